"""A worker: claims due jobs in batches, runs their handlers on threads, writes the results.

    worker = Worker(store, {"settle": SettleTask(settlements)}, config=WorkerConfig(concurrency=4))
    worker.start()               # returns at once; everything runs on the worker's own threads
    ...
    worker.stop(grace=25.0)      # stop claiming; let running jobs finish for up to 25 s, release
                                 # the rest; True when every job finished in time

Threads of one worker (all daemons, so a process that exits does not wait for a hung handler):

- the dispatcher writes finished results and claims due jobs for each queue, as many as that
  queue has room for (of a kind whose task has a ``hold``, no more than it says:
  ``freehours.jobs.job.hold_limit``), all in one transaction, then waits for the first of: a
  runner finishing, a NOTIFY (PostgreSQL), the next job falling due, or ``poll``;
- for each queue (the tasks name theirs: ``freehours.jobs.job.queue_name``), its runners, as many
  as ``WorkerConfig.runners`` says, each running one handler of the queue's kinds at a time: a
  kind whose jobs hang (a webhook receiver that never answers) holds its own queue's runners and
  no others;
- the keeper renews the worker's leases every ``heartbeat`` (a third of a lease), and every
  ``rescue_every`` rescues jobs of dead workers (``freehours.workers.rescuer``), and does nothing
  else, so that nothing slow comes between a worker and its renewals;
- the upkeep: every ``prune_every`` it deletes the jobs finished over ``retention`` ago and keeps
  the partitions (``freehours.store.maintenance``), statements that may take seconds or wait on
  locks;
- on PostgreSQL the listener: ``LISTEN freehours_jobs`` on a connection of its own.

Any number of workers, in any number of processes, may share one PostgreSQL database: claims skip
each other's rows, and every result is fenced.

``run_due`` runs due jobs in the calling thread instead: for tests and simulations that move a
``ManualClock`` themselves.
"""

from __future__ import annotations

import contextvars
import logging
import os
import queue as threadqueue
import random
import secrets
import socket
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import structlog
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from freehours import defaults
from freehours.clock import Clock, SystemClock
from freehours.domain.webhooks import WEBHOOK_RETENTION
from freehours.jobs.decisions import Complete, Finish, Release
from freehours.jobs.job import (
    BatchAnswer,
    BatchTask,
    Done,
    Job,
    JobId,
    RetryAfter,
    Snooze,
    Task,
    batch_limit,
    hold_limit,
    queue_name,
)
from freehours.jobs.retry import RetryPolicy
from freehours.observability.metrics import (
    WORKER_JOBS_WAITING,
    WORKER_RUNNERS,
    WORKER_RUNNERS_BUSY,
)
from freehours.store.database import Store, Unit
from freehours.store.errors import DatabaseError
from freehours.store.jobs import NOTIFY_CHANNEL
from freehours.store.maintenance import Expiry, Retention, history_partitions, job_partitions
from freehours.webhooks import service as webhooks
from freehours.workers import rescuer, telemetry

log = structlog.get_logger("freehours.jobs")
tracer = trace.get_tracer("freehours.jobs")

#: The shortest wait between two claims while due jobs remain that another worker was claiming
#: at that moment: long enough not to spin on the database, far below any delay anyone notices.
_RETRY_CLAIM_SECONDS = 0.005

#: How often the listener looks up from waiting for a notification to see whether its worker is
#: stopping: how long ``stop()`` may wait for it.
_LISTEN_CHECK_SECONDS = 0.5

