"""The broken design, as a model: what the retailer's post-mortem describes, small enough to read.

``docs/incident-report-id.txt`` (in Indonesian; ``docs/incident.md`` tells it in English) is the
post-mortem of a billing backend whose metering jobs hit ``HTTP 409 quota already in process``
and were requeued without end when the three free hours began. This module models that backend
and its meter service, nothing more: it is the yardstick of ``freehours simulate incident`` and
nothing in freehours uses it. Each rule quotes the post-mortem.

The meter service
    Every reading in the free window makes a metering job ("antrean job metering") that calls the
    billing API for the day's quota (idempotency key: user and period). A job whose call fails is
    requeued as a new job, its retry counter reset ("retryCount di-reset setiap job baru"): its
    backoff, ``requeue_base * 2**retries``, is always the base, and its retry limit is never
    reached. The circuit breaker around the call is told "success" in a ``finally``, as in the
    published fix (``finally { circuitBreaker.success(); }``), so its count of failures in a row
    never reaches the threshold: it never trips.

The billing API
    - Quota validation trusts the rate-limit service's in-memory cache ("cache in-memory untuk
      mempercepat validasi kuota"; the log's ``cache_hit=true`` then ``start processing``); the
      database is read only on a miss.
    - It does not tell a quota in process from a settled one ("tidak membedakan antara 'kuota
      sedang diproses' dan 'kuota selesai'"): both answer 409, as does a day not due yet, so a job
      retries for as long as anything runs.
    - Processing locks the row (status in-process, in the cache too), books the credit, and writes
      the final status only at the end ("menulis status hanya pada akhir pipe"). There is no lock
      timeout: a worker that dies after taking the lock leaves the quota in process for good, and
      a failure after the credit leaves it in process with its credit booked, the cache not
      updated.
    - A stale cache entry that still says "pending" after the settlement ("cache masih memegang
      nilai pending") lets the next call process the quota again: another credit.

The metering workers run ``Workload.worker_capacity`` calls per simulated second, oldest due
first; the run ends at the workload's horizon, which is all that stops the storm.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import Counter
from dataclasses import dataclass
from enum import StrEnum

from freehours.sim.figures import STUCK_SECONDS, RetryLog, RunFigures
from freehours.sim.workload import FaultPlan, PostFault, QuotaFault, Workload


class Status(StrEnum):
    """A legacy quota's status as its database holds it."""

    PENDING = "pending"  # nothing has processed it yet
    IN_PROCESS = "in_process"  # locked by a worker; the only status written before the end
    DONE = "done"  # written at the end of the pipe, after the credit


@dataclass(frozen=True, slots=True)
class LegacyDesign:
    """The legacy meter service's retry settings."""

    #: The queue's backoff is ``requeue_base * 2**retries``; with the counter reset per job, it is
    #: always this.
    requeue_base: float = 1.0
    #: The per-job retry limit, which a counter reset per job never reaches.
    max_retries: int = 5
    #: Failures in a row that open the meter service's breaker.
    breaker_fail_max: int = 5


class LegacyBreaker:
    """The meter service's circuit breaker: opens after ``fail_max`` failures in a row."""

    def __init__(self, fail_max: int) -> None:
        self.fail_max = fail_max
        self.failures = 0
        self.trips = 0

    def failure(self) -> None:
        self.failures += 1
        if self.failures == self.fail_max:
            self.trips += 1

    def success(self) -> None:
        self.failures = 0


class WorkerDied(Exception):
    """The billing worker died holding the quota's lock: the call gets no answer."""


class LegacyBilling:
    """The billing API and its database, one quota per meter."""

    def __init__(self, workload: Workload, faults: FaultPlan) -> None:
        self._due = workload.seconds(workload.due)
        self._faults = faults.quotas
        self._stale_for = faults.stale_for.total_seconds()
        self.status = dict.fromkeys(workload.nmis, Status.PENDING)
        self.cache: dict[str, Status] = {}
        self.credits: Counter[str] = Counter()
        self.settled_at: dict[str, float] = {}
        self._struck: set[str] = set()

    def call(self, nmi: str, now: float) -> bool:
        """A call for ``nmi``'s quota at ``now`` (seconds): True for 200, False for 409 "quota
        already in process". Raises ``WorkerDied``."""
        if self._validate(nmi, now) is not Status.PENDING or now < self._due:
            return False
        self.status[nmi] = self.cache[nmi] = Status.IN_PROCESS
        fault = self._strike(nmi)
        if fault is QuotaFault.WORKER_DIES:
            raise WorkerDied(nmi)
        self.credits[nmi] += 1
        if fault is QuotaFault.DATABASE_ERROR:
            return False  # the final write never happens, nor the cache's update
        self.status[nmi] = self.cache[nmi] = Status.DONE
        self.settled_at.setdefault(nmi, now)
        return True

    def _validate(self, nmi: str, now: float) -> Status:
        settled = self.settled_at.get(nmi)
        if (
            settled is not None
            and now < settled + self._stale_for
            and self._faults.get(nmi) is QuotaFault.STALE_CACHE
        ):
            return Status.PENDING  # the stale entry, trusted: the database is not asked
        return self.cache.get(nmi, self.status[nmi])

    def _strike(self, nmi: str) -> QuotaFault | None:
        """The quota's fault, on its first processing only."""
        if nmi in self._struck:
            return None
        self._struck.add(nmi)
        return self._faults.get(nmi)


