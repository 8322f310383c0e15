"""Routes that read their body themselves, after the key: the answers of a declared body kept
(422 naming ``body.FIELD``, a missing body as ``body``), byte limits (413), the OpenAPI
description; NEM12 upload slots (503) and X-Filename."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.api.conftest import PLAN, Api

JSON_ROUTES = [
    ("PUT", "/v1/plans/test-nsw", "admin"),
    ("PUT", "/v1/customers/4102000001", "admin"),
    ("POST", "/v1/meter-readings", "ingest"),
    ("POST", "/v1/free-energy/settlements", "settle"),
]
#: The routes whose body is bounded by FREEHOURS_MAX_JSON_BODY_BYTES.
SMALL_BODY_ROUTES = [route for route in JSON_ROUTES if route[1] != "/v1/meter-readings"]


def send(api: Api, method: str, path: str, scope: str, content: bytes) -> dict[str, object]:
    headers = {**api.auth(scope), "Idempotency-Key": "b1", "Content-Type": "application/json"}
    response = api.client.request(method, path, content=content, headers=headers)
    return {"status": response.status_code, **response.json()}


@pytest.mark.parametrize(("method", "path", "scope"), JSON_ROUTES)
def test_a_missing_body_is_422_naming_the_body(
    api: Api, method: str, path: str, scope: str
) -> None:
    answer = send(api, method, path, scope, b"")
    assert answer["status"] == 422
    assert answer["errors"] == [{"field": "body", "message": "Field required"}]


@pytest.mark.parametrize(("method", "path", "scope"), JSON_ROUTES)
def test_a_body_that_is_not_json_is_422(api: Api, method: str, path: str, scope: str) -> None:
    answer = send(api, method, path, scope, b"{not json")
    assert answer["status"] == 422
    assert answer["type"] == "/problems/validation-error"


@pytest.mark.parametrize(("method", "path", "scope"), SMALL_BODY_ROUTES)
def test_a_small_body_over_its_limit_is_413(api: Api, method: str, path: str, scope: str) -> None:
    # The fixture's default FREEHOURS_MAX_JSON_BODY_BYTES: 1 MiB.
    answer = send(api, method, path, scope, b" " * (1024 * 1024 + 1))
    assert answer["status"] == 413
    assert answer["detail"] == "body: over 1048576 bytes"


@pytest.mark.parametrize(("method", "path", "scope"), SMALL_BODY_ROUTES)
def test_a_small_body_of_no_declared_length_is_refused_once_past_its_limit(
    api: Api, method: str, path: str, scope: str
) -> None:
    # Sent chunked, with no Content-Length to refuse it by: 4 MiB of JSON whitespace, which a
    # body read whole would take in (and then answer 422).
    def chunks() -> Iterator[bytes]:
        for _ in range(64):
            yield b" " * 65536

    headers = {**api.auth(scope), "Idempotency-Key": "b1", "Content-Type": "application/json"}
    response = api.client.request(method, path, content=chunks(), headers=headers)
    assert response.status_code == 413
    assert response.json()["detail"] == "body: over 1048576 bytes"


def test_a_batch_over_its_byte_limit_is_413_before_it_is_parsed(api: Api) -> None:
    limit = 512 * 100 + 64 * 1024  # the fixture's max_batch_reads is 100
    answer = send(api, "POST", "/v1/meter-readings", "ingest", b"x" * (limit + 1))
    assert answer["status"] == 413
    assert answer["detail"] == f"body: over {limit} bytes (at most 100 reads a batch)"


def test_a_customer_body_is_checked_as_declared(api: Api) -> None:
    assert api.client.put("/v1/plans/test-nsw", json=PLAN, headers=api.auth("admin")).is_success
    body = b'{"plan_id": "test-nsw", "region": "MARS"}'
    answer = send(api, "PUT", "/v1/customers/4102000001", "admin", body)
    assert answer["status"] == 422
    assert [error["field"] for error in answer["errors"]] == ["body.region"]  # type: ignore[attr-defined]
    answer = send(api, "PUT", "/v1/customers/4102000001", "admin", body.replace(b"MARS", b"NSW"))
    assert answer == {
        "status": 200,
        "nmi": "4102000001",
        "plan_id": "test-nsw",
        "region": "NSW",
        "billing_cycle": "monthly",
        "anchor_day": 1,
        "payment_term_days": 21,
        **dict.fromkeys(("name", "supply_address", "billing_address", "email", "delivery")),
    }


def test_a_plan_body_must_be_an_object(api: Api) -> None:
    answer = send(api, "PUT", "/v1/plans/test-nsw", "admin", b"[1, 2]")
    assert answer["status"] == 422
    assert [error["field"] for error in answer["errors"]] == ["body"]  # type: ignore[attr-defined]


def test_the_openapi_description_keeps_the_bodies(api: Api) -> None:
    paths = api.client.get("/openapi.json").json()["paths"]
    customer = paths["/v1/customers/{nmi}"]["put"]["requestBody"]["content"]["application/json"]
    assert customer["schema"]["required"] == ["plan_id", "region"]
    readings = paths["/v1/meter-readings"]["post"]["requestBody"]["content"]["application/json"]
    read = readings["schema"]["properties"]["reads"]["items"]
    assert read["required"] == ["start", "kwh"]  # written in: no "$defs" reference left
    plan = paths["/v1/plans/{plan_id}"]["put"]["requestBody"]["content"]
    # The plan file's fields, its id the path's when left out; TOML the same document.
    assert plan["application/json"]["schema"]["required"] == [
        "region",
        "daily_supply_charge",
        "time_of_use",
    ]
    assert plan["application/toml"] == plan["application/json"]
    (parameter,) = paths["/v1/meter-readings"]["post"]["parameters"]
    assert (parameter["name"], parameter["in"], parameter["required"]) == (
        "Idempotency-Key",
        "header",
        True,
    )


@pytest.mark.parametrize(
    ("name", "detail"),
    [
        ("x" * 256, "X-Filename: 256 characters, at most 255"),
        ("a\tb.csv", "X-Filename: empty, or holds control characters"),
        (" ", "X-Filename: empty, or holds control characters"),
    ],
)
def test_an_odd_x_filename_is_400(api: Api, name: str, detail: str) -> None:
    headers = {**api.auth("ingest"), "Idempotency-Key": "f1", "X-Filename": name}
    response = api.client.post("/v1/meter-readings/nem12", content=b"100,NEM12", headers=headers)
    assert response.status_code == 400
    assert response.json()["detail"] == detail


def test_uploads_past_the_slots_are_503_with_retry_after(api: Api) -> None:
    """Every upload slot taken (as by uploads being checked): the next is refused before its
    body is read."""
    limiter = api.services.uploads
    portal = api.client.portal
    assert portal is not None
    borrowers = [object() for _ in range(int(limiter.total_tokens))]
    for borrower in borrowers:
        portal.call(limiter.acquire_on_behalf_of_nowait, borrower)
    headers = {**api.auth("ingest"), "Idempotency-Key": "f1"}
    try:
        response = api.client.post(
            "/v1/meter-readings/nem12", content=b"100,NEM12", headers=headers
        )
    finally:
        for borrower in borrowers:
            portal.call(limiter.release_on_behalf_of, borrower)
    assert response.status_code == 503
    assert response.headers["retry-after"] == "5"
    assert response.json()["type"] == "/problems/busy"
    # The slots free again, the same request goes through to its (bad) file.
    again = api.client.post("/v1/meter-readings/nem12", content=b"100,NEM12", headers=headers)
    assert again.status_code == 422
