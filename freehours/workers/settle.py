"""Settlements that happen by themselves: the ``settle`` job, and scheduling it from ingest.

A day's settlement job (kind ``settle``, key ``"{nmi}:{date}"``, the quota's idempotency key) is
enqueued by ``schedule_settlements`` in the ingest's transaction (``SettlementJobs`` is the hook
``freehours.settlement.ingest.Ingestion`` takes), to run when the day's free window has ended plus
the settlement grace. Its handler asks ``Settlements.settle`` once and obeys the answer:

============================  =====================================================================
settle's outcome              the job
============================  =====================================================================
SETTLED, REPLAYED             COMPLETED, outcome ``settled`` / ``replayed``
LOCKED, NOT_DUE, RETRY        snoozed until the answer's Retry-After: no attempt counted; the
                              quota counts its own attempts (RETRY) and aborts at its maximum
ABORTED                       COMPLETED, outcome ``aborted: <reason>``: the quota is terminal and
                              the job did its work (drive it to a final state); the abort itself
                              is counted and logged by the settlement, and a job that is fine must
                              not page anyone as DISCARDED does
============================  =====================================================================

The job never answers from the quota cache (``trust_cache=False``): its payload's version is
the one it was enqueued for, and a revision that opens the next version while the job waits or
runs leaves that payload as it was, so only the database can tell it of the new version.

An exception (the database unreachable, say) is a failed attempt, retried with backoff. The job's
deadline is the data deadline plus ``SETTLEMENT_JOB_SLACK``: while the day's data is incomplete the
settlement answers NOT_DUE and the job snoozes; at the data deadline it settles with what there is.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta

import structlog
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from freehours import defaults
from freehours.domain.settlement import Quota, quota_key
from freehours.jobs.job import BatchAnswer, Done, Job, Snooze, Task
from freehours.settlement.model import AffectedDays, Answer, Outcome, SettleRequest
from freehours.settlement.service import Settlements
from freehours.store.database import Unit
from freehours.store.jobs import NewJob

log = structlog.get_logger("freehours.jobs")

KIND = "settle"

#: After the data deadline the settlement settles with what there is, so the next run completes
#: unless it fails; an hour covers the quota's own attempts with their backoff and a takeover of
#: a dead holder's lock, and then the job is DISCARDED and alerted on.
SETTLEMENT_JOB_SLACK = timedelta(hours=1)

#: Quotas per ``settle_many`` call when a worker has that many due at once: a worker's whole
#: claim (``WorkerConfig.batch``). Measured on the 2-core machine, a day of 100,000 quotas: 32 a
#: call settled 1,047 a second, 64 1,309, 128 (with claims of 128) 991.
DEFAULT_BATCH = 64


class SettleTask:
    """The ``settle`` handler: one ``Settlements.settle`` call, its answer obeyed; or, for the
    jobs a worker claimed together (``BatchTask``), one ``Settlements.settle_many`` call for up
    to ``batch`` of them, each answer obeyed as settle's would be."""

    #: Quotas settled per ``settle_many`` call at most (``DEFAULT_BATCH``).
    batch: int
    #: Settlements have runners that no other kind of job can take.
    queue = defaults.SETTLE_QUEUE

    def __init__(self, settlements: Settlements, *, batch: int = DEFAULT_BATCH) -> None:
        self.settlements = settlements
        self.batch = batch

    def __call__(self, job: Job) -> Done | Snooze:
        structlog.contextvars.bind_contextvars(nmi=job.payload["nmi"], date=job.payload["date"])
        answer = self.settlements.settle(
            job.payload["nmi"],
            date.fromisoformat(job.payload["date"]),
            version=int(job.payload.get("version", 1)),
            trust_cache=False,
        )
        structlog.contextvars.bind_contextvars(quota_state=answer.quota.status.value)
        return _obeyed(answer)

    def run_batch(self, jobs: Sequence[Job]) -> list[BatchAnswer]:
        requests = [
            SettleRequest(
                job.payload["nmi"],
                date.fromisoformat(job.payload["date"]),
                version=int(job.payload.get("version", 1)),
                trace_id=_trace_id(job.traceparent),
                trust_cache=False,
            )
            for job in jobs
        ]
        answers: list[BatchAnswer] = []
        for request, answer in zip(requests, self.settlements.settle_many(requests), strict=True):
            if isinstance(answer, Exception):
                answers.append(answer)
                continue
            facts = {
                "nmi": request.nmi,
                "date": request.day.isoformat(),
                "quota_state": answer.quota.status.value,
            }
            answers.append(replace(_obeyed(answer), facts=facts))
        return answers