def replay_legacy(
    workload: Workload, faults: FaultPlan, design: LegacyDesign | None = None
) -> RunFigures:
    """Run the legacy model on ``workload`` under ``faults`` until the horizon."""
    design = design or LegacyDesign()
    billing = LegacyBilling(workload, faults)
    breaker = LegacyBreaker(design.breaker_fail_max)
    horizon = workload.seconds(workload.horizon)
    step = 1.0 / workload.worker_capacity
    retries = RetryLog(math.ceil(horizon / 60))
    arrivals = sorted(
        (workload.seconds(at), index, nmi)
        for index, at in enumerate(workload.posts)
        for nmi in workload.nmis
    )
    # (due, order, NMI, post, retries): the metering jobs waiting, oldest due first.
    waiting: list[tuple[float, int, str, int, int]] = []
    order = itertools.count()
    runs: dict[tuple[str, int], int] = {}
    stuck: set[tuple[str, int]] = set()
    arrived = 0
    now = 0.0
    while True:
        while arrived < len(arrivals) and arrivals[arrived][0] <= now:
            at, index, nmi = arrivals[arrived]
            heapq.heappush(waiting, (at, next(order), nmi, index, 0))
            arrived += 1
        if not waiting or waiting[0][0] > now:
            upcoming = min(
                waiting[0][0] if waiting else math.inf,
                arrivals[arrived][0] if arrived < len(arrivals) else math.inf,
            )
            if upcoming >= horizon:
                break
            now = upcoming
            continue
        if now >= horizon:
            break
        due, _, nmi, index, job_retries = heapq.heappop(waiting)
        job = (nmi, index)
        earlier = runs.get(job, 0)
        runs[job] = earlier + 1
        if earlier:
            retries.record(now)
        if now - due > STUCK_SECONDS:
            stuck.add(job)
        try:
            answered = (
                _call(billing, nmi, now)
                if earlier
                else _exchange(billing, nmi, now, faults.posts.get(job))
            )
            if not answered:
                breaker.failure()
                if job_retries < design.max_retries:
                    fresh = 0  # requeued as a new job: its retry counter starts again
                    delay = design.requeue_base * 2**fresh
                    heapq.heappush(waiting, (now + delay, next(order), nmi, index, fresh))
        finally:
            breaker.success()  # the fixed handler's ``finally``: success, failure or not
        now += step
    stuck.update((nmi, index) for due, _, nmi, index, _ in waiting if horizon - due > STUCK_SECONDS)
    due_at = workload.seconds(workload.due)
    return RunFigures(
        requests=sum(runs.values()),
        retries=retries.count,
        job_runs=sum(runs.values()),
        duplicate_credits=sum(count - 1 for count in billing.credits.values() if count > 1),
        jobs_stuck=len(stuck),
        quotas=workload.meters,
        settle_seconds=tuple(
            at - due_at
            for nmi, at in sorted(billing.settled_at.items())
            if billing.status[nmi] is Status.DONE
        ),
        breaker_trips=breaker.trips,
        retries_per_minute=tuple(retries.per_minute),
    )


def _exchange(billing: LegacyBilling, nmi: str, now: float, fault: PostFault | None) -> bool:
    """One call as the network delivers it: True when the meter service got a 200."""
    match fault:
        case PostFault.SERVER_ERROR | PostFault.TIMEOUT:
            return False
        case PostFault.ANSWER_LOST:
            _call(billing, nmi, now)
            return False
        case PostFault.DUPLICATE:
            _call(billing, nmi, now)
            return _call(billing, nmi, now)
        case None:
            return _call(billing, nmi, now)


def _call(billing: LegacyBilling, nmi: str, now: float) -> bool:
    try:
        return billing.call(nmi, now)
    except WorkerDied:
        return False  # the worker died with the call: no answer
