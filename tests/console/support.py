"""What the console's tests set up through the system's own parts: a customer with an ABORTED
quota, a DISCARDED job, a waiting job."""

from __future__ import annotations

from dataclasses import replace
from datetime import date, timedelta

from freehours.domain.settlement import QuotaStatus, new_quota
from freehours.domain.time import Region
from freehours.jobs.decisions import Complete, Finish
from freehours.jobs.job import JobId, JobState
from freehours.jobs.retry import Discard, DiscardReason, RetryAt
from freehours.operations.runtime import Runtime
from tests.api.conftest import START

NMI = "4100000001"
DAY = date(2026, 7, 1)
LEASE = timedelta(seconds=30)


def aborted_quota(runtime: Runtime, nmi: str = NMI, day: date = DAY) -> None:
    """A customer on the NSW plan whose quota of ``day`` ran out of attempts."""
    runtime.put_customer(nmi, plan_id="sso-nsw", region=Region.NSW, cycle={})
    with runtime.store.write() as unit:
        unit.quotas.insert(
            replace(
                new_quota(nmi, day),
                status=QuotaStatus.ABORTED,
                fence=5,
                attempts=5,
                reason="attempts exhausted: the meter data service kept failing",
            ),
            at=START,
        )


def discarded_job(runtime: Runtime, key: str = f"{NMI}:{DAY.isoformat()}") -> JobId:
    """A settlement job whose one attempt failed: DISCARDED, as the worker leaves it."""
    with runtime.store.write() as unit:
        job_id = unit.jobs.enqueue(
            "settle",
            key,
            {"nmi": key[:10], "date": key[11:], "version": 1},
            run_at=START,
            max_attempts=1,
            now=START,
        )
    with runtime.store.write() as unit:
        (job,) = unit.jobs.claim("test-worker", ["settle"], 1, now=START, lease=LEASE)
        unit.jobs.finish(
            [Finish(job, Discard(DiscardReason.ATTEMPTS, 1), "RuntimeError: boom")], now=START
        )
    assert job_id is not None
    with runtime.store.read() as unit:
        stored = unit.jobs.get(job_id)
    assert stored is not None
    assert stored.state is JobState.DISCARDED
    return job_id


def waiting_job(runtime: Runtime, key: str = "4100000002:2026-07-02") -> JobId:
    with runtime.store.write() as unit:
        job_id = unit.jobs.enqueue(
            "settle",
            key,
            {"nmi": key[:10], "date": key[11:], "version": 1},
            run_at=START + timedelta(hours=1),
            now=START,
        )
    assert job_id is not None
    return job_id


#: Why the recovered job's first attempt failed, as the rescuer says it.
LEASE_EXPIRED = "lease expired: worker test-worker stopped renewing it"


def recovered_job(runtime: Runtime, key: str = "4100000004:2026-07-01") -> JobId:
    """A settlement job whose first attempt's lease ran out, and whose second completed: its
    error is kept, and it is COMPLETED. The only settlement job due when it is made."""
    with runtime.store.write() as unit:
        job_id = unit.jobs.enqueue("settle", key, {"nmi": key[:10]}, run_at=START, now=START)
    for decision, error in ((RetryAt(START, 1), LEASE_EXPIRED), (Complete("settled 0 kWh"), None)):
        with runtime.store.write() as unit:
            (job,) = unit.jobs.claim("test-worker", ["settle"], 1, now=START, lease=LEASE)
            assert job.id == job_id
            unit.jobs.finish([Finish(job, decision, error)], now=START)
    assert job_id is not None
    return job_id
