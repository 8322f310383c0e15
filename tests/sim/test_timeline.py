"""Simulated time: events in order, sleeps that let them run, and a breaker that keeps it."""

from __future__ import annotations

from datetime import UTC, datetime

import pybreaker
import pytest

from freehours.agent.breaker import Breaker, BreakerConfig, CircuitOpen
from freehours.agent.sender import Stopped
from freehours.clock import ManualClock
from freehours.sim.clients import SimulatedTimeStorage, half_open_in
from freehours.sim.timeline import Timeline

START = datetime(2026, 7, 1, 1, 0, tzinfo=UTC)


def test_events_run_in_time_order_and_a_sleep_runs_what_falls_due_meanwhile() -> None:
    timeline = Timeline(ManualClock(START), end=100.0)
    seen: list[tuple[str, float]] = []
    timeline.at(30.0, lambda: seen.append(("late", timeline.now)))
    timeline.at(10.0, lambda: seen.append(("early", timeline.now)))

    def sleeper() -> None:
        seen.append(("asleep", timeline.now))
        timeline.sleep(25.0)
        seen.append(("awake", timeline.now))

    timeline.at(5.0, sleeper)
    timeline.run_until(60.0)
    assert seen == [("asleep", 5.0), ("early", 10.0), ("late", 30.0), ("awake", 30.0)]
    assert timeline.now == 60.0


def test_a_sleep_that_reaches_the_end_stops_the_sleeper() -> None:
    timeline = Timeline(ManualClock(START), end=100.0)
    timeline.run_until(90.0)
    with pytest.raises(Stopped):
        timeline.sleep(30.0)
    assert timeline.now == 100.0


def test_an_open_breaker_waits_its_reset_timeout_in_simulated_time() -> None:
    clock = ManualClock(START)
    breaker = Breaker(BreakerConfig(fail_max=1, reset_timeout=30.0), SimulatedTimeStorage(clock))

    def fail() -> None:
        raise ConnectionError("down")

    with pytest.raises(CircuitOpen):
        breaker.call(fail)
    assert breaker.state == pybreaker.STATE_OPEN
    clock.advance(20.0)
    assert half_open_in(breaker) == pytest.approx(10.0, abs=0.01)
    with pytest.raises(CircuitOpen):
        breaker.call(lambda: None)  # still open: nothing goes through
    clock.advance(11.0)
    assert half_open_in(breaker) == 0.0
    breaker.call(lambda: None)  # the trial call, after 31 simulated seconds
    assert breaker.state == pybreaker.STATE_CLOSED
