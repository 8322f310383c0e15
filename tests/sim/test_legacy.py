"""The legacy model behaves as the post-mortem says the broken backend did."""

from __future__ import annotations

from datetime import timedelta

import pytest

from freehours.sim.legacy import LegacyBilling, Status, WorkerDied, replay_legacy
from freehours.sim.workload import FaultPlan, QuotaFault, Workload


def storm(after_window: timedelta) -> int:
    # Three meters and five calls a second: the storm's shape, at a fraction of the cost.
    workload = Workload.incident(3, 1, after_window=after_window, worker_capacity=5)
    return replay_legacy(workload, FaultPlan.draw(workload)).retries


def test_its_retries_grow_with_the_horizon_since_nothing_else_stops_them() -> None:
    half_hour, hour, two_hours = (storm(timedelta(minutes=m)) for m in (30, 60, 120))
    assert half_hour < hour < two_hours
    # Every job is still retrying: the workers retry at their full capacity until the end.
    assert abs((two_hours - hour) - 3600 * 5) <= 1


def test_a_settled_quota_answers_409_like_one_in_process() -> None:
    workload = Workload.incident(3, 1)
    billing = LegacyBilling(workload, FaultPlan(posts={}, quotas={}))
    nmi = workload.nmis[0]
    due = workload.seconds(workload.due)
    assert not billing.call(nmi, due - 1)  # not due yet: 409
    assert billing.call(nmi, due)  # settled: 200
    assert billing.status[nmi] is Status.DONE
    assert not billing.call(nmi, due + 1)  # settled: 409 all the same, for ever


def test_each_quota_fault_does_what_the_post_mortem_describes() -> None:
    workload = Workload.incident(20, 1, worker_capacity=5)
    faults = FaultPlan.draw(workload)
    figures = replay_legacy(workload, faults)
    by_fault = {fault: nmi for nmi, fault in faults.quotas.items()}
    billing = LegacyBilling(workload, faults)
    due = workload.seconds(workload.due)
    # A worker dies holding the lock, and there is no lock timeout: in process for good.
    dying = by_fault[QuotaFault.WORKER_DIES]
    with pytest.raises(WorkerDied):
        billing.call(dying, due)
    assert not billing.call(dying, due + 3600)
    assert (billing.status[dying], billing.credits[dying]) == (Status.IN_PROCESS, 0)
    # The database fails after the credit, before the final write: credited, never settled.
    failing = by_fault[QuotaFault.DATABASE_ERROR]
    assert not billing.call(failing, due)
    assert not billing.call(failing, due + 3600)
    assert (billing.status[failing], billing.credits[failing]) == (Status.IN_PROCESS, 1)
    # The stale "pending" entry lets the next call in credit the quota again.
    stale = by_fault[QuotaFault.STALE_CACHE]
    assert billing.call(stale, due)
    assert billing.call(stale, due + 1)
    assert billing.credits[stale] == 2
    assert figures.settled == workload.meters - 2
    assert figures.duplicate_credits > 0
    assert figures.breaker_trips == 0  # told "success" in a finally, it never opens
