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
from freehours.operations.runtime import Runtime
from freehours.plans import builtin_document
from freehours.settings import Settings
from freehours.store.database import Store
from freehours.store.tables import jobs, ledger_entries, quotas
from tests.api.conftest import PLAN, Api
from tests.support import stored_or_new

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


def post_reads(api: Api, day: date) -> None:
    """A whole NEM day of ``NMI``'s reads (0.4 kWh each half hour) through the API."""
    readings = {
        "nmi": NMI,
        "suffix": "E1",
        "interval_minutes": 30,
        "reads": [
            {"start": f"{day.isoformat()}T{h:02d}:{m:02d}:00+10:00", "kwh": "0.400"}
            for h in range(24)
            for m in (0, 30)
        ],
    }
    headers = {**api.auth("ingest"), "Idempotency-Key": f"reads-{day.isoformat()}"}
    assert api.client.post("/v1/meter-readings", json=readings, headers=headers).status_code == 200


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


def held_for_12_of_30_seconds(api: Api) -> None:
    """The day's quota LOCKED by another holder, 12 s into its 30 s lock."""
    set_up(api)
    with api.services.store.write() as unit:
        pending = stored_or_new(unit, NMI, DAY, at=api.clock.now())
        held = claim(pending, api.clock.now(), timedelta(seconds=30), 5).quota
        unit.quotas.save([held], at=api.clock.now())
    api.clock.advance(12)


def test_a_live_lock_is_409_locked_with_the_seconds_left(api: Api) -> None:
    held_for_12_of_30_seconds(api)
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
    codes = [settle(api).status_code for _ in range(21)]  # the fixture allows 20 a day
    assert codes[:20] == [200] * 20
    assert codes[20] == 429
    response = settle(api)
    assert response.headers["content-type"] == "application/problem+json"
    assert 1 <= int(response.headers["Retry-After"]) <= 24 * 3600


def state(api: Api, nmi: str = NMI, day: str = "2026-07-01"):
    return api.client.get(f"/v1/free-energy/settlements/{nmi}/{day}", headers=api.auth("read"))


def stored_rows(api: Api) -> dict[str, int]:
    """How many rows each table that a settlement could write holds."""
    with api.services.store.read() as unit:
        return {
            table.name: unit.connection.scalar(sa.select(sa.func.count()).select_from(table))
            for table in (quotas, ledger_entries, jobs)
        }


def test_get_of_a_day_nobody_settled_is_200_pending_saying_when_and_writes_nothing(
    api: Api,
) -> None:
    set_up(api)
    before = stored_rows(api)
    # 1 July: its window ended at 14:00 and the 15-minute grace has just passed; its data is in.
    response = state(api)
    assert response.status_code == 200
    assert "Retry-After" not in response.headers  # a settlement request would settle it now
    assert response.json() == {
        "nmi": NMI,
        "date": "2026-07-01",
        "version": 1,
        "status": "PENDING",
        "free_kwh": None,
        "attempts": 0,
        "completed_at": None,
        "reason": "not settled yet: due since 2026-07-01T14:15:00+10:00",
    }
    # 2 July: its window is still ahead; due in a day, as the POST's 409 says.
    tomorrow = state(api, day="2026-07-02")
    assert tomorrow.status_code == 200
    assert tomorrow.headers["Retry-After"] == str(24 * 3600)
    assert tomorrow.json()["reason"] == "not settled yet: due at 2026-07-02T14:15:00+10:00"
    assert stored_rows(api) == before  # a GET stores nothing
    posted = settle(api, day="2026-07-02")
    assert posted.status_code == 409
    assert posted.headers["Retry-After"] == tomorrow.headers["Retry-After"]
    assert posted.json() == tomorrow.json()
    assert state(api, day="2026-07-02").json() == tomorrow.json()  # now stored, the same
    settle(api)
    settled = state(api)
    assert settled.status_code == 200
    assert settled.json()["status"] == "COMPLETED"
    assert "Retry-After" not in settled.headers


def test_get_of_a_due_day_whose_data_is_incomplete_waits_for_the_next_data_poll(
    api: Api,
) -> None:
    set_up(api, with_data=False)
    response = state(api)
    assert response.status_code == 200
    assert response.headers["Retry-After"] == "600"  # the data poll, as a POST would postpone
    assert response.json()["status"] == "PENDING"
    reason = response.json()["reason"]
    assert reason == (
        "waiting for the window's meter data; settles with what there is at"
        " 2026-07-04T14:00:00+10:00"
    )
    posted = settle(api)
    assert (posted.status_code, posted.headers["Retry-After"]) == (409, "600")
    assert posted.json()["reason"] == reason
    assert state(api).json() == posted.json()


def test_get_of_a_day_being_settled_is_locked_with_the_seconds_left(api: Api) -> None:
    held_for_12_of_30_seconds(api)
    response = state(api)
    assert (response.status_code, response.headers["Retry-After"]) == (200, "18")
    assert response.json()["status"] == "LOCKED"


