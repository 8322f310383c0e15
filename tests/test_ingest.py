"""Ingestion keeps settlement in step: a revision of a settled day opens its next version, in the
same transaction as the data, and nothing of a failed batch is stored or reopened."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext

from freehours.clock import ManualClock
from freehours.domain.reads import IntervalDay
from freehours.domain.settlement import QuotaStatus
from freehours.errors import InputError
from freehours.operations.runtime import Runtime
from freehours.settings import Settings
from freehours.settlement.ingest import Arrival
from freehours.settlement.model import Outcome
from freehours.store.database import Store
from tests.test_settlement import DAY, DUE, NMI, STAMP, add_customer, day_row


@pytest.fixture
def runtime(store: Store) -> Runtime:
    clock = ManualClock(DUE)
    add_customer(store, clock.now())
    return Runtime.on(store, Settings(database_url="sqlite://"), clock)


def test_a_revision_of_a_settled_day_reopens_it_and_the_cache_learns_at_once(
    runtime: Runtime,
) -> None:
    runtime.ingestion.file([day_row("0.500", stamp=STAMP)])
    assert runtime.settlements.settle(NMI, DAY).quota.free_kwh == Decimal("3.000")
    ingested = runtime.ingestion.file([day_row("0.600", stamp=STAMP + timedelta(days=1))])
    assert [(q.version, q.status) for q in ingested.reopened] == [(2, QuotaStatus.PENDING)]
    answer = runtime.settlements.settle(NMI, DAY)  # no version given: the cache already knows
    assert (answer.outcome, answer.quota.version, answer.quota.free_kwh) == (
        Outcome.SETTLED,
        2,
        Decimal("3.600"),
    )


def test_an_identical_resend_reopens_nothing(runtime: Runtime) -> None:
    runtime.ingestion.file([day_row("0.500", stamp=STAMP)])
    runtime.settlements.settle(NMI, DAY)
    assert runtime.ingestion.file([day_row("0.500", stamp=STAMP)]).reopened == []


def test_a_batch_that_fails_midway_stores_and_reopens_nothing(runtime: Runtime) -> None:
    runtime.ingestion.file([day_row("0.500", stamp=STAMP)])
    runtime.settlements.settle(NMI, DAY)

    def broken():
        yield day_row("0.900", stamp=STAMP + timedelta(days=1))
        raise InputError("bad.csv:7: not a number (field value)")

    with pytest.raises(InputError):
        runtime.ingestion.file(broken())
    state = runtime.settlements.state(NMI, DAY)
    assert state is not None
    assert (state.version, state.status) == (1, QuotaStatus.COMPLETED)


def test_a_revision_outside_the_window_reopens_nothing(runtime: Runtime) -> None:
    runtime.ingestion.file([day_row("0.500", stamp=STAMP)])
    runtime.settlements.settle(NMI, DAY)
    values = [Decimal("0.500")] * 48
    values[40] = Decimal("9.999")  # 20:00-20:30: outside 11:00-14:00
    evening = IntervalDay(NMI, "E1", DAY, 30, tuple(values), "A" * 48, STAMP + timedelta(days=1))
    ingested = runtime.ingestion.file([evening])
    assert ingested.counts.superseded == 1
    assert ingested.reopened == []


def test_an_arrival_is_recorded_with_its_counts_in_the_ingests_transaction(
    runtime: Runtime,
) -> None:
    arrival = Arrival("import", 2048, name="a.csv")
    context = SpanContext(trace_id=0xABC, span_id=0x1, is_remote=False)
    with trace.use_span(NonRecordingSpan(context)):
        runtime.ingestion.file([day_row("0.500", stamp=STAMP)], arrival)
    runtime.ingestion.file([day_row("0.500", stamp=STAMP)])  # no arrival: not recorded

    def broken():
        yield day_row("0.900", stamp=STAMP + timedelta(days=1))
        raise InputError("bad.csv:7: not a number (field value)")

    with pytest.raises(InputError):
        runtime.ingestion.file(broken(), Arrival("import", 10, name="bad.csv"))
    with runtime.store.read() as unit:
        (record,) = unit.ingestions.recent(limit=10)
    assert (record.source, record.name, record.bytes, record.key_id, record.agent) == (
        "import",
        "a.csv",
        2048,
        None,
        None,
    )
    assert (record.accepted, record.superseded, record.unchanged, record.stale) == (1, 0, 0, 0)
    assert (record.received_at, record.trace_id) == (DUE, f"{0xABC:032x}")
