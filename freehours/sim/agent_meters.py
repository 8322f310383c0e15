"""Simulated smart meters that post each interval's reads as soon as the interval ends.

Every meter is a household of ``freehours.sim.meters`` (load and rooftop solar), reading E1
(consumption) and B1 (export) every 30 minutes. A day's values are drawn from a random source
seeded with the run's seed, the NMI and the date, so the same seed gives the same reads whatever
the start, the speed or how often the agent was restarted. They are the meter agent's ``Meters``
(``freehours.agent.meters``) in ``freehours agent --simulate``, the demo and the incident replay.
"""

from __future__ import annotations

import random
from datetime import date, datetime, time, timedelta
from decimal import Decimal

from freehours.agent.batch import Batch, readings_batch
from freehours.domain.reads import IntervalRead
from freehours.domain.time import NEM_TIME
from freehours.sim.meters import Household, households, meter_days

INTERVAL_MINUTES = 30
INTERVAL = timedelta(minutes=INTERVAL_MINUTES)
SUFFIXES = ("E1", "B1")


class SimulatedMeters:
    """``count`` meters reading from ``start`` to ``end``: every interval that ends in
    ``(start, end]`` is read once, in time order."""

    def __init__(self, count: int, seed: int, start: datetime, end: datetime) -> None:
        self.households = households(count, random.Random(seed))
        self._seed = seed
        midnight = datetime.combine(start.astimezone(NEM_TIME).date(), time(0), NEM_TIME)
        self._next_end = midnight + INTERVAL * ((start - midnight) // INTERVAL + 1)
        self.start = start
        self.end = end
        self._days: dict[tuple[str, date], dict[str, tuple[Decimal | None, ...]]] = {}

    @property
    def finished(self) -> bool:
        """Every interval up to ``end`` has been read."""
        return self._next_end > self.end

    @property
    def next_end(self) -> datetime | None:
        """When the next interval ends (None once finished)."""
        return None if self.finished else self._next_end

    def due(self, now: datetime) -> list[Batch]:
        """The reads of every interval that has ended by ``now`` and not been read yet, in time
        order: one batch per interval, meter and channel (meters in NMI order, E1 before B1).

        One interval per batch, however late the agent looks, so that a batch, and so its
        Idempotency-Key, depends on the reads alone: a run restarted over the same hours makes
        the same batches, which the spool and the API recognise.
        """
        batches: list[Batch] = []
        until = min(now, self.end)
        while self._next_end <= until:
            start = self._next_end - INTERVAL
            for household in self.households:
                values = self._day(household, start.date())
                index = (start - datetime.combine(start.date(), time(0), NEM_TIME)) // INTERVAL
                for suffix in SUFFIXES:
                    read = IntervalRead(
                        household.nmi, suffix, start, self._next_end, values[suffix][index], "A"
                    )
                    batches.append(readings_batch(household.nmi, suffix, INTERVAL_MINUTES, [read]))
            self._next_end += INTERVAL
            self._forget_before(start.date())
        return batches

    def _day(self, household: Household, day: date) -> dict[str, tuple[Decimal | None, ...]]:
        key = (household.nmi, day)
        values = self._days.get(key)
        if values is None:
            rng = random.Random(f"{self._seed}:{household.nmi}:{day.isoformat()}")
            days = meter_days(household, day, 1, rng, interval_minutes=INTERVAL_MINUTES)
            values = self._days[key] = {read.suffix: read.values for read in days}
        return values

    def _forget_before(self, day: date) -> None:
        for key in [key for key in self._days if key[1] < day]:
            del self._days[key]
