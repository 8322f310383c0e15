"""The one exponential backoff: its ceiling doubles up to the cap, full jitter draws below it."""

from __future__ import annotations

import random

from freehours.backoff import ceiling, full_jitter


class Top:
    """A random source that draws the top of the range, and remembers the ranges."""

    def __init__(self) -> None:
        self.ranges: list[tuple[float, float]] = []

    def uniform(self, a: float, b: float) -> float:
        self.ranges.append((a, b))
        return b


def test_the_ceiling_doubles_per_failed_attempt_up_to_the_cap() -> None:
    assert [ceiling(attempt, 1.0, 60.0) for attempt in range(8)] == [1, 2, 4, 8, 16, 32, 60, 60]
    assert ceiling(3, 0.5, 600.0) == 4.0


def test_the_ceiling_stays_finite_for_absurd_attempt_counts_and_starts_at_base() -> None:
    assert ceiling(10_000, 1.0, 60.0) == 60.0
    assert ceiling(-1, 1.0, 60.0) == 1.0


def test_full_jitter_draws_between_nothing_and_the_ceiling() -> None:
    top = Top()
    assert full_jitter(4, 1.0, 60.0, top) == 16.0
    assert top.ranges == [(0.0, 16.0)]
    seeded = random.Random(7)
    draws = [full_jitter(5, 1.0, 60.0, seeded) for _ in range(2_000)]
    assert 0 <= min(draws) < 1
    assert 31 < max(draws) <= 32
