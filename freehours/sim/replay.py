"""freehours replayed on the incident's workload and faults: the real code on simulated time.

Everything here is freehours' production code, wired as ``freehours serve`` and
``freehours worker`` wire it, with three seams set: a ``ManualClock`` moved by a ``Timeline``,
the settlement's ``SettlementFaults``, and an httpx transport in place of the network.

- the store (SQLite in the work directory, or the database at a URL), ``Runtime`` (settlements,
  ingestion scheduling settlement jobs, the in-process quota cache) and the HTTP API application;
- the meter agent's simulated meters, spool and ``Sender`` posting each half-hour's reads
  (``AgentSending``), and after each post the quota ask (``QuotaAsker``), through a network that
  injects the plan's faults (``SimulatedNetwork``);
- the job ``Worker`` running due jobs with ``run_due`` at the simulated time, at most
  ``Workload.worker_capacity`` a second; a worker that dies is replaced by a new one, and the
  rescuer runs every ``WorkerConfig.rescue_every`` while the dead worker's jobs are held, as the
  keeper thread would. A job counts as stuck when a worker picks it up more than 20 s after it
  fell due, or when it still waits so at the end.

The quota faults enter through the settlement's ``SettlementFaults`` seam: ``WorkerDied`` (a
``BaseException``, which nothing in freehours catches) after a worker's claim, a database error
before the final write, failed cache writes after the settlement behind a stale "pending" entry.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable
from datetime import date, datetime
from functools import partial
from pathlib import Path

from freehours.agent.batch import Batch
from freehours.agent.breaker import Breaker, BreakerConfig
from freehours.agent.http import IngestApi, Timeouts
from freehours.agent.policy import Backoff, RetryBudget
from freehours.agent.sender import BREAKER_EXCLUDES, Sender
from freehours.agent.spool import Spool
from freehours.agent.tally import Tally
from freehours.api.app import create_app
from freehours.api.keys import Scope, create_key
from freehours.api.ratelimit import RateLimits
from freehours.api.services import Services
from freehours.cache.quota import CacheUnavailable
from freehours.clock import Clock, ManualClock
from freehours.domain.settlement import Quota, QuotaStatus, new_quota
from freehours.domain.time import Region
from freehours.errors import ConfigurationError
from freehours.jobs.job import Done, Job, JobState, Snooze, Task
from freehours.operations.runtime import Runtime, retry_policy, worker_config
from freehours.plans import builtin_document
from freehours.settings import Settings
from freehours.settlement.model import FaultPoint
from freehours.sim.agent_meters import INTERVAL, SimulatedMeters
from freehours.sim.clients import (
    API_URL,
    AgentSending,
    ClientCounts,
    QuotaAsker,
    SettlementApi,
    SimulatedNetwork,
    SimulatedTimeStorage,
)
from freehours.sim.figures import STUCK_SECONDS, RetryLog, RunFigures
from freehours.sim.timeline import Timeline
from freehours.sim.workload import PLAN_ID, FaultPlan, QuotaFault, Workload
from freehours.store.database import Store, Unit
from freehours.store.engine import shown_url
from freehours.store.errors import connection_lost
from freehours.workers import rescuer
from freehours.workers.rescuer import STUCK_AFTER
from freehours.workers.settle import settlement_tasks
from freehours.workers.worker import Worker

#: Rate limits count wall-clock seconds (the ``limits`` package), on which a replay's requests
#: crowd together: set out of reach, so that the replay does not depend on the machine's speed.
UNLIMITED = "1000000/second"

#: How often the replay reports its progress, in simulated seconds.
PROGRESS_STEP = 60.0


class WorkerDied(BaseException):
    """A worker process dying after its claim: nothing in freehours catches it or releases."""


class IncidentFaults:
    """The quota faults of the plan, through the settlement's ``SettlementFaults`` seam."""

    def __init__(self, plan: FaultPlan, clock: Clock) -> None:
        self._faults = plan.quotas
        self._stale_for = plan.stale_for
        self._clock = clock
        #: Set by the workers while a job runs: only a worker can die holding a lock.
        self.in_job = False

    def check(self, point: FaultPoint, quota: Quota) -> None:
        fault = self._faults.get(quota.nmi)
        first_holder = quota.fence == 1
        if point is FaultPoint.AFTER_CLAIM and fault is QuotaFault.WORKER_DIES:
            if first_holder and self.in_job:
                raise WorkerDied(quota.key)
        elif point is FaultPoint.BEFORE_COMPLETE and fault is QuotaFault.DATABASE_ERROR:
            if first_holder:
                raise connection_lost("COMMIT", "simulated: the connection was lost")
        elif (
            point is FaultPoint.CACHE_WRITE
            and fault is QuotaFault.STALE_CACHE
            and self._hides_settlement(quota)
        ):
            raise CacheUnavailable("simulated: the cache kept its pending entry")

    def _hides_settlement(self, quota: Quota) -> bool:
        """Whether the stale entry still hides ``quota``'s settlement from the cache."""
        settled_at = quota.completed_at
        return (
            quota.status is QuotaStatus.COMPLETED
            and settled_at is not None
            and self._clock.now() < settled_at + self._stale_for
        )


