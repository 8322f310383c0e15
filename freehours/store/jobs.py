"""The job table's SQL, every statement here by name, in its unit of work's transaction.

``enqueue`` runs in the caller's transaction, so a job exists exactly when the state that needs it
was committed. The worker's statements run in ``Store.write()`` units:

- ``claim``: the due jobs, oldest first, locked with ``FOR UPDATE SKIP LOCKED`` on PostgreSQL (so
  concurrent workers never wait for, nor take, each other's rows) and inside ``BEGIN IMMEDIATE``
  on SQLite (one writer at a time); each becomes RUNNING with ``runs + 1`` (its fence) and a lease.
- ``renew``: the heartbeat, extending the leases of one worker's running jobs (one statement, every
  second by default: ``freehours.defaults.JOB_LEASE``).
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
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import sqlalchemy as sa

from freehours.jobs.decisions import (
    DEFAULT_DEADLINE,
    DEFAULT_MAX_ATTEMPTS,
    Complete,
    Finish,
    Release,
)
from freehours.jobs.job import Job, JobError, JobId, JobState
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
#: that enqueues (one notification per transaction: PostgreSQL folds identical ones), by
#: releases and by rescues.
NOTIFY_CHANNEL = "freehours_jobs"

_WAITING = (JobState.AVAILABLE.value, JobState.RETRYABLE.value)
_T = TypeVar("_T")
#: Tries of the heartbeat's and the rescuer's statements when a job they lock finishes meanwhile
#: (``Jobs._past_moves``): each retry leaves out the jobs finished by then.
_MOVE_TRIES = 5
#: Written out, not bound: PostgreSQL matches an ``ON CONFLICT ... WHERE`` to the partial index
#: only by its text, which a parameter (in a prepared statement) never matches.
_UNFINISHED = sa.text(f"state IN {UNFINISHED_JOB_STATES}")


#: Jobs per statement of ``enqueue_many``'s deletes (two parameters each): far under both
#: databases' limits.
_ENQUEUE_BATCH = 1_000
#: A wave of at least this many jobs goes through a staging table; fewer, one by one.
_STAGE_FROM = 20
#: The columns a new job is given (the others keep their defaults).
_STAGED = (
    "kind",
    "key",
    "payload",
    "state",
    "run_at",
    "deadline",
    "attempts",
    "max_attempts",
    "snoozes",
    "runs",
    "created_at",
    "traceparent",
)
_staging_metadata = sa.MetaData()
#: Where a large wave of new jobs lands before it is matched and inserted: a temporary table (per
#: connection, never WAL-logged on PostgreSQL), created and dropped in the caller's transaction.
_staging = sa.Table(
    "jobs_staging",
    _staging_metadata,
    *(sa.Column(name, jobs.c[name].type) for name in _STAGED),
    sa.Column("seq", sa.Integer, nullable=False),
    prefixes=["TEMPORARY"],
)


@dataclass(frozen=True, slots=True)
class NewJob:
    """A job to enqueue (``Jobs.enqueue_many``), with ``Jobs.enqueue``'s arguments."""

    kind: str
    key: str
    payload: Mapping[str, Any]
    run_at: datetime
    deadline: datetime | None = None
    max_attempts: int | None = None
    traceparent: str | None = None


