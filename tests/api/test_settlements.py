"""POST /v1/free-energy/settlements and GET its state: every row of the contract's table."""

from __future__ import annotations

import asyncio
import json
from datetime import date, datetime, timedelta
from decimal import Decimal
from importlib import resources
from typing import Any

import hypothesis
import sqlalchemy as sa
from hypothesis import HealthCheck, given
from hypothesis import strategies as st
from starlette.requests import Request

from freehours.api.problems import data_error_handler
from freehours.api.services import Services
from freehours.domain.reads import IntervalDay
from freehours.domain.settlement import claim
from freehours.domain.time import NEM_TIME
from freehours.plans import builtin_document
from freehours.runtime import Runtime
from freehours.settings import Settings
from freehours.store.database import Store
from tests.api.conftest import PLAN, Api

NMI = "4102000001"
DAY = date(2026, 7, 1)


def set_up(api: Api, *, with_data: bool = True) -> None:
    admin = api.auth("admin")
    assert api.client.put("/v1/plans/test-nsw", json=PLAN, headers=admin).status_code == 200
    response = api.client.put(
        f"/v1/customers/{NMI}", json={"plan_id": "test-nsw", "region": "NSW"}, headers=admin
    )
    assert response.status_code == 200
    if with_data:
        day = IntervalDay(
            NMI,
            "E1",
            DAY,
            30,
            tuple(Decimal("0.400") for _ in range(48)),
            "A" * 48,
            datetime(2026, 7, 1, 14, 30, tzinfo=NEM_TIME),
        )
        with api.services.store.write() as unit:
            unit.meter.ingest_days([day], received_at=api.clock.now())


def settle(api: Api, nmi: str = NMI, day: str = "2026-07-01"):
    return api.client.post(
        "/v1/free-energy/settlements", json={"nmi": nmi, "date": day}, headers=api.auth("settle")
    )


def test_settled_now_is_200_completed_with_the_quota(api: Api) -> None:
    set_up(api)
    response = settle(api)
    assert response.status_code == 200
    assert "Idempotent-Replayed" not in response.headers
    body = response.json()
    assert body == {
        "nmi": NMI,
        "date": "2026-07-01",
        "version": 1,
        "status": "COMPLETED",
        "free_kwh": "2.400",
        "attempts": 0,
        "completed_at": api.clock.now().isoformat(),
        "reason": None,
    }


def test_a_replay_is_200_with_the_same_body_and_idempotent_replayed(api: Api) -> None:
    set_up(api)
    first = settle(api)
    api.clock.advance(120)
    again = settle(api)
    assert again.status_code == 200
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()


def test_while_the_window_is_open_it_is_409_pending_with_retry_after(api: Api) -> None:
    set_up(api)
    response = settle(api, day="2026-07-02")
    assert response.status_code == 409
    assert response.json()["status"] == "PENDING"
    # 2 July's window ends 14:00 AEST = 04:00 UTC; due 15 minutes later; now is 1 July 04:15 UTC.
    assert int(response.headers["Retry-After"]) == 24 * 3600


def test_a_live_lock_is_409_locked_with_the_seconds_left(api: Api) -> None:
    set_up(api)
    with api.services.store.write() as unit:
        pending = unit.quotas.latest_or_new(NMI, DAY)
        unit.quotas.save(claim(pending, api.clock.now(), timedelta(seconds=30), 5).quota)
    api.clock.advance(12)
    response = settle(api)
    assert response.status_code == 409
    assert response.json()["status"] == "LOCKED"
    assert response.headers["Retry-After"] == "18"


def test_unknown_nmi_is_422_aborted_without_retry_after(api: Api) -> None:
    set_up(api)
    response = settle(api, nmi="NOBODY0001")
    assert response.status_code == 422
    assert response.json()["status"] == "ABORTED"
    assert "Retry-After" not in response.headers


def test_too_many_requests_for_one_nmi_is_429_with_retry_after(api: Api) -> None:
    set_up(api)
    codes = [settle(api).status_code for _ in range(21)]  # the fixture allows 20 a minute
    assert codes[:20] == [200] * 20
    assert codes[20] == 429
    response = settle(api)
    assert response.headers["content-type"] == "application/problem+json"
    assert 1 <= int(response.headers["Retry-After"]) <= 60


