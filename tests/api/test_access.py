"""Keys and scopes on every /v1 route; the open operational routes."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from freehours.api.keys import list_keys, revoke_key
from tests.api.conftest import Api

V1_ROUTES = [
    ("PUT", "/v1/plans/p1", "admin"),
    ("PUT", "/v1/customers/4102000001", "admin"),
    ("POST", "/v1/meter-readings", "ingest"),
    ("POST", "/v1/meter-readings/nem12", "ingest"),
    ("POST", "/v1/free-energy/settlements", "settle"),
    ("GET", "/v1/free-energy/settlements/4102000001/2026-07-01", "read"),
]


@pytest.mark.parametrize(("method", "path", "scope"), V1_ROUTES)
def test_v1_route_without_a_key_is_401_problem(
    api: Api, method: str, path: str, scope: str
) -> None:
    response = api.client.request(method, path)
    assert response.status_code == 401
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["type"] == "/problems/unauthorized"


@pytest.mark.parametrize(("method", "path", "scope"), V1_ROUTES)
def test_v1_route_with_an_unknown_key_is_401(api: Api, method: str, path: str, scope: str) -> None:
    response = api.client.request(method, path, headers={"Authorization": "Bearer fh_nope"})
    assert response.status_code == 401


@pytest.mark.parametrize(("method", "path", "scope"), V1_ROUTES)
def test_v1_route_with_the_wrong_scope_is_403(api: Api, method: str, path: str, scope: str) -> None:
    wrong = "read" if scope != "read" else "ingest"
    response = api.client.request(method, path, headers=api.auth(wrong))
    assert response.status_code == 403
    assert response.json()["type"] == "/problems/forbidden"


def test_admin_key_may_use_every_scope(api: Api) -> None:
    response = api.client.get(
        "/v1/free-energy/settlements/4102000001/2026-07-01", headers=api.auth("admin")
    )
    assert response.status_code == 404  # allowed in; there is no such quota


def test_a_revoked_key_is_refused_once_the_key_cache_forgets_it(api: Api) -> None:
    path = "/v1/free-energy/settlements/4102000001/2026-07-01"
    assert api.client.get(path, headers=api.auth("read")).status_code == 404
    with api.services.store.write() as conn:
        key_id = next(k.id for k in list_keys(conn) if k.name == "read")
        assert revoke_key(conn, key_id, api.clock.now())
    api.clock.advance(api.services.settings.api_key_cache_seconds)
    assert api.client.get(path, headers=api.auth("read")).status_code == 401


def test_health_and_readiness_are_open(api: Api) -> None:
    assert api.client.get("/healthz").json() == {"status": "ok"}
    assert api.client.get("/readyz").json() == {"status": "ok", "database": "ok"}


def test_metrics_are_open_on_loopback(api: Api) -> None:
    response = api.client.get("/metrics")
    assert response.status_code == 200
    assert "freehours_quota_cache_requests_total" in response.text


def test_metrics_from_elsewhere_need_a_read_key(api: Api) -> None:
    with TestClient(api.client.app, client=("10.1.2.3", 50000)) as remote:
        assert remote.get("/metrics").status_code == 401
        assert remote.get("/metrics", headers=api.auth("settle")).status_code == 403
        response = remote.get("/metrics", headers=api.auth("read"))
    assert response.status_code == 200
    assert "freehours_quota_cache_requests_total" in response.text


def test_openapi_is_served(api: Api) -> None:
    paths = api.client.get("/openapi.json").json()["paths"]
    assert {"/v1/meter-readings", "/v1/free-energy/settlements"} <= set(paths)