class SettlementWorkers:
    """The settlement job workers at simulated times."""

    def __init__(
        self,
        runtime: Runtime,
        timeline: Timeline,
        faults: IncidentFaults,
        workload: Workload,
        retries: RetryLog,
    ) -> None:
        settings = runtime.settings
        self._store = runtime.store
        self._timeline = timeline
        self._faults = faults
        self._workload = workload
        self._retries = retries
        self._config = worker_config(settings)
        seeded = random.Random(f"jobs:{workload.seed}")
        self._retry = retry_policy(settings, runtime.clock, seeded)
        self._tasks: dict[str, Task] = {
            kind: partial(self._observed, task)
            for kind, task in settlement_tasks(runtime.settlements).items()
        }
        self._generation = 0
        self._worker = self._new_worker()
        self._next_run: float | None = None
        self._keeping = False
        self.runs = 0
        self.deaths = 0
        self.stuck: set[int] = set()

    def wake(self) -> None:
        """Run the worker when the next job falls due (jobs may have been enqueued)."""
        with self._store.read() as unit:
            due = unit.jobs.next_due(self._tasks)
        if due is not None:
            self._plan_run(self._workload.seconds(due))

    def _plan_run(self, at: float) -> None:
        at = max(at, self._timeline.now)
        if self._next_run is not None and self._next_run <= at:
            return
        self._next_run = at
        self._timeline.at(at, partial(self._run, at))

    def _run(self, planned: float) -> None:
        if self._next_run != planned:
            return  # an earlier run took its place
        self._next_run = None
        capacity = self._workload.worker_capacity
        try:
            ran = self._worker.run_due(limit=capacity)
        except WorkerDied:
            # The process is gone with the jobs it had claimed: their leases run out and the
            # rescuer makes them retryable. A new worker process takes its place.
            self.deaths += 1
            self._worker = self._new_worker()
            self._keep_soon()
            ran = capacity
        if ran >= capacity:
            self._plan_run(self._timeline.now + 1.0)
        else:
            self.wake()

    def _keep_soon(self) -> None:
        if not self._keeping:
            self._keeping = True
            self._timeline.after(self._config.rescue_every.total_seconds(), self._keep)

    def _keep(self) -> None:
        """The keeper's round, as often as the worker's keeper thread: rescue the jobs whose
        lease ran out, then look for due jobs. Rounds go on while a dead worker's jobs are
        held; only they can be rescued, since a live worker here finishes what it claims."""
        self._keeping = False
        rescuer.rescue(self._store, self._retry)
        self.wake()
        with self._store.read() as unit:
            held = unit.jobs.count_by_state()[JobState.RUNNING]
        if held:
            self._keep_soon()

    def _observed(self, task: Task, job: Job) -> Done | Snooze:
        now = self._timeline.now
        self.runs += 1
        if job.runs > 1:
            self._retries.record(now)
        if (self._timeline.clock.now() - job.run_at).total_seconds() > STUCK_SECONDS:
            self.stuck.add(job.id)
        self._faults.in_job = True
        try:
            return task(job)
        finally:
            self._faults.in_job = False

    def _new_worker(self) -> Worker:
        self._generation += 1
        return Worker(
            self._store,
            self._tasks,
            config=self._config,
            clock=self._timeline.clock,
            retry=self._retry,
            name=f"simulated-worker-{self._generation}",
        )


def replay_freehours(
    workload: Workload,
    faults: FaultPlan,
    settings: Settings,
    work_dir: Path,
    on_progress: Callable[[float], None] = lambda _: None,
) -> RunFigures:
    """Replay ``workload`` under ``faults`` on freehours over ``settings.database_url`` (which
    must be empty); ``work_dir`` takes the agent's spool. ``on_progress`` hears the share of
    simulated time done."""
    clock = ManualClock(workload.window_start)
    horizon = workload.seconds(workload.horizon)
    timeline = Timeline(clock, horizon)
    seams = IncidentFaults(faults, clock)
    counts = ClientCounts(RetryLog(math.ceil(horizon / 60)))
    trips = Tally()
    store = Store.open(settings.database_url)
    try:
        _require_empty(store, settings.database_url)
        runtime = Runtime.on(store, settings, clock, seams)
        ingest_key, settle_key = _set_up(runtime, workload, faults)
        limits = RateLimits.open(None, UNLIMITED, UNLIMITED)
        network = SimulatedNetwork(create_app(Services(runtime, limits)))
        workers = SettlementWorkers(runtime, timeline, seams, workload, counts.retries)
        rng = random.Random(f"clients:{workload.seed}")
        settle_api = SettlementApi(network, settle_key)
        asker = QuotaAsker(
            timeline,
            settle_api,
            breaker=_breaker(clock, "freehours-settlements", trips),
            budget=RetryBudget(clock),
            backoff=Backoff(rng),
            counts=counts,
        )
        ingest = IngestApi(API_URL, ingest_key, Timeouts(), transport=network)
        spool = Spool.open(work_dir / "agent-spool.db", durable=False)
        backoff = Backoff(rng)
        sender = Sender(
            ingest,
            _breaker(clock, "freehours-api", trips),
            budget=RetryBudget(clock),
            backoff=backoff,
            clock=clock,
            sleep=timeline.sleep,
            tally=Tally(),
        )

        def delivered(batch: Batch) -> None:
            workers.wake()
            nmi, suffix, _ = _post_of(batch)
            if suffix == "E1":
                timeline.after(0.0, partial(asker.ask, nmi, workload.day))

        sending = AgentSending(
            timeline, spool, sender, backoff=backoff, counts=counts, on_delivered=delivered
        )
        meters = SimulatedMeters(
            workload.meters, workload.seed, workload.window_start, workload.window_end
        )
        for post in workload.posts:
            timeline.at(
                workload.seconds(post),
                partial(
                    _post,
                    clock=clock,
                    meters=meters,
                    sending=sending,
                    network=network,
                    faults=faults,
                    workload=workload,
                ),
            )
        try:
            steps = math.ceil(horizon / PROGRESS_STEP)
            for step in range(1, steps + 1):
                timeline.run_until(step * PROGRESS_STEP)
                on_progress(min(1.0, step * PROGRESS_STEP / horizon))
        finally:
            settle_api.close()
            ingest.close()
            spool.close()
        return _figures(runtime, workload, counts, workers, trips.counts().breaker_trips)
    finally:
        store.close()


