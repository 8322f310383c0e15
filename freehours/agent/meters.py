"""The agent's second source: meters that post each interval's reads as soon as the interval ends.

The agent knows them only as ``Meters``; the simulated smart meters of ``freehours.sim`` are the
ones it has (the simulation depends on the agent, never the other way round). Time is an
``AcceleratedClock``: simulated time that starts at ``start`` and runs ``speed`` times as fast as
the real clock.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Protocol

from freehours.agent.batch import Batch
from freehours.clock import Clock


class Meters(Protocol):
    """Meters reading from ``start`` to ``end``: every interval that ends in ``(start, end]`` is
    read once, in time order."""

    @property
    def end(self) -> datetime: ...

    @property
    def finished(self) -> bool:
        """Every interval up to ``end`` has been read."""
        ...

    @property
    def next_end(self) -> datetime | None:
        """When the next interval ends (None once finished)."""
        ...

    def due(self, now: datetime) -> list[Batch]:
        """The batches of every interval that has ended by ``now`` and not been read yet."""
        ...


class AcceleratedClock:
    """Simulated time: ``start`` when made, then ``speed`` simulated seconds per real one."""

    def __init__(self, real: Clock, start: datetime, speed: float) -> None:
        if start.tzinfo is None:
            raise ValueError("an AcceleratedClock needs a timezone-aware start")
        if speed <= 0:
            raise ValueError("speed must be positive")
        self._real = real
        self._start = start
        self._speed = speed
        self._origin = real.monotonic()

    def now(self) -> datetime:
        return self._start + timedelta(seconds=self.monotonic())

    def monotonic(self) -> float:
        return (self._real.monotonic() - self._origin) * self._speed

    def real_seconds_until(self, moment: datetime) -> float:
        """Real seconds until simulated time reaches ``moment`` (0 when it has)."""
        return max(0.0, (moment - self.now()).total_seconds() / self._speed)
