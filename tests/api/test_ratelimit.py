"""Rate limits on the event loop: the sliding window, its 429, and the in-memory sweep."""

from __future__ import annotations

import asyncio
import time

import pytest

from freehours.api.problems import Problem
from freehours.api.ratelimit import RateLimits, SweptMemoryStorage


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
    async def run() -> tuple[int, bool]:
        storage = SweptMemoryStorage()
        storage.SWEEP_SECONDS = 3600.0  # no second sweep in this test
        limits = RateLimits(storage, "2/second", "100/minute")
        for who in ("a", "b", "c"):
            await limits.check_client(who)
        await asyncio.sleep(0)  # the one sweep ran with the first hit (nothing had expired)
        swept_at = storage._swept_at
        await limits.check_client("a")  # "a" is at its limit now
        deadline = time.monotonic() + 5.0
        allowed = 0
        while allowed < 2:  # the limit frees up as its window passes, with no sweep
            try:
                await limits.check_client("a")
                allowed += 1
            except Problem:
                assert time.monotonic() < deadline, "the limit did not free up within 5 s"
                await asyncio.sleep(0.05)
        return len(storage.expirations), swept_at == storage._swept_at

    keys, one_sweep = asyncio.run(run())
    assert one_sweep
    assert keys >= 3  # the expired counters are still there: no sweep ran since