def _post(
    *,
    clock: Clock,
    meters: SimulatedMeters,
    sending: AgentSending,
    network: SimulatedNetwork,
    faults: FaultPlan,
    workload: Workload,
) -> None:
    """An interval has ended: every meter's reads of it go to the spool, faults lying in wait."""
    batches = meters.due(clock.now())
    for batch in batches:
        nmi, suffix, end = _post_of(batch)
        fault = faults.posts.get((nmi, workload.posts.index(end)))
        if suffix == "E1" and fault is not None:
            network.expect(batch.idempotency_key, fault)
    sending.accept(batches)


def _post_of(batch: Batch) -> tuple[str, str, datetime]:
    """A meter batch's NMI, channel and the end of its interval."""
    body = json.loads(batch.body)
    start = datetime.fromisoformat(body["reads"][0]["start"])
    return body["nmi"], body["suffix"], start + INTERVAL


def _breaker(clock: Clock, name: str, trips: Tally) -> Breaker:
    return Breaker(
        BreakerConfig(name=name),
        SimulatedTimeStorage(clock),
        exclude=BREAKER_EXCLUDES,
        on_trip=lambda: trips.add(breaker_trips=1),
    )


def _require_empty(store: Store, url: str) -> None:
    with store.read() as unit:
        if unit.catalog.count_customers():
            shown = shown_url(url)
            raise ConfigurationError(
                f"{shown}: the replay needs an empty database (this one has customers)"
            )


def _set_up(runtime: Runtime, workload: Workload, faults: FaultPlan) -> tuple[str, str]:
    """The plan, a customer per meter, the clients' keys, and the stale cache entries; the
    ingest key and the settle key."""
    now = runtime.clock.now()
    with runtime.store.write() as unit:
        unit.catalog.put_plan(PLAN_ID, builtin_document(PLAN_ID), updated_at=now)
        for nmi in workload.nmis:
            unit.catalog.put_customer(nmi, plan_id=PLAN_ID, region=Region.NSW, updated_at=now)
        _, ingest_key = create_key(unit.keys, frozenset({Scope.INGEST}), "simulated agent", now)
        _, settle_key = create_key(unit.keys, frozenset({Scope.SETTLE}), "simulated meters", now)
    lasting = workload.seconds(workload.horizon)
    for nmi, fault in faults.quotas.items():
        if fault is QuotaFault.STALE_CACHE:
            # The incident's rate-limit cache: "pending", and it stays so after the settlement.
            runtime.settlements.cache.put(new_quota(nmi, workload.day), lasting)
    return ingest_key, settle_key


def _figures(
    runtime: Runtime,
    workload: Workload,
    counts: ClientCounts,
    workers: SettlementWorkers,
    breaker_trips: int,
) -> RunFigures:
    now = runtime.clock.now()
    with runtime.store.read() as unit:
        settled = [_settled_at(unit, nmi, workload.day) for nmi in workload.nmis]
        duplicate_credits = unit.quotas.duplicate_credits()
        waiting = unit.jobs.count_stuck(now=now, waiting_over=STUCK_AFTER)
    return RunFigures(
        requests=counts.requests,
        retries=counts.retries.count,
        job_runs=workers.runs,
        duplicate_credits=duplicate_credits,
        jobs_stuck=len(workers.stuck) + waiting,
        quotas=workload.meters,
        settle_seconds=tuple(
            (at - workload.due).total_seconds() for at in settled if at is not None
        ),
        breaker_trips=breaker_trips,
        retries_per_minute=tuple(counts.retries.per_minute),
    )


def _settled_at(unit: Unit, nmi: str, day: date) -> datetime | None:
    quota = unit.quotas.latest(nmi, day)
    if quota is None or quota.status is not QuotaStatus.COMPLETED:
        return None
    return quota.completed_at
