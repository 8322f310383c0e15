"""What became of job attempts, told once: the Prometheus counters and the log lines.

Called after the transaction that wrote the results, with the ids it wrote, so that a result the
fence refused is counted as ``stale`` and nothing else.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence

import structlog

from freehours.jobs.decisions import Complete, Decision, Finish, Release
from freehours.jobs.job import JobId
from freehours.jobs.retry import Discard, RetryAt, SnoozeUntil
from freehours.observability.metrics import JOB_ATTEMPTS, JOB_RETRIES, JOBS_DISCARDED

log = structlog.get_logger("freehours.jobs")


def result(decision: Decision) -> str:
    """The ``outcome`` label of ``freehours_job_attempts_total`` for a decision."""
    match decision:
        case Complete():
            return "completed"
        case SnoozeUntil():
            return "snoozed"
        case RetryAt():
            return "failed"
        case Discard():
            return "discarded"
        case Release():
            return "released"


def record(finishes: Sequence[Finish], written: Collection[JobId]) -> None:
    """Count every finish; log the discards (error: each is alerted on) and the stale ones."""
    counted: Counter[tuple[str, str]] = Counter()
    for item in finishes:
        job = item.job
        if job.id not in written:
            counted[job.kind, "stale"] += 1
            log.warning(
                "job_result_stale",
                job_id=job.id,
                kind=job.kind,
                idempotency_key=job.key,
                fence=job.runs,
            )
            continue
        label = result(item.decision)
        if label != "released":
            counted[job.kind, label] += 1
        match item.decision:
            case Complete():
                JOB_RETRIES.labels(job.kind).observe(job.attempts)
            case Discard(reason, attempts):
                JOBS_DISCARDED.labels(job.kind, reason.value).inc()
                JOB_RETRIES.labels(job.kind).observe(attempts)
                log.error(
                    "job_discarded",
                    job_id=job.id,
                    kind=job.kind,
                    idempotency_key=job.key,
                    reason=reason.value,
                    attempts=attempts,
                    snoozes=job.snoozes,
                    error=item.note or job.error,
                )
            case Release():
                log.info("job_released", job_id=job.id, kind=job.kind, idempotency_key=job.key)
    for (kind, label), count in counted.items():
        JOB_ATTEMPTS.labels(kind, label).inc(count)
