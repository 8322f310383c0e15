"""Rate limits on the event loop: the sliding window, its 429, and the in-memory sweep."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from freehours.api.problems import Problem
from freehours.api.ratelimit import RateLimits, SweptMemoryStorage
from freehours.clock import ManualClock


def test_a_client_over_its_limit_gets_a_429_naming_it_with_retry_after() -> None:
    async def run() -> Problem:
        limits = RateLimits.open(None, "3/minute", "100/minute")
        for _ in range(3):
            await limits.check_client("key-1")
        await limits.check_client("key-2")  # another client has its own window
        with pytest.raises(Problem) as caught:
            await limits.check_client("key-1")
        return caught.value

    problem = asyncio.run(run())
    assert problem.status == 429
    assert "client key-1" in problem.detail
    assert 1 <= int(problem.headers["Retry-After"]) <= 60


def test_the_sweep_runs_at_most_once_a_second_and_expiry_does_not_wait_for_it() -> None:
    clock = ManualClock(datetime(2026, 7, 1, tzinfo=UTC))

    async def run() -> None:
        storage = SweptMemoryStorage(clock)
        limits = RateLimits(storage, "2/second", "100/minute", clock=clock)
        for who in ("a", "b", "c", "a"):
            await limits.check_client(who)
        with pytest.raises(Problem):  # "a" is at its limit
            await limits.check_client("a")
        counters = set(storage.expirations)
        clock.advance(2.5)  # every window has passed; the sweep's second too, but it waits
        storage.SWEEP_SECONDS = 3600.0
        await limits.check_client("a")  # the limit freed up as its window passed, unswept
        await limits.check_client("a")
        assert counters <= set(storage.expirations)  # the expired counters are still there
        storage.SWEEP_SECONDS = 1.0
        await limits.check_client("d")  # over a second since the last: this hit sweeps
        assert not counters & set(storage.expirations)
        swept = set(storage.expirations)  # "a"'s and "d"'s, not yet expired
        clock.advance(2.5)  # they expire; 2.5 s after the sweep, under its 3 s none runs
        storage.SWEEP_SECONDS = 3.0
        await limits.check_client("e")
        assert swept <= set(storage.expirations)

    asyncio.run(run())
