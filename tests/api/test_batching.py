"""``SettleQueue``: the API's settlement requests that arrive while every settlement thread is
busy are settled together in the next batch, each answered its own, on the real store (SQLite
and PostgreSQL)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

import pytest
import structlog
from opentelemetry import trace
from opentelemetry.trace import SpanContext, format_trace_id
from prometheus_client import REGISTRY
from structlog.contextvars import merge_contextvars
from structlog.testing import capture_logs

from freehours.api.batching import SettleQueue
from freehours.cache.quota import MemoryQuotaCache
from freehours.clock import ManualClock
from freehours.settlement.model import Answer, FaultPoint, Outcome, SettleRequest
from freehours.settlement.service import Settlements
from freehours.store.database import Store
from tests.support import eventually_async
from tests.test_settlement import DAY, DUE, POLICY
from tests.test_settlement_batch import KeyedFaults, customers, ingest, reads
from tests.tracing import Spans

tracer = trace.get_tracer("tests.api.test_batching")


@pytest.fixture
def faults() -> KeyedFaults:
    return KeyedFaults()


@pytest.fixture
def service(store: Store, faults: KeyedFaults) -> Settlements:
    clock = ManualClock(DUE)
    return Settlements(store, MemoryQuotaCache(clock), clock, POLICY, faults)


class Blocked:
    """A fault that holds the settlement thread until released: every thread busy."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    def __call__(self) -> None:
        self.started.set()
        assert self.release.wait(10), "never released"


class Counted:
    """``settle_many``, with the size of each batch it was given."""

    def __init__(self, service: Settlements) -> None:
        self.sizes: list[int] = []
        self._settle_many = service.settle_many

    def __call__(self, requests: Sequence[SettleRequest]) -> list[Answer | Exception]:
        self.sizes.append(len(requests))
        return self._settle_many(requests)


async def _while_blocked(
    queue: SettleQueue, blocked: Blocked, first: SettleRequest, then: Sequence[SettleRequest]
) -> tuple[Answer, list[Answer]]:
    """``first`` settled until it blocks its thread, ``then`` asked for meanwhile (as requests
    with their own log fields), then all released: the answers."""

    async def request(settle: SettleRequest) -> Answer:
        structlog.contextvars.bind_contextvars(nmi=settle.nmi, route="/test")
        with tracer.start_as_current_span(f"request {settle.nmi}"):
            return await queue.settle(settle)

    held = asyncio.create_task(request(first))
    await eventually_async(blocked.started.is_set, what="the first batch started")
    waiting = [asyncio.create_task(request(settle)) for settle in then]
    await eventually_async(lambda: queue.waiting == len(then), what="the others queued")
    blocked.release.set()
    return await held, list(await asyncio.gather(*waiting))


def test_requests_arriving_while_the_threads_are_busy_settle_together_each_its_own(
    store: Store, service: Settlements, faults: KeyedFaults, spans: Spans
) -> None:
    nmis = customers(store, "Q")
    ingest(store, *(reads(nmi, f"0.{n % 9 + 1}00") for n, nmi in enumerate(nmis)))
    blocked = Blocked()
    faults.add(FaultPoint.AFTER_CLAIM, f"{nmis[0]}:{DAY}", blocked)
    counted = Counted(service)
    service.settle_many = counted  # type: ignore[method-assign]
    queue = SettleQueue(service, runners=1)
    then = [SettleRequest(nmi, DAY) for nmi in nmis[1:]] + [SettleRequest(nmis[1], DAY)]
    before = _batches()
    with capture_logs(processors=[merge_contextvars]) as logs:
        first, rest = asyncio.run(_while_blocked(queue, blocked, SettleRequest(nmis[0], DAY), then))
    assert counted.sizes == [1, len(then)]  # alone at once; then the rest, together
    assert first.outcome is Outcome.SETTLED
    assert [answer.quota.nmi for answer in rest] == [request.nmi for request in then]
    assert [answer.outcome for answer in rest] == [Outcome.SETTLED] * (len(nmis) - 1) + [
        Outcome.REPLAYED
    ]
    expected = [f"{(n % 9 + 1) * 6 / 10:.3f}" for n in range(len(nmis))]  # 6 free intervals
    assert [str(answer.quota.free_kwh) for answer in [first, *rest[:-1]]] == expected
    # The batch's lines carry none of its requests' fields: each names its own quota.
    completed = [line for line in logs if line["event"] == "quota_completed"]
    assert len(completed) == len(nmis)
    assert all("route" not in line for line in completed)
    assert all(line["quota_key"] == f"{line['nmi']}:{DAY}" for line in completed)
    # One span a batch, its size on it.
    batches = spans.named("settlement.batch")
    sizes = [int((span.attributes or {})["freehours.settlement.batch"]) for span in batches]
    assert sorted(sizes) == [1, len(then)]
    # Each batch is a child of its first request's span, linked to the others'; each quota's
    # events are in its own request's trace.
    asked: dict[str, list[SpanContext]] = {}
    for span in spans.finished():
        if span.name.startswith("request "):
            asked.setdefault(span.name.split()[1], []).append(span.context)
    second = max(batches, key=lambda span: len(span.links))
    assert second.parent is not None
    members = {second.parent.span_id, *(link.context.span_id for link in second.links)}
    assert members == {context.span_id for nmi in nmis[1:] for context in asked[nmi]}
    assert len(members) == len(then)
    with store.read() as unit:
        for nmi in nmis:
            traces = {event.trace_id for event in unit.quotas.events(nmi, DAY)}
            assert traces, nmi
            assert traces <= {format_trace_id(context.trace_id) for context in asked[nmi]}, nmi
    after = _batches()
    assert (after[0] - before[0], after[1] - before[1]) == (2, 1 + len(then))


