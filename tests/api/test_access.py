"""Keys and scopes on every /v1 route; the open operational routes."""

from __future__ import annotations

import asyncio
import re

import pytest
from fastapi.testclient import TestClient

from freehours.api import keycache
from freehours.api.keycache import KeyCache
from freehours.api.keys import Scope, create_key, list_keys, revoke_key
from freehours.api.ratelimit import RateLimits
from freehours.settings import Settings
from freehours.store.database import Store
from tests.api.conftest import Api, serving

#: A client address outside loopback: a proxy's, say, that every client's requests come from.
PROXY = ("10.9.8.7", 40000)

V1_ROUTES = [
    ("PUT", "/v1/plans/p1", "admin"),
    ("PUT", "/v1/customers/4102000001", "admin"),
    ("POST", "/v1/meter-readings", "ingest"),
    ("POST", "/v1/meter-readings/nem12", "ingest"),
    ("POST", "/v1/free-energy/settlements", "settle"),
    ("GET", "/v1/free-energy/settlements/4102000001/2026-07-01", "read"),
    ("POST", "/v1/invoice-runs", "admin"),
    ("GET", "/v1/invoice-runs/r1", "read"),
    ("GET", "/v1/invoice-runs/r1/journal.csv", "read"),
    ("GET", "/v1/invoices", "read"),
    ("GET", "/v1/invoices/INV-00000001", "read"),
    ("GET", "/v1/invoices/INV-00000001.pdf", "read"),
    ("GET", "/v1/credit-notes", "read"),
    ("GET", "/v1/credit-notes/CN-00000001.html", "read"),
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
    assert response.status_code == 200  # allowed in: the quota of an NMI without a customer
    assert response.json()["status"] == "ABORTED"


def test_a_revoked_key_is_refused_once_the_key_cache_forgets_it(api: Api) -> None:
    path = "/v1/free-energy/settlements/4102000001/2026-07-01"
    assert api.client.get(path, headers=api.auth("read")).status_code == 200
    with api.services.store.write() as unit:
        key_id = next(k.id for k in list_keys(unit.keys) if k.name == "read")
        assert revoke_key(unit.keys, key_id, api.clock.now())
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


def counted_key_lookups(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The secrets looked up in the database from now on, in order."""
    lookups: list[str] = []
    real_find_key = keycache.find_key

    def counting_find_key(keys, secret):  # type: ignore[no-untyped-def]
        lookups.append(secret)
        return real_find_key(keys, secret)

    monkeypatch.setattr(keycache, "find_key", counting_find_key)
    return lookups


def test_a_client_sending_unknown_keys_is_refused_before_each_costs_a_lookup(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    lookups = counted_key_lookups(monkeypatch)
    path = "/v1/free-energy/settlements/4102000001/2026-07-01"
    assert api.client.get(path, headers=api.auth("read")).status_code == 200  # a working key
    limit = 30  # the fixture's RateLimits: 30 unknown keys a minute per address
    for n in range(limit):
        response = api.client.get(path, headers={"Authorization": f"Bearer fh_guess{n}"})
        assert response.status_code == 401
    refused = api.client.get(path, headers={"Authorization": "Bearer fh_guess-next"})
    assert refused.status_code == 429
    assert int(refused.headers["Retry-After"]) >= 1
    assert len(lookups) == 1 + limit  # the refused guess cost no database lookup
    # The working key, remembered, still works from that address; another address is not
    # held to this one's failures.
    assert api.client.get(path, headers=api.auth("read")).status_code == 200
    with TestClient(api.client.app, client=("10.1.2.3", 50000)) as other:
        assert other.get(path, headers={"Authorization": "Bearer fh_x"}).status_code == 401


def test_unknown_keys_are_throttled_and_the_valid_keys_of_their_address_never_are(
    store: Store, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    lookups = counted_key_lookups(monkeypatch)
    # No key is remembered: each valid request is checked afresh, as one after the cache's
    # time (or from another process) is.
    uncached = settings.model_copy(update={"api_key_cache_seconds": 0.0})
    settlement = "/v1/free-energy/settlements/4102000001/2026-07-01"
    body = {"nmi": "4102000001", "suffix": "E1", "interval_minutes": 30, "reads": []}
    limit = 30
    with serving(store, uncached) as api, TestClient(api.client.app, client=PROXY) as client:
        # 30 a day, not the fixture's 30 a minute: the sliding window would let a guess or two
        # through again if the test's seconds crossed a minute's end.
        api.services.limits = RateLimits.open(
            None, "1000/minute", "20/minute", unknown_keys=f"{limit}/day"
        )
        answers: dict[str, list[int]] = {"unknown": [], "read": [], "ingest": [], "admin": []}
        for n in range(1000):
            guess = client.get(settlement, headers={"Authorization": f"Bearer fh_guess{n}"})
            answers["unknown"].append(guess.status_code)
            if n % 10 == 0:
                for scope in ("read", "admin"):
                    answers[scope].append(
                        client.get(settlement, headers=api.auth(scope)).status_code
                    )
                headers = {**api.auth("ingest"), "Idempotency-Key": f"batch-{n}"}
                ingest = client.post("/v1/meter-readings", json=body, headers=headers)
                answers["ingest"].append(ingest.status_code)
    assert answers["unknown"] == [401] * limit + [429] * (1000 - limit)
    assert answers["read"] == answers["admin"] == answers["ingest"] == [200] * 100
    # Only the guesses before the limit cost a lookup each; the live keys' hashes were read
    # once (the clock stands still), not once a guess.
    assert len([secret for secret in lookups if secret.startswith("fh_guess")]) == limit


def test_the_key_cache_forgets_the_least_recently_used_never_all(api: Api) -> None:
    cache = KeyCache(api.services.store, api.clock, ttl=60, size=3)
    working = asyncio.run(cache.load(api.keys["read"]))
    assert working is not None
    for n in range(2):
        assert asyncio.run(cache.load(f"fh_unknown{n}")) is None
    assert cache.cached(api.keys["read"]) == working  # used: now the most recent
    for n in range(2, 6):  # a flood of unknown secrets
        asyncio.run(cache.load(f"fh_unknown{n}"))
    assert len(cache) == 3
    assert cache.cached("fh_unknown0") is False  # the oldest went first
    assert cache.cached("fh_unknown5") is None  # remembered as unknown
    assert cache.cached(api.keys["read"]) is False  # pushed out only after three newer ones


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_the_documentation_pages_load_nothing_from_another_origin(api: Api, page: str) -> None:
    response = api.client.get(page)
    assert response.status_code == 200
    policy = response.headers["content-security-policy"]
    assert "script-src 'self' 'unsafe-inline'" in policy
    assert "http" not in policy  # no other origin named
    html = response.text
    assets = re.findall(r"""(?:src|href)=["']([^"']+)["']""", html)
    assert assets  # the page does load its viewer
    assert "openapi.json" in html
    for asset in assets:
        assert asset.startswith("/docs/static/"), asset
        assert api.client.get(asset).status_code == 200, asset
    assert "googleapis" not in html
    assert "cdn." not in html


def test_the_live_keys_hashes_are_read_at_most_once_a_second(api: Api) -> None:
    cache = KeyCache(api.services.store, api.clock, ttl=60)
    reads: list[frozenset[str]] = []
    load_live = cache._load_live

    def counted() -> frozenset[str]:
        reads.append(load_live())
        return reads[-1]

    cache._load_live = counted  # type: ignore[method-assign]
    assert asyncio.run(cache.may_be_live(api.keys["read"]))
    for n in range(100):
        assert not asyncio.run(cache.may_be_live(f"fh_guess{n}"))
    assert len(reads) == 1  # the clock stood still: one reading for every guess
    with api.services.store.write() as unit:
        _, made = create_key(unit.keys, frozenset({Scope.READ}), "new", api.clock.now())
    assert not asyncio.run(cache.may_be_live(made))  # made after the reading, within its second
    api.clock.advance(keycache.LIVE_HASHES_SECONDS)
    assert asyncio.run(cache.may_be_live(made))
    assert len(reads) == 2
