"""The incident's workload and fault plan: everything follows from the seed."""

from __future__ import annotations

from collections import Counter

from freehours.sim.workload import FaultPlan, PostFault, QuotaFault, Workload


def test_the_same_seed_draws_the_same_faults_and_another_seed_others() -> None:
    first = FaultPlan.draw(Workload.incident(50, 7))
    assert FaultPlan.draw(Workload.incident(50, 7)) == first
    assert FaultPlan.draw(Workload.incident(50, 8)) != first


def test_three_quotas_meet_one_quota_fault_each() -> None:
    faults = FaultPlan.draw(Workload.incident(20, 1))
    assert sorted(faults.quotas.values()) == sorted(QuotaFault)


def test_every_kind_of_post_fault_strikes_about_one_post_in_eight() -> None:
    workload = Workload.incident(100, 1)
    faults = FaultPlan.draw(workload)
    kinds = Counter(faults.posts.values())
    assert set(kinds) == set(PostFault)
    assert 0.08 < sum(kinds.values()) / (workload.meters * len(workload.posts)) < 0.18


def test_the_meters_post_as_each_half_hour_of_the_window_ends() -> None:
    workload = Workload.incident(3, 1)
    assert [f"{post:%H:%M}" for post in workload.posts] == [
        "11:30",
        "12:00",
        "12:30",
        "13:00",
        "13:30",
        "14:00",
    ]
    assert f"{workload.due:%H:%M}" == "14:15"