#: The canonical line of a failed attempt is a warning; of a discard an error (it is logged once
#: more, with its reason, when it is written); of anything else information. The attempt's span
#: is marked as an error for these two.
_LEVELS = {"failed": logging.WARNING, "discarded": logging.ERROR}


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    """How a worker runs. ``runtime.worker_config(settings)`` maps the ``FREEHOURS_*`` values onto
    it; the defaults of those four, and their reasons, are in ``freehours.defaults``."""

    #: Runners of each queue that ``queues`` does not size: handlers of that queue run at once
    #: (``FREEHOURS_WORKER_CONCURRENCY``).
    concurrency: int = defaults.WORKER_CONCURRENCY
    #: Runners of the queues sized on their own, by name (``FREEHOURS_WORKER_QUEUES``).
    queues: Mapping[str, int] = field(default_factory=dict)
    #: Queues claimed for at most once every ``background_every`` while the worker holds jobs
    #: of any other queue (``defaults.BACKGROUND_QUEUES``: the webhooks yield to settlements).
    background: frozenset[str] = defaults.BACKGROUND_QUEUES
    background_every: timedelta = defaults.BACKGROUND_CLAIM_EVERY
    #: A claimed job's lease, renewed every third of it (``FREEHOURS_JOB_LEASE_SECONDS``): how
    #: long a dead worker keeps its jobs from the others.
    lease: timedelta = defaults.JOB_LEASE
    #: The longest an idle worker waits before it looks for due jobs
    #: (``FREEHOURS_JOB_POLL_SECONDS``).
    poll: timedelta = defaults.JOB_POLL
    #: Jobs claimed (and results written) per transaction at most. Measured on the 2-core
    #: machine, one worker claiming and finishing 16 trivial jobs per transaction manages 1,500
    #: jobs/s, 64 per transaction 3,200/s; larger batches hold jobs away from other workers.
    batch: int = 64
    #: LISTEN for enqueues on PostgreSQL.
    listen: bool = True
    #: Finished jobs older than this are deleted (``FREEHOURS_JOB_RETENTION_HOURS``).
    retention: timedelta = defaults.JOB_RETENTION
    #: How often a worker deletes them: the deletion scans the table, and a day's finished jobs
    #: wait an hour more at no cost.
    prune_every: timedelta = timedelta(hours=1)
    #: Months of partitions created ahead (PostgreSQL; ``FREEHOURS_PARTITIONS_AHEAD_MONTHS``).
    partitions_ahead: int = defaults.PARTITIONS_AHEAD_MONTHS
    #: Months of billing history kept attached (``FREEHOURS_HISTORY_RETENTION_MONTHS``).
    history_months: int = defaults.HISTORY_RETENTION_MONTHS

    def __post_init__(self) -> None:
        sizes = {"concurrency": self.concurrency, **self.queues}
        for name, runners in sizes.items():
            if not isinstance(runners, int) or runners < 1:
                raise ValueError(f"a worker's {name} must be a positive int, not {runners!r}")

    def runners(self, queue: str) -> int:
        """Runner threads of ``queue``: as sized in ``queues``, else ``concurrency``."""
        return self.queues.get(queue, self.concurrency)

    @property
    def heartbeat(self) -> timedelta:
        """How often the keeper renews the leases: two renewals in a row may fail (a database
        blip) before a live worker loses its jobs."""
        return self.lease / 3

    @property
    def rescue_every(self) -> timedelta:
        """How often the keeper rescues jobs whose lease ran out: ``defaults.JOB_RESCUE_EVERY``,
        or as often as leases are renewed where they are shorter, so a dead worker's jobs are
        found soon after their lease runs out."""
        return min(self.heartbeat, defaults.JOB_RESCUE_EVERY)


@dataclass(eq=False)
class _Queue:
    """One queue of a worker: its kinds, its runners, and the claimed jobs that wait for them."""

    name: str
    kinds: tuple[str, ...]
    runners: int
    #: Jobs it holds at once: enough for every runner to have a batch of the queue's largest kind
    #: while the next claim's batch waits, so that runners keep busy while it is claimed.
    capacity: int
    #: What its runners take: a job, or jobs of one batch kind to run together.
    ready: threadqueue.SimpleQueue[list[Job] | None] = field(
        default_factory=threadqueue.SimpleQueue
    )
    ready_jobs: int = 0  # jobs in ``ready``