def test_a_request_whose_caller_went_away_while_it_waited_is_not_settled(
    store: Store, service: Settlements, faults: KeyedFaults
) -> None:
    nmis = customers(store, "R", 2)
    ingest(store, *(reads(nmi, "0.500") for nmi in nmis))
    blocked = Blocked()
    faults.add(FaultPoint.AFTER_CLAIM, f"{nmis[0]}:{DAY}", blocked)
    queue = SettleQueue(service, runners=1)

    async def main() -> Answer:
        held = asyncio.create_task(queue.settle(SettleRequest(nmis[0], DAY)))
        await eventually_async(blocked.started.is_set, what="the first batch started")
        gone = asyncio.create_task(queue.settle(SettleRequest(nmis[1], DAY)))
        await eventually_async(lambda: queue.waiting == 1, what="the second queued")
        gone.cancel()
        blocked.release.set()
        return await held

    assert asyncio.run(main()).outcome is Outcome.SETTLED
    with store.read() as unit:
        assert unit.quotas.latest(nmis[1], DAY) is None


def test_a_batch_that_breaks_fails_each_of_its_requests_and_the_queue_goes_on(
    store: Store, service: Settlements
) -> None:
    nmis = customers(store, "S", 2)
    ingest(store, *(reads(nmi, "0.500") for nmi in nmis))
    queue = SettleQueue(service, runners=2)
    broken = RuntimeError("a bug in settle_many")
    real = service.settle_many

    def once(requests: Sequence[SettleRequest]) -> list[Answer | Exception]:
        service.settle_many = real  # type: ignore[method-assign]
        raise broken

    service.settle_many = once  # type: ignore[method-assign]

    async def main() -> tuple[BaseException | Answer, Answer]:
        first = await asyncio.gather(
            queue.settle(SettleRequest(nmis[0], DAY)), return_exceptions=True
        )
        return first[0], await queue.settle(SettleRequest(nmis[1], DAY))

    failed, settled = asyncio.run(main())
    assert failed is broken
    assert settled.outcome is Outcome.SETTLED


def _batches() -> tuple[float, float]:
    """The batch-size histogram's count and sum so far, in this process."""
    count = REGISTRY.get_sample_value("freehours_api_settlement_batch_size_count")
    total = REGISTRY.get_sample_value("freehours_api_settlement_batch_size_sum")
    return count or 0.0, total or 0.0


def test_a_request_made_as_the_last_batch_ends_is_settled(
    store: Store, service: Settlements
) -> None:
    """A thread that found nothing more waiting has stopped: the next request, made as soon
    as the last answer is in, starts one."""
    nmis = customers(store, "T", 2)
    ingest(store, *(reads(nmi, "0.500") for nmi in nmis))
    queue = SettleQueue(service, runners=1)

    async def main() -> list[Answer]:
        first = await queue.settle(SettleRequest(nmis[0], DAY))
        second = await asyncio.wait_for(queue.settle(SettleRequest(nmis[1], DAY)), 10)
        return [first, second]

    assert [answer.outcome for answer in asyncio.run(main())] == [Outcome.SETTLED] * 2
