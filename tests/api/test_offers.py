"""``PUT /v1/offers/{offer_id}`` stores a CDR plan as an offer (a new version only when it
changed), ``GET /v1/offers`` lists them and ``GET /v1/offers/{offer_id}`` shows one with its
plan; what cannot be an offer is refused naming where, and nothing is stored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from freehours.plans.cdr import CDR_MEDIA_TYPE
from tests.api.conftest import Api

PLANS = Path(__file__).resolve().parent.parent / "data" / "cdr" / "plans"
CDR = {"Content-Type": CDR_MEDIA_TYPE}


def cdr(name: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((PLANS / name).read_text(encoding="utf-8"))
    return document


def put(api: Api, offer_id: str, document: dict[str, Any], **params: str) -> Any:
    return api.client.put(
        f"/v1/offers/{offer_id}",
        content=json.dumps(document),
        params=params,
        headers={**api.auth("admin"), **CDR},
    )


def test_an_offer_is_versioned_when_it_changes_and_read_back_with_its_plan(api: Api) -> None:
    document = cdr("controlled-load.json")
    answer = put(api, "EXA-VIC-CL", document)
    assert answer.status_code == 200, answer.text
    assert answer.json() == {
        "offer_id": "EXA-VIC-CL",
        "version": 1,
        "name": document.get("displayName", "EXA-VIC-CL"),
        "source": "cdr",
        "region": "VIC",
        "distributors": ["CitiPower"],
        "controlled_load": True,
        "effective_from": None,
        "effective_to": None,
    }
    assert put(api, "EXA-VIC-CL", document).json()["version"] == 1  # the same: no new version
    dated = {
        **document,
        "effectiveFrom": "2026-06-30T14:00:00Z",
        "effectiveTo": "2027-06-30T13:59:59Z",
    }
    changed = put(api, "EXA-VIC-CL", dated).json()
    assert (changed["version"], changed["effective_from"], changed["effective_to"]) == (
        2,
        "2026-07-01",  # NEM dates: 14:00 UTC is midnight in NEM time
        "2027-06-30",
    )
    assert put(api, "EXA-SA-SEASONS", cdr("seasonal.json")).status_code == 200
    read = api.auth("read")
    listed = api.client.get("/v1/offers", headers=read).json()["items"]
    assert [(o["offer_id"], o["version"]) for o in listed] == [
        ("EXA-SA-SEASONS", 1),
        ("EXA-VIC-CL", 2),
    ]
    only_sa = api.client.get("/v1/offers", params={"region": "SA"}, headers=read).json()
    assert [o["offer_id"] for o in only_sa["items"]] == ["EXA-SA-SEASONS"]
    first = api.client.get("/v1/offers/EXA-VIC-CL", params={"version": 1}, headers=read).json()
    assert (first["version"], first["effective_from"], first["plan"]["id"]) == (
        1,
        None,
        "EXA-VIC-CL",
    )
    assert first["plan"]["region"] == "VIC"
    missing = api.client.get("/v1/offers/EXA-VIC-CL", params={"version": 3}, headers=read)
    assert missing.status_code == 404
    assert api.client.put("/v1/offers/EXA-SA-SEASONS", headers=read).status_code == 403


def test_what_cannot_be_an_offer_is_refused_naming_where_and_nothing_is_stored(api: Api) -> None:
    document = cdr("single-rate.json")
    business = {**document, "customerType": "BUSINESS"}
    answer = put(api, "EXA-SEQ-SR", business)
    assert answer.status_code == 422
    assert answer.json()["type"].endswith("/problems/invalid-offer")
    assert "customerType" in answer.json()["detail"]
    other_id = put(api, "SOMETHING-ELSE", document)
    assert other_id.status_code == 422
    assert "is not the path's offer id" in other_id.json()["detail"]
    backwards = {
        **document,
        "effectiveFrom": "2027-01-01T00:00:00Z",
        "effectiveTo": "2026-01-01T00:00:00Z",
    }
    assert put(api, "EXA-SEQ-SR", backwards).status_code == 422
    bad_date = put(api, "EXA-SEQ-SR", {**document, "effectiveFrom": "soon"})
    assert "effectiveFrom" in bad_date.json()["detail"]
    # A name no invoice could print whole: refused here, not found when an invoice names it.
    long_name = put(api, "EXA-SEQ-SR", {**document, "displayName": "Saver " * 30})
    assert long_name.status_code == 422
    assert "displayName" in long_name.json()["detail"]
    assert "at most 120" in long_name.json()["detail"]
    as_json = api.client.put("/v1/offers/EXA-SEQ-SR", json=document, headers=api.auth("admin"))
    assert as_json.status_code == 415
    assert api.client.get("/v1/offers", headers=api.auth("read")).json() == {"items": []}


def test_a_version_past_any_the_store_holds_is_refused_not_a_server_error(api: Api) -> None:
    answer = api.client.get(
        "/v1/offers/EXA-SEQ-SR", params={"version": 9720449419812978688}, headers=api.auth("read")
    )
    assert answer.status_code == 422
    assert "version" in answer.text
