"""Simulated time: events in order on a ``ManualClock``, so that hours pass in seconds.

Events are callables due at a moment (seconds since the clock's start); ``run_until`` runs those
due by then in time order, moving the clock to each. Nothing sleeps: a part of the real code that
waits (the agent's sender, through its injected ``sleep``) calls ``sleep``, which runs whatever
falls due meanwhile and returns with the clock moved on. ``sleep`` raises the agent's ``Stopped``
once the timeline's end is reached, as the agent's own sleep does when the agent stops.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable

from freehours.agent.sender import Stopped
from freehours.clock import ManualClock


class Timeline:
    """Events on ``clock``, up to ``end`` seconds after its start."""

    def __init__(self, clock: ManualClock, end: float) -> None:
        self.clock = clock
        self.end = end
        self._events: list[tuple[float, int, Callable[[], None]]] = []
        self._order = itertools.count()

    @property
    def now(self) -> float:
        """Seconds since the clock's start."""
        return self.clock.monotonic()

    def at(self, moment: float, event: Callable[[], None]) -> None:
        """Run ``event`` at ``moment`` (or at once, when that has passed)."""
        heapq.heappush(self._events, (max(moment, self.now), next(self._order), event))

    def after(self, seconds: float, event: Callable[[], None]) -> None:
        """Run ``event`` ``seconds`` from now."""
        self.at(self.now + seconds, event)

    def run_until(self, moment: float) -> None:
        """Run every event due by ``moment`` (and by the end), then move the clock there."""
        moment = min(moment, self.end)
        while self._events and self._events[0][0] <= moment:
            when, _, event = heapq.heappop(self._events)
            self._move_to(when)
            event()
        self._move_to(moment)

    def sleep(self, seconds: float) -> None:
        """Let ``seconds`` pass, running what falls due; raises ``Stopped`` at the end."""
        self.run_until(self.now + seconds)
        if self.now >= self.end:
            raise Stopped("the simulation reached its end")

    def _move_to(self, moment: float) -> None:
        # An event may run after its moment when one before it slept past it.
        if moment > self.now:
            self.clock.advance(moment - self.now)
