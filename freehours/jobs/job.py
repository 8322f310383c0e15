"""A job: its states, its row as workers see it, and what a handler answers.

A handler is a function of a ``Job`` that returns ``Done`` (finished; COMPLETED), ``Snooze`` (not
yet: run again later, not a failure) or raises (a failed attempt, retried with backoff until the
job's attempts or deadline run out). A ``BatchTask`` also runs several jobs of its kind in one
call, answering for each. ``RetryAfter`` is a failure that names the earliest time to
try again, as an HTTP ``Retry-After`` does. The state diagram is in ``docs/jobs.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, NewType, Protocol, runtime_checkable

from freehours.errors import FreehoursError

JobId = NewType("JobId", int)


class JobState(StrEnum):
    """Where a job is in its life. Only the first three are unfinished."""

    AVAILABLE = "AVAILABLE"  # waiting for run_at (new, scheduled or snoozed); claimable once due
    RUNNING = "RUNNING"  # claimed by one worker, which renews its lease; fenced by ``runs``
    RETRYABLE = "RETRYABLE"  # an attempt failed or its worker died; runs again at run_at
    COMPLETED = "COMPLETED"  # terminal: the handler finished; ``outcome`` says what it found
    DISCARDED = "DISCARDED"  # terminal: out of attempts or past its deadline; alerted, kept as is
    CANCELLED = "CANCELLED"  # terminal: cancelled while it waited; it never ran again

    @property
    def is_finished(self) -> bool:
        return self in (JobState.COMPLETED, JobState.DISCARDED, JobState.CANCELLED)


@dataclass(frozen=True, slots=True)
class JobError:
    """A failed attempt of a job: its number (1 for the first), when it failed, and why
    (``Type: message``, or why its lease ran out)."""

    attempt: int
    at: datetime
    error: str


@dataclass(frozen=True, slots=True)
class Job:
    """A job as stored. A claimed job's ``runs`` is the fence its result is written with."""

    id: JobId
    kind: str
    key: str
    payload: Mapping[str, Any]
    state: JobState
    run_at: datetime
    deadline: datetime
    attempts: int  # failed attempts so far (a worker that died counts; a snooze does not)
    max_attempts: int
    snoozes: int
    runs: int
    worker: str | None
    lease_until: datetime | None
    created_at: datetime
    attempted_at: datetime | None
    finalized_at: datetime | None
    outcome: str | None
    error: str | None
    traceparent: str | None
    #: The failed attempts' errors, oldest first: the last ``JOB_ERRORS_KEPT`` (the store's).
    errors: tuple[JobError, ...] = ()


@dataclass(frozen=True, slots=True)
class Done:
    """The handler finished: the job becomes COMPLETED with ``outcome`` recorded. ``facts``:
    fields for the job's canonical log line (a batch's handler, which cannot bind them)."""

    outcome: str | None = None
    facts: Mapping[str, object] | None = None


@dataclass(frozen=True, slots=True)
class Snooze:
    """Not yet: run again in ``seconds``. Not a failure; bounded by the job's deadline."""

    seconds: float
    reason: str
    facts: Mapping[str, object] | None = None


class RetryAfter(FreehoursError):
    """A failed attempt that must not be retried sooner than ``seconds`` from now."""

    def __init__(self, seconds: float, message: str) -> None:
        self.seconds = seconds
        super().__init__(message)


#: A job's handler: answers ``Done`` or ``Snooze``, or raises for a failed attempt. A handler
#: may say how many jobs of its kind one worker holds at once (running, and claimed waiting for
#: a runner) with an int attribute ``HOLD_ATTRIBUTE``: a kind whose jobs run for seconds, so
#: that a worker does not claim a whole run's jobs ahead of the others (``hold_limit``). It may
#: name the worker queue its jobs run in with a str attribute ``QUEUE_ATTRIBUTE``: each queue has
#: runners of its own, which no other queue's jobs take (``queue_name``).
Task = Callable[[Job], Done | Snooze]

HOLD_ATTRIBUTE = "hold"
QUEUE_ATTRIBUTE = "queue"
#: The queue of a task that names none: in a worker whose tasks name none, every kind shares it.
DEFAULT_QUEUE = "default"

#: What a batch handler answers for each of its jobs: ``Done``, ``Snooze``, or the exception
#: that job's attempt failed with (the job alone is retried with backoff).
BatchAnswer = Done | Snooze | Exception


@runtime_checkable
class BatchTask(Protocol):
    """A task whose jobs are worth running together (their work shares transactions): besides
    running one job, it runs several of its kind at once. The worker hands it up to ``batch``
    of the jobs it claimed together; each job is still finished, snoozed or failed on its own,
    by the answer at its place in ``run_batch``'s list (one per job, in order). An exception
    ``run_batch`` raises fails every job it was given."""

    batch: int

    def __call__(self, job: Job) -> Done | Snooze: ...

    def run_batch(self, jobs: Sequence[Job]) -> Sequence[BatchAnswer]: ...


def batch_limit(task: Task) -> int | None:
    """The most jobs ``task`` runs in one ``run_batch`` call, or None: it runs one at a time."""
    if not isinstance(task, BatchTask):
        return None
    limit = task.batch
    if not isinstance(limit, int) or limit < 1:
        raise ValueError(f"a batch task's batch must be a positive int, not {limit!r}")
    return limit


def hold_limit(task: Task) -> int | None:
    """The most jobs of ``task``'s kind a worker holds at once, or None: as many as it has room
    for."""
    limit = getattr(task, HOLD_ATTRIBUTE, None)
    if limit is None:
        return None
    if not isinstance(limit, int) or limit < 1:
        raise ValueError(f"a task's {HOLD_ATTRIBUTE} must be a positive int, not {limit!r}")
    return limit


def queue_name(task: Task) -> str:
    """The worker queue ``task``'s jobs run in: its ``queue`` attribute, or ``DEFAULT_QUEUE``."""
    name = getattr(task, QUEUE_ATTRIBUTE, DEFAULT_QUEUE)
    if not isinstance(name, str) or not name:
        raise ValueError(f"a task's {QUEUE_ATTRIBUTE} must be a non-empty str, not {name!r}")
    return name
