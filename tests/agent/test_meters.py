"""The agent's meters: simulated time that runs ``speed`` times as fast as the real clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from freehours.agent.meters import AcceleratedClock
from freehours.clock import ManualClock
from freehours.domain.time import NEM_TIME

START = datetime(2026, 7, 1, 0, 0, tzinfo=NEM_TIME)


def test_the_accelerated_clock_runs_speed_times_as_fast() -> None:
    real = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
    clock = AcceleratedClock(real, START, speed=360)
    real.advance(10)
    assert clock.now() == START + timedelta(hours=1)
    assert clock.real_seconds_until(START + timedelta(hours=2)) == 10.0
    assert clock.real_seconds_until(START) == 0.0
