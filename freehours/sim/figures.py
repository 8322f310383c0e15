"""What a replay measured, counted the same way for both designs.

- **requests**: every request a client sent to the backend, retries included (the legacy meter
  service's calls to its billing API; freehours' ingest posts and quota asks).
- **retries**: every request or job run that repeats one already made for the same logical
  operation: the same batch re-sent (after a 5xx, a timeout or a deferral), the same quota asked
  again after an answer that was not final (409 with Retry-After included), a job run again after
  a failure, a snooze, a requeue or a rescue. A post's first request and a job's first run are
  not retries.
- **duplicate credits**: credits beyond the first for one quota version (in freehours, ledger
  entries per (NMI, day, version) past one; in the legacy model, its own credit list).
- **jobs stuck over 20 s**: jobs that were due (runnable and held by no worker) for more than 20 s
  of simulated time before a worker picked them up, or still were at the end: what
  ``freehours_jobs_stuck`` counts.
- **time to settle**: from the moment the quota was due (the window's end plus the settlement
  grace, the same moment in both designs) to its settlement, for the quotas that were settled.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from freehours.workers.rescuer import STUCK_AFTER

#: A job due this long without being picked up counts as stuck (DESIGN.md section 6).
STUCK_SECONDS = STUCK_AFTER.total_seconds()


@dataclass(slots=True)
class RetryLog:
    """Retries, and how many fell in each simulated minute."""

    minutes: int
    count: int = 0
    per_minute: list[int] = field(init=False)

    def __post_init__(self) -> None:
        self.per_minute = [0] * self.minutes

    def record(self, at: float) -> None:
        """A retry ``at`` seconds after the replay's start."""
        self.count += 1
        self.per_minute[min(self.minutes - 1, max(0, int(at // 60)))] += 1


@dataclass(frozen=True, slots=True)
class RunFigures:
    """One design's replay, in numbers."""

    requests: int
    retries: int
    job_runs: int
    duplicate_credits: int
    jobs_stuck: int
    quotas: int
    #: Seconds from due to settled, for each settled quota.
    settle_seconds: tuple[float, ...]
    breaker_trips: int
    #: Retries per simulated minute from the replay's start.
    retries_per_minute: tuple[int, ...]

    @property
    def settled(self) -> int:
        return len(self.settle_seconds)

    def as_json(self) -> dict[str, Any]:
        """The figures as ``freehours simulate incident --json`` prints them."""
        return {
            "requests": self.requests,
            "retries": self.retries,
            "retries_per_quota": round(self.retries / self.quotas, 2),
            "duplicate_credits": self.duplicate_credits,
            "jobs_stuck_over_20s": self.jobs_stuck,
            "quotas_settled": self.settled,
            "quotas_unsettled": self.quotas - self.settled,
            "settle_seconds_p50": percentile(self.settle_seconds, 50),
            "settle_seconds_p99": percentile(self.settle_seconds, 99),
            "job_runs": self.job_runs,
            "breaker_trips": self.breaker_trips,
        }


def percentile(values: tuple[float, ...], rank: float) -> float | None:
    """The nearest-rank percentile of ``values`` (None when there are none), to 0.1."""
    if not values:
        return None
    ordered = sorted(values)
    index = max(0, math.ceil(rank / 100 * len(ordered)) - 1)
    return round(ordered[index], 1)