def test_get_state_answers_the_newest_version_or_404(api: Api) -> None:
    set_up(api)
    path = f"/v1/free-energy/settlements/{NMI}/2026-07-01"
    assert api.client.get(path, headers=api.auth("read")).status_code == 404
    settle(api)
    response = api.client.get(path, headers=api.auth("read"))
    assert response.status_code == 200
    assert response.json()["status"] == "COMPLETED"


def test_a_malformed_settlement_body_is_422_naming_the_field(api: Api) -> None:
    response = api.client.post(
        "/v1/free-energy/settlements",
        json={"nmi": NMI, "date": "2026-13-01"},
        headers=api.auth("settle"),
    )
    assert response.status_code == 422
    assert [e["field"] for e in response.json()["errors"]] == ["body.date"]


def test_an_invalid_plan_is_422_naming_the_key(api: Api) -> None:
    bad = {**PLAN, "daily_supply_charge": "-1"}
    response = api.client.put("/v1/plans/test-nsw", json=bad, headers=api.auth("admin"))
    assert response.status_code == 422
    assert "daily_supply_charge" in response.json()["detail"]


def test_a_plan_file_is_taken_as_toml(api: Api) -> None:
    text = (resources.files("freehours.plans") / "builtin" / "sso-sa.toml").read_text("utf-8")
    text = text.replace('id = "sso-sa"', 'id = "own-sa"')
    response = api.client.put(
        "/v1/plans/own-sa",
        content=text.encode(),
        headers={**api.auth("admin"), "Content-Type": "application/toml; charset=utf-8"},
    )
    assert response.status_code == 200, response.text
    stored = response.json()
    builtin = builtin_document("sso-sa")
    assert (stored["id"], stored["region"]) == ("own-sa", "SA")
    assert stored["daily_supply_charge"] == str(builtin["daily_supply_charge"])
    assert stored.keys() == builtin.keys()


def test_a_toml_body_that_is_not_toml_is_422_naming_the_body(api: Api) -> None:
    response = api.client.put(
        "/v1/plans/x",
        content=b'id = "x"\nregion = \n',
        headers={**api.auth("admin"), "Content-Type": "application/toml"},
    )
    assert response.status_code == 422
    assert response.json()["detail"].startswith("body: not valid TOML:")


def test_a_toml_plan_with_problems_is_422_naming_its_keys(api: Api) -> None:
    response = api.client.put(
        "/v1/plans/x",
        content=b'id = "x"\nregion = "NSW"\ndialy_supply_charge = "1"\n',
        headers={**api.auth("admin"), "Content-Type": "application/toml"},
    )
    assert response.status_code == 422
    assert "dialy_supply_charge: is not a plan key" in response.json()["detail"]


@hypothesis.settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    text=st.text(alphabet=st.sampled_from('id=regon"NSW[]{}.,\n 0123456789-_:tfalse'), max_size=200)
)
def test_any_toml_body_is_a_plan_or_a_422_naming_the_body(api: Api, text: str) -> None:
    """TOML's parser and the plan's checker, fed bodies near the shape of a plan: never a 5xx,
    and a refusal always says what in the body is wrong."""
    response = api.client.put(
        "/v1/plans/x",
        content=text.encode(),
        headers={**api.auth("admin"), "Content-Type": "application/toml"},
    )
    assert response.status_code in (200, 422), response.text
    if response.status_code == 422:
        detail = response.json()["detail"]
        assert detail.startswith(("body: not valid TOML:", "plan x", "body id")), detail


def test_a_customer_on_an_unknown_plan_is_422(api: Api) -> None:
    response = api.client.put(
        f"/v1/customers/{NMI}", json={"plan_id": "nope", "region": "NSW"}, headers=api.auth("admin")
    )
    assert response.status_code == 422
    assert "plan_id" in response.json()["detail"]


def _customer_on(api: Api, plan_id: str, region: str) -> dict[str, Any]:
    """Put the customer on ``plan_id``; the plan document stored under that id afterwards."""
    response = api.client.put(
        f"/v1/customers/{NMI}",
        json={"plan_id": plan_id, "region": region},
        headers=api.auth("admin"),
    )
    assert response.status_code == 200, response.text
    with api.services.store.read() as unit:
        stored = unit.catalog.get_plan(plan_id)
    assert stored is not None
    return stored.document


