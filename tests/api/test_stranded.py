"""Reads that come before their customer, and days no job settles: a customer put schedules
every day of its reads without a final quota, however old; ``POST /v1/settlements/schedule``
schedules what an operator names; ``freehours_settlements_unscheduled_days`` counts what is
left; a plan of another region than its customer's is refused. SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

from freehours.domain.reads import IntervalDay
from freehours.domain.time import Region
from freehours.observability.metrics import SETTLEMENTS_UNSCHEDULED
from freehours.plans import builtin_document
from tests.api.conftest import PLAN, Api
from tests.api.test_settlements import DAY, NMI, post_reads

#: Three days of reads, the first on 1 July: each settles with its whole window.
DAYS = [DAY + timedelta(days=n) for n in range(3)]


def put_customer(api: Api, plan_id: str = "test-nsw", region: str = "NSW") -> Any:
    return api.client.put(
        f"/v1/customers/{NMI}",
        json={"plan_id": plan_id, "region": region},
        headers=api.auth("admin"),
    )


def settle_jobs(api: Api) -> list[tuple[str, str]]:
    with api.services.store.read() as unit:
        return sorted(
            (job.key, job.state.value) for job in unit.jobs.every() if job.kind == "settle"
        )


def statuses(api: Api) -> list[str | None]:
    found = []
    for day in DAYS:
        quota = api.services.settlements.state(NMI, day)
        found.append(None if quota is None else quota.status.value)
    return found


def test_reads_before_their_customer_settle_once_it_is_put_past_the_data_deadline_too(
    api: Api,
) -> None:
    for day in DAYS:
        post_reads(api, day)
    assert (
        api.client.put("/v1/plans/test-nsw", json=PLAN, headers=api.auth("admin")).status_code
        == 200
    )
    worker = api.services.runtime.worker()
    assert worker.run_due() == 0  # no customer: no job
    # A month on, every day is past its data deadline (72 hours).
    api.clock.advance(timedelta(days=30).total_seconds())
    assert put_customer(api).status_code == 200
    keys = [f"{NMI}:{day.isoformat()}" for day in DAYS]
    assert settle_jobs(api) == [(key, "AVAILABLE") for key in keys]
    assert put_customer(api).status_code == 200  # a second put enqueues nothing new
    assert settle_jobs(api) == [(key, "AVAILABLE") for key in keys]
    assert worker.run_due() == 3  # due at once
    assert statuses(api) == ["COMPLETED"] * 3
    quota = api.services.settlements.state(NMI, DAYS[0])
    assert quota is not None
    assert quota.free_kwh == Decimal("2.400")
    # Settled days are not scheduled again: a put after settling enqueues nothing.
    assert put_customer(api).status_code == 200
    assert settle_jobs(api) == [(key, "COMPLETED") for key in keys]


def test_a_plan_change_to_one_with_a_window_schedules_the_days_it_had_none_for(api: Api) -> None:
    """On a plan without a free window the days have no quota; moved to one with a window, they
    settle without anyone asking."""
    windowless = {**PLAN, "id": "no-window", "free_window": {"enabled": False}}
    admin = api.auth("admin")
    assert api.client.put("/v1/plans/no-window", json=windowless, headers=admin).status_code == 200
    assert api.client.put("/v1/plans/test-nsw", json=PLAN, headers=admin).status_code == 200
    assert put_customer(api, "no-window").status_code == 200
    post_reads(api, DAY)
    assert settle_jobs(api) == []
    api.clock.advance(timedelta(days=10).total_seconds())
    assert put_customer(api).status_code == 200
    assert api.services.runtime.worker().run_due() == 1
    assert statuses(api)[0] == "COMPLETED"


def strand(api: Api) -> None:
    """The customer stored as a version before this one stored it, scheduling nothing, and its
    reads of ``DAYS``: days with reads, a customer and no quota."""
    with api.services.store.write() as unit:
        unit.catalog.put_plan("test-nsw", PLAN, updated_at=api.clock.now())
        unit.catalog.put_customer(
            NMI, plan_id="test-nsw", region=Region.NSW, updated_at=api.clock.now()
        )
        unit.meter.ingest_days(
            [
                IntervalDay(NMI, "E1", day, 30, (Decimal("0.400"),) * 48, "A" * 48, None)
                for day in DAYS
            ],
            received_at=api.clock.now(),
        )


def schedule(api: Api, body: dict[str, Any], scope: str = "admin") -> Any:
    return api.client.post("/v1/settlements/schedule", json=body, headers=api.auth(scope))


def test_the_schedule_route_settles_the_days_an_operator_names_and_the_gauge_counts_them(
    api: Api,
) -> None:
    strand(api)
    api.clock.advance(timedelta(days=4).total_seconds())  # past the data deadline of all three
    settlements = api.services.settlements
    assert settlements.count_unscheduled() == 3
    measured = {m.gauge.name: m for m in api.services.runtime.measured}
    assert measured[SETTLEMENTS_UNSCHEDULED.name].value() == 3

    body = {"nmi": NMI, "from": "2026-07-02", "to": "2026-07-03"}
    answer = schedule(api, body)
    assert answer.status_code == 200, answer.text
    assert answer.json() == {**body, "scheduled": 2}
    assert api.services.runtime.worker().run_due() == 2
    assert statuses(api) == [None, "COMPLETED", "COMPLETED"]
    assert settlements.count_unscheduled() == 1
    # The whole range: only the day left is scheduled.
    whole = {"nmi": NMI, "from": "2026-07-01", "to": "2026-07-03"}
    assert schedule(api, whole).json() == {**whole, "scheduled": 1}
    assert api.services.runtime.worker().run_due() == 1
    assert statuses(api) == ["COMPLETED"] * 3
    assert settlements.count_unscheduled() == 0
    assert schedule(api, whole).json()["scheduled"] == 0


def test_the_gauge_leaves_out_days_not_due_and_days_with_a_job_that_ran(api: Api) -> None:
    strand(api)
    # 1 July 14:15 AEST: only the first day's window has ended, and not an hour ago.
    assert api.services.settlements.count_unscheduled() == 0
    api.clock.advance(timedelta(days=3, hours=1).total_seconds())
    assert api.services.settlements.count_unscheduled() == 3


def test_the_schedule_route_refuses_what_cannot_be_naming_the_field(api: Api) -> None:
    strand(api)
    cases = [
        ({"nmi": NMI, "from": "2026-07-03", "to": "2026-07-01"}, "body.to"),
        ({"nmi": NMI, "from": "2025-07-01", "to": "2026-07-02"}, "body.to"),
        ({"nmi": NMI, "from": "1999-12-31", "to": "2000-01-01"}, "body.from"),
        ({"nmi": NMI, "from": "2026-07-01", "to": "2027-07-01"}, "body.to"),
        ({"nmi": "NOBODY0001", "from": "2026-07-01", "to": "2026-07-01"}, "body.nmi"),
        ({"nmi": "x", "from": "2026-07-01", "to": "2026-07-01"}, "body.nmi"),
        ({"from": "2026-07-01", "to": "2026-07-01"}, "body.nmi"),
        ({"nmi": NMI, "from": "2026-07-01"}, "body.to"),
    ]
    for body, field in cases:
        answer = schedule(api, body)
        assert answer.status_code == 422, (body, answer.text)
        assert [e["field"] for e in answer.json()["errors"]] == [field], body
    one_day = {"nmi": NMI, "from": "2026-07-01", "to": "2026-07-01"}
    assert schedule(api, one_day, "read").status_code == 403
    assert settle_jobs(api) == []


def test_a_plan_of_another_region_than_the_customers_is_refused_naming_both(api: Api) -> None:
    refused = api.client.put(
        "/v1/customers/4300000004",
        json={"plan_id": "sso-sa", "region": "NSW"},
        headers=api.auth("admin"),
    )
    assert refused.status_code == 422
    problem = refused.json()
    assert problem["type"].endswith("/problems/region-mismatch")
    assert problem["detail"] == (
        "region: plan 'sso-sa' is for region SA, the customer's region is NSW"
    )
    with api.services.store.read() as unit:
        assert unit.catalog.get_customer("4300000004") is None
    assert put_customer(api, "sso-sa", "SA").status_code == 200


def test_a_plan_put_with_another_region_than_its_customers_is_refused(api: Api) -> None:
    admin = api.auth("admin")
    assert api.client.put("/v1/plans/test-nsw", json=PLAN, headers=admin).status_code == 200
    assert put_customer(api).status_code == 200
    moved = {**PLAN, "region": "VIC"}
    refused = api.client.put("/v1/plans/test-nsw", json=moved, headers=admin)
    assert refused.status_code == 422
    assert refused.json()["detail"] == (
        "plan 'test-nsw' is for region VIC, but customers on it are in region NSW: move them to"
        " a plan of their region first"
    )
    with api.services.store.read() as unit:
        stored = unit.catalog.get_plan("test-nsw")
    assert stored is not None
    assert stored.document["region"] == "NSW"
    # The built-in plans keep their region: a customer of theirs in another is refused.
    assert builtin_document("sso-sa")["region"] == "SA"
