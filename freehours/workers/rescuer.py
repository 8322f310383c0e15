"""The rescuer: running jobs whose lease ran out belonged to a worker that died or hung.

Each one is a failed attempt: the retry policy makes it RETRYABLE after a backoff (none after
its first: ``after_rescue``), or DISCARDED when that was its last attempt or its deadline has
passed, and idle workers are woken (NOTIFY on
PostgreSQL) to claim it when it is due. Every worker runs the rescuer every ``rescue_every`` (half
a second by default: ``Worker``'s keeper thread); on PostgreSQL ``SKIP LOCKED`` keeps two
rescuers off one job, and the fence (``runs``) keeps a late result of the dead worker, or of one
that was paused longer than its lease, from being written over its successor's.

``count_stuck`` counts what ``freehours_jobs_stuck`` says: jobs due for over ``STUCK_AFTER`` that
no worker has started (measured when scraped, by whichever process is: ``Runtime.measured``).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import structlog

from freehours.clock import Clock
from freehours.jobs.decisions import Finish
from freehours.jobs.job import Job
from freehours.jobs.retry import Discard, RetryAt, RetryPolicy
from freehours.observability.metrics import JOBS_RESCUED
from freehours.store.database import Store
from freehours.workers import telemetry

log = structlog.get_logger("freehours.jobs")

#: A due job normally starts within the poll interval (a second); twenty seconds waiting means no
#: worker takes its kind, or the workers are down or overloaded (DESIGN.md section 6).
STUCK_AFTER = timedelta(seconds=20)
#: Rescued per transaction: keeps each one short when many workers died at once.
RESCUE_BATCH = 100


def rescue(store: Store, retry: RetryPolicy) -> list[Finish]:
    """Rescue every running job whose lease has run out; what became of each."""
    rescued: list[Finish] = []
    while True:
        now = retry.clock.now()
        with store.write() as unit:
            expired = unit.jobs.expired(now=now, limit=RESCUE_BATCH)
            finishes = [
                Finish(
                    job,
                    after_rescue(retry, job),
                    f"lease expired: worker {job.worker} stopped renewing it",
                )
                for job in expired
            ]
            written = unit.jobs.finish(finishes, now=now)
            if written:
                # Idle workers look up now: each rescued job is due within its backoff, sooner
                # than the poll that would otherwise find it.
                unit.jobs.notify()
        for item in finishes:
            if item.job.id in written:
                JOBS_RESCUED.labels(item.job.kind).inc()
                log.warning(
                    "job_rescued",
                    job_id=item.job.id,
                    kind=item.job.kind,
                    idempotency_key=item.job.key,
                    worker=item.job.worker,
                    attempt=item.job.attempts + 1,
                )
        telemetry.record(finishes, written)
        rescued += finishes
        if len(expired) < RESCUE_BATCH:
            return rescued


def after_rescue(retry: RetryPolicy, job: Job) -> RetryAt | Discard:
    """What becomes of a rescued job: the retry policy's answer to a failed attempt, except that
    a first one runs again at once. Its backoff (up to ``JOB_RETRY_BASE``) is there for a blip to
    pass, and the expired lease has waited longer than that already; a job rescued again (one
    whose handler may kill or hang its worker) backs off as any other failure does."""
    if job.attempts == 0:
        retry = replace(retry, base=timedelta(0))
    return retry.after_failure(job)


def prune(store: Store, finished_before: datetime) -> int:
    """Delete every job finished before ``finished_before``, a batch a transaction; how many
    went."""
    pruned = store.prune(
        lambda unit, limit: unit.jobs.prune(finished_before=finished_before, limit=limit)
    )
    if pruned:
        log.info("jobs_pruned", count=pruned)
    return pruned


def count_stuck(store: Store, clock: Clock) -> int:
    """Jobs due for over ``STUCK_AFTER`` that no worker has started, now."""
    with store.read() as unit:
        return unit.jobs.count_stuck(now=clock.now(), waiting_over=STUCK_AFTER)
