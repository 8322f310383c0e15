"""The incident's workload and its faults: one of each per seed, the same for both replays.

The workload is the incident's: ``meters`` households on the NSW Solar Sharer plan (``sso-nsw``)
on its first day, each posting its reads as every half-hour of the three-hour free window ends,
and asking with every post for its day's quota. The replay goes on for an hour after the window:
past the moment the quota is due (the window's end plus the settlement grace, when either design
may settle it), and long enough for a storm to show.

The faults are drawn from the seed:

- a post's first attempt may meet a 5xx, a timeout before the server saw it, a timeout after the
  server did the work (its answer lost, so the resend repeats it), or a duplicate delivery;
- one quota has a stale cache entry (the cache keeps saying "pending" for a minute after the
  database says settled), another's worker dies after taking its lock, a third meets a database
  error between the lock and the final write: each at the quota's first settlement attempt.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from enum import StrEnum

from freehours.plans import builtin_plan
from freehours.settlement.model import SettlementPolicy
from freehours.sim.agent_meters import INTERVAL
from freehours.sim.meters import SOLAR_SHARER_START, households

#: The incident's customers are on the NSW Solar Sharer Offer: free 11:00-14:00 Sydney time.
PLAN_ID = "sso-nsw"


class PostFault(StrEnum):
    """What may happen to a post's first attempt on the way to the server."""

    SERVER_ERROR = "server_error"  # 503: the server failed before it did anything
    TIMEOUT = "timeout"  # no answer: the request never reached the server
    ANSWER_LOST = "answer_lost"  # the server did the work but its answer was lost
    DUPLICATE = "duplicate"  # delivered twice (a proxy retried it): the server sees it twice


class QuotaFault(StrEnum):
    """What may happen to a quota's first settlement attempt."""

    STALE_CACHE = "stale_cache"  # the cache says "pending" for STALE_FOR after the settlement
    WORKER_DIES = "worker_dies"  # the worker dies after taking the lock, releasing nothing
    DATABASE_ERROR = "database_error"  # the database fails between the lock and the final write


#: Chance that a post's first attempt meets each fault: one post in eight meets one, far more
#: than a healthy network, so that every kind shows up even in a run of twenty meters.
POST_FAULT_RATES = {
    PostFault.SERVER_ERROR: 0.04,
    PostFault.TIMEOUT: 0.03,
    PostFault.ANSWER_LOST: 0.03,
    PostFault.DUPLICATE: 0.03,
}

#: How long a stale cache entry outlives the settlement it hides: the post-mortem's cache "did
#: not store the completed state at once"; a minute covers many retries of either design.
STALE_FOR = timedelta(minutes=1)

#: The settlement grace freehours runs with unless configured otherwise.
DEFAULT_GRACE = SettlementPolicy().grace


@dataclass(frozen=True, slots=True)
class Workload:
    """The meters, their posts and the replay's horizon."""

    meters: int
    seed: int
    day: date
    window_start: datetime
    window_end: datetime
    #: The settlement grace: the quota is due at ``window_end + grace`` in both designs.
    grace: timedelta
    #: How long the replay goes on after the window's end.
    after_window: timedelta
    #: Job runs per simulated second, in both designs: two workers at 100 ms a run (a billing
    #: call, or a settlement with its few database round trips).
    worker_capacity: int
    nmis: tuple[str, ...]

    @classmethod
    def incident(
        cls,
        meters: int,
        seed: int,
        *,
        grace: timedelta = DEFAULT_GRACE,
        after_window: timedelta = timedelta(hours=1),
        worker_capacity: int = 20,
    ) -> Workload:
        """``meters`` households on ``sso-nsw`` on 1 July 2026, the Solar Sharer Offer's first
        day, as the simulated meters of ``freehours.sim.agent_meters`` make them for ``seed``."""
        if meters < 3:
            raise ValueError("the incident needs at least 3 meters: one per kind of quota fault")
        plan = builtin_plan(PLAN_ID)
        assert plan.free_window is not None, "the built-in Solar Sharer plans have a window"
        start, end = plan.free_window.bounds(SOLAR_SHARER_START, plan.zone)
        return cls(
            meters=meters,
            seed=seed,
            day=SOLAR_SHARER_START,
            window_start=start,
            window_end=end,
            grace=grace,
            after_window=after_window,
            worker_capacity=worker_capacity,
            nmis=tuple(house.nmi for house in households(meters, random.Random(seed))),
        )

    @property
    def due(self) -> datetime:
        """When the quota may be settled: the window's end plus the grace."""
        return self.window_end + self.grace

    @property
    def horizon(self) -> datetime:
        """When the replay stops."""
        return self.window_end + self.after_window

    @property
    def posts(self) -> tuple[datetime, ...]:
        """When every meter posts: as each interval of the window ends."""
        count = (self.window_end - self.window_start) // INTERVAL
        return tuple(self.window_start + INTERVAL * (n + 1) for n in range(count))

    def seconds(self, moment: datetime) -> float:
        """``moment`` as seconds since the replay's start (the window's start)."""
        return (moment - self.window_start).total_seconds()


@dataclass(frozen=True, slots=True)
class FaultPlan:
    """Which posts and which quotas meet which fault."""

    #: (NMI, index of the post in ``Workload.posts``) -> the fault its first attempt meets.
    posts: Mapping[tuple[str, int], PostFault]
    #: NMI -> the fault its quota meets (one quota for each kind).
    quotas: Mapping[str, QuotaFault]
    stale_for: timedelta = STALE_FOR

    @classmethod
    def draw(cls, workload: Workload) -> FaultPlan:
        """The faults for ``workload``, drawn from its seed alone."""
        rng = random.Random(f"faults:{workload.seed}")
        posts: dict[tuple[str, int], PostFault] = {}
        for nmi in workload.nmis:
            for index in range(len(workload.posts)):
                draw = rng.random()
                for fault, rate in POST_FAULT_RATES.items():
                    if draw < rate:
                        posts[nmi, index] = fault
                        break
                    draw -= rate
        chosen = rng.sample(workload.nmis, len(QuotaFault))
        return cls(posts, dict(zip(chosen, QuotaFault, strict=True)))
