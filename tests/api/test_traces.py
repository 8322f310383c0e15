"""One trace from the meter to the ledger: the agent's send, its HTTP request, the API, the
settlement job the ingest scheduled, the worker's settlement and its cache write, all in process
(the agent's sender against the app through httpx's ASGI transport, then the worker's run)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import datetime, timedelta
from decimal import Decimal

import httpx
import pybreaker
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, format_span_id, format_trace_id
from structlog.contextvars import merge_contextvars
from structlog.testing import capture_logs

from freehours.agent.batch import readings_batch
from freehours.agent.breaker import Breaker, BreakerConfig
from freehours.agent.http import IngestApi, Timeouts
from freehours.agent.policy import Backoff, RetryBudget
from freehours.agent.sender import BREAKER_EXCLUDES, Outcome, Sender
from freehours.agent.tally import Tally
from freehours.api.app import create_app
from freehours.domain.reads import IntervalRead
from freehours.domain.time import NEM_TIME
from freehours.observability.logging import add_trace_context
from tests.api.conftest import Api
from tests.api.test_settlements import NMI, set_up
from tests.tracing import Spans

ROUTE = "/v1/meter-readings"


@pytest.fixture
def sender(api: Api) -> Iterator[Sender]:
    """The agent's sender, posting to the API app in this process."""
    ingest = IngestApi(
        "http://api.test",
        api.keys["ingest"],
        Timeouts(),
        transport=httpx.ASGITransport(app=create_app(api.services)),
    )
    breaker = Breaker(
        BreakerConfig(name="trace-test"),
        pybreaker.CircuitMemoryStorage(pybreaker.STATE_CLOSED),
        exclude=BREAKER_EXCLUDES,
    )
    yield Sender(
        ingest,
        breaker,
        budget=RetryBudget(api.clock),
        backoff=Backoff(random.Random(1)),
        clock=api.clock,
        sleep=api.clock.advance,
        tally=Tally(),
    )
    ingest.close()


def one_of_kind(spans: Spans, name: str, kind: SpanKind) -> ReadableSpan:
    (span,) = [span for span in spans.named(name) if span.kind is kind]
    return span


def test_one_trace_runs_from_the_agents_request_through_the_api_and_the_job_to_the_ledger(
    api: Api, sender: Sender, spans: Spans
) -> None:
    set_up(api, with_data=False)
    spans.clear()
    midnight = datetime(2026, 7, 1, tzinfo=NEM_TIME)
    reads = [
        IntervalRead(
            NMI,
            "E1",
            midnight + timedelta(minutes=30 * n),
            midnight + timedelta(minutes=30 * (n + 1)),
            Decimal("0.250"),
            "A",
        )
        for n in range(48)
    ]
    batch = readings_batch(NMI, "E1", 30, reads)
    with capture_logs(processors=[merge_contextvars, add_trace_context]) as logs:
        assert sender.send(batch, on_attempt=lambda: None).outcome is Outcome.DELIVERED
        with api.services.store.read() as unit:
            (job,) = unit.jobs.history("settle", f"{NMI}:2026-07-01")
        assert api.services.runtime.worker().run_due() == 1

    # One trace: the one the batch was given when it was spooled.
    assert {format_trace_id(span.context.trace_id) for span in spans.finished()} == {batch.trace_id}
    send = spans.one("agent.send_batch")
    client = one_of_kind(spans, f"POST {ROUTE}", SpanKind.CLIENT)
    server = one_of_kind(spans, f"POST {ROUTE}", SpanKind.SERVER)
    work = one_of_kind(spans, "job settle", SpanKind.CONSUMER)
    settlement = spans.one("settlement.settle")
    assert client.parent == send.context
    assert server.parent is not None  # continued from the traceparent the request carried
    assert server.parent.span_id == client.context.span_id
    # The job row carries the request's trace; the worker's span continues it.
    assert job.traceparent is not None
    assert job.traceparent.split("-")[1] == batch.trace_id
    assert work.parent is not None
    assert format_span_id(work.parent.span_id) == job.traceparent.split("-")[2]
    assert spans.ancestors(work)[-3:] == [f"POST {ROUTE}", f"POST {ROUTE}", "agent.send_batch"]
    assert settlement.parent == work.context
    for name in ("settlement.claim", "settlement.complete", "cache.put"):
        assert spans.one(name).parent == settlement.context, name

    # The canonical lines of the request and of the job lead to the same trace.
    (request_line,) = [line for line in logs if line["event"] == "request_finished"]
    (job_line,) = [line for line in logs if line["event"] == "job_finished"]
    assert request_line["trace_id"] == job_line["trace_id"] == batch.trace_id
    assert request_line["span_id"] == format_span_id(server.context.span_id)
    assert job_line["span_id"] == format_span_id(work.context.span_id)
    assert (job_line["quota_state"], job_line["outcome"]) == ("COMPLETED", "completed")
