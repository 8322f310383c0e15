"""When a job runs next, or that it never will: a pure policy that decides and never sleeps.

After a failed attempt (the handler raised, or its worker died and the rescuer found it):

- the job is DISCARDED once ``max_attempts`` attempts have failed (reason ``attempts``);
- otherwise it waits a full-jitter backoff (``freehours.backoff``),
  ``uniform(0, min(cap, base * 2**attempt))``, with ``attempt`` counting failed attempts from 0,
  and never less than a ``Retry-After`` it was given;
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

from freehours import defaults
from freehours.backoff import RandomSource, full_jitter
from freehours.clock import Clock
from freehours.jobs.job import Job


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
    #: The longest wait after a job's first failed attempt (``FREEHOURS_JOB_RETRY_BASE_SECONDS``).
    base: timedelta = defaults.JOB_RETRY_BASE
    #: The longest wait between two attempts (``FREEHOURS_JOB_RETRY_CAP_SECONDS``).
    cap: timedelta = defaults.JOB_RETRY_CAP

    def backoff(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (0 for the first): full
        jitter."""
        return full_jitter(
            attempt, self.base.total_seconds(), self.cap.total_seconds(), self.random
        )

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