def _obeyed(answer: Answer) -> Done | Snooze:
    """What the job does on settle's answer (the table in the module docstring)."""
    quota = answer.quota
    match answer.outcome:
        case Outcome.SETTLED | Outcome.REPLAYED:
            return Done(answer.outcome.value)
        case Outcome.ABORTED:
            return Done(f"aborted: {quota.reason}")
        case Outcome.LOCKED | Outcome.NOT_DUE | Outcome.RETRY:
            # Settle always says when to ask again; one second is its own floor.
            wait = answer.retry_after or 1
            return Snooze(wait, f"{answer.outcome.value}: quota {quota.status.value}")


def _trace_id(traceparent: str | None) -> str | None:
    """The trace id of a W3C ``traceparent`` (``00-<trace id>-<span id>-<flags>``), or None."""
    if traceparent is None:
        return None
    parts = traceparent.split("-")
    if len(parts) != 4 or len(parts[1]) != 32 or parts[1] == "0" * 32:
        return None
    return parts[1].lower()


def settlement_tasks(settlements: Settlements) -> dict[str, Task]:
    """The tasks a settlement worker runs: what ``Worker`` takes."""
    return {KIND: SettleTask(settlements)}


class SettlementJobs:
    """The ingest's ``schedule`` hook (``freehours.settlement.ingest.SettlementScheduler``):
    settlement jobs for what an ingest changed, in its transaction::

        Ingestion(store, settlements, clock, schedule=SettlementJobs(settlements))
    """

    def __init__(self, settlements: Settlements) -> None:
        self.settlements = settlements

    def __call__(self, unit: Unit, affected: Sequence[AffectedDays], reopened: list[Quota]) -> None:
        # A reopened quota's day is among the affected ones: its job is scheduled with them, told
        # the new version so that a cached older one cannot answer it.
        versions = {quota.key: quota.version for quota in reopened}
        schedule_settlements(unit, self.settlements, affected, versions=versions)


def schedule_settlements(
    unit: Unit,
    settlements: Settlements,
    affected: Iterable[AffectedDays],
    *,
    versions: dict[str, int] | None = None,
    traceparent: str | None = None,
) -> list[str]:
    """In the ingest's transaction, after new meter data: a settlement job for every quota whose
    free window the changed consumption day rows touch (``affected``: what
    ``Settlements.affected_days`` made of them); the quota keys.

    Each job runs at its window's end plus the settlement grace, or is told so if it is waiting
    already (see ``freehours.store.jobs``). Call it after ``Settlements.reopen`` in the same
    transaction, so that a reopened day's next version gets its job. An NMI without a customer, or
    whose plan has no free window, has no quotas: nothing is scheduled for it. ``versions`` gives
    the version of quotas the caller just reopened (by quota key). ``traceparent`` defaults to
    the current trace's, so the job continues the request's trace.
    """
    versions = versions or {}
    now = settlements.clock.now()
    traceparent = traceparent or current_traceparent()
    scheduled = []
    new = []
    # Customers on one plan share a day's window: its job's times (and the day's text) worked
    # out once per plan and day, not once per customer, and in UTC: aware datetimes of one
    # tzinfo compare (in the job's checks) and are sent to the database without a zone look-up.
    times: dict[tuple[int, date], tuple[str, datetime, datetime]] = {}
    for item in affected:
        nmi, customer = item.nmi, item.customer
        for day in item.days:
            known = times.get((id(customer.plan), day))
            if known is None:
                quota = settlements.quota_times(customer, day)
                known = times[(id(customer.plan), day)] = (
                    day.isoformat(),
                    quota.due.astimezone(UTC),
                    max(quota.data_deadline, now).astimezone(UTC) + SETTLEMENT_JOB_SLACK,
                )
            day_text, run_at, deadline = known
            key = quota_key(nmi, day)
            new.append(
                NewJob(
                    KIND,
                    key,
                    {"nmi": nmi, "date": day_text, "version": versions.get(key, 1)},
                    run_at=run_at,
                    deadline=deadline,
                    traceparent=traceparent,
                )
            )
            scheduled.append(key)
    unit.jobs.enqueue_many(new, now=now)  # one statement a thousand jobs, not one a job
    if scheduled:
        log.info("settlements_scheduled", quotas=len(scheduled))
    return scheduled


def current_traceparent() -> str | None:
    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier)
    return carrier.get("traceparent")
