"""``PUT /v1/plans/{id}`` with a CDR body and ``GET /v1/plans/{id}``, JSON or CDR by Accept."""

from __future__ import annotations

import json

from freehours.plans import builtin_document
from freehours.plans.cdr import CDR_MEDIA_TYPE
from tests.api.conftest import Api
from tests.cdr.support import CDR, schema_problems

PLANS = CDR / "plans"


def put_cdr(api: Api, plan_id: str, body: bytes, scope: str = "admin", **params: str) -> object:
    headers = {**api.auth(scope), "Content-Type": CDR_MEDIA_TYPE}
    return api.client.put(f"/v1/plans/{plan_id}", content=body, headers=headers, params=params)


def test_a_cdr_plan_put_is_stored_as_the_plan_it_rates_as_and_read_back_both_ways(
    api: Api,
) -> None:
    body = (PLANS / "controlled-load.json").read_bytes()
    response = put_cdr(api, "EXA-VIC-CL", body)
    assert response.status_code == 200, response.text
    stored = response.json()
    assert stored["controlled_load"] == {
        "suffixes": ["E2"],
        "unit_price": "0.1800",
        "daily_supply_charge": "0.1000",
    }
    as_json = api.client.get("/v1/plans/EXA-VIC-CL", headers=api.auth("read"))
    assert as_json.status_code == 200
    assert as_json.json() == stored
    as_cdr = api.client.get(
        "/v1/plans/EXA-VIC-CL", headers={**api.auth("read"), "Accept": CDR_MEDIA_TYPE}
    )
    assert as_cdr.status_code == 200
    assert as_cdr.headers["content-type"].startswith(CDR_MEDIA_TYPE)
    document = as_cdr.json()
    assert schema_problems(document) == []
    assert document["electricityContract"]["pricingModel"] == "TIME_OF_USE_CONT_LOAD"
    assert (
        "incentives[0]: Welcome pack (GIFT)"
        in document["electricityContract"]["additionalFeeInformation"]
    )


def test_a_builtin_plan_is_read_before_it_is_stored(api: Api) -> None:
    response = api.client.get("/v1/plans/sso-nsw", headers=api.auth("read"))
    assert (response.status_code, response.json()) == (200, builtin_document("sso-nsw"))
    missing = api.client.get("/v1/plans/nothing", headers=api.auth("read"))
    assert missing.status_code == 404
    assert missing.headers["content-type"] == "application/problem+json"


def test_what_cannot_be_rated_is_a_422_naming_its_path_and_nothing_is_stored(api: Api) -> None:
    document = json.loads((PLANS / "time-of-use-free-window.json").read_text())
    document["electricityContract"]["tariffPeriod"][0]["timeOfUseRates"][0]["rates"].append(
        {"unitPrice": "0.6"}
    )
    response = put_cdr(api, "EXA-NSW-SSO", json.dumps(document).encode())
    assert response.status_code == 422
    problem = response.json()
    assert problem["type"].endswith("/invalid-plan")
    where = "body: electricityContract.tariffPeriod[0].timeOfUseRates[0].rates[0].volume: "
    assert where + "stepped rates give every rate but the last the volume" in problem["detail"]
    assert api.client.get("/v1/plans/EXA-NSW-SSO", headers=api.auth("read")).status_code == 404


def test_a_region_by_query_and_a_body_that_is_not_json(api: Api) -> None:
    document = json.loads((PLANS / "single-rate.json").read_text())
    del document["geography"]
    response = put_cdr(api, "EXA-SEQ-SR", json.dumps(document).encode())
    assert response.status_code == 422
    assert "give the region" in response.json()["detail"]
    response = put_cdr(api, "EXA-SEQ-SR", json.dumps(document).encode(), region="SA")
    assert (response.status_code, response.json()["region"]) == (200, "SA")
    assert put_cdr(api, "x", b"{nope").status_code == 422
    assert put_cdr(api, "x", b"x" * 10_000_000).status_code == 413


def test_only_an_admin_puts_and_a_read_key_reads(api: Api) -> None:
    body = (PLANS / "seasonal.json").read_bytes()
    assert put_cdr(api, "EXA-SA-SEASONS", body, scope="read").status_code == 403
    assert (
        api.client.put(
            "/v1/plans/x", content=body, headers={"Content-Type": CDR_MEDIA_TYPE}
        ).status_code
        == 401
    )
    assert api.client.get("/v1/plans/sso-sa").status_code == 401
    assert put_cdr(api, "EXA-SA-SEASONS", body).status_code == 200
    assert api.client.get("/v1/plans/EXA-SA-SEASONS", headers=api.auth("read")).status_code == 200


def test_a_plan_the_cdr_cannot_say_is_a_406_for_cdr_and_fine_as_json(api: Api) -> None:
    document = {
        **builtin_document("sso-sa"),
        "id": "gst-15",
        "gst_rate": "0.15",
    }
    assert (
        api.client.put("/v1/plans/gst-15", json=document, headers=api.auth("admin")).status_code
        == 200
    )
    response = api.client.get(
        "/v1/plans/gst-15", headers={**api.auth("read"), "Accept": CDR_MEDIA_TYPE}
    )
    assert response.status_code == 406
    assert "gst_rate" in response.json()["detail"]
    assert api.client.get("/v1/plans/gst-15", headers=api.auth("read")).status_code == 200
