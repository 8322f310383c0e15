"""The settlement service against the real store, on SQLite and PostgreSQL: every path of the
state machine, including the failure paths, settles a quota exactly once."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest
import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import REGISTRY

from freehours.cache.quota import MemoryQuotaCache
from freehours.clock import ManualClock
from freehours.domain.reads import IntervalDay
from freehours.domain.settlement import Quota, QuotaStatus, StaleFence, claim, complete
from freehours.domain.time import NEM_TIME, Region
from freehours.plans.document import parse_plan
from freehours.settlement.energy import window_complete
from freehours.settlement.ingest import Ingestion
from freehours.settlement.model import (
    ATTEMPT_FAILED,
    INCOMPLETE_AT_DEADLINE,
    NO_DATA_AT_DEADLINE,
    FaultPoint,
    Outcome,
    SettlementPolicy,
)
from freehours.settlement.service import Settlements
from freehours.store import quotas
from freehours.store.database import Store
from tests.support import eventually, stored_or_new

NMI = "4102000001"
DAY = date(2026, 7, 1)  # winter: Sydney is on AEST, so the window 11:00-14:00 is 01:00-04:00 UTC
WINDOW_END = datetime(2026, 7, 1, 4, 0, tzinfo=UTC)
POLICY = SettlementPolicy()
DUE = WINDOW_END + POLICY.grace

PLAN = {
    "id": "test-nsw",
    "region": "NSW",
    "daily_supply_charge": "1.0000",
    "free_window": {"start": "11:00", "end": "14:00", "cap_kwh": "24"},
    "time_of_use": [
        {
            "type": "PEAK",
            "unit_price": "0.3000",
            "periods": [{"days": ["ALL"], "start": "00:00", "end": "24:00"}],
        }
    ],
    "feed_in": {"unit_price": "0.0500"},
}


class Death(BaseException):
    """A worker process dying: not an Exception, so nothing in the service catches it."""


@dataclass
class Faults:
    """Raise the queued faults at their points, once each."""

    queued: dict[FaultPoint, list[BaseException]] = field(default_factory=dict)

    def add(self, point: FaultPoint, error: BaseException) -> None:
        self.queued.setdefault(point, []).append(error)

    def check(self, point: FaultPoint, quota: object) -> None:
        pending = self.queued.get(point)
        if pending:
            raise pending.pop(0)


def day_row(
    value: str, *, stamp: datetime, suffix: str = "E1", missing: range = range(0)
) -> IntervalDay:
    values = tuple(None if i in missing else Decimal(value) for i in range(48))
    qualities = "".join("N" if i in missing else "A" for i in range(48))
    return IntervalDay(NMI, suffix, DAY, 30, values, qualities, stamp)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(DUE)


@pytest.fixture
def faults() -> Faults:
    return Faults()


def add_customer(store: Store, now: datetime) -> None:
    """The test plan, and customer ``NMI`` on it."""
    with store.write() as unit:
        unit.catalog.put_plan("test-nsw", PLAN, updated_at=now)
        unit.catalog.put_customer(NMI, plan_id="test-nsw", region=Region.NSW, updated_at=now)


@pytest.fixture
def service(store: Store, clock: ManualClock, faults: Faults) -> Settlements:
    add_customer(store, clock.now())
    return Settlements(store, MemoryQuotaCache(clock), clock, POLICY, faults)


def ingest(store: Store, *days: IntervalDay, at: datetime) -> None:
    with store.write() as unit:
        unit.meter.ingest_days(days, received_at=at)


STAMP = datetime(2026, 7, 1, 15, 0, tzinfo=NEM_TIME)


def ledger(store: Store) -> list[quotas.LedgerEntry]:
    with store.read() as unit:
        return unit.quotas.ledger(NMI)


def test_settles_once_and_books_the_window_energy(service: Settlements, store: Store) -> None:
    ingest(store, day_row("0.500", stamp=STAMP), at=DUE)
    answer = service.settle(NMI, DAY)
    assert answer.outcome is Outcome.SETTLED
    # Six half-hours of 0.5 kWh in 11:00-14:00, priced at 0.30: 3 kWh worth 0.90.
    assert answer.quota.status is QuotaStatus.COMPLETED
    assert answer.quota.free_kwh == Decimal("3.000")
    assert answer.quota.free_value == Decimal("0.90")
    assert [(e.kwh, e.amount) for e in ledger(store)] == [(Decimal("3.000"), Decimal("0.90"))]


def test_every_repeat_replays_the_same_quota_and_books_nothing(
    service: Settlements, store: Store, clock: ManualClock
) -> None:
    ingest(store, day_row("0.500", stamp=STAMP), at=DUE)
    first = service.settle(NMI, DAY)
    for _ in range(3):
        clock.advance(3600)
        again = service.settle(NMI, DAY)
        assert again.outcome is Outcome.REPLAYED
        assert again.quota == first.quota
    assert len(ledger(store)) == 1


def test_before_the_window_ends_it_is_pending_until_due(service: Settlements) -> None:
    early = ManualClock(WINDOW_END - timedelta(minutes=30))
    answer = Settlements(service.store, MemoryQuotaCache(early), early, POLICY).settle(NMI, DAY)
    assert answer.outcome is Outcome.NOT_DUE
    assert answer.quota.status is QuotaStatus.PENDING
    assert answer.retry_after == 45 * 60


def test_incomplete_window_data_waits_then_settles_with_what_there_is_after_the_deadline(
    service: Settlements, store: Store, clock: ManualClock
) -> None:
    # Interval 23 (11:00-11:30) has no value.
    ingest(store, day_row("0.500", stamp=STAMP, missing=range(22, 23)), at=DUE)
    answer = service.settle(NMI, DAY)
    assert answer.outcome is Outcome.NOT_DUE
    assert answer.retry_after == int(POLICY.data_poll.total_seconds())
    # Postponed, not failed: no attempt is counted while the data is awaited.
    assert (answer.quota.status, answer.quota.attempts) == (QuotaStatus.PENDING, 0)
    assert answer.quota.reason == (
        "waiting for the window's meter data; settles with what there is at "
        + (WINDOW_END + POLICY.data_deadline).astimezone(ZoneInfo("Australia/Sydney")).isoformat()
    )
    clock.set(WINDOW_END + POLICY.data_deadline)
    settled = service.settle(NMI, DAY)
    assert settled.outcome is Outcome.SETTLED
    assert settled.quota.free_kwh == Decimal("2.500")
    assert settled.quota.reason == INCOMPLETE_AT_DEADLINE  # the settled quota says so


def test_a_day_without_any_data_books_zero_at_the_deadline_and_later_data_the_next_version(
    service: Settlements, store: Store, clock: ManualClock
) -> None:
    """The data deadline bounds the wait: a day with no meter data at all settles at 0 kWh
    (and says why); its data, arriving later, opens version 2, which books the difference."""
    waiting = service.settle(NMI, DAY)
    assert (waiting.outcome, waiting.quota.status) == (Outcome.NOT_DUE, QuotaStatus.PENDING)
    clock.set(WINDOW_END + POLICY.data_deadline - timedelta(seconds=1))
    assert service.settle(NMI, DAY).outcome is Outcome.NOT_DUE
    clock.set(WINDOW_END + POLICY.data_deadline)
    empty = service.settle(NMI, DAY)
    assert (empty.outcome, empty.quota.free_kwh) == (Outcome.SETTLED, Decimal(0))
    assert empty.quota.reason == NO_DATA_AT_DEADLINE
    assert [(e.version, e.kwh, e.amount) for e in ledger(store)] == [(1, 0, Decimal("0.00"))]
    assert service.settle(NMI, DAY).quota == empty.quota  # replayed, reason and all
    ingestion = Ingestion(store, service, clock)
    (reopened,) = ingestion.file([day_row("0.500", stamp=STAMP)]).reopened
    assert (reopened.version, reopened.status) == (2, QuotaStatus.PENDING)
    again = service.settle(NMI, DAY)
    assert (again.outcome, again.quota.version) == (Outcome.SETTLED, 2)
    assert (again.quota.free_kwh, again.quota.reason) == (Decimal("3.000"), None)
    assert [(e.version, e.kwh) for e in ledger(store)] == [(1, 0), (2, Decimal("3.000"))]


def test_the_data_deadline_is_counted_in_real_hours_across_a_daylight_saving_change(
    service: Settlements, clock: ManualClock
) -> None:
    """Sydney's clocks go back an hour on 4 April 2027: the 2nd's day, without data, settles 72
    hours after its window (as its settle job's deadline counts them), not 73."""
    day = date(2027, 4, 2)
    window_end = datetime(2027, 4, 2, 3, 0, tzinfo=UTC)  # 14:00 AEDT
    clock.set(window_end + POLICY.data_deadline - timedelta(seconds=1))
    assert service.settle(NMI, day).retry_after == 1
    clock.set(window_end + POLICY.data_deadline)
    settled = service.settle(NMI, day)
    assert (settled.outcome, settled.quota.reason) == (Outcome.SETTLED, NO_DATA_AT_DEADLINE)


def test_unknown_nmi_is_aborted_without_storing_a_quota(
    service: Settlements, clock: ManualClock
) -> None:
    answer = service.settle("NOBODY0001", DAY)
    assert answer.outcome is Outcome.ABORTED
    assert answer.quota.reason == "unknown NMI NOBODY0001: no customer"
    assert service.state("NOBODY0001", DAY) is None
    # Not a stored state, so the same answer to every request while it is so: never completed.
    assert answer.quota.completed_at is None
    clock.advance(60)
    assert service.settle("NOBODY0001", DAY) == answer
    assert service.view("NOBODY0001", DAY).quota == answer.quota


def test_a_failure_after_the_lock_releases_and_counts_one_attempt(
    service: Settlements, store: Store, faults: Faults
) -> None:
    ingest(store, day_row("0.500", stamp=STAMP), at=DUE)
    faults.add(FaultPoint.BEFORE_COMPLETE, RuntimeError("database went away"))
    failed = service.settle(NMI, DAY)
    assert failed.outcome is Outcome.RETRY
    assert (failed.quota.status, failed.quota.attempts) == (QuotaStatus.PENDING, 1)
    assert failed.quota.reason == ATTEMPT_FAILED  # the exception's text is logged, not shown
    assert failed.retry_after == 1
    assert ledger(store) == []
    done = service.settle(NMI, DAY)
    assert done.outcome is Outcome.SETTLED
    assert done.quota.attempts == 1
    assert len(ledger(store)) == 1


def test_a_holder_that_dies_leaves_a_lock_that_is_taken_over_after_it_expires(
    service: Settlements, store: Store, faults: Faults, clock: ManualClock
) -> None:
    ingest(store, day_row("0.500", stamp=STAMP), at=DUE)
    faults.add(FaultPoint.AFTER_CLAIM, Death())
    with pytest.raises(Death):
        service.settle(NMI, DAY)
    lock = POLICY.lock_timeout.total_seconds()
    clock.advance(lock - 2)
    busy = service.settle(NMI, DAY)
    assert busy.outcome is Outcome.LOCKED
    assert busy.retry_after == 2
    clock.advance(2)
    done = service.settle(NMI, DAY)
    assert done.outcome is Outcome.SETTLED
    assert (done.quota.fence, done.quota.attempts) == (2, 1)
    assert len(ledger(store)) == 1


def test_a_stale_holder_cannot_complete_or_book_after_a_takeover(
    service: Settlements, store: Store, clock: ManualClock
) -> None:
    ingest(store, day_row("0.500", stamp=STAMP), at=DUE)
    with store.write() as unit:
        pending = stored_or_new(unit, NMI, DAY, at=clock.now())
        first = claim(pending, clock.now(), POLICY.lock_timeout, POLICY.max_attempts)
        unit.quotas.save([first.quota], at=clock.now())
    clock.advance(POLICY.lock_timeout.total_seconds())
    assert service.settle(NMI, DAY).outcome is Outcome.SETTLED  # the successor, fence 2
    with store.write() as unit:
        current = unit.quotas.latest(NMI, DAY, for_update=True)
        assert current is not None
        with pytest.raises(StaleFence):
            complete(current, first.quota.fence, Decimal(9), Decimal(9), clock.now())
    assert len(ledger(store)) == 1


def test_repeated_failures_end_in_aborted_and_stay_there(
    service: Settlements, store: Store, faults: Faults
) -> None:
    ingest(store, day_row("0.500", stamp=STAMP), at=DUE)
    for _ in range(POLICY.max_attempts):
        faults.add(FaultPoint.BEFORE_COMPLETE, RuntimeError("boom: SELECT secret FROM t"))
    outcomes = [service.settle(NMI, DAY).outcome for _ in range(POLICY.max_attempts + 2)]
    assert outcomes == [Outcome.RETRY] * (POLICY.max_attempts - 1) + [Outcome.ABORTED] * 3
    state = service.state(NMI, DAY)
    assert state is not None
    assert (state.status, state.attempts) == (QuotaStatus.ABORTED, POLICY.max_attempts)
    assert state.reason == f"gave up after {POLICY.max_attempts} attempts: {ATTEMPT_FAILED}"
    assert "boom" not in state.reason
    assert "RuntimeError" not in state.reason
    assert ledger(store) == []


def _cache_count(result: str) -> float:
    value = REGISTRY.get_sample_value("freehours_quota_cache_requests_total", {"result": result})
    return value or 0.0


def test_a_failed_cache_write_is_counted_and_the_database_still_answers(
    service: Settlements, store: Store, faults: Faults
) -> None:
    ingest(store, day_row("0.500", stamp=STAMP), at=DUE)
    before = REGISTRY.get_sample_value("freehours_quota_cache_write_failures_total") or 0.0
    faults.add(FaultPoint.CACHE_WRITE, ConnectionError("redis down"))
    assert service.settle(NMI, DAY).outcome is Outcome.SETTLED
    assert REGISTRY.get_sample_value("freehours_quota_cache_write_failures_total") == before + 1
    misses = _cache_count("miss")
    assert service.settle(NMI, DAY).outcome is Outcome.REPLAYED  # from the database
    assert _cache_count("miss") == misses + 1
    hits = _cache_count("hit")
    assert service.settle(NMI, DAY).outcome is Outcome.REPLAYED  # now from the cache
    assert _cache_count("hit") == hits + 1


def test_a_stale_non_terminal_cache_entry_is_re_read_from_the_database(
    service: Settlements, store: Store, clock: ManualClock
) -> None:
    ingest(store, day_row("0.500", stamp=STAMP), at=DUE)
    with store.write() as unit:
        pending = stored_or_new(unit, NMI, DAY, at=clock.now())
    service.cache.put(pending, 30)  # the incident: "pending" cached, then settled elsewhere
    with store.write() as unit:
        locked = claim(pending, clock.now(), POLICY.lock_timeout, 5).quota
        done = complete(locked, locked.fence, Decimal(3), Decimal("0.9"), clock.now())
        unit.quotas.save([done], at=clock.now())
    stale = _cache_count("stale")
    answer = service.settle(NMI, DAY)
    assert answer.outcome is Outcome.REPLAYED
    assert answer.quota.status is QuotaStatus.COMPLETED
    assert _cache_count("stale") == stale + 1


def test_a_revision_after_completion_settles_a_new_version_booking_the_difference(
    service: Settlements, store: Store, clock: ManualClock
) -> None:
    ingest(store, day_row("0.500", stamp=STAMP), at=DUE)
    assert service.settle(NMI, DAY).quota.free_kwh == Decimal("3.000")
    with store.write() as unit:
        unit.meter.ingest_days(
            [day_row("0.600", stamp=STAMP + timedelta(days=1))], received_at=clock.now()
        )
        reopened = service.reopen(unit, service.affected_days(unit, [(NMI, "E1", DAY)]))
    service.publish(reopened)
    assert [(q.version, q.status) for q in reopened] == [(2, QuotaStatus.PENDING)]
    answer = service.settle(NMI, DAY)
    assert answer.outcome is Outcome.SETTLED
    assert (answer.quota.version, answer.quota.free_kwh) == (2, Decimal("3.600"))
    assert [(e.version, e.kwh, e.amount) for e in ledger(store)] == [
        (1, Decimal("3.000"), Decimal("0.90")),
        (2, Decimal("0.600"), Decimal("0.18")),
    ]


def test_a_job_for_a_new_version_is_not_fooled_by_a_cached_older_version(
    service: Settlements, store: Store, clock: ManualClock, faults: Faults
) -> None:
    ingest(store, day_row("0.500", stamp=STAMP), at=DUE)
    assert service.settle(NMI, DAY).outcome is Outcome.SETTLED  # v1 COMPLETED, cached
    with store.write() as unit:
        unit.meter.ingest_days(
            [day_row("0.600", stamp=STAMP + timedelta(days=1))], received_at=clock.now()
        )
        (reopened,) = service.reopen(unit, service.affected_days(unit, [(NMI, "E1", DAY)]))
    faults.add(FaultPoint.CACHE_WRITE, ConnectionError("redis down"))
    service.publish([reopened])  # lost: the cache still says v1 COMPLETED
    assert service.settle(NMI, DAY).quota.version == 1  # a client may see v1 until the TTL
    answer = service.settle(NMI, DAY, version=reopened.version)
    assert (answer.outcome, answer.quota.version) == (Outcome.SETTLED, 2)


def test_an_export_revision_does_not_reopen_a_settled_quota(
    service: Settlements, store: Store, clock: ManualClock
) -> None:
    ingest(store, day_row("0.500", stamp=STAMP), at=DUE)
    service.settle(NMI, DAY)
    with store.write() as unit:
        assert service.reopen(unit, service.affected_days(unit, [(NMI, "B1", DAY)])) == []


def test_a_revision_racing_the_first_settlement_is_settled_by_one_or_reopens_it(
    service: Settlements, store: Store, clock: ManualClock
) -> None:
    """A revision stored while the day's first settlement runs, in a transaction that commits
    after it: the settlement reads it, or its ingest reopens the quota. Never a COMPLETED
    quota that misses it with no next version (on PostgreSQL the ingest and the settlement run
    at once; on SQLite one waits for the other)."""
    ingest(store, day_row("0.500", stamp=STAMP), at=DUE)
    revised = threading.Event()
    settled = threading.Event()
    reopened: list[Quota] = []

    def settlement_waits_for_the_ingest() -> bool:
        # SQLite runs nothing beside a writer: there is no race to hold open.
        if store.dialect != "postgresql":
            return True
        with store.read() as unit:
            waiting = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            return bool(unit.connection.execute(sa.text(waiting)).scalar())

    def revise() -> None:
        with store.write() as unit:
            unit.meter.ingest_days(
                [day_row("0.600", stamp=STAMP + timedelta(days=1))], received_at=DUE
            )
            reopened.extend(service.reopen(unit, service.affected_days(unit, [(NMI, "E1", DAY)])))
            revised.set()
            # Uncommitted until the settlement has finished without it, or waits for it.
            eventually(
                lambda: settled.is_set() or settlement_waits_for_the_ingest(),
                within=10,
                what="the settlement finished, or waiting for the ingest",
                every=0.01,
            )

    ingesting = threading.Thread(target=revise)
    ingesting.start()
    assert revised.wait(timeout=10)
    first = service.settle(NMI, DAY)
    settled.set()
    ingesting.join()
    service.publish(reopened)
    if first.quota.free_kwh == Decimal("3.600"):
        assert reopened == []  # it read the revision
    else:
        assert first.quota.free_kwh == Decimal("3.000")
        assert [(q.version, q.status) for q in reopened] == [(2, QuotaStatus.PENDING)]
        assert service.settle(NMI, DAY).quota.free_kwh == Decimal("3.600")
    with store.read() as unit:
        assert sum(entry.kwh for entry in unit.quotas.ledger(NMI)) == Decimal("3.600")


@settings(max_examples=300, deadline=None)
@given(
    minutes=st.sampled_from([5, 15, 30]),
    start=st.integers(-120, 24 * 60 + 120),
    length=st.integers(0, 6 * 60),
    missing=st.sets(st.integers(0, 287), max_size=4),
)
def test_window_complete_is_every_overlapping_interval_having_a_value(
    minutes: int, start: int, length: int, missing: set[int]
) -> None:
    count = 24 * 60 // minutes
    values = tuple(None if i in missing else Decimal(1) for i in range(count))
    day = IntervalDay(NMI, "E1", DAY, minutes, values, "A" * count, STAMP)
    window_start = day.start + timedelta(minutes=start)
    window_end = window_start + timedelta(minutes=length)
    step = timedelta(minutes=minutes)
    overlapping = [
        value
        for first, value in zip(day.interval_starts(), values, strict=True)
        if first + step > window_start and first < window_end
    ]
    expected = bool(overlapping) and None not in overlapping
    plan = parse_plan(PLAN, source="the test plan")
    assert window_complete(plan, [day], window_start, window_end) == expected
