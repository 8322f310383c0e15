"""Sending one batch, against scripted answers (httpx.MockTransport) on a manual clock: attempts,
waits, Retry-After, the retry budget and the circuit breaker."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import httpx
import pybreaker
import pytest
from opentelemetry.trace import SpanKind, format_span_id, format_trace_id
from prometheus_client import REGISTRY

from freehours.agent.batch import Batch, readings_batch
from freehours.agent.breaker import Breaker, BreakerConfig
from freehours.agent.http import IngestApi, Timeouts, Unreachable
from freehours.agent.policy import Backoff, RetryBudget
from freehours.agent.sender import (
    BREAKER_EXCLUDES,
    Delivery,
    KeyRefused,
    Outcome,
    Sender,
    Stopped,
)
from freehours.agent.tally import Tally
from freehours.backoff import RandomSource
from freehours.clock import ManualClock
from freehours.domain.reads import IntervalRead
from freehours.domain.time import NEM_TIME
from tests.tracing import Spans

NOW = datetime(2026, 7, 1, 2, 0, tzinfo=UTC)
Answer = tuple[int, dict[str, str]] | type[Exception]


class Lowest:
    """Jitter at the bottom of its range: a wait is then exactly the floor it was given."""

    def uniform(self, a: float, b: float) -> float:
        return a


class Highest:
    def uniform(self, a: float, b: float) -> float:
        return b


@dataclass
class ScriptedApi:
    """Answers requests in order from ``answers``; remembers each request and when it came."""

    clock: ManualClock
    answers: list[Answer]
    requests: list[tuple[float, httpx.Request]] = field(default_factory=list)

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append((self.clock.monotonic(), request))
        answer = self.answers.pop(0)
        if isinstance(answer, type):
            raise answer("scripted failure", request=request)  # type: ignore[call-arg]
        status, headers = answer
        body = b'{"accepted": 1, "superseded": 0, "unchanged": 0}' if status == 200 else b"{}"
        return httpx.Response(status, headers=headers, content=body)

    def gaps(self) -> list[float]:
        """Seconds between one request and the next."""
        times = [at for at, _ in self.requests]
        return [later - earlier for earlier, later in itertools.pairwise(times)]


@dataclass
class Harness:
    clock: ManualClock
    api: ScriptedApi
    storage: pybreaker.CircuitMemoryStorage
    breaker: Breaker
    budget: RetryBudget
    tally: Tally
    sleeps: list[float]
    sender: Sender

    def send(
        self, batch: Batch, earlier_attempts: int = 0, on_attempt: Callable[[], None] = lambda: None
    ) -> Delivery:
        return self.sender.send(batch, earlier_attempts=earlier_attempts, on_attempt=on_attempt)


def harness(
    answers: list[Answer],
    *,
    fail_max: int = 5,
    jitter: RandomSource | None = None,
    sleep: Callable[[float], None] | None = None,
) -> Harness:
    clock = ManualClock(NOW)
    api = ScriptedApi(clock, answers)
    sleeps: list[float] = []

    def waited(seconds: float) -> None:
        """The wait as the manual clock sees it: recorded, and the clock moved on."""
        sleeps.append(seconds)
        clock.advance(seconds)

    storage = pybreaker.CircuitMemoryStorage(pybreaker.STATE_CLOSED)
    breaker = Breaker(
        BreakerConfig(fail_max=fail_max, reset_timeout=30.0, name="test"),
        storage,
        exclude=BREAKER_EXCLUDES,
    )
    budget = RetryBudget(clock)
    tally = Tally()
    ingest = IngestApi(
        "http://api.test", "secret", Timeouts(), transport=httpx.MockTransport(api.handle)
    )
    sender = Sender(
        ingest,
        breaker,
        budget=budget,
        backoff=Backoff(jitter or Lowest(), base=1.0, cap=30.0),
        clock=clock,
        sleep=sleep or waited,
        tally=tally,
    )
    return Harness(clock, api, storage, breaker, budget, tally, sleeps, sender)


def metric(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def batch(kwh: str = "0.412") -> Batch:
    start = datetime(2026, 7, 1, 11, 0, tzinfo=NEM_TIME)
    read = IntervalRead("4100000001", "E1", start, start + timedelta(minutes=30), Decimal(kwh), "A")
    return readings_batch("4100000001", "E1", 30, [read])


def test_a_200_delivers_in_one_attempt_with_key_trace_and_body(spans: Spans) -> None:
    h = harness([(200, {})])
    sent = batch()
    delivery = h.send(sent)
    assert delivery.outcome is Outcome.DELIVERED
    ((_, request),) = h.api.requests
    assert request.url == "http://api.test/v1/meter-readings"
    assert request.headers["Idempotency-Key"] == sent.idempotency_key
    assert request.headers["Authorization"] == "Bearer secret"
    assert request.headers["Content-Type"] == "application/json"
    post = spans.one("POST /v1/meter-readings")
    span_id = format_span_id(post.context.span_id)
    assert request.headers["traceparent"] == f"00-{sent.trace_id}-{span_id}-01"
    assert request.content == sent.body
    assert h.sleeps == []


def test_every_attempt_is_a_client_span_inside_the_send_in_the_batchs_trace(
    spans: Spans,
) -> None:
    h = harness([(409, {"Retry-After": "1"}), (200, {})])
    sent = batch()
    assert h.send(sent).outcome is Outcome.DELIVERED
    send = spans.one("agent.send_batch")
    posts = spans.named("POST /v1/meter-readings")
    assert [post.attributes["http.response.status_code"] for post in posts] == [409, 200]
    assert {format_trace_id(span.context.trace_id) for span in [send, *posts]} == {sent.trace_id}
    assert all(post.parent == send.context and post.kind is SpanKind.CLIENT for post in posts)
    sent_parents = [request.headers["traceparent"].split("-")[2] for _, request in h.api.requests]
    assert sent_parents == [format_span_id(post.context.span_id) for post in posts]
    assert send.attributes["freehours.batch.outcome"] == "delivered"


def test_a_batch_sent_again_later_stays_in_its_trace(spans: Spans) -> None:
    sent = batch()
    harness([(503, {})], fail_max=1).send(sent)
    harness([(200, {})]).send(sent, earlier_attempts=1)
    first, again = spans.named("agent.send_batch")
    assert first.context.trace_id == again.context.trace_id == int(sent.trace_id, 16)
    assert first.parent == again.parent  # the batch's own place in its trace, in every run
    assert (
        first.attributes["freehours.batch.outcome"],
        again.attributes["freehours.batch.outcome"],
    ) == ("deferred", "delivered")


def test_a_409_waits_at_least_its_retry_after_then_resends_the_same_key() -> None:
    h = harness([(409, {"Retry-After": "7"}), (200, {})])
    delivery = h.send(batch())
    assert delivery.outcome is Outcome.DELIVERED
    assert h.api.gaps() == [7.0]
    keys = {request.headers["Idempotency-Key"] for _, request in h.api.requests}
    assert len(keys) == 1


def test_a_429_waits_at_least_its_retry_after_even_when_jitter_is_shorter() -> None:
    h = harness([(429, {"Retry-After": "3"}), (429, {"Retry-After": "3"}), (200, {})])
    assert h.send(batch()).outcome is Outcome.DELIVERED
    assert h.api.gaps() == [3.0, 3.0]


def test_jitter_longer_than_retry_after_is_kept() -> None:
    h = harness(
        [(429, {"Retry-After": "1"}), (429, {"Retry-After": "1"}), (200, {})], jitter=Highest()
    )
    assert h.send(batch()).outcome is Outcome.DELIVERED
    assert h.api.gaps() == [1.0, 2.0]  # base * 2**0, then base * 2**1


def test_retry_after_past_a_minute_is_waited_for_a_minute() -> None:
    h = harness([(429, {"Retry-After": "3600"}), (200, {})])
    h.send(batch())
    assert h.sleeps == [60.0]


def test_a_422_is_rejected_without_a_retry() -> None:
    h = harness([(422, {"Content-Type": "application/problem+json"})])
    delivery = h.send(batch())
    assert delivery.outcome is Outcome.REJECTED
    assert delivery.answer is not None
    assert delivery.answer.status == 422
    assert len(h.api.requests) == 1
    assert h.sleeps == []


@pytest.mark.parametrize("status", [400, 404, 413])
def test_other_4xx_are_rejected_without_a_retry(status: int) -> None:
    h = harness([(status, {})])
    assert h.send(batch()).outcome is Outcome.REJECTED
    assert len(h.api.requests) == 1


def test_a_408_is_retried_like_a_503() -> None:
    h = harness([(408, {}), (200, {})])
    assert h.send(batch()).outcome is Outcome.DELIVERED
    assert len(h.api.requests) == 2


def test_a_batch_no_request_can_be_made_of_is_rejected_unsent_and_the_breaker_untouched() -> None:
    h = harness([(200, {})], fail_max=1)
    good = batch()
    broken = replace(good, content_type="text/csv\r\nX-Injected: 1", idempotency_key="k\u00e9")
    before = metric("freehours_agent_attempts_total", result="unsendable")
    for _ in range(3):
        delivery = h.send(broken)
        assert delivery.outcome is Outcome.REJECTED
        assert delivery.answer is None
        assert delivery.unsendable is not None
        assert "not printable ASCII" in delivery.unsendable
    assert h.api.requests == []
    assert h.breaker.state == "closed"
    assert h.tally.counts().attempts == 0
    assert metric("freehours_agent_attempts_total", result="unsendable") == before + 3
    assert h.send(good).outcome is Outcome.DELIVERED


@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_key_stops_the_agent_without_a_retry(status: int) -> None:
    h = harness([(status, {})])
    with pytest.raises(KeyRefused, match=f"HTTP {status}"):
        h.send(batch())
    assert len(h.api.requests) == 1


def test_at_most_three_attempts_then_the_batch_is_deferred() -> None:
    h = harness([(503, {}), (503, {}), (503, {}), (200, {})])
    delivery = h.send(batch())
    assert delivery.outcome is Outcome.DEFERRED
    assert not delivery.breaker_open
    assert len(h.api.requests) == 3
    assert h.tally.counts().attempts == 3
    assert h.tally.counts().retried == 2


def test_no_answer_is_retried_like_a_503() -> None:
    h = harness([httpx.ConnectError, httpx.ReadTimeout, (200, {})])
    assert h.send(batch()).outcome is Outcome.DELIVERED
    assert len(h.api.requests) == 3
    assert h.tally.counts().failed_attempts == 2


def test_an_empty_retry_budget_stops_retries_and_is_counted() -> None:
    h = harness([(503, {}), (200, {})])
    while h.budget.try_retry():
        pass
    before = metric("freehours_agent_retry_budget_exhausted_total")
    delivery = h.send(batch())
    assert delivery.outcome is Outcome.DEFERRED
    assert len(h.api.requests) == 1
    assert h.tally.counts().budget_exhausted == 1
    assert metric("freehours_agent_retry_budget_exhausted_total") == before + 1


def test_the_breaker_opens_after_fail_max_failures_and_then_nothing_is_sent() -> None:
    h = harness([(503, {})] * 3, fail_max=3)
    first = h.send(batch())
    assert first.outcome is Outcome.DEFERRED
    assert first.breaker_open
    assert h.breaker.state == pybreaker.STATE_OPEN
    second = h.send(batch("0.5"))
    assert second.outcome is Outcome.DEFERRED
    assert second.breaker_open
    assert len(h.api.requests) == 3  # none while open
    assert metric("freehours_circuit_breaker_state", breaker="test") == 2
    half_open_in = h.breaker.half_open_in(datetime.now(UTC))
    assert half_open_in is not None
    assert 29.0 < half_open_in <= 30.0


def test_failures_across_batches_add_up_until_a_real_success() -> None:
    h = harness([(503, {}), (503, {}), (503, {}), (503, {}), (200, {})], fail_max=10)
    assert h.send(batch()).outcome is Outcome.DEFERRED
    assert h.storage.counter == 3  # a deferred batch told the breaker nothing good
    assert h.send(batch()).outcome is Outcome.DELIVERED
    assert h.storage.counter == 0  # only the 200 did


def test_a_trial_call_that_succeeds_closes_the_breaker() -> None:
    h = harness([(503, {})] * 3 + [(200, {})], fail_max=3)
    h.send(batch())
    assert h.breaker.state == pybreaker.STATE_OPEN
    h.storage.opened_at = datetime.now(UTC) - timedelta(seconds=31)
    assert h.breaker.half_open_in(datetime.now(UTC)) == 0.0
    assert h.send(batch()).outcome is Outcome.DELIVERED
    assert h.breaker.state == pybreaker.STATE_CLOSED


def test_a_trial_call_that_fails_opens_it_again_after_one_attempt() -> None:
    h = harness([(503, {})] * 4, fail_max=3)
    h.send(batch())
    h.storage.opened_at = datetime.now(UTC) - timedelta(seconds=31)
    delivery = h.send(batch())
    assert delivery.breaker_open
    assert len(h.api.requests) == 4
    assert h.breaker.state == pybreaker.STATE_OPEN
    assert h.tally.counts().attempts == 4


def test_a_trip_after_a_retry_after_keeps_it_for_the_pause() -> None:
    h = harness([(429, {"Retry-After": "45"})], fail_max=1)
    delivery = h.send(batch())
    assert delivery.breaker_open
    assert delivery.retry_after == 45.0


def test_each_attempt_is_announced_before_it_goes_out() -> None:
    h = harness([(503, {}), (200, {})])
    seen: list[int] = []
    h.send(batch(), on_attempt=lambda: seen.append(len(h.api.requests)))
    assert seen == [0, 1]


def test_a_batch_attempted_in_an_earlier_run_counts_its_first_attempt_as_a_retry() -> None:
    h = harness([(200, {})])
    h.send(batch(), earlier_attempts=2)
    assert h.tally.counts().retried == 1


def test_a_stop_during_a_wait_ends_the_send() -> None:
    def stopping(seconds: float) -> None:
        raise Stopped

    h = harness([(503, {}), (200, {})], sleep=stopping)
    with pytest.raises(Stopped):
        h.send(batch())
    assert len(h.api.requests) == 1


def test_the_total_deadline_ends_a_request_that_never_answers() -> None:
    async def never(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(30)
        return httpx.Response(200)

    api = IngestApi(
        "http://api.test",
        "secret",
        Timeouts(connect=5, read=60, total=0.2),
        transport=httpx.MockTransport(never),
    )
    started = time.monotonic()
    with pytest.raises(Unreachable, match="deadline"):
        api.post(batch())
    assert time.monotonic() - started < 2.0
    api.close()
