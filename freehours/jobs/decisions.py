"""What becomes of a claimed job (``Finish``: complete, retry, snooze, discard, release), and the
defaults of a new job.

The job table's SQL, enqueue, claim, renew and finish, is ``freehours.store.jobs`` (``unit.jobs``
of a ``Store`` unit of work); the worker and the rescuer say here what to write.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from freehours.jobs.job import Job
from freehours.jobs.retry import Discard, RetryAt, SnoozeUntil

#: Ten attempts: enough to ride out an outage of several minutes with the default backoff, few
#: enough that a job which can never succeed stops within the hour and is alerted on.
DEFAULT_MAX_ATTEMPTS = 10
#: A job that has not succeeded a day after it was due needs a person, not another attempt.
DEFAULT_DEADLINE = timedelta(hours=24)


@dataclass(frozen=True, slots=True)
class Complete:
    """The handler finished: COMPLETED (or AVAILABLE again at ``rerun_at`` if one was asked)."""

    outcome: str | None


@dataclass(frozen=True, slots=True)
class Release:
    """Give a claimed job back unstarted or unfinished (a worker stopping): AVAILABLE now."""


Decision = Complete | RetryAt | SnoozeUntil | Discard | Release


@dataclass(frozen=True, slots=True)
class Finish:
    """A claimed job (at its fence ``job.runs``) and what becomes of it."""

    job: Job
    decision: Decision
    #: The attempt's failure, ``Type: message``, or a snooze's reason.
    note: str | None = None
