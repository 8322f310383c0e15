"""When a job runs next, or that it never will: a pure policy that decides and never sleeps.

After a failed attempt (the handler raised, or its worker died and the rescuer found it):

- the job is DISCARDED once ``max_attempts`` attempts have failed (reason ``attempts``);
- otherwise it waits a full-jitter backoff, ``uniform(0, min(cap, base * 2**attempt))``, with
  ``attempt`` counting failed attempts from 0, and never less than a ``Retry-After`` it was given;
- and it is DISCARDED (reason ``deadline``) when that would start it after its deadline.

A snooze (the handler said "not yet", e.g. a settlement told LOCKED or PENDING) waits exactly as
long as it was told, counts no attempt, and ends at the same deadline. A job found past its
deadline before it starts is DISCARDED without running.

The time comes from the injected clock and the jitter from the injected random source, so tests
pin both.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Protocol

from freehours.clock import Clock
from freehours.jobs.job import Job

#: Above this exponent ``base * 2**attempt`` is past any sensible cap already; stopping there
#: keeps the float finite whatever ``max_attempts`` a job was given.
_MAX_EXPONENT = 62


class RandomSource(Protocol):
    """Where jitter comes from: ``random.Random`` in production, seeded or stubbed in tests."""

    def uniform(self, a: float, b: float) -> float: ...


class DiscardReason(StrEnum):
    """Why a job was DISCARDED: the ``reason`` label of ``freehours_jobs_discarded_total``."""

    ATTEMPTS = "attempts"  # max_attempts attempts failed
    DEADLINE = "deadline"  # its next start would have been after its deadline


@dataclass(frozen=True, slots=True)
class RetryAt:
    """The attempt failed: RETRYABLE, to run again at ``at``; ``attempts`` failed so far."""

    at: datetime
    attempts: int


@dataclass(frozen=True, slots=True)
class SnoozeUntil:
    """Not yet: AVAILABLE again at ``at``; no attempt counted."""

    at: datetime


@dataclass(frozen=True, slots=True)
class Discard:
    """Never again: DISCARDED for ``reason`` with ``attempts`` failed attempts."""

    reason: DiscardReason
    attempts: int


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """The backoff between failed attempts, and where a job's attempts and deadline end it."""

    clock: Clock
    random: RandomSource
    #: The first retry waits up to a second: long enough for a blip (a dropped connection, a
    #: failover) to pass, short enough that a one-off failure costs nobody a noticeable delay.
    base: timedelta = timedelta(seconds=1)
    #: Ten minutes at most between attempts: ten attempts then span an hour or so, and a fault
    #: that is fixed is noticed within minutes.
    cap: timedelta = timedelta(minutes=10)

    def backoff(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (0 for the first): full
        jitter."""
        ceiling = min(
            self.cap.total_seconds(),
            self.base.total_seconds() * 2.0 ** min(attempt, _MAX_EXPONENT),
        )
        return self.random.uniform(0.0, ceiling)

    def after_failure(self, job: Job, retry_after: float | None = None) -> RetryAt | Discard:
        """The job's attempt failed (``retry_after``: seconds the failure said to wait)."""
        attempts = job.attempts + 1
        if attempts >= job.max_attempts:
            return Discard(DiscardReason.ATTEMPTS, attempts)
        wait = max(self.backoff(attempts - 1), retry_after or 0.0)
        at = self.clock.now() + timedelta(seconds=wait)
        if at > job.deadline:
            return Discard(DiscardReason.DEADLINE, attempts)
        return RetryAt(at, attempts)

    def after_snooze(self, job: Job, seconds: float) -> SnoozeUntil | Discard:
        """The handler said "not yet, ask again in ``seconds``"."""
        at = self.clock.now() + timedelta(seconds=max(0.0, seconds))
        if at > job.deadline:
            return Discard(DiscardReason.DEADLINE, job.attempts)
        return SnoozeUntil(at)

    def before_start(self, job: Job) -> Discard | None:
        """A claimed job past its deadline is discarded instead of started."""
        if self.clock.now() > job.deadline:
            return Discard(DiscardReason.DEADLINE, job.attempts)
        return None
