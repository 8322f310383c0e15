"""The job table's SQL, every statement here by name, in its unit of work's transaction.

``enqueue`` runs in the caller's transaction, so a job exists exactly when the state that needs it
was committed. The worker's statements run in ``Store.write()`` units:

- ``claim``: the due jobs, oldest first, locked with ``FOR UPDATE SKIP LOCKED`` on PostgreSQL (so
  concurrent workers never wait for, nor take, each other's rows) and inside ``BEGIN IMMEDIATE``
  on SQLite (one writer at a time); each becomes RUNNING with ``runs + 1`` (its fence) and a lease.
- ``renew``: the heartbeat, extending the leases of one worker's running jobs.
- ``expired``: running jobs whose lease ran out (their worker died), locked for the rescuer.
- ``finish``: the results of attempts, written only where the fence still matches, so that a
  worker whose job was rescued and re-run cannot overwrite its successor's result. A failed
  attempt (a retry, or a discard that counts one more attempt: the worker's or the rescuer's)
  appends its error to ``errors``, keeping the last ``JOB_ERRORS_KEPT``; completions, snoozes
  and releases are written in batches and touch no error.

Unique jobs: at most one unfinished (AVAILABLE, RUNNING, RETRYABLE) job per (kind, key), kept by a
partial unique index. ``enqueue`` of a duplicate inserts nothing and returns None; instead it tells
the existing job that it is wanted by ``run_at``: a waiting AVAILABLE job is brought forward to
``run_at`` if that is sooner, and a RUNNING one is marked to run once more from ``run_at`` after
this run (what it works on changed after it started; see ``rerun_at`` in the tables).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa

from freehours.jobs.job import Job, JobError, JobId, JobState
from freehours.jobs.queue import DEFAULT_DEADLINE, DEFAULT_MAX_ATTEMPTS, Complete, Finish, Release
from freehours.jobs.retry import Discard, RetryAt, SnoozeUntil
from freehours.store.repository import Repository
from freehours.store.tables import (
    IDEMPOTENCY_KEY_LENGTH,
    JOB_ERRORS_KEPT,
    JOB_KIND_LENGTH,
    TRACEPARENT_LENGTH,
    UNFINISHED_JOB_STATES,
    UtcDateTime,
    jobs,
)

#: The channel whose notifications wake idle workers (PostgreSQL): sent by every transaction
#: that enqueues (one notification per transaction: PostgreSQL folds identical ones) and by
#: releases.
NOTIFY_CHANNEL = "freehours_jobs"

_WAITING = (JobState.AVAILABLE.value, JobState.RETRYABLE.value)
#: Written out, not bound: PostgreSQL matches an ``ON CONFLICT ... WHERE`` to the partial index
#: only by its text, which a parameter (in a prepared statement) never matches.
_UNFINISHED = sa.text(f"state IN {UNFINISHED_JOB_STATES}")


class Jobs(Repository):
    """The job table, in the unit of work's transaction."""

    __slots__ = ()

    def enqueue(
        self,
        kind: str,
        key: str,
        payload: Mapping[str, Any],
        *,
        run_at: datetime,
        deadline: datetime | None = None,
        max_attempts: int | None = None,
        traceparent: str | None = None,
        now: datetime | None = None,
    ) -> JobId | None:
        """Add a job in the caller's transaction: its id, or None where an unfinished job of the
        same kind and key exists (which is then wanted by ``run_at``; see the module docstring).

        ``deadline`` defaults to ``DEFAULT_DEADLINE`` after the job is due, ``max_attempts`` to
        ``DEFAULT_MAX_ATTEMPTS``; ``payload`` must be JSON-serialisable.
        """
        now = now or datetime.now(UTC)
        deadline = deadline or max(run_at, now) + DEFAULT_DEADLINE
        attempts = DEFAULT_MAX_ATTEMPTS if max_attempts is None else max_attempts
        _check(
            kind,
            key,
            run_at=run_at,
            deadline=deadline,
            max_attempts=attempts,
            traceparent=traceparent,
        )
        row = {
            "kind": kind,
            "key": key,
            "payload": json.dumps(dict(payload), sort_keys=True, separators=(",", ":")),
            "state": JobState.AVAILABLE.value,
            "run_at": run_at,
            "deadline": deadline,
            "attempts": 0,
            "max_attempts": attempts,
            "snoozes": 0,
            "runs": 0,
            "created_at": now,
            "traceparent": traceparent,
        }
        live = self._driver.live_jobs(jobs)
        insert = (
            self._driver.insert_or_ignore(
                live, index_elements=["kind", "key"], index_where=_UNFINISHED
            )
            .values(row)
            .returning(live.c.id)
        )
        # A duplicate found here may finish before the update below reaches it (READ
        # COMMITTED): then the insert is tried again, and succeeds. Three rounds cover any
        # interleaving of one finish.
        for _ in range(3):
            inserted = self._conn.execute(insert).scalar_one_or_none()
            if inserted is not None:
                self._notify()
                return JobId(inserted)
            if self._wanted_by(kind, key, run_at, deadline):
                self._notify()
                return None
        raise RuntimeError(f"job {kind} {key}: neither inserted nor found unfinished")

    def claim(
        self,
        worker: str,
        kinds: Collection[str],
        limit: int,
        *,
        now: datetime,
        lease: timedelta,
    ) -> list[Job]:
        """Take up to ``limit`` due jobs of ``kinds``, oldest first: RUNNING, held by
        ``worker``."""
        c = jobs.c
        due = (
            sa.select(c.id)
            .where(c.state.in_(_WAITING), c.run_at <= now, c.kind.in_(sorted(kinds)))
            .order_by(c.run_at, c.id)
            .limit(limit)
            .with_for_update(skip_locked=True)
            .cte("due")
        )
        rows = self._conn.execute(
            jobs.update()
            # The state again, although ``due`` has it: where jobs are partitioned by state, so
            # that the update too reads only the live partition.
            .where(c.id.in_(sa.select(due.c.id)), c.state.in_(_WAITING))
            .values(
                state=JobState.RUNNING.value,
                runs=c.runs + 1,
                worker=worker,
                lease_until=now + lease,
                attempted_at=now,
            )
            .returning(*jobs.c)
        )
        return sorted((_job(row) for row in rows), key=lambda job: (job.run_at, job.id))

    def next_due(self, kinds: Collection[str]) -> datetime | None:
        """When the earliest waiting job of ``kinds`` is due, or None when none is waiting."""
        c = jobs.c
        due: datetime | None = self._conn.scalar(
            sa.select(sa.func.min(c.run_at)).where(c.state.in_(_WAITING), c.kind.in_(sorted(kinds)))
        )
        return due

    def renew(self, worker: str, *, now: datetime, lease: timedelta) -> int:
        """Extend the leases of ``worker``'s running jobs; how many were extended.

        A job past its deadline is not extended: if its handler hangs, its lease runs out and
        the rescuer discards it, so no job outlives its deadline by more than a lease.
        """
        c = jobs.c
        result = self._conn.execute(
            jobs.update()
            .where(c.state == JobState.RUNNING.value, c.worker == worker, c.deadline > now)
            .values(lease_until=now + lease)
        )
        return result.rowcount

    def expired(self, *, now: datetime, limit: int) -> list[Job]:
        """Running jobs whose lease ran out, locked for this transaction (skipping locked
        ones)."""
        c = jobs.c
        rows = self._conn.execute(
            sa.select(jobs)
            .where(c.state == JobState.RUNNING.value, c.lease_until < now)
            .order_by(c.lease_until)
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        return [_job(row) for row in rows]

    def finish(self, finishes: Sequence[Finish], *, now: datetime) -> set[JobId]:
        """Write the results of attempts; the ids written. A result whose fence is stale (the
        job was rescued and claimed again) is not written and not in the answer."""
        written: set[JobId] = set()
        completions: dict[str | None, list[tuple[int, int]]] = {}
        released: list[tuple[int, int]] = []
        for item in finishes:
            fence = (item.job.id, item.job.runs)
            match item.decision:
                case Complete(outcome):
                    completions.setdefault(outcome, []).append(fence)
                case Release():
                    released.append(fence)
                case decision:
                    written |= self._finish_one(item, decision, now)
        for outcome, fences in completions.items():
            written |= self._update(fences, _completed(outcome, now))
        if released:
            written |= self._update(released, _released(now))
            self._notify()
        return written

    def cancel(self, kind: str, key: str, *, now: datetime) -> JobId | None:
        """Cancel the waiting (AVAILABLE or RETRYABLE) job of (kind, key); its id, or None if
        there is none. A RUNNING job is not cancelled: its attempt finishes as it would have."""
        c = jobs.c
        cancelled: int | None = self._conn.execute(
            jobs.update()
            .where(c.kind == kind, c.key == key, c.state.in_(_WAITING))
            .values(state=JobState.CANCELLED.value, outcome="cancelled", finalized_at=now)
            .returning(c.id)
        ).scalar_one_or_none()
        return None if cancelled is None else JobId(cancelled)

    def get(self, job_id: int) -> Job | None:
        """The job ``job_id``, or None."""
        row = self._conn.execute(sa.select(jobs).where(jobs.c.id == job_id)).first()
        return None if row is None else _job(row)

    def history(self, kind: str, key: str) -> list[Job]:
        """Every job of (kind, key), oldest first."""
        c = jobs.c
        rows = self._conn.execute(
            sa.select(jobs).where(c.kind == kind, c.key == key).order_by(c.id)
        )
        return [_job(row) for row in rows]

    def every(self) -> list[Job]:
        """Every job, oldest first."""
        return [_job(row) for row in self._conn.execute(sa.select(jobs).order_by(jobs.c.id))]

    def reruns(self) -> int:
        """Runs beyond each job's first, summed over every job."""
        c = jobs.c
        reruns = self._conn.scalar(
            sa.select(sa.func.coalesce(sa.func.sum(c.runs - 1), 0)).where(c.runs > 0)
        )
        return int(reruns or 0)

    def count_by_state(self) -> dict[JobState, int]:
        """How many jobs are in each state (every state present, 0 where none)."""
        rows = self._conn.execute(sa.select(jobs.c.state, sa.func.count()).group_by(jobs.c.state))
        counts = dict.fromkeys(JobState, 0)
        for state, count in rows:
            counts[JobState(state)] = count
        return counts

    def prune(self, *, finished_before: datetime, limit: int) -> int:
        """Delete up to ``limit`` jobs finished before ``finished_before``; how many went."""
        c = jobs.c
        oldest = (
            sa.select(c.id)
            .where(c.state.not_in(UNFINISHED_JOB_STATES), c.finalized_at < finished_before)
            .limit(limit)
            .scalar_subquery()
        )
        return self._conn.execute(sa.delete(jobs).where(c.id.in_(oldest))).rowcount

    def count_stuck(self, *, now: datetime, waiting_over: timedelta) -> int:
        """Jobs due for longer than ``waiting_over`` that no worker has started."""
        c = jobs.c
        count = self._conn.scalar(
            sa.select(sa.func.count()).where(c.state.in_(_WAITING), c.run_at < now - waiting_over)
        )
        return int(count or 0)

    def page(
        self,
        *,
        state: str | None = None,
        kind: str | None = None,
        key: str | None = None,
        limit: int,
        before_id: int | None = None,
    ) -> list[Job]:
        """Up to ``limit`` jobs, newest first, older than ``before_id``, of the state, kind and
        key given (the console's lists: off ``ix_jobs_state_id``, ``ix_jobs_kind_id``,
        ``ix_jobs_key_id``)."""
        c = jobs.c
        query = sa.select(jobs).order_by(c.id.desc()).limit(limit)
        for column, value in ((c.state, state), (c.kind, kind), (c.key, key)):
            if value is not None:
                query = query.where(column == value)
        if before_id is not None:
            query = query.where(c.id < before_id)
        return [_job(row) for row in self._conn.execute(query)]

    def count_in(self, states: Collection[JobState]) -> dict[JobState, int]:
        """How many jobs are in each of ``states``, each counted off the state index: cheap for
        the unfinished and discarded states, which are few in a busy table."""
        c = jobs.c
        return {
            state: int(
                self._conn.scalar(sa.select(sa.func.count()).where(c.state == state.value)) or 0
            )
            for state in states
        }

    def kinds(self) -> list[str]:
        """The kinds of job there are: each next kind one probe of the kind index, however many
        jobs there are."""
        c = jobs.c
        kinds: list[str] = []
        while True:
            query = sa.select(sa.func.min(c.kind))
            if kinds:
                query = query.where(c.kind > kinds[-1])
            kind = self._conn.scalar(query)
            if kind is None:
                return kinds
            kinds.append(kind)

    def lock(self, job_id: int) -> Job | None:
        """The job ``job_id`` locked for the rest of the transaction, or None."""
        row = self._conn.execute(
            sa.select(jobs).where(jobs.c.id == job_id).with_for_update()
        ).first()
        return None if row is None else _job(row)

    def _wanted_by(self, kind: str, key: str, run_at: datetime, deadline: datetime) -> bool:
        """``_want_by``; where jobs are partitioned, the duplicate finishing meanwhile moves it
        out of the live partition, which PostgreSQL reports as an error instead of finding no
        row: then, in a savepoint, it is no row (and the insert is tried again)."""
        if not self._driver.partitions:
            return self._want_by(kind, key, run_at, deadline)
        try:
            with self._conn.begin_nested():
                return self._want_by(kind, key, run_at, deadline)
        except sa.exc.DBAPIError as exc:
            if self._driver.moved_concurrently(exc):
                return False
            raise

    def _want_by(self, kind: str, key: str, run_at: datetime, deadline: datetime) -> bool:
        """Tell the unfinished job of (kind, key) that it is wanted by ``run_at``; False if
        none."""
        c = jobs.c
        running = c.state == JobState.RUNNING.value
        updated = self._conn.execute(
            jobs.update()
            .where(c.kind == kind, c.key == key, _UNFINISHED)
            .values(
                run_at=sa.case(
                    (
                        sa.and_(c.state == JobState.AVAILABLE.value, c.run_at > run_at),
                        _at(run_at),
                    ),
                    else_=c.run_at,
                ),
                rerun_at=sa.case(
                    (
                        sa.and_(running, sa.or_(c.rerun_at.is_(None), c.rerun_at > run_at)),
                        _at(run_at),
                    ),
                    else_=c.rerun_at,
                ),
                deadline=sa.case((c.deadline < deadline, _at(deadline)), else_=c.deadline),
            )
            .returning(c.id)
        ).first()
        return updated is not None

    def _notify(self) -> None:
        self._driver.notify(self._conn, NOTIFY_CHANNEL)

    def _finish_one(
        self, item: Finish, decision: RetryAt | SnoozeUntil | Discard, now: datetime
    ) -> set[JobId]:
        c = jobs.c
        values: dict[str, Any]
        match decision:
            case RetryAt(at, attempts):
                values = {
                    "state": JobState.RETRYABLE.value,
                    "run_at": at,
                    "attempts": attempts,
                    "error": item.note,
                }
            case SnoozeUntil(at):
                values = {
                    "state": JobState.AVAILABLE.value,
                    "run_at": sa.case((c.rerun_at < at, c.rerun_at), else_=_at(at)),
                    "snoozes": c.snoozes + 1,
                    "outcome": item.note,
                }
            case Discard(reason, attempts):
                values = {
                    "state": JobState.DISCARDED.value,
                    "attempts": attempts,
                    "outcome": reason.value,
                    "error": sa.func.coalesce(item.note, c.error),
                    "finalized_at": now,
                }
        # A failed attempt counts one more (a snooze, or a discard before the start, none); the
        # job is held at its fence, so the errors read when it was claimed are still its own.
        counted = None if isinstance(decision, SnoozeUntil) else decision.attempts
        if counted is not None and counted > item.job.attempts:
            failed = JobError(counted, now, item.note or "")
            values["errors"] = _errors_text((*item.job.errors, failed))
        return self._update([(item.job.id, item.job.runs)], {**_unheld(), **values})

    def _update(self, fences: list[tuple[int, int]], values: dict[str, Any]) -> set[JobId]:
        """Apply ``values`` to the running jobs at these (id, runs) fences; the ids updated."""
        c = jobs.c
        statement = self._driver.where_pairs(
            jobs.update().values(values).returning(c.id),
            (c.id, c.runs),
            fences,
        )
        rows = self._conn.execute(statement.where(c.state == JobState.RUNNING.value))
        return {JobId(job_id) for job_id in rows.scalars()}


def _check(
    kind: str,
    key: str,
    *,
    run_at: datetime,
    deadline: datetime,
    max_attempts: int,
    traceparent: str | None,
) -> None:
    if not 0 < len(kind) <= JOB_KIND_LENGTH:
        raise ValueError(f"job kind {kind!r} is not 1 to {JOB_KIND_LENGTH} characters")
    if not 0 < len(key) <= IDEMPOTENCY_KEY_LENGTH:
        raise ValueError(f"job key {key!r} is not 1 to {IDEMPOTENCY_KEY_LENGTH} characters")
    if deadline < run_at:
        raise ValueError(f"job {kind} {key}: deadline {deadline} is before run_at {run_at}")
    if max_attempts < 1:
        raise ValueError(f"job {kind} {key}: max_attempts {max_attempts} is less than 1")
    if traceparent is not None and len(traceparent) != TRACEPARENT_LENGTH:
        raise ValueError(f"job {kind} {key}: traceparent {traceparent!r} is not W3C version 00")


def _at(moment: datetime) -> sa.ColumnElement[datetime]:
    """A time inside an expression (``CASE``), stored as the columns store times: in UTC."""
    return sa.literal(moment, UtcDateTime())


def _completed(outcome: str | None, now: datetime) -> dict[str, Any]:
    c = jobs.c
    asked_again = c.rerun_at.is_not(None)
    return {
        **_unheld(),
        "state": sa.case((asked_again, JobState.AVAILABLE.value), else_=JobState.COMPLETED.value),
        "run_at": sa.func.coalesce(c.rerun_at, c.run_at),
        "finalized_at": sa.case((asked_again, sa.null()), else_=_at(now)),
        "outcome": outcome,
    }


def _released(now: datetime) -> dict[str, Any]:
    return {**_unheld(), "state": JobState.AVAILABLE.value, "run_at": now}


def _unheld() -> dict[str, Any]:
    return {"worker": None, "lease_until": None, "rerun_at": None}


def _errors_text(errors: Sequence[JobError]) -> str:
    """The last ``JOB_ERRORS_KEPT`` of ``errors`` as the ``errors`` column's JSON array."""
    return json.dumps(
        [
            {"attempt": e.attempt, "at": e.at.astimezone(UTC).isoformat(), "error": e.error}
            for e in errors[-JOB_ERRORS_KEPT:]
        ],
        separators=(",", ":"),
    )


def _errors(text: str | None) -> tuple[JobError, ...]:
    if not text:
        return ()
    return tuple(
        JobError(e["attempt"], datetime.fromisoformat(e["at"]), e["error"])
        for e in json.loads(text)
    )


def _job(row: sa.Row[Any]) -> Job:
    return Job(
        id=JobId(row.id),
        kind=row.kind,
        key=row.key,
        payload=json.loads(row.payload),
        state=JobState(row.state),
        run_at=row.run_at,
        deadline=row.deadline,
        attempts=row.attempts,
        max_attempts=row.max_attempts,
        snoozes=row.snoozes,
        runs=row.runs,
        worker=row.worker,
        lease_until=row.lease_until,
        created_at=row.created_at,
        attempted_at=row.attempted_at,
        finalized_at=row.finalized_at,
        outcome=row.outcome,
        error=row.error,
        traceparent=row.traceparent,
        errors=_errors(row.errors),
    )