def test_a_customer_on_a_built_in_plan_needs_no_plan_put_first(api: Api) -> None:
    assert _customer_on(api, "sso-sa", "SA")["id"] == "sso-sa"


def test_a_stored_plan_keeps_a_built_in_id(api: Api) -> None:
    """A retailer's own plan stored under a built-in id is the one its customers are on."""
    own = {**PLAN, "id": "sso-nsw", "daily_supply_charge": "1.23"}
    put = api.client.put("/v1/plans/sso-nsw", json=own, headers=api.auth("admin"))
    assert put.status_code == 200
    assert _customer_on(api, "sso-nsw", "NSW")["daily_supply_charge"] == "1.23"


def test_the_bill_is_the_same_json_as_the_command_line(api: Api) -> None:
    set_up(api)
    response = api.client.get(
        f"/v1/customers/{NMI}/bill",
        params={"from": "2026-07-01", "to": "2026-07-01"},
        headers=api.auth("read"),
    )
    assert response.status_code == 200
    bill = response.json()
    assert (bill["nmi"], bill["plan"], bill["from"], bill["to"]) == (
        NMI,
        "test-nsw",
        "2026-07-01",
        "2026-07-01",
    )
    # 48 x 0.4 kWh: 2.4 free in 11:00-14:00, 16.8 at 0.30 = 5.04, supply 1.00, GST 10%.
    assert bill["totals"]["consumption_kwh"] == "19.2"
    assert bill["totals"]["free_kwh"] == "2.4"
    assert (bill["subtotal"], bill["gst"], bill["total"]) == ("6.04", "0.60", "6.64")
    assert bill["free_energy_value"] == "0.72"


def test_a_bill_for_an_nmi_without_a_customer_is_404(api: Api) -> None:
    response = api.client.get(
        "/v1/customers/NOBODY0001/bill",
        params={"from": "2026-07-01", "to": "2026-07-01"},
        headers=api.auth("read"),
    )
    assert response.status_code == 404


def test_reads_that_came_before_their_customer_settle_once_the_customer_exists(api: Api) -> None:
    readings = {
        "nmi": NMI,
        "suffix": "E1",
        "interval_minutes": 30,
        "reads": [
            {"start": f"2026-07-01T{h:02d}:{m:02d}:00+10:00", "kwh": "0.400"}
            for h in range(24)
            for m in (0, 30)
        ],
    }
    posted = api.client.post(
        "/v1/meter-readings",
        json=readings,
        headers={**api.auth("ingest"), "Idempotency-Key": "early"},
    )
    assert posted.status_code == 200
    worker = api.services.runtime.worker()
    assert worker.run_due() == 0  # no customer: no quota, no job
    set_up(api, with_data=False)
    assert worker.run_due() == 1  # the customer's arrival scheduled the day's settlement
    state = api.services.settlements.state(NMI, DAY)
    assert state is not None
    assert (state.status.value, state.free_kwh) == ("COMPLETED", Decimal("2.400"))


def test_a_plan_id_that_is_not_an_identifier_is_422(api: Api) -> None:
    response = api.client.put(
        f"/v1/customers/{NMI}", json={"plan_id": "\x00", "region": "NSW"}, headers=api.auth("admin")
    )
    assert response.status_code == 422
    assert [e["field"] for e in response.json()["errors"]] == ["body.plan_id"]


def test_a_value_the_database_cannot_store_is_422_not_500() -> None:
    error = sa.exc.DataError("INSERT ...", {}, ValueError("text fields cannot contain NUL"))
    request = Request({"type": "http", "method": "PUT", "path": "/v1/plans/x", "headers": []})
    response = asyncio.run(data_error_handler(request, error))
    assert response.status_code == 422
    assert json.loads(bytes(response.body))["title"] == "A value in the request cannot be stored"


def test_settlements_run_on_the_threads_configured_or_those_measured_best(
    api: Api, store: Store
) -> None:
    assert api.services.settle_threads == (2 if store.dialect == "sqlite" else 4)
    configured = Services(
        Runtime.on(store, Settings(database_url="sqlite://", settle_threads=3), api.clock),
        api.services.limits,
    )
    assert configured.settle_threads == 3