def new_job_row(job: NewJob, now: datetime) -> dict[str, Any]:
    """The job table's row for ``job``, enqueued ``now``; checked (``ValueError``). (A
    benchmark or a test loading many jobs in one statement writes these rows itself.)"""
    deadline = job.deadline or max(job.run_at, now) + DEFAULT_DEADLINE
    attempts = DEFAULT_MAX_ATTEMPTS if job.max_attempts is None else job.max_attempts
    _check(
        job.kind,
        job.key,
        run_at=job.run_at,
        deadline=deadline,
        max_attempts=attempts,
        traceparent=job.traceparent,
    )
    return {
        "kind": job.kind,
        "key": job.key,
        "payload": json.dumps(dict(job.payload), sort_keys=True, separators=(",", ":")),
        "state": JobState.AVAILABLE.value,
        "run_at": job.run_at,
        "deadline": deadline,
        "attempts": 0,
        "max_attempts": attempts,
        "snoozes": 0,
        "runs": 0,
        "created_at": now,
        "traceparent": job.traceparent,
    }


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
        job = NewJob(kind, key, payload, run_at, deadline, max_attempts, traceparent)
        return self.enqueue_many([job], now=now)[0]

    def enqueue_many(
        self, new: Sequence[NewJob], *, now: datetime | None = None
    ) -> list[JobId | None]:
        """``enqueue`` of each of ``new`` in turn, in a few statements: for each, its id, or None
        where it was a duplicate (of a job stored, or of one earlier in ``new``).

        The n-th occurrence of a (kind, key) is enqueued in the n-th wave, all of a wave's jobs
        at once: one multi-row ``INSERT ... ON CONFLICT DO NOTHING`` per ``_ENQUEUE_BATCH``, then
        the duplicates told they are wanted (one statement on PostgreSQL), which is what the
        same enqueues one by one do. Every job is checked before anything is written.
        """
        now = now or datetime.now(UTC)
        rows = [new_job_row(job, now) for job in new]
        answers: list[JobId | None] = [None] * len(rows)
        waves: list[list[int]] = []
        seen: dict[tuple[str, str], int] = {}
        for index, row in enumerate(rows):
            identity = (row["kind"], row["key"])
            occurrence = seen.get(identity, 0)
            seen[identity] = occurrence + 1
            if occurrence == len(waves):
                waves.append([])
            waves[occurrence].append(index)
        for wave in waves:
            self._enqueue_wave(rows, wave, answers)
        if rows:
            self.notify()
        return answers

    def _enqueue_wave(
        self, rows: list[dict[str, Any]], wave: list[int], answers: list[JobId | None]
    ) -> None:
        """Enqueue ``rows[i]`` for each ``i`` of ``wave`` (distinct kinds and keys)."""
        pending = {(rows[i]["kind"], rows[i]["key"]): i for i in wave}
        round_of = self._staged_round if len(pending) >= _STAGE_FROM else self._round
        # A duplicate found may finish before it is told (READ COMMITTED): then the insert is
        # tried again, and succeeds. Three rounds cover any interleaving of one finish.
        for _ in range(3):
            inserted, wanted = round_of([rows[i] for i in pending.values()])
            for identity, job_id in inserted:
                answers[pending.pop(identity)] = JobId(job_id)
            for identity in wanted:
                del pending[identity]
            if not pending:
                return
        kind, key = next(iter(pending))
        raise RuntimeError(f"job {kind} {key}: neither inserted nor found unfinished")

    def _round(
        self, rows: list[dict[str, Any]]
    ) -> tuple[list[tuple[tuple[str, str], int]], set[tuple[str, str]]]:
        """A few jobs, one by one: each inserted, or else its unfinished duplicate told it is
        wanted. The ((kind, key), id) of those inserted; the (kind, key) of those told."""
        live = self._driver.live_jobs(jobs)
        insert = self._driver.insert_or_ignore(
            live, index_elements=["kind", "key"], index_where=_UNFINISHED
        )
        inserted = []
        wanted = set()
        for row in rows:
            identity = (row["kind"], row["key"])
            job_id = self._conn.execute(insert.values(row).returning(live.c.id)).scalar()
            if job_id is not None:
                inserted.append((identity, int(job_id)))
            elif self._tell_wanted(row["kind"], row["key"], row["run_at"], row["deadline"]):
                wanted.add(identity)
        return inserted, wanted

    def _staged_round(
        self, rows: list[dict[str, Any]]
    ) -> tuple[list[tuple[tuple[str, str], int]], set[tuple[str, str]]]:
        """Many jobs at once, as ``_round`` does them: loaded into a temporary table (COPY on
        PostgreSQL), inserted in one ``INSERT ... SELECT ... ON CONFLICT DO NOTHING``, and only
        where some were not (an unfinished duplicate held their key), those duplicates told in
        one ``UPDATE ... FROM``.

        In that order because an ingest's jobs are new keys nearly always: the insert is then
        the whole round. The tell, joined over every unfinished job, was planned (with no
        statistics of ``jobs_live`` filling up) as a hash of all of them: 17 ms a file at
        50,000 live jobs, growing with them."""
        s = _staging.c
        with (
            self._driver.without_statement_timeout(self._conn),
            self._driver.staging(self._conn, _staging),
        ):
            self._driver.stage(
                self._conn,
                _staging,
                ((*(row[name] for name in _STAGED), seq) for seq, row in enumerate(rows)),
            )
            # SQLite needs a WHERE in INSERT ... SELECT ... ON CONFLICT, or it reads ON as a
            # join's.
            live = self._driver.live_jobs(jobs)
            insert = (
                self._driver.insert_or_ignore(
                    live, index_elements=["kind", "key"], index_where=_UNFINISHED
                )
                .from_select(
                    _STAGED,
                    sa.select(*(s[name] for name in _STAGED)).where(sa.true()).order_by(s.seq),
                )
                .returning(live.c.id, live.c.kind, live.c.key)
            )
            inserted = [((row.kind, row.key), row.id) for row in self._conn.execute(insert)]
            if len(inserted) == len(rows):
                return inserted, set()
            # The rest met an unfinished duplicate: the jobs just inserted out of the way (they
            # are unfinished too), then the duplicates told.
            identities = [identity for identity, _ in inserted]
            for start in range(0, len(identities), _ENQUEUE_BATCH):
                done = identities[start : start + _ENQUEUE_BATCH]
                self._conn.execute(sa.delete(_staging).where(sa.tuple_(s.kind, s.key).in_(done)))
            found = self._tell_staged()
        return inserted, {(row.kind, row.key) for row in found}

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
        # Each kind's oldest from its own run of the due index (kind, run_at, id), then the oldest
        # of those: one scan of ``kinds IN (...)`` would read and sort every due job of every
        # kind in each claim, a cost that grows with the backlog (a settlement burst's million
        # due jobs) instead of with the batch.
        of_kind = [
            sa.select(c.id, c.run_at)
            .where(c.kind == kind, c.state.in_(_WAITING), c.run_at <= now)
            .order_by(c.run_at, c.id)
            .limit(limit)
            .with_for_update(skip_locked=True)
            .cte(f"due_{n}")
            for n, kind in enumerate(sorted(kinds))
        ]
        if not of_kind:
            return []
        if len(of_kind) == 1:
            due = sa.select(of_kind[0].c.id).cte("due")
        else:
            # A kind's candidates left out by the limit stay locked (skipped by other workers)
            # only until this transaction commits, a moment later.
            candidates = sa.union_all(
                *(sa.select(kind.c.id, kind.c.run_at) for kind in of_kind)
            ).subquery("candidates")
            due = (
                sa.select(candidates.c.id)
                .order_by(candidates.c.run_at, candidates.c.id)
                .limit(limit)
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

        A job whose row another transaction holds is skipped, not waited for (``SKIP LOCKED`` on
        PostgreSQL): that is the worker's own dispatcher writing its result (it needs no lease
        then), the rescuer taking it, or an enqueue telling it to run again, each a moment. A
        renewal that waited could deadlock with the dispatcher's write of the same rows (each
        locking them in its own order) now that it runs every second, and the next heartbeat
        renews what this one skipped. A job that finished since the statement began is left out
        by running it again (``_past_moves``).
        """
        c = jobs.c
        held = (
            sa.select(c.id)
            .where(c.state == JobState.RUNNING.value, c.worker == worker, c.deadline > now)
            .with_for_update(skip_locked=True)
        )
        statement = (
            jobs.update()
            # The state again: where jobs are partitioned by state, the update reads only the
            # live partition.
            .where(c.id.in_(held), c.state == JobState.RUNNING.value)
            .values(lease_until=now + lease)
        )
        # A job of the worker's finishing as this runs is the rule, not the exception, when
        # jobs are short (a few thousand a second): its row moves, and the renewal is run again.
        return self._past_moves(lambda: self._conn.execute(statement).rowcount, 0, _MOVE_TRIES)

    def expired(self, *, now: datetime, limit: int) -> list[Job]:
        """Running jobs whose lease ran out, locked for this transaction (skipping locked
        ones)."""
        c = jobs.c
        query = (
            sa.select(jobs)
            .where(c.state == JobState.RUNNING.value, c.lease_until < now)
            .order_by(c.lease_until)
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        # A late worker finishing one of them as this runs moves its row: looked for again.
        return self._past_moves(
            lambda: [_job(row) for row in self._conn.execute(query)], [], _MOVE_TRIES
        )

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
            self.notify()
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

    def _past_moves(self, run: Callable[[], _T], nothing: _T, tries: int) -> _T:
        """``run()``, a statement that locks jobs' rows. Where jobs are partitioned, a job that
        finishes meanwhile moves out of the live partition, which PostgreSQL reports as an
        error rather than as a row gone: each try is then undone to a savepoint, and run again
        (a new snapshot, without that job) up to ``tries`` times in all; ``nothing`` when every
        try met one."""
        if not self._driver.partitions:
            return run()
        for _ in range(tries):
            try:
                with self._conn.begin_nested():
                    return run()
            except sa.exc.DBAPIError as exc:
                if not self._driver.moved_concurrently(exc):
                    raise
        return nothing

    def _tell_wanted(self, kind: str, key: str, run_at: datetime, deadline: datetime) -> bool:
        """``_want_by``; the duplicate finishing meanwhile (``_past_moves``) is no row, and the
        insert is tried again."""
        return self._past_moves(lambda: self._want_by(kind, key, run_at, deadline), False, 1)

    def _tell_staged(self) -> list[sa.Row[Any]]:
        """The staged jobs' unfinished duplicates told they are wanted, in one statement; their
        (kind, key). Where a duplicate finishes meanwhile and moves partition (as in
        ``_tell_wanted``), none is told: the next round inserts those that finished and tells
        those still unfinished."""
        s = _staging.c
        c = jobs.c
        update = (
            jobs.update()
            .where(c.kind == s.kind, c.key == s.key, c.state.in_(UNFINISHED_JOB_STATES))
            .values(_wanted_by(s.run_at, s.deadline))
            .returning(c.kind, c.key)  # SQLite returns the target's columns only
        )
        return self._past_moves(lambda: list(self._conn.execute(update).all()), [], 1)

    def _want_by(self, kind: str, key: str, run_at: datetime, deadline: datetime) -> bool:
        """Tell the unfinished job of (kind, key) that it is wanted by ``run_at``; False if
        none."""
        c = jobs.c
        updated = self._conn.execute(
            jobs.update()
            .where(c.kind == kind, c.key == key, _UNFINISHED)
            .values(_wanted_by(_at(run_at), _at(deadline)))
            .returning(c.id)
        ).first()
        return updated is not None

    def notify(self) -> None:
        """Wake the idle workers when this transaction commits (PostgreSQL; a no-op on SQLite):
        jobs became due, or will at a time they should look up."""
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


def _wanted_by(
    run_at: sa.ColumnElement[datetime], deadline: sa.ColumnElement[datetime]
) -> dict[str, sa.ColumnElement[Any]]:
    """What telling an unfinished job that it is wanted by ``run_at`` (with ``deadline``) sets:
    a waiting AVAILABLE job brought forward, a RUNNING one marked to run again, the later
    deadline kept."""
    c = jobs.c
    running = c.state == JobState.RUNNING.value
    return {
        "run_at": sa.case(
            (sa.and_(c.state == JobState.AVAILABLE.value, c.run_at > run_at), run_at),
            else_=c.run_at,
        ),
        "rerun_at": sa.case(
            (sa.and_(running, sa.or_(c.rerun_at.is_(None), c.rerun_at > run_at)), run_at),
            else_=c.rerun_at,
        ),
        "deadline": sa.case((c.deadline < deadline, deadline), else_=c.deadline),
    }


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
