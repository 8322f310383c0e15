"""Every transition of the settlement state machine, including the failure paths."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest

from freehours.domain.settlement import (
    Busy,
    Claimed,
    QuotaStatus,
    QuotaTimes,
    Settled,
    StaleFence,
    abort,
    claim,
    complete,
    data_deadline_of,
    has_quota,
    new_quota,
    postpone,
    quota_dates,
    quota_key,
    quota_times,
    release,
    seconds_until_settleable,
)
from freehours.plans import load_plan

NOW = datetime(2026, 7, 1, 5, 0, tzinfo=UTC)
LOCK = timedelta(seconds=30)
MAX = 3


def claimed(now: datetime = NOW):
    decision = claim(new_quota("NMI0000001", date(2026, 7, 1)), now, LOCK, MAX)
    assert isinstance(decision, Claimed)
    return decision.quota


def test_claim_takes_a_pending_quota_with_the_next_fence_until_the_lock_timeout() -> None:
    quota = claimed()
    assert quota.status is QuotaStatus.LOCKED
    assert quota.fence == 1
    assert quota.locked_until == NOW + LOCK
    assert quota.attempts == 0


def test_claim_of_a_live_lock_is_busy_for_the_seconds_left_rounded_up() -> None:
    quota = claimed()
    decision = claim(quota, NOW + timedelta(seconds=10.5), LOCK, MAX)
    assert decision == Busy(quota, 20)


def test_busy_retry_after_is_at_least_one_second() -> None:
    quota = claimed()
    decision = claim(quota, NOW + LOCK - timedelta(milliseconds=1), LOCK, MAX)
    assert isinstance(decision, Busy)
    assert decision.retry_after == 1


def test_claim_takes_over_an_expired_lock_with_fence_plus_one_and_counts_the_attempt() -> None:
    quota = claimed()
    later = NOW + LOCK
    decision = claim(quota, later, LOCK, MAX)
    assert isinstance(decision, Claimed)
    assert decision.quota.fence == 2
    assert decision.quota.attempts == 1
    assert decision.quota.locked_until == later + LOCK


def test_stale_holder_cannot_complete_after_its_lock_was_taken_over() -> None:
    first = claimed()
    takeover = claim(first, NOW + LOCK, LOCK, MAX)
    assert isinstance(takeover, Claimed)
    with pytest.raises(StaleFence):
        complete(takeover.quota, first.fence, Decimal("1"), Decimal("0.3"), NOW + LOCK)


def test_holder_whose_lock_expired_untaken_may_still_complete() -> None:
    quota = claimed()
    done = complete(quota, quota.fence, Decimal("2.5"), Decimal("0.75"), NOW + 2 * LOCK)
    assert done.status is QuotaStatus.COMPLETED


def test_complete_records_free_energy_and_time_and_clears_the_lock() -> None:
    quota = claimed()
    done = complete(quota, 1, Decimal("12.345"), Decimal("3.70"), NOW)
    assert (done.status, done.free_kwh, done.free_value) == (
        QuotaStatus.COMPLETED,
        Decimal("12.345"),
        Decimal("3.70"),
    )
    assert done.completed_at == NOW
    assert done.locked_until is None
    assert done.revision == quota.revision + 1


def test_completed_quota_is_settled_for_every_later_claim() -> None:
    done = complete(claimed(), 1, Decimal("1"), Decimal("0.3"), NOW)
    for later in (NOW, NOW + timedelta(days=400)):
        assert claim(done, later, LOCK, MAX) == Settled(done)


def test_complete_twice_with_the_same_fence_is_refused() -> None:
    done = complete(claimed(), 1, Decimal("1"), Decimal("0.3"), NOW)
    with pytest.raises(StaleFence):
        complete(done, 1, Decimal("1"), Decimal("0.3"), NOW)


def test_abort_is_terminal_with_its_reason() -> None:
    aborted = abort(claimed(), 1, "customer has no plan", NOW)
    assert aborted.status is QuotaStatus.ABORTED
    assert aborted.reason == "customer has no plan"
    assert claim(aborted, NOW, LOCK, MAX) == Settled(aborted)


def test_abort_with_a_stale_fence_is_refused() -> None:
    with pytest.raises(StaleFence):
        abort(claimed(), 7, "no", NOW)


def test_release_returns_to_pending_and_counts_the_attempt() -> None:
    released = release(claimed(), 1, "database error", NOW, MAX)
    assert released.status is QuotaStatus.PENDING
    assert released.attempts == 1
    assert released.reason == "database error"
    assert released.locked_until is None


def test_release_with_a_stale_fence_is_refused() -> None:
    with pytest.raises(StaleFence):
        release(claimed(), 2, "x", NOW, MAX)


def test_release_aborts_once_attempts_reach_the_maximum() -> None:
    quota = claimed()
    for attempt in range(1, MAX):
        quota = release(quota, quota.fence, "boom", NOW, MAX)
        assert quota.status is QuotaStatus.PENDING
        assert quota.attempts == attempt
        decision = claim(quota, NOW, LOCK, MAX)
        assert isinstance(decision, Claimed)
        quota = decision.quota
    final = release(quota, quota.fence, "boom", NOW, MAX)
    assert final.status is QuotaStatus.ABORTED
    assert final.attempts == MAX
    assert final.reason == f"gave up after {MAX} attempts: boom"


def test_holders_that_keep_dying_end_in_aborted_after_max_attempts() -> None:
    quota = claimed()
    now = NOW
    outcomes = []
    for _ in range(10):
        now += LOCK
        decision = claim(quota, now, LOCK, MAX)
        outcomes.append(type(decision).__name__)
        quota = decision.quota
        if isinstance(decision, Settled):
            break
    assert outcomes == ["Claimed", "Claimed", "Settled"]
    assert quota.status is QuotaStatus.ABORTED
    assert quota.attempts == MAX


def test_every_transition_bumps_the_revision() -> None:
    quota = new_quota("N", date(2026, 7, 1))
    revisions = [quota.revision]
    quota = claimed()
    revisions.append(quota.revision)
    quota = release(quota, 1, "x", NOW, MAX)
    revisions.append(quota.revision)
    decision = claim(quota, NOW, LOCK, MAX)
    assert isinstance(decision, Claimed)
    revisions.append(decision.quota.revision)
    revisions.append(complete(decision.quota, 2, Decimal(0), Decimal(0), NOW).revision)
    assert revisions == [0, 1, 2, 3, 4]


def test_key_is_nmi_colon_date() -> None:
    assert new_quota("4102000001", date(2026, 7, 1)).key == "4102000001:2026-07-01"
    assert quota_key("4102000001", date(2026, 7, 1)) == "4102000001:2026-07-01"


WINDOW_END = datetime(2026, 7, 1, 4, 0, tzinfo=UTC)  # 14:00 AEST
GRACE = timedelta(minutes=15)
DEADLINE = timedelta(days=3)
POLL = timedelta(minutes=10)


@pytest.mark.parametrize(
    ("now", "complete_data", "expected"),
    [
        (WINDOW_END - timedelta(hours=1), True, 3600 + 900),  # window still open
        (WINDOW_END + timedelta(minutes=14, seconds=59.5), True, 1),  # grace, rounded up
        (WINDOW_END + GRACE, True, None),  # due, data complete
        (WINDOW_END + GRACE, False, 600),  # due, waiting for data
        (WINDOW_END + DEADLINE - timedelta(seconds=90), False, 90),  # poll capped by deadline
        (WINDOW_END + DEADLINE, False, None),  # past the data deadline: settle with what there is
    ],
)
def test_seconds_until_settleable(now: datetime, complete_data: bool, expected: int | None) -> None:
    times = QuotaTimes.of(
        (WINDOW_END - timedelta(hours=3), WINDOW_END), grace=GRACE, data_deadline=DEADLINE
    )
    got = seconds_until_settleable(times, now, data_complete=complete_data, poll=POLL)
    assert got == expected


def test_a_quota_day_s_times_are_on_the_customer_s_clock() -> None:
    times = quota_times(load_plan("sso-nsw"), date(2026, 7, 1), grace=GRACE, data_deadline=DEADLINE)
    sydney = ZoneInfo("Australia/Sydney")
    assert times == QuotaTimes(
        datetime(2026, 7, 1, 11, 0, tzinfo=sydney),
        datetime(2026, 7, 1, 14, 0, tzinfo=sydney),
        datetime(2026, 7, 1, 14, 15, tzinfo=sydney),
        datetime(2026, 7, 4, 14, 0, tzinfo=sydney),
    )


def test_the_data_deadline_is_real_hours_after_the_window_across_a_daylight_saving_change() -> None:
    """Sydney's clocks go back an hour on 4 April 2027: three days after the window of the 2nd
    (14:00 AEDT, 03:00 UTC) is 72 hours after it, not the 73 that 14:00 AEST on the 5th is. The
    settle job's deadline and the settlement's must be one moment."""
    plan = load_plan("sso-nsw")
    times = quota_times(plan, date(2027, 4, 2), grace=GRACE, data_deadline=DEADLINE)
    assert times.window_end.astimezone(UTC) == datetime(2027, 4, 2, 3, 0, tzinfo=UTC)
    assert times.data_deadline.astimezone(UTC) == datetime(2027, 4, 5, 3, 0, tzinfo=UTC)
    assert times.data_deadline.isoformat() == "2027-04-05T13:00:00+10:00"
    assert data_deadline_of(plan, date(2027, 4, 2), DEADLINE) == times.data_deadline


def test_a_plan_without_a_window_has_its_data_deadline_after_the_local_day() -> None:
    plan = replace(load_plan("sso-nsw"), free_window=None)
    deadline = data_deadline_of(plan, date(2026, 7, 1), DEADLINE)
    assert deadline.astimezone(UTC) == datetime(2026, 7, 4, 14, 0, tzinfo=UTC)  # midnight AEST


def test_the_days_with_a_quota_are_those_whose_window_has_data() -> None:
    """In South Australia (UTC+9:30) a local day begins in the NEM day before, but its window
    (11:00-14:00 local) never does: data on one NEM date gives that local date's quota only."""
    sa = load_plan("sso-sa")
    assert quota_dates(sa, [date(2026, 7, 1)]) == {date(2026, 7, 1)}
    assert quota_dates(sa, [date(2026, 7, 1), date(2026, 7, 3)]) == {
        date(2026, 7, 1),
        date(2026, 7, 3),
    }
    assert has_quota(sa, date(2026, 7, 2), {date(2026, 7, 1), date(2026, 7, 3)}) is False
    no_window = replace(sa, free_window=None)
    assert quota_dates(no_window, [date(2026, 7, 1)]) == set()


def test_postpone_returns_to_pending_without_counting_an_attempt() -> None:
    waiting = postpone(claimed(), 1, "waiting for data")
    assert (waiting.status, waiting.attempts, waiting.reason) == (
        QuotaStatus.PENDING,
        0,
        "waiting for data",
    )
    assert waiting.locked_until is None


def test_postpone_with_a_stale_fence_is_refused() -> None:
    with pytest.raises(StaleFence):
        postpone(claimed(), 3, "x")