class Worker:
    """Runs the jobs of the kinds in ``tasks`` from ``store``. ``start()``/``stop(grace)`` may be
    called from any thread, once each."""

    def __init__(
        self,
        store: Store,
        tasks: Mapping[str, Task],
        *,
        config: WorkerConfig | None = None,
        clock: Clock | None = None,
        retry: RetryPolicy | None = None,
        name: str | None = None,
    ) -> None:
        if not tasks:
            raise ValueError("a worker needs at least one task")
        self.store = store
        self.tasks = dict(tasks)
        #: Kinds whose tasks limit how many of their jobs this worker holds at once.
        self._limits = {
            kind: limit for kind, task in self.tasks.items() if (limit := hold_limit(task))
        }
        #: Kinds whose tasks run several jobs per call (``BatchTask``): how many at most.
        self._batches = {
            kind: limit for kind, task in self.tasks.items() if (limit := batch_limit(task))
        }
        self.config = config or WorkerConfig()
        kinds_of: dict[str, list[str]] = {}
        for kind, task in self.tasks.items():
            kinds_of.setdefault(queue_name(task), []).append(kind)
        # The background queues last: a cycle's claims for the others come first.
        names = sorted(kinds_of, key=lambda name: name in self.config.background)
        self._queues = {name: self._queue(name, kinds_of[name]) for name in names}
        self._queue_of = {kind: queue for queue in self._queues.values() for kind in queue.kinds}
        self.clock = clock or SystemClock()
        self.retry = retry or RetryPolicy(self.clock, random.Random())
        self.name = name or f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
        self._lock = threading.Lock()
        self._runner_done = threading.Condition(self._lock)
        self._held: dict[JobId, Job] = {}  # claimed, result not yet written
        self._running: set[JobId] = set()
        self._finished: list[Finish] = []
        self._closing = False  # stopping: a runner no longer starts a job it is handed
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._keeper_stop = threading.Event()
        self._threads: dict[str, threading.Thread] = {}
        #: When the background queues may claim next while other queues hold jobs.
        self._background_at: datetime | None = None
        self._background_waiting = False  # their claim put off: the dispatcher wakes for it

    def _queue(self, name: str, kinds: list[str]) -> _Queue:
        runners = self.config.runners(name)
        largest = max((self._batches.get(kind, 1) for kind in kinds), default=1)
        capacity = runners * largest + self.config.batch
        return _Queue(name, tuple(kinds), runners, capacity)

    # --- life cycle ----------------------------------------------------------------------------

    def start(self) -> None:
        """Start claiming and running jobs on the worker's threads."""
        if self._threads:
            raise RuntimeError(f"worker {self.name} was started already")
        threads: dict[str, tuple[Any, ...]] = {
            "dispatcher": (self._dispatch,),
            "keeper": (self._keep,),
            "upkeep": (self._upkeep,),
        }
        for queue in self._queues.values():
            WORKER_RUNNERS.labels(queue.name).inc(queue.runners)
            for n in range(queue.runners):
                threads[f"runner-{queue.name}-{n}"] = (self._run, queue)
        if self.config.listen and self.store.listens:
            threads["listener"] = (self._listen,)
        for role, (target, *args) in threads.items():
            thread = threading.Thread(
                target=target, args=args, name=f"{self.name} {role}", daemon=True
            )
            self._threads[role] = thread
            thread.start()
        log.info(
            "worker_started",
            worker=self.name,
            kinds=sorted(self.tasks),
            queues={queue.name: queue.runners for queue in self._queues.values()},
        )

    def stop(self, grace: float) -> bool:
        """Stop claiming; give running jobs ``grace`` seconds to finish, then release the rest
        (AVAILABLE again, for another worker) and write every result. True when every running
        job finished within the grace period."""
        if not self._threads:
            return True
        self._stopping.set()
        self._wake.set()
        self._threads["dispatcher"].join()
        with self._lock:
            self._closing = True
            for queue in self._queues.values():
                while True:
                    try:
                        unstarted = queue.ready.get_nowait()
                    except threadqueue.Empty:
                        break
                    if unstarted is not None:
                        self._took(queue, unstarted)
                        self._finished += [Finish(job, Release()) for job in unstarted]
            finished = self._runner_done.wait_for(lambda: not self._running, timeout=grace)
            cut_short = [self._held[job_id] for job_id in self._running]
            self._running.clear()
            self._finished += [Finish(job, Release(), "worker stopped") for job in cut_short]
        for queue in self._queues.values():
            WORKER_RUNNERS.labels(queue.name).dec(queue.runners)
            for _ in range(queue.runners):
                queue.ready.put(None)
        try:
            self._cycle(claim=False)
        except DatabaseError:
            # Their leases run out and the rescuer retries them: late, never lost.
            log.exception("worker_final_write_failed", worker=self.name)
        self._keeper_stop.set()
        for role, thread in self._threads.items():
            if role != "dispatcher" and not role.startswith("runner"):
                thread.join()
        log.info("worker_stopped", worker=self.name, finished=finished, released=len(cut_short))
        return finished

    # --- running in the caller's thread ----------------------------------------------------------

    def run_due(self, limit: int = 10_000) -> int:
        """Run the jobs due now in this thread, batch after batch, until none is due (or
        ``limit`` attempts ran); how many attempts ran."""
        ran = 0
        while ran < limit:
            with self.store.write() as unit:
                claimed = unit.jobs.claim(
                    self.name,
                    self.tasks,
                    min(self.config.batch, limit - ran),
                    now=self.clock.now(),
                    lease=self.config.lease,
                )
            if not claimed:
                break
            finished = [
                finish for batch_ in self._units(claimed) for finish in self._perform(batch_)
            ]
            with self.store.write() as unit:
                written = unit.jobs.finish(finished, now=self.clock.now())
            telemetry.record(finished, written)
            ran += len(claimed)
        return ran

    # --- the dispatcher --------------------------------------------------------------------------

    def _dispatch(self) -> None:
        poll = self.config.poll.total_seconds()
        while not self._stopping.is_set():
            self._wake.clear()
            try:
                wait = self._cycle()
            except Exception:
                # The database gone, or a fault of ours: either way the dispatcher must live on,
                # or the worker would look alive and claim nothing. Results are kept for the
                # next cycle; leases keep the claimed jobs meanwhile.
                log.exception("worker_cycle_failed", worker=self.name)
                wait = poll
            self._wake.wait(wait)

    def _cycle(self, *, claim: bool = True) -> float:
        """One transaction: write the results that are in, and claim for each queue as many due
        jobs as it has room for. Seconds to wait before the next cycle, unless woken."""
        poll = self.config.poll.total_seconds()
        with self._lock:
            finished, self._finished = self._finished, []
            leaving = {item.job.id for item in finished}
            held = Counter(job.kind for job in self._held.values() if job.id not in leaving)
        rooms = {
            queue.name: queue.capacity - sum(held[kind] for kind in queue.kinds) if claim else 0
            for queue in self._queues.values()
        }
        claimed: list[Job] = []
        written: set[JobId] = set()
        upcoming = None
        now = self.clock.now()
        if finished or any(room > 0 for room in rooms.values()):
            try:
                with self.store.write() as unit:
                    written = unit.jobs.finish(finished, now=now) if finished else set()
                    claimed, open_kinds = self._claim(unit, rooms, held, now)
                    if open_kinds:
                        upcoming = unit.jobs.next_due(open_kinds)
            except BaseException:
                with self._lock:
                    self._finished[:0] = finished  # fenced: writing them again later is safe
                raise
        telemetry.record(finished, written)
        with self._lock:
            for item in finished:
                self._held.pop(item.job.id, None)
            for job in claimed:
                self._held[job.id] = job
        units = self._units(claimed)
        with self._lock:
            for batch_ in units:
                queue = self._queue_of[batch_[0].kind]
                queue.ready_jobs += len(batch_)
                WORKER_JOBS_WAITING.labels(queue.name).inc(len(batch_))
        for batch_ in units:
            self._queue_of[batch_[0].kind].ready.put(batch_)
        if self._background_waiting and self._background_at is not None:
            upcoming = min(upcoming or self._background_at, self._background_at)
        if upcoming is None:
            return poll  # a runner wakes the dispatcher when its queue runs low
        until = (upcoming - now).total_seconds()
        return min(poll, max(_RETRY_CLAIM_SECONDS, until))

    def _claim(
        self, unit: Unit, rooms: Mapping[str, int], held: Counter[str], now: datetime
    ) -> tuple[list[Job], list[str]]:
        """Claim for each queue up to its room in due jobs of its kinds, no more of a limited
        kind than its task's hold allows (``held``: the jobs of each kind held now); the jobs,
        and the kinds that had room left (those whose next due job matters)."""
        lease = self.config.lease
        claimed: list[Job] = []
        open_kinds: list[str] = []
        self._background_waiting = False
        # Busy: holding, or claiming now, jobs of a queue that does not yield.
        busy = any(
            count and self._queue_of[kind].name not in self.config.background
            for kind, count in held.items()
        )
        for queue in self._queues.values():
            room = rooms[queue.name]
            yields = busy and queue.name in self.config.background
            if yields:
                room = self._background_room(queue, room, now)
            if room <= 0:
                continue
            unlimited = [kind for kind in queue.kinds if kind not in self._limits]
            got = (
                unit.jobs.claim(self.name, unlimited, room, now=now, lease=lease)
                if unlimited
                else []
            )
            if len(got) < room:
                open_kinds += unlimited
            for kind in sorted(kind for kind in queue.kinds if kind in self._limits):
                free = min(room - len(got), self._limits[kind] - held[kind])
                if free > 0:
                    limited = unit.jobs.claim(self.name, [kind], free, now=now, lease=lease)
                    got += limited
                    if len(limited) < free:
                        open_kinds.append(kind)
            if yields and got:
                self._background_at = now + self.config.background_every
            claimed += got
            busy = busy or (bool(got) and queue.name not in self.config.background)
        return claimed, open_kinds

    def _background_room(self, queue: _Queue, room: int, now: datetime) -> int:
        """What a background queue may claim while the worker is busy with other queues' jobs:
        a job per runner once every ``background_every`` (from its last claim that got any),
        the dispatcher woken for it."""
        self._background_waiting = self._background_at is not None and now < self._background_at
        return 0 if self._background_waiting else min(room, queue.runners)

    # --- runners ---------------------------------------------------------------------------------

    def _units(self, claimed: list[Job]) -> list[list[Job]]:
        """The claimed jobs as runners take them: one by one, and those of a batch kind in
        batches as large as the kind takes (the last one smaller). A batch's statements cost
        about the same for 10 jobs as for 60, so under a backlog the fewest batches settle the
        most: shared evenly between the four runners instead, a day of 100,000 quotas went in
        batches of about 10 at 723 a second; in batches of up to 64, 1,309."""
        units: list[list[Job]] = []
        by_kind: dict[str, list[Job]] = {}
        for job in claimed:
            if job.kind in self._batches:
                by_kind.setdefault(job.kind, []).append(job)
            else:
                units.append([job])
        for kind, jobs in by_kind.items():
            size = self._batches[kind]
            units += [jobs[n : n + size] for n in range(0, len(jobs), size)]
        return units

    def _took(self, queue: _Queue, jobs: list[Job]) -> None:
        """``jobs`` left ``queue``'s ready jobs (the lock held)."""
        queue.ready_jobs -= len(jobs)
        WORKER_JOBS_WAITING.labels(queue.name).dec(len(jobs))

    def _run(self, queue: _Queue) -> None:
        busy = WORKER_RUNNERS_BUSY.labels(queue.name)
        while True:
            jobs = queue.ready.get()
            if jobs is None:
                return
            with self._lock:
                self._took(queue, jobs)
                if self._closing:
                    self._finished += [Finish(job, Release()) for job in jobs]
                    continue
                self._running.update(job.id for job in jobs)
            busy.inc()
            try:
                finishes = self._perform(jobs)
            finally:
                busy.dec()
            with self._lock:
                for finish in finishes:
                    job_id = finish.job.id
                    if job_id in self._running:  # else stop() gave up on it and released it
                        self._running.discard(job_id)
                        self._finished.append(finish)
                self._runner_done.notify_all()
                # Woken once per half batch, not per job: results are written and jobs claimed
                # a batch at a time, while the runners work through the other half.
                due_a_cycle = (
                    len(self._finished) >= self.config.batch // 2
                    or queue.ready_jobs < self.config.batch // 2
                )
            if due_a_cycle:
                self._wake.set()

    def _perform(self, jobs: list[Job]) -> list[Finish]:
        """Run one attempt of each of ``jobs`` (one job, or a batch of one kind) and decide what
        becomes of each; log each one's canonical line.

        The attempt runs in a context of its own: what it binds for its log lines (the job's
        fields, the handler's ``quota_state``) and its trace neither leak out nor come in.
        """
        if len(jobs) == 1:
            return [contextvars.Context().run(self._perform_in_context, jobs[0])]
        return contextvars.Context().run(self._perform_batch, jobs)

    def _perform_in_context(self, job: Job) -> Finish:
        structlog.contextvars.bind_contextvars(
            job_id=job.id, kind=job.kind, idempotency_key=job.key, attempt=job.attempts + 1
        )
        with tracer.start_as_current_span(
            f"job {job.kind}",
            context=_parent(job),
            kind=SpanKind.CONSUMER,
            attributes=_attributes(job),
        ) as span:
            started = self.clock.monotonic()
            finish = self._attempt(job)
            self._conclude(job, finish, span, log, started)
        return finish

    def _perform_batch(self, jobs: list[Job]) -> list[Finish]:
        """One ``run_batch`` call for jobs of one kind: each job still has its span (in its own
        trace, linked from the batch's span) and its canonical line, and is finished alone."""
        kind = jobs[0].kind
        task = self.tasks[kind]
        assert isinstance(task, BatchTask), f"kind {kind} runs in batches"
        started = self.clock.monotonic()
        spans = {
            job.id: tracer.start_span(
                f"job {kind}",
                context=_parent(job),
                kind=SpanKind.CONSUMER,
                attributes=_attributes(job),
            )
            for job in jobs
        }
        finishes: dict[JobId, Finish] = {}
        runnable: list[Job] = []
        for job in jobs:
            too_late = self.retry.before_start(job)
            if too_late is None:
                runnable.append(job)
            else:
                finishes[job.id] = Finish(
                    job, too_late, "its deadline passed before it could start"
                )
        facts: dict[JobId, Mapping[str, object]] = {}
        if runnable:
            links = [Link(spans[job.id].get_span_context()) for job in runnable]
            with tracer.start_as_current_span(
                f"jobs {kind}",
                kind=SpanKind.CONSUMER,
                links=links,
                attributes={"freehours.job.kind": kind, "freehours.job.batch": len(runnable)},
            ) as batch_span:
                answers = self._run_batch(task, runnable, batch_span)
            for job, answer in zip(runnable, answers, strict=True):
                finishes[job.id] = self._answered(job, answer)
                if not isinstance(answer, Exception) and answer.facts:
                    facts[job.id] = answer.facts
        result = []
        for job in jobs:
            finish = finishes[job.id]
            line = log.bind(
                job_id=job.id,
                kind=job.kind,
                idempotency_key=job.key,
                attempt=job.attempts + 1,
                **facts.get(job.id, {}),
            )
            span = spans[job.id]
            self._conclude(job, finish, span, line, started)
            span.end()
            result.append(finish)
        return result

    def _run_batch(self, task: BatchTask, jobs: list[Job], span: Span) -> Sequence[BatchAnswer]:
        """``task.run_batch(jobs)``, or, when it raises or answers for another number of jobs,
        that failure for every job."""
        try:
            answers = task.run_batch(jobs)
        except Exception as exc:  # noqa: BLE001 - every job of the batch failed with it
            failure: Exception = exc
        else:
            if len(answers) == len(jobs):
                return answers
            failure = RuntimeError(f"the batch task answered {len(answers)} of {len(jobs)} jobs")
        span.record_exception(failure)
        log.warning("job_batch_failed", kind=jobs[0].kind, jobs=len(jobs), exc_info=failure)
        return [failure] * len(jobs)

    def _conclude(self, job: Job, finish: Finish, span: Span, line: Any, started: float) -> None:
        """Say on the job's span and canonical log line what became of its attempt."""
        outcome = telemetry.result(finish.decision)
        span.set_attribute("freehours.job.outcome", outcome)
        if outcome in _LEVELS:
            span.set_status(Status(StatusCode.ERROR, finish.note))
        line.log(
            _LEVELS.get(outcome, logging.INFO),
            "job_finished",
            worker=self.name,
            outcome=outcome,
            note=finish.note,
            duration_ms=round((self.clock.monotonic() - started) * 1000, 1),
        )

    def _answered(self, job: Job, answer: BatchAnswer) -> Finish:
        """What becomes of ``job`` given its batch handler's answer (as ``_attempt`` decides)."""
        if isinstance(answer, RetryAfter):
            return Finish(job, self.retry.after_failure(job, answer.seconds), _describe(answer))
        if isinstance(answer, Exception):
            log.warning("job_failed", job_id=job.id, kind=job.kind, exc_info=answer)
            return Finish(job, self.retry.after_failure(job), _describe(answer))
        if isinstance(answer, Snooze):
            return Finish(job, self.retry.after_snooze(job, answer.seconds), answer.reason)
        assert isinstance(answer, Done)
        return Finish(job, Complete(answer.outcome))

    def _attempt(self, job: Job) -> Finish:
        too_late = self.retry.before_start(job)
        if too_late is not None:
            return Finish(job, too_late, "its deadline passed before it could start")
        try:
            answer = self.tasks[job.kind](job)
        except RetryAfter as exc:
            return Finish(job, self.retry.after_failure(job, exc.seconds), _describe(exc))
        except Exception as exc:
            trace.get_current_span().record_exception(exc)
            log.warning("job_failed", exc_info=exc)
            return Finish(job, self.retry.after_failure(job), _describe(exc))
        if isinstance(answer, Snooze):
            return Finish(job, self.retry.after_snooze(job, answer.seconds), answer.reason)
        return Finish(job, Complete(answer.outcome))

    # --- the keeper and the listener --------------------------------------------------------------

    def _keep(self) -> None:
        """Renew this worker's leases every heartbeat and rescue expired ones every
        ``rescue_every``: one short statement each, on a thread that does nothing else."""
        heartbeat = self.config.heartbeat.total_seconds()
        rescue_every = self.config.rescue_every.total_seconds()
        tick = min(heartbeat, rescue_every)
        next_renewal = next_rescue = self.clock.monotonic()
        while not self._keeper_stop.wait(tick):
            now = self.clock.monotonic()
            if now >= next_renewal:
                next_renewal = now + heartbeat
                self._renew()
            if now >= next_rescue:
                next_rescue = now + rescue_every
                try:
                    rescuer.rescue(self.store, self.retry)
                except Exception:
                    log.exception("worker_rescue_failed", worker=self.name)

    def _renew(self) -> None:
        try:
            with self.store.write() as unit:
                unit.jobs.renew(self.name, now=self.clock.now(), lease=self.config.lease)
        except Exception:
            log.exception("worker_keeper_failed", worker=self.name)

    def _upkeep(self) -> None:
        """Expire finished jobs, webhook events and partitions every ``prune_every`` (the first
        time ``rescue_every`` after the start), on a thread of its own: a deletion of many rows,
        or a partition waiting on a lock, delays no lease renewal and no rescue. It looks every
        ``rescue_every`` whether one is due, so that ``stop()`` waits on it no longer than that,
        or than the run under way."""
        config = self.config
        expiries = [
            # Whole months of finished jobs first (PostgreSQL), then the rows left of the last.
            job_partitions(config.retention, config.partitions_ahead),
            Expiry("jobs", config.retention, rescuer.prune),
            history_partitions(config.history_months, config.partitions_ahead),
            # Webhook events delivered (or given up) over a month ago (docs/webhooks.md).
            Expiry("webhook_events", WEBHOOK_RETENTION, webhooks.prune),
        ]
        retention = Retention(self.store, self.clock, expiries, every=config.prune_every)
        while not self._keeper_stop.wait(config.rescue_every.total_seconds()):
            try:
                retention.run_if_due()
            except Exception:
                log.exception("worker_upkeep_failed", worker=self.name)

    def _listen(self) -> None:
        poll = self.config.poll.total_seconds()
        while not self._stopping.is_set():
            try:
                self._listen_once()
            except self.store.errors as exc:
                log.warning("worker_listen_failed", worker=self.name, error=str(exc))
                self._stopping.wait(poll)

    def _listen_once(self) -> None:
        with self.store.listen(NOTIFY_CHANNEL) as notifications:
            self._wake.set()  # whatever was enqueued while nobody listened
            while not self._stopping.is_set():
                if notifications.wait(_LISTEN_CHECK_SECONDS):
                    self._wake.set()


def _parent(job: Job) -> Context | None:
    """The trace the job continues: the request's that enqueued it (None: a trace of its own)."""
    if job.traceparent is None:
        return None
    return TraceContextTextMapPropagator().extract({"traceparent": job.traceparent})


def _attributes(job: Job) -> dict[str, Any]:
    return {
        "freehours.job.id": job.id,
        "freehours.job.kind": job.kind,
        "freehours.job.key": job.key,
        "freehours.job.attempt": job.attempts + 1,
    }


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"
