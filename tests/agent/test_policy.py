"""The agent's pure decisions: verdicts, Retry-After, backoff, the retry budget, breaker timing."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from freehours.agent.policy import (
    RETRY_AFTER_CAP,
    Backoff,
    RetryBudget,
    Verdict,
    pause_after_deferral,
    retry_after_seconds,
    seconds_until_half_open,
    verdict,
)
from freehours.clock import ManualClock

NOW = datetime(2026, 7, 1, 2, 0, tzinfo=UTC)


class Highest:
    """A random source that always draws the top of the range: the longest jitter."""

    def uniform(self, a: float, b: float) -> float:
        return b


class Lowest:
    def uniform(self, a: float, b: float) -> float:
        return a


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (200, Verdict.DELIVERED),
        (408, Verdict.RETRY),
        (409, Verdict.RETRY),
        (429, Verdict.RETRY),
        (500, Verdict.RETRY),
        (502, Verdict.RETRY),
        (503, Verdict.RETRY),
        (401, Verdict.KEY_REFUSED),
        (403, Verdict.KEY_REFUSED),
        (400, Verdict.REJECTED),
        (404, Verdict.REJECTED),
        (413, Verdict.REJECTED),
        (422, Verdict.REJECTED),
        (301, Verdict.REJECTED),
    ],
)
def test_verdict_on_each_status(status: int, expected: Verdict) -> None:
    assert verdict(status) is expected


def test_retry_after_in_seconds() -> None:
    assert retry_after_seconds("7", NOW) == 7.0


def test_retry_after_as_an_http_date_counts_from_now() -> None:
    assert retry_after_seconds("Wed, 01 Jul 2026 02:00:30 GMT", NOW) == 30.0


def test_retry_after_in_the_past_is_no_wait() -> None:
    assert retry_after_seconds("Wed, 01 Jul 2026 01:00:00 GMT", NOW) == 0.0


def test_retry_after_is_capped_at_a_minute() -> None:
    assert retry_after_seconds("3600", NOW) == RETRY_AFTER_CAP == 60.0


@pytest.mark.parametrize("value", [None, "", "soon", "-5", "1.5"])
def test_retry_after_missing_or_unreadable_is_none(value: str | None) -> None:
    assert retry_after_seconds(value, NOW) is None


def test_backoff_is_full_jitter_up_to_base_times_two_to_the_attempt() -> None:
    backoff = Backoff(Highest(), base=1.0, cap=30.0)
    assert [backoff.delay(attempt) for attempt in range(7)] == [1, 2, 4, 8, 16, 30, 30]
    assert Backoff(Lowest()).delay(3) == 0.0


def test_backoff_never_waits_less_than_retry_after() -> None:
    assert Backoff(Lowest()).delay(0, retry_after=5.0) == 5.0
    assert Backoff(Highest(), base=1.0).delay(3, retry_after=5.0) == 8.0


def test_backoff_draws_within_its_range() -> None:
    backoff = Backoff(random.Random(7), base=1.0, cap=30.0)
    delays = [backoff.delay(2) for _ in range(1000)]
    assert all(0.0 <= delay <= 4.0 for delay in delays)
    assert max(delays) > 3.5  # spread over the range, not stuck at one end
    assert min(delays) < 0.5


def test_backoff_of_a_huge_attempt_stays_at_the_cap() -> None:
    assert Backoff(Highest(), cap=30.0).delay(10_000) == 30.0


def test_a_full_budget_allows_capacity_retries_then_refuses() -> None:
    budget = RetryBudget(ManualClock(NOW), capacity=10.0)
    assert [budget.try_retry() for _ in range(11)] == [True] * 10 + [False]


def test_retries_are_funded_by_a_tenth_of_the_requests() -> None:
    budget = RetryBudget(ManualClock(NOW))
    while budget.try_retry():
        pass
    for _ in range(100):
        budget.record_request()
    allowed = 0
    while budget.try_retry():
        allowed += 1
    assert allowed == 10


def test_nine_requests_do_not_fund_a_retry() -> None:
    budget = RetryBudget(ManualClock(NOW), capacity=10.0)
    while budget.try_retry():
        pass
    for _ in range(9):
        budget.record_request()
    assert not budget.try_retry()
    budget.record_request()
    assert budget.try_retry()


def test_time_funds_one_retry_every_ten_seconds() -> None:
    clock = ManualClock(NOW)
    budget = RetryBudget(clock)
    while budget.try_retry():
        pass
    clock.advance(9.9)
    assert not budget.try_retry()
    clock.advance(0.1)
    assert budget.try_retry()
    assert not budget.try_retry()


def test_the_budget_never_saves_more_than_its_capacity() -> None:
    clock = ManualClock(NOW)
    budget = RetryBudget(clock, capacity=10.0)
    for _ in range(1000):
        budget.record_request()
    clock.advance(3600)
    assert budget.balance == 10.0


def test_retries_stay_within_a_tenth_of_requests_under_steady_failure() -> None:
    """Every request fails and wants a retry: over a long run retries stay near 10 %."""
    clock = ManualClock(NOW)
    budget = RetryBudget(clock, allowance_per_second=0.0)
    requests = retries = 0
    for _ in range(10_000):
        budget.record_request()
        requests += 1
        if budget.try_retry():
            retries += 1
        clock.advance(0.01)
    assert retries <= 0.1 * requests + budget.capacity
    assert retries >= 0.1 * requests - 1


def test_half_open_comes_reset_timeout_after_opening() -> None:
    opened = NOW - timedelta(seconds=12)
    assert seconds_until_half_open(opened, 30.0, NOW) == 18.0
    assert seconds_until_half_open(opened, 10.0, NOW) == 0.0
    assert seconds_until_half_open(None, 30.0, NOW) == 0.0


def test_a_deferral_with_the_breaker_open_waits_for_half_open() -> None:
    backoff = Backoff(Highest())
    assert pause_after_deferral(backoff, 1, retry_after=None, half_open_in=12.5) == 12.5
    assert pause_after_deferral(backoff, 1, retry_after=20.0, half_open_in=12.5) == 20.0


def test_deferrals_in_a_row_back_off_further_each_time_up_to_the_cap() -> None:
    backoff = Backoff(Highest(), base=1.0, cap=30.0)
    pauses = [
        pause_after_deferral(backoff, n, retry_after=None, half_open_in=None) for n in range(1, 7)
    ]
    assert pauses == [4.0, 8.0, 16.0, 30.0, 30.0, 30.0]
    assert pause_after_deferral(backoff, 1, retry_after=45.0, half_open_in=None) == 45.0
