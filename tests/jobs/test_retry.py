"""The retry policy: pure decisions from an injected clock and an injected random source."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from freehours.clock import ManualClock
from freehours.jobs.job import Job, JobId, JobState
from freehours.jobs.retry import Discard, DiscardReason, RetryAt, RetryPolicy, SnoozeUntil

NOW = datetime(2026, 7, 1, 4, 15, tzinfo=UTC)


class Ceiling:
    """A random source that always draws the top of the range, and remembers the ranges."""

    def __init__(self) -> None:
        self.ranges: list[tuple[float, float]] = []

    def uniform(self, a: float, b: float) -> float:
        self.ranges.append((a, b))
        return b


def job(*, attempts: int = 0, max_attempts: int = 10, deadline: timedelta | None = None) -> Job:
    return Job(
        id=JobId(1),
        kind="settle",
        key="4102000001:2026-07-01",
        payload={},
        state=JobState.RUNNING,
        run_at=NOW,
        deadline=NOW + (deadline or timedelta(days=1)),
        attempts=attempts,
        max_attempts=max_attempts,
        snoozes=0,
        runs=attempts + 1,
        worker="w",
        lease_until=NOW + timedelta(seconds=30),
        created_at=NOW,
        attempted_at=NOW,
        finalized_at=None,
        outcome=None,
        error=None,
        traceparent=None,
    )


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def ceiling() -> Ceiling:
    return Ceiling()


@pytest.fixture
def policy(clock: ManualClock, ceiling: Ceiling) -> RetryPolicy:
    return RetryPolicy(clock, ceiling, base=timedelta(seconds=1), cap=timedelta(seconds=60))


def test_backoff_ceiling_doubles_per_failed_attempt_up_to_the_cap(
    policy: RetryPolicy, ceiling: Ceiling
) -> None:
    assert [policy.backoff(attempt) for attempt in range(8)] == [1, 2, 4, 8, 16, 32, 60, 60]
    assert all(low == 0 for low, _ in ceiling.ranges)


def test_full_jitter_draws_anywhere_between_zero_and_the_ceiling(clock: ManualClock) -> None:
    seeded = RetryPolicy(clock, random.Random(7), cap=timedelta(seconds=60))
    draws = [seeded.backoff(5) for _ in range(2_000)]
    assert 0 <= min(draws) < 1
    assert 31 < max(draws) <= 32
    assert 14 < sum(draws) / len(draws) < 18  # the mean of uniform(0, 32)


def test_backoff_stays_finite_for_absurd_attempt_counts(policy: RetryPolicy) -> None:
    assert policy.backoff(10_000) == 60


def test_a_failure_retries_after_the_jittered_backoff(policy: RetryPolicy) -> None:
    assert policy.after_failure(job(attempts=2)) == RetryAt(NOW + timedelta(seconds=4), 3)


def test_a_retry_is_never_sooner_than_the_retry_after_it_was_given(policy: RetryPolicy) -> None:
    assert policy.after_failure(job(), retry_after=30) == RetryAt(NOW + timedelta(seconds=30), 1)
    # ... and a Retry-After shorter than the backoff does not shorten it.
    assert policy.after_failure(job(attempts=3), retry_after=2) == RetryAt(
        NOW + timedelta(seconds=8), 4
    )


def test_the_last_attempt_discards_instead_of_retrying(policy: RetryPolicy) -> None:
    assert policy.after_failure(job(attempts=8)) == RetryAt(NOW + timedelta(seconds=60), 9)
    assert policy.after_failure(job(attempts=9)) == Discard(DiscardReason.ATTEMPTS, 10)


def test_a_retry_that_would_start_after_the_deadline_discards_now(policy: RetryPolicy) -> None:
    tight = job(attempts=3, deadline=timedelta(seconds=7))
    assert policy.after_failure(tight) == Discard(DiscardReason.DEADLINE, 4)
    assert policy.after_failure(replace(tight, attempts=2)) == RetryAt(
        NOW + timedelta(seconds=4), 3
    )


def test_a_snooze_waits_exactly_as_told_and_counts_no_attempt(
    policy: RetryPolicy, ceiling: Ceiling
) -> None:
    assert policy.after_snooze(job(attempts=2), 600) == SnoozeUntil(NOW + timedelta(minutes=10))
    assert ceiling.ranges == []  # no jitter drawn


def test_snoozes_end_at_the_deadline(policy: RetryPolicy, clock: ManualClock) -> None:
    waiting = job(deadline=timedelta(minutes=25))
    assert policy.after_snooze(waiting, 600) == SnoozeUntil(NOW + timedelta(minutes=10))
    clock.advance(600)
    assert policy.after_snooze(waiting, 600) == SnoozeUntil(NOW + timedelta(minutes=20))
    clock.advance(600)
    assert policy.after_snooze(waiting, 600) == Discard(DiscardReason.DEADLINE, 0)


def test_a_job_found_past_its_deadline_is_discarded_before_it_starts(
    policy: RetryPolicy, clock: ManualClock
) -> None:
    late = job(deadline=timedelta(hours=1))
    assert policy.before_start(late) is None
    clock.advance(3600)
    assert policy.before_start(late) is None  # at the deadline itself it may still start
    clock.advance(1)
    assert policy.before_start(late) == Discard(DiscardReason.DEADLINE, 0)
