"""``Settlements.settle_many``, the workers' batches, against the real store on SQLite and
PostgreSQL: the same answers, states, events and ledger as settling each quota alone, and every
failure of one quota answered as ``settle`` answers it, without failing its neighbours."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta
from decimal import Decimal

import pytest
import sqlalchemy as sa
import structlog

from freehours.cache.quota import MemoryQuotaCache
from freehours.clock import ManualClock
from freehours.domain.reads import IntervalDay
from freehours.domain.settlement import Quota, QuotaStatus, claim
from freehours.domain.time import Region
from freehours.settlement.ingest import Ingestion
from freehours.settlement.model import (
    ATTEMPT_FAILED,
    Answer,
    FaultPoint,
    Outcome,
    SettleRequest,
    day_lock,
)
from freehours.settlement.service import Settlements
from freehours.store.database import Store, Unit
from freehours.store.errors import UNAVAILABLE, connection_lost
from tests.support import eventually, stored_or_new
from tests.test_settlement import DAY, DUE, PLAN, POLICY, STAMP, WINDOW_END, Death

#: Quotas per batch in these tests: enough that each statement carries many rows.
COUNT = 12


def nmi_of(group: str, n: int) -> str:
    return f"{group}{n:0{10 - len(group)}d}"


def reads(
    nmi: str, value: str, *, stamp: datetime = STAMP, missing: range = range(0)
) -> IntervalDay:
    values = tuple(None if i in missing else Decimal(value) for i in range(48))
    qualities = "".join("N" if i in missing else "A" for i in range(48))
    return IntervalDay(nmi, "E1", DAY, 30, values, qualities, stamp)


@dataclass
class KeyedFaults:
    """Raise at a point for one quota key, once per queued error."""

    queued: dict[tuple[FaultPoint, str], list[BaseException | Callable[[], None]]] = field(
        default_factory=dict
    )

    def add(self, point: FaultPoint, key: str, fault: BaseException | Callable[[], None]) -> None:
        self.queued.setdefault((point, key), []).append(fault)

    def check(self, point: FaultPoint, quota: Quota) -> None:
        pending = self.queued.get((point, quota.key))
        if pending:
            fault = pending.pop(0)
            if isinstance(fault, BaseException):
                raise fault
            fault()  # something else happening at that moment


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(DUE)


@pytest.fixture
def faults() -> KeyedFaults:
    return KeyedFaults()


@pytest.fixture(autouse=True)
def batch_statements_hold() -> Iterator[None]:
    """The batch's own statements run: a batch whose claim or completion statement failed is
    answered the single way, each quota alone, with the same answers, so the answers alone
    would not show that the batch path itself is broken."""
    with structlog.testing.capture_logs() as logs:
        yield
    fallen = [e for e in logs if e["event"].startswith("settlement_batch_")]
    assert not fallen, fallen


@pytest.fixture
def service(store: Store, clock: ManualClock, faults: KeyedFaults) -> Settlements:
    return Settlements(store, MemoryQuotaCache(clock), clock, POLICY, faults)


def customers(store: Store, group: str, count: int = COUNT) -> list[str]:
    """``count`` customers on the test plan, NMIs ``{group}00000000``...: their NMIs."""
    nmis = [nmi_of(group, n) for n in range(count)]
    with store.write() as unit:
        unit.catalog.put_plan("test-nsw", PLAN, updated_at=DUE)
        for nmi in nmis:
            unit.catalog.put_customer(nmi, plan_id="test-nsw", region=Region.NSW, updated_at=DUE)
    return nmis


def ingest(store: Store, *days: IntervalDay) -> None:
    with store.write() as unit:
        unit.meter.ingest_days(days, received_at=DUE)


def requests(nmis: list[str], day: date = DAY) -> list[SettleRequest]:
    return [SettleRequest(nmi, day) for nmi in nmis]


def answers_of(results: list[Answer | Exception]) -> list[Answer]:
    assert not [r for r in results if isinstance(r, Exception)]
    return [r for r in results if isinstance(r, Answer)]


def ledger(store: Store, nmis: list[str]) -> list[tuple[str, int, Decimal, Decimal]]:
    with store.read() as unit:
        return [
            (entry.nmi, entry.version, entry.kwh, entry.amount)
            for nmi in nmis
            for entry in unit.quotas.ledger(nmi)
        ]


def comparable(answer: Answer) -> tuple[object, ...]:
    """An answer without its NMI: what two quotas with the same data must both be told."""
    quota = answer.quota
    reason = None if quota.reason is None else quota.reason.replace(quota.nmi, "-")
    return (answer.outcome, answer.retry_after, replace(quota, nmi="-", reason=reason))


def events(store: Store, nmi: str) -> list[tuple[object, ...]]:
    with store.read() as unit:
        return [
            (e.version, e.status, e.fence, e.attempts, e.reason)
            for e in unit.quotas.events(nmi, DAY)
        ]


def scenario(store: Store, service: Settlements, clock: ManualClock, group: str) -> list[str]:
    """Quotas in every state a batch meets, NMIs of ``group``: complete data (three of them),
    a window with a gap (waits for its data), no data (waits), settled before (replayed, from
    the database: another service settled it), reopened by a revision (version 2 books the
    difference), a live lock of another holder, an expired lock (taken over), one whose
    attempts ran out at its expired lock (aborted by the claim), no customer."""
    nmis = customers(store, group, 9)
    ingest(store, *(reads(nmi, f"0.{n + 1}00") for n, nmi in enumerate(nmis[:3])))
    ingest(store, reads(nmis[3], "0.500", missing=range(22, 23)))
    other = Settlements(store, MemoryQuotaCache(clock), clock, POLICY)
    ingest(store, reads(nmis[5], "0.500"), reads(nmis[6], "0.500"))
    assert other.settle(nmis[5], DAY).outcome is Outcome.SETTLED
    assert other.settle(nmis[6], DAY).outcome is Outcome.SETTLED
    ingestion = Ingestion(store, other, clock)
    (reopened,) = ingestion.file(
        [reads(nmis[6], "0.600", stamp=STAMP + timedelta(days=1))]
    ).reopened
    assert reopened.version == 2
    ingest(store, reads(nmis[7], "0.500"), reads(nmis[8], "0.500"))
    with store.write() as unit:
        held = claim(
            stored_or_new(unit, nmis[7], DAY, at=clock.now()),
            clock.now(),
            POLICY.lock_timeout,
            POLICY.max_attempts,
        ).quota
        unit.quotas.save([held], at=clock.now())
        dead = stored_or_new(unit, nmis[8], DAY, at=clock.now())
        dead = claim(dead, clock.now() - POLICY.lock_timeout * 2, POLICY.lock_timeout, 10).quota
        unit.quotas.save([dead], at=clock.now())
    return [*nmis, nmi_of(group + "X", 0)]  # and one with no customer


def test_a_batch_answers_stores_and_books_exactly_what_single_settles_do(
    store: Store, service: Settlements, clock: ManualClock
) -> None:
    alone = scenario(store, service, clock, "A")
    together = scenario(store, service, clock, "B")
    singles = [service.settle(nmi, DAY) for nmi in alone]
    batch = answers_of(service.settle_many(requests(together)))
    assert [comparable(a) for a in batch] == [comparable(a) for a in singles]
    outcomes = [a.outcome for a in batch]
    assert outcomes == [
        *[Outcome.SETTLED] * 3,
        Outcome.NOT_DUE,
        Outcome.NOT_DUE,
        Outcome.REPLAYED,
        Outcome.SETTLED,
        Outcome.LOCKED,
        Outcome.SETTLED,
        Outcome.ABORTED,
    ]
    assert (batch[6].quota.version, batch[8].quota.attempts) == (2, 1)
    strip = [(version, kwh, amount) for _, version, kwh, amount in ledger(store, alone)]
    assert [(v, k, a) for _, v, k, a in ledger(store, together)] == strip
    for single, batched in zip(alone, together, strict=True):
        assert events(store, batched) == events(store, single)
    # Asked again, each is replayed (or still waits) as alone.
    clock.advance(1)
    again = answers_of(service.settle_many(requests(together)))
    assert [comparable(a) for a in again] == [comparable(service.settle(nmi, DAY)) for nmi in alone]


def test_a_batch_settles_many_quotas_once_each_and_replays_them_from_the_cache(
    store: Store, service: Settlements
) -> None:
    nmis = customers(store, "C")
    ingest(store, *(reads(nmi, "0.500") for nmi in nmis))
    first = answers_of(service.settle_many(requests(nmis)))
    assert {a.outcome for a in first} == {Outcome.SETTLED}
    assert {a.quota.free_kwh for a in first} == {Decimal("3.000")}
    again = answers_of(service.settle_many(requests(nmis)))
    assert [a.outcome for a in again] == [Outcome.REPLAYED] * COUNT
    assert [a.quota for a in again] == [a.quota for a in first]
    assert len(ledger(store, nmis)) == COUNT


def test_a_batch_reads_only_consumption_and_settles_what_single_settles_do(
    store: Store, service: Settlements
) -> None:
    # E1 and B1 (export through the window): the batch leaves the export day unread, and its
    # free energy is still exactly what the single path, which reads every channel, settles.
    alone, together = customers(store, "E", 3), customers(store, "F", 3)
    for n, (single, batched) in enumerate(zip(alone, together, strict=True)):
        for nmi in (single, batched):
            ingest(
                store,
                reads(nmi, f"0.{n + 2}50"),
                replace(reads(nmi, f"1.{n}00"), suffix="B1"),
            )
    singles = [service.settle(nmi, DAY) for nmi in alone]
    batch = answers_of(service.settle_many(requests(together)))
    assert [comparable(a) for a in batch] == [comparable(a) for a in singles]
    assert [a.quota.free_kwh for a in batch] == [
        Decimal("1.500"),
        Decimal("2.100"),
        Decimal("2.700"),
    ]


def test_a_repeated_key_in_one_batch_is_answered_as_a_second_request(
    store: Store, service: Settlements
) -> None:
    nmis = customers(store, "D", 2)
    ingest(store, *(reads(nmi, "0.500") for nmi in nmis))
    got = answers_of(service.settle_many(requests([nmis[0], nmis[1], nmis[0]])))
    assert [a.outcome for a in got] == [Outcome.SETTLED, Outcome.SETTLED, Outcome.REPLAYED]
    assert len(ledger(store, nmis)) == 2


def test_a_failing_attempt_in_a_batch_is_released_alone_and_its_neighbours_settle(
    store: Store, service: Settlements, faults: KeyedFaults
) -> None:
    nmis = customers(store, "E")
    ingest(store, *(reads(nmi, "0.500") for nmi in nmis))
    faults.add(FaultPoint.BEFORE_COMPLETE, f"{nmis[3]}:{DAY}", RuntimeError("rating blew up"))
    faults.add(FaultPoint.AFTER_CLAIM, f"{nmis[7]}:{DAY}", RuntimeError("database went away"))
    got = answers_of(service.settle_many(requests(nmis)))
    for n, answer in enumerate(got):
        if n in (3, 7):
            assert answer.outcome is Outcome.RETRY
            assert (answer.quota.status, answer.quota.attempts) == (QuotaStatus.PENDING, 1)
            assert answer.quota.reason == ATTEMPT_FAILED
            assert answer.retry_after == 1
        else:
            assert (answer.outcome, answer.quota.attempts) == (Outcome.SETTLED, 0)
    assert sorted(nmi for nmi, *_ in ledger(store, nmis)) == sorted(
        nmi for n, nmi in enumerate(nmis) if n not in (3, 7)
    )
    again = answers_of(service.settle_many(requests(nmis)))
    assert [a.outcome for n, a in enumerate(again) if n in (3, 7)] == [Outcome.SETTLED] * 2
    assert len(ledger(store, nmis)) == COUNT


def test_a_worker_dying_mid_batch_leaves_locks_that_are_taken_over_once_each(
    store: Store, service: Settlements, clock: ManualClock, faults: KeyedFaults
) -> None:
    nmis = customers(store, "F")
    ingest(store, *(reads(nmi, "0.500") for nmi in nmis))
    faults.add(FaultPoint.AFTER_CLAIM, f"{nmis[5]}:{DAY}", Death())
    with pytest.raises(Death):
        service.settle_many(requests(nmis))
    states = [service.state(nmi, DAY) for nmi in nmis]
    assert {state.status for state in states if state is not None} == {QuotaStatus.LOCKED}
    assert ledger(store, nmis) == []
    lock = POLICY.lock_timeout.total_seconds()
    clock.advance(lock - 2)
    busy = answers_of(service.settle_many(requests(nmis)))
    assert {(a.outcome, a.retry_after) for a in busy} == {(Outcome.LOCKED, 2)}
    clock.advance(2)
    done = answers_of(service.settle_many(requests(nmis)))
    assert {(a.outcome, a.quota.fence, a.quota.attempts) for a in done} == {(Outcome.SETTLED, 2, 1)}
    assert len(ledger(store, nmis)) == COUNT


def test_a_stale_fence_in_a_batch_books_nothing_and_answers_the_successors_lock(
    store: Store, service: Settlements, clock: ManualClock, faults: KeyedFaults
) -> None:
    nmis = customers(store, "G")
    ingest(store, *(reads(nmi, "0.500") for nmi in nmis))
    stale = nmis[4]

    def taken_over() -> None:
        # Between our claim and our completion, our lock expired and another holder claimed.
        with store.write() as unit:
            ours = unit.quotas.latest(stale, DAY, for_update=True)
            assert ours is not None
            assert ours.status is QuotaStatus.LOCKED
            later = clock.now() + POLICY.lock_timeout
            successor = claim(ours, later, POLICY.lock_timeout, POLICY.max_attempts).quota
            unit.quotas.save([successor], at=later)

    faults.add(FaultPoint.AFTER_CLAIM, f"{stale}:{DAY}", taken_over)
    got = answers_of(service.settle_many(requests(nmis)))
    assert got[4].outcome is Outcome.LOCKED
    assert (got[4].quota.fence, got[4].quota.status) == (2, QuotaStatus.LOCKED)
    assert [a.outcome for n, a in enumerate(got) if n != 4] == [Outcome.SETTLED] * (COUNT - 1)
    assert stale not in {nmi for nmi, *_ in ledger(store, nmis)}


def test_a_revision_between_the_claim_and_the_completion_is_what_the_batch_books(
    store: Store, service: Settlements, clock: ManualClock, faults: KeyedFaults
) -> None:
    nmis = customers(store, "H")
    ingest(store, *(reads(nmi, "0.500") for nmi in nmis))
    ingestion = Ingestion(store, service, clock)
    revised = nmis[2]

    def revision() -> None:
        done = ingestion.file([reads(revised, "0.600", stamp=STAMP + timedelta(days=1))])
        assert done.reopened == []  # LOCKED, not settled: the holder reads it

    faults.add(FaultPoint.AFTER_CLAIM, f"{revised}:{DAY}", revision)
    got = answers_of(service.settle_many(requests(nmis)))
    assert got[2].quota.free_kwh == Decimal("3.600")
    assert {a.quota.free_kwh for n, a in enumerate(got) if n != 2} == {Decimal("3.000")}
    assert len(ledger(store, nmis)) == COUNT


@pytest.mark.parametrize(
    "store_url", [pytest.param("postgresql", marks=pytest.mark.postgres)], indirect=True
)
def test_a_day_whose_ingest_is_committing_is_completed_alone_after_it(
    store: Store, service: Settlements, clock: ManualClock
) -> None:
    """An ingest holds a quota day's lock until it commits: the batch does not wait for it (it
    holds many), that one quota waits alone, and reads the revision."""
    nmis = customers(store, "I")
    ingest(store, *(reads(nmi, "0.500") for nmi in nmis))
    revised = nmis[6]
    holding = threading.Event()
    released = threading.Event()

    def settlement_waits() -> bool:
        with store.read() as unit:
            waiting = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            return bool(unit.connection.execute(sa.text(waiting)).scalar())

    def revise() -> None:
        with store.write() as unit:
            unit.hold_shared([day_lock(revised, DAY)])
            unit.meter.ingest_days(
                [reads(revised, "0.600", stamp=STAMP + timedelta(days=1))], received_at=DUE
            )
            holding.set()
            eventually(settlement_waits, within=20, what="the settlement waiting for the ingest")
        released.set()

    ingesting = threading.Thread(target=revise)
    ingesting.start()
    assert holding.wait(timeout=20)
    got = answers_of(service.settle_many(requests(nmis)))
    ingesting.join()
    assert released.is_set()
    assert got[6].quota.free_kwh == Decimal("3.600")
    assert {a.outcome for a in got} == {Outcome.SETTLED}
    assert len(ledger(store, nmis)) == COUNT


@pytest.mark.parametrize(
    "store_url", [pytest.param("postgresql", marks=pytest.mark.postgres)], indirect=True
)
def test_two_workers_batching_the_same_quotas_at_once_book_each_once_without_errors(
    store: Store, clock: ManualClock
) -> None:
    nmis = customers(store, "J", 40)
    ingest(store, *(reads(nmi, "0.500") for nmi in nmis))
    workers = [Settlements(store, MemoryQuotaCache(clock), clock, POLICY) for _ in range(2)]
    orders = [requests(nmis), requests(list(reversed(nmis)))]
    results: list[list[Answer | Exception]] = [[], []]
    start = threading.Barrier(2)

    def run(n: int) -> None:
        start.wait()
        for _ in range(3):
            results[n] += workers[n].settle_many(orders[n])

    threads = [threading.Thread(target=run, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    answers = answers_of(results[0] + results[1])
    assert {a.outcome for a in answers} <= {Outcome.SETTLED, Outcome.REPLAYED, Outcome.LOCKED}
    settled = [a.quota.nmi for a in answers if a.outcome is Outcome.SETTLED]
    assert sorted(settled) == sorted(nmis)  # each by exactly one of them
    with store.read() as unit:
        assert unit.quotas.duplicate_credits() == 0
    assert len(ledger(store, nmis)) == len(nmis)
    states = [workers[0].state(nmi, DAY) for nmi in nmis]
    assert {state.status for state in states if state is not None} == {QuotaStatus.COMPLETED}


def test_a_batch_before_the_window_ends_answers_not_due_as_settle_does(
    store: Store, service: Settlements
) -> None:
    nmis = customers(store, "K", 3)
    early = ManualClock(WINDOW_END - timedelta(minutes=30))
    before = Settlements(store, MemoryQuotaCache(early), early, POLICY)
    got = answers_of(before.settle_many(requests(nmis)))
    assert [(a.outcome, a.quota.status, a.retry_after) for a in got] == [
        (Outcome.NOT_DUE, QuotaStatus.PENDING, 45 * 60)
    ] * 3


def test_a_batch_the_database_fails_is_answered_with_its_failure_once_not_quota_by_quota(
    store: Store, service: Settlements, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unreachable, a database fails every quota of a batch alike: asking again for each alone
    would keep the batch's callers waiting for its timeouts once per quota."""
    nmis = customers(store, "J")
    ingest(store, *(reads(nmi, "0.500") for nmi in nmis))
    opened: list[str] = []

    def unreachable() -> object:
        opened.append("autocommit")
        raise connection_lost("SELECT 1", "the database went away")

    monkeypatch.setattr(store, "autocommit", unreachable)
    got = service.settle_many(requests(nmis))
    assert opened == ["autocommit"]
    assert len(got) == COUNT
    assert all(isinstance(answer, UNAVAILABLE) for answer in got)


def test_a_batch_whose_completion_the_database_fails_is_released_in_one_transaction(
    store: Store, service: Settlements, monkeypatch: pytest.MonkeyPatch
) -> None:
    nmis = customers(store, "K")
    ingest(store, *(reads(nmi, "0.500") for nmi in nmis))
    write = store.write
    opened: list[str | None] = []

    def failing_once(lock: str | None = None) -> AbstractContextManager[Unit]:
        opened.append(lock)
        if len(opened) == 1:
            raise connection_lost("BEGIN", "the database went away")
        return write(lock)

    monkeypatch.setattr(store, "write", failing_once)
    got = answers_of(service.settle_many(requests(nmis)))
    assert opened == [None, None]  # the completion, then one release for all
    assert {(a.outcome, a.quota.status, a.quota.attempts) for a in got} == {
        (Outcome.RETRY, QuotaStatus.PENDING, 1)
    }
    assert ledger(store, nmis) == []