def test_an_nmi_without_a_customer_is_aborted_while_so_the_same_answer_every_time(
    api: Api,
) -> None:
    """Not stored, so the same to every request while the NMI has no customer (no completion
    time that moves), and GET tells what POST does; once the customer exists, it settles."""
    admin = api.auth("admin")
    assert api.client.put("/v1/plans/test-nsw", json=PLAN, headers=admin).status_code == 200
    first = settle(api, nmi="NOBODY0001")
    api.clock.advance(60)
    again = settle(api, nmi="NOBODY0001")
    assert (first.status_code, again.status_code) == (422, 422)
    assert (
        first.json()
        == again.json()
        == {
            "nmi": "NOBODY0001",
            "date": "2026-07-01",
            "version": 1,
            "status": "ABORTED",
            "free_kwh": None,
            "attempts": 0,
            "completed_at": None,
            "reason": "unknown NMI NOBODY0001: no customer",
        }
    )
    looked = state(api, nmi="NOBODY0001")
    assert (looked.status_code, looked.json()) == (200, first.json())
    assert "Retry-After" not in looked.headers
    assert stored_rows(api)["quotas"] == 0
    customer = {"plan_id": "test-nsw", "region": "NSW"}
    assert (
        api.client.put("/v1/customers/NOBODY0001", json=customer, headers=admin).status_code == 200
    )
    assert state(api, nmi="NOBODY0001").json()["status"] == "PENDING"


def test_a_plan_without_a_free_window_is_aborted_by_get_and_post_alike(api: Api) -> None:
    admin = api.auth("admin")
    windowless = {**PLAN, "id": "no-window", "free_window": {"enabled": False}}
    assert api.client.put("/v1/plans/no-window", json=windowless, headers=admin).status_code == 200
    customer = {"plan_id": "no-window", "region": "NSW"}
    assert api.client.put(f"/v1/customers/{NMI}", json=customer, headers=admin).status_code == 200
    posted, looked = settle(api), state(api)
    assert (posted.status_code, looked.status_code) == (422, 200)
    assert posted.json() == looked.json()
    assert looked.json()["reason"] == "plan 'no-window' has no free window"
    # No quotas, but a bill all the same: every kWh charged at its band.
    bill = api.client.get(
        f"/v1/customers/{NMI}/bill",
        params={"from": "2026-07-01", "to": "2026-07-01"},
        headers=api.auth("read"),
    )
    assert bill.status_code == 200, bill.text
    assert (bill.json()["plan"], bill.json()["totals"]["free_kwh"]) == ("no-window", "0")


def test_a_settled_quota_is_replayed_after_its_plan_loses_its_window(api: Api) -> None:
    """A settled version stays what it was: COMPLETED, by POST and GET, not the ABORTED of a
    quota that never was."""
    set_up(api)
    settled = settle(api)
    assert settled.status_code == 200
    api.clock.advance(600)  # past the cache's time to live: the database must say it
    windowless = {**PLAN, "free_window": {"enabled": False}}
    admin = api.auth("admin")
    assert api.client.put("/v1/plans/test-nsw", json=windowless, headers=admin).status_code == 200
    assert settle(api, day="2026-06-30").json()["status"] == "ABORTED"  # the plan has changed
    again = settle(api)
    assert (again.status_code, again.json()) == (200, settled.json())
    assert state(api).json() == settled.json()


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


def test_a_bill_day_in_daylight_saving_takes_both_nem_days_that_cover_it(api: Api) -> None:
    """Local 16 Jan 2026 (AEDT) is NEM 15 Jan 23:00 to NEM 16 Jan 23:00: the bill reads both NEM
    days, so none of its 48 intervals is left out or missing."""
    set_up(api, with_data=False)
    rows = [
        IntervalDay(NMI, "E1", date(2026, 1, d), 30, (Decimal("1.000"),) * 48, "A" * 48, None)
        for d in (15, 16)
    ]
    with api.services.store.write() as unit:
        unit.meter.ingest_days(rows, received_at=api.clock.now())
    response = api.client.get(
        f"/v1/customers/{NMI}/bill",
        params={"from": "2026-01-16", "to": "2026-01-16"},
        headers=api.auth("read"),
    )
    (day,) = response.json()["days"]
    assert (day["consumption_kwh"], day["missing_intervals"]) == ("48", 0)


def test_a_bill_for_an_nmi_without_a_customer_is_404(api: Api) -> None:
    response = api.client.get(
        "/v1/customers/NOBODY0001/bill",
        params={"from": "2026-07-01", "to": "2026-07-01"},
        headers=api.auth("read"),
    )
    assert response.status_code == 404


def test_reads_that_came_before_their_customer_settle_once_the_customer_exists(api: Api) -> None:
    post_reads(api, DAY)
    worker = api.services.runtime.worker()
    assert worker.run_due() == 0  # no customer: no quota, no job
    refused = settle(api)  # ABORTED while the NMI has no customer: the client stops asking
    assert (refused.status_code, refused.json()["status"]) == (422, "ABORTED")
    set_up(api, with_data=False)
    assert worker.run_due() == 1  # the customer's arrival scheduled the day's settlement
    stored = api.services.settlements.state(NMI, DAY)
    assert stored is not None
    assert (stored.status.value, stored.free_kwh) == ("COMPLETED", Decimal("2.400"))
    # Nobody asked again: the client that was told ABORTED finds the settlement by reading it.
    assert state(api).json()["status"] == "COMPLETED"


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
    assert api.services.settle_threads == (1 if store.dialect == "sqlite" else 4)
    assert api.services.settle_queue.runners == api.services.settle_threads
    configured = Services(
        Runtime.on(store, Settings(database_url="sqlite://", settle_threads=3), api.clock),
        api.services.limits,
    )
    assert (configured.settle_threads, configured.settle_queue.runners) == (3, 3)
