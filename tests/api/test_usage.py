"""GET /v1/customers/{nmi}/usage: a household's days, as its own page shows them."""

from __future__ import annotations

from datetime import date

from freehours.api.routes.usage import HouseholdDaysOut
from tests.api.conftest import Api
from tests.api.test_settlements import NMI, set_up

URL = f"/v1/customers/{NMI}/usage"


def test_each_day_its_use_free_energy_what_was_left_and_what_it_would_have_saved(
    api: Api,
) -> None:
    set_up(api)  # 1 July: 0.4 kWh every half hour
    read = api.auth("read")
    response = api.client.get(f"{URL}?from=2026-07-01&to=2026-07-02", headers=read)
    assert response.status_code == 200, response.text
    body = response.json()
    assert HouseholdDaysOut.model_validate(body).model_dump(mode="json", by_alias=True) == body
    assert body["free_window"] == {"start": "11:00", "end": "14:00", "cap_kwh": "24"}
    first, second = body["days"]
    # 48 half hours of 0.4 kWh; six of them in the window; 16.8 kWh charged outside it, all of
    # which the 21.6 kWh left of the cap could have taken, at $0.30 and 10% GST: $5.544.
    assert first == {
        "date": "2026-07-01",
        "use_kwh": "19.2",
        "free_kwh": "2.4",
        "unused_free_kwh": "21.6",
        "over_cap_kwh": "0",
        "missing_intervals": 0,
        "could_have_saved": "5.54",
        "settled": None,
    }
    # No data: nothing used, the whole cap left, nothing to move.
    assert second["use_kwh"] == "0"
    assert second["unused_free_kwh"] == "24"
    assert second["missing_intervals"] == 48
    assert second["could_have_saved"] == "0.00"
    assert body["totals"] == {
        "use_kwh": "19.2",
        "free_kwh": "2.4",
        "unused_free_kwh": "45.6",
        "over_cap_kwh": "0",
        "could_have_saved": "5.54",
        "free_share_percent": 13,
    }
    # The same engine as the bill: its days are the bill's.
    bill = api.client.get(f"/v1/customers/{NMI}/bill?from=2026-07-01&to=2026-07-02", headers=read)
    for day, billed in zip(body["days"], bill.json()["days"], strict=True):
        assert day["use_kwh"] == billed["consumption_kwh"]
        assert day["free_kwh"] == billed["free_kwh"]
        assert day["over_cap_kwh"] == billed["over_cap_kwh"]


def test_a_settled_day_says_so(api: Api) -> None:
    set_up(api)
    settled = api.client.post(
        "/v1/free-energy/settlements",
        json={"nmi": NMI, "date": "2026-07-01"},
        headers=api.auth("settle"),
    )
    assert settled.status_code in (200, 201), settled.text
    response = api.client.get(f"{URL}?from=2026-07-01&to=2026-07-01", headers=api.auth("read"))
    (day,) = response.json()["days"]
    assert day["settled"] == settled.json()["status"] == "COMPLETED"


def test_refusals(api: Api) -> None:
    set_up(api, with_data=False)
    read = api.auth("read")
    assert api.client.get(f"{URL}?from=2026-07-01&to=2026-07-01").status_code == 401
    wrong = api.client.get(f"{URL}?from=2026-07-01&to=2026-07-01", headers=api.auth("ingest"))
    assert wrong.status_code == 403
    unknown = api.client.get(
        "/v1/customers/4102999999/usage?from=2026-07-01&to=2026-07-01", headers=read
    )
    assert unknown.status_code == 404
    assert unknown.json()["type"].endswith("/customer-not-found")
    backwards = api.client.get(f"{URL}?from=2026-07-02&to=2026-07-01", headers=read)
    assert backwards.status_code == 422
    assert "from" in backwards.json()["detail"]
    start = date(2025, 7, 1)
    long = api.client.get(f"{URL}?from={start}&to=2026-07-03", headers=read)
    assert long.status_code == 422
    assert "367" in long.json()["detail"]
    assert api.client.get(f"{URL}?from=x&to=2026-07-01", headers=read).status_code == 422
