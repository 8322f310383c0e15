"""``/v1/webhook-endpoints``: admin only, checked before the body; bounded bodies; 4xx problem
details naming the field; an endpoint registered, listed, changed, rotated, disabled and enabled,
deleted; its deliveries listed with their attempts and replayed with the same webhook-id."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from random import Random
from typing import Any

import pytest
from standardwebhooks.webhooks import Webhook

from freehours.settings import Settings
from freehours.store.errors import connection_lost
from freehours.store.webhooks import NewEvent
from freehours.webhooks.sender import HttpSender
from freehours.webhooks.service import Webhooks
from freehours.workers.webhook import webhook_tasks
from freehours.workers.worker import Worker
from tests.api.conftest import Api
from tests.webhooks.receiver import LOOPBACK, Receiver, Reply, receiving

ROUTE = "/v1/webhook-endpoints"


@pytest.fixture
def settings() -> Settings:
    """The API's settings, its receivers on loopback allowed (docs/security.md)."""
    return Settings(database_url="sqlite://", webhook_allowed_networks="127.0.0.1/32")


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with receiving() as running:
        yield running


def register(api: Api, url: str, events: list[str] | None = None) -> dict[str, Any]:
    response = api.client.post(
        ROUTE, json={"url": url, "events": events or ["quota.completed"]}, headers=api.auth("admin")
    )
    assert response.status_code == 201, response.text
    return dict(response.json())


@pytest.mark.parametrize("scope", ["read", "ingest", "settle"])
def test_only_admin_keys_and_before_the_body(api: Api, scope: str) -> None:
    assert api.client.get(ROUTE).status_code == 401
    response = api.client.post(ROUTE, content=b"{" * 5_000_000, headers=api.auth(scope))
    assert response.status_code == 403
    assert response.json()["type"] == "/problems/forbidden"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"url": "ftp://example.com/x", "events": ["quota.completed"]}, "body.url"),
        ({"url": "https://", "events": ["quota.completed"]}, "body.url"),
        ({"url": "https://a.example/" + "x" * 2100, "events": ["quota.completed"]}, "body.url"),
        ({"url": "https://user:pw@a.example/", "events": ["quota.completed"]}, "body.url"),
        ({"url": "https://a.example/", "events": []}, "body.events"),
        ({"url": "https://a.example/", "events": ["quota.exploded"]}, "body.events.0"),
        ({"url": "https://a.example/", "events": ["quota.completed"] * 13}, "body.events"),
        ({"url": "https://a.example/", "events": ["quota.completed"], "x": 1}, "body.x"),
        ({"events": ["quota.completed"]}, "body.url"),
    ],
)
def test_a_bad_body_is_a_422_naming_the_field(api: Api, body: dict[str, Any], field: str) -> None:
    response = api.client.post(ROUTE, json=body, headers=api.auth("admin"))
    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["type"] == "/problems/validation-error"
    assert field in [error["field"] for error in problem["errors"]]
    with api.services.store.read() as unit:
        assert unit.webhooks.endpoints() == []


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://127.0.0.2:5432/", "loopback addresses are refused"),
        ("http://[::1]/", "loopback addresses are refused"),
        ("http://169.254.169.254/latest/", "link-local"),
        ("http://2130706434/", "loopback addresses are refused"),  # 127.0.0.2
        ("http://[::ffff:10.0.0.1]/", "private addresses are refused"),
        ("http://0.0.0.0/", "unspecified"),
        ("http://224.0.0.1/", "multicast"),
        ("http://" + "a" * 64 + ".example/", "not a valid IDNA name"),
        ("http://@a.example/", "must not carry credentials"),
    ],
)
def test_a_refused_url_is_a_422_naming_the_field_and_why(api: Api, url: str, reason: str) -> None:
    body = {"url": url, "events": ["quota.completed"]}
    response = api.client.post(ROUTE, json=body, headers=api.auth("admin"))
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    (error,) = response.json()["errors"]
    assert error["field"] == "body.url"
    assert reason in error["message"]
    made = register(api, "https://a.example/x")
    changed = api.client.patch(
        f"{ROUTE}/{made['id']}", json={"url": url}, headers=api.auth("admin")
    )
    assert changed.status_code == 422
    assert changed.json()["errors"][0]["field"] == "body.url"
    with api.services.store.read() as unit:
        assert [e.url for e in unit.webhooks.endpoints()] == ["https://a.example/x"]


def test_a_url_is_stored_as_it_is_sent(api: Api) -> None:
    made = register(api, "https://Bücher.example/päth?q=ü")
    assert made["url"] == "https://xn--bcher-kva.example/p%C3%A4th?q=%C3%BC"


def test_a_body_over_the_limit_is_413(api: Api) -> None:
    limit = api.services.settings.max_json_body_bytes
    response = api.client.post(ROUTE, content=b" " * (limit + 1), headers=api.auth("admin"))
    assert response.status_code == 413


def test_an_endpoint_is_registered_changed_rotated_and_deleted(api: Api) -> None:
    made = register(api, "https://hooks.example/freehours", ["quota.completed", "quota.revised"])
    assert made["secret"].startswith("whsec_")
    assert made["enabled"] is True
    path = f"{ROUTE}/{made['id']}"
    got = api.client.get(path, headers=api.auth("admin")).json()
    assert "secret" not in got  # shown once
    assert got["events"] == ["quota.completed", "quota.revised"]
    listed = api.client.get(ROUTE, headers=api.auth("admin")).json()["items"]
    assert [item["id"] for item in listed] == [made["id"]]

    changed = api.client.patch(
        path, json={"events": ["invoice.finalised"], "enabled": False}, headers=api.auth("admin")
    )
    assert changed.status_code == 200
    assert changed.json()["events"] == ["invoice.finalised"]
    assert changed.json()["enabled"] is False
    assert changed.json()["disabled_reason"] == "disabled through the API"
    enabled = api.client.patch(path, json={"enabled": True}, headers=api.auth("admin")).json()
    assert (enabled["enabled"], enabled["disabled_reason"]) == (True, None)
    bad = api.client.patch(path, json={"url": "mailto:x@y"}, headers=api.auth("admin"))
    assert bad.status_code == 422

    rotated = api.client.post(f"{path}/rotate-secret", headers=api.auth("admin"))
    assert rotated.status_code == 200
    assert rotated.json()["secret"] not in (made["secret"], None)
    assert rotated.json()["previous_secret_until"] is not None

    assert api.client.delete(path, headers=api.auth("admin")).status_code == 204
    gone = api.client.get(path, headers=api.auth("admin"))
    assert gone.status_code == 404
    assert gone.json()["type"] == "/problems/webhook-endpoint-not-found"
    assert api.client.delete(path, headers=api.auth("admin")).status_code == 404
    malformed = api.client.get(f"{ROUTE}/nope", headers=api.auth("admin"))
    assert malformed.status_code == 422


def test_endpoints_are_bounded(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("freehours.webhooks.service.MAX_ENDPOINTS", 2)
    register(api, "https://a.example/1")
    register(api, "https://a.example/2")
    response = api.client.post(
        ROUTE,
        json={"url": "https://a.example/3", "events": ["quota.completed"]},
        headers=api.auth("admin"),
    )
    assert response.status_code == 422
    assert response.json()["type"] == "/problems/too-many-endpoints"


def test_deliveries_are_listed_and_replayed_with_the_same_webhook_id(
    api: Api, receiver: Receiver
) -> None:
    made = register(api, receiver.url)
    hooks = Webhooks(
        api.services.store,
        api.clock,
        send=HttpSender(LOOPBACK, deadline=2),
        destinations=LOOPBACK,
        rng=Random(1),
    )
    worker = Worker(api.services.store, webhook_tasks(hooks), clock=api.clock)
    receiver.script = [Reply(500, body=b"not today")]
    with api.services.store.write() as unit:
        (ident,) = unit.webhooks.publish([NewEvent("quota.completed", api.clock.now(), {"n": 1})])
    worker.run_due()
    api.clock.advance(60)
    worker.run_due()
    page = api.client.get(f"{ROUTE}/{made['id']}/deliveries", headers=api.auth("admin"))
    assert page.status_code == 200
    (delivery,) = page.json()["items"]
    assert delivery["webhook_id"] == ident
    assert delivery["status"] == "succeeded"
    assert [(a["outcome"], a["status_code"]) for a in delivery["attempt_log"]] == [
        ("failed", 500),
        ("succeeded", 200),
    ]
    assert delivery["attempt_log"][0]["error"] == "HTTP 500: not today"

    replay = f"{ROUTE}/{made['id']}/deliveries/{delivery['id']}/replay"
    answer = api.client.post(replay, headers=api.auth("admin"))
    assert answer.status_code == 202
    assert answer.json()["status"] == "pending"
    worker.run_due()
    assert receiver.ids() == [ident, ident, ident]
    assert receiver.received[1].body == receiver.received[2].body
    stamp_header = receiver.received[2].headers
    # Signed with the secret the registration answered (the clock is the API's, 2026).
    sent_at = int(stamp_header["webhook-timestamp"])
    expected = Webhook(made["secret"]).sign(
        ident, datetime.fromtimestamp(sent_at, UTC), receiver.received[2].body
    )
    assert stamp_header["webhook-signature"] == expected

    other = api.client.post(
        f"{ROUTE}/{made['id']}/deliveries/999/replay", headers=api.auth("admin")
    )
    assert other.status_code == 404
    assert other.json()["type"] == "/problems/webhook-delivery-not-found"
    failed_only = api.client.get(
        f"{ROUTE}/{made['id']}/deliveries?status=failed", headers=api.auth("admin")
    )
    assert failed_only.json()["items"] == []


def test_replays_are_rate_limited_per_endpoint_and_per_key(api: Api) -> None:
    made = register(api, "https://a.example/x")
    with api.services.store.write() as unit:
        written = unit.webhooks.publish([NewEvent("quota.completed", api.clock.now(), {"n": 1})])
        # Its fan-out job's work, at once.
        unit.webhooks.fan_out(written, {"quota.completed": [made["id"]]})
        (delivery,) = unit.webhooks.deliveries()
    replay = f"{ROUTE}/{made['id']}/deliveries/{delivery.id}/replay"
    answers = [api.client.post(replay, headers=api.auth("admin")) for _ in range(7)]
    assert [a.status_code for a in answers] == [202] * 5 + [429] * 2
    refused = answers[-1]
    assert refused.headers["content-type"] == "application/problem+json"
    assert refused.json()["type"] == "/problems/rate-limited"
    assert f"webhook-endpoint {made['id']}" in refused.json()["detail"]
    assert 1 <= int(refused.headers["retry-after"]) <= 60
    with api.services.store.read() as unit:
        assert unit.webhooks.delivery(delivery.id).replays == 5  # type: ignore[union-attr]
    # Another endpoint, the same key: the key's own limit is spent too.
    other = register(api, "https://b.example/x")
    with api.services.store.write() as unit:
        written = unit.webhooks.publish([NewEvent("quota.completed", api.clock.now(), {"n": 2})])
        unit.webhooks.fan_out(written, {"quota.completed": [made["id"], other["id"]]})
        newest = unit.webhooks.deliveries(endpoint_id=other["id"])[0]
    again = api.client.post(
        f"{ROUTE}/{other['id']}/deliveries/{newest.id}/replay", headers=api.auth("admin")
    )
    assert again.status_code == 429
    assert again.json()["detail"].startswith("key ")
    # A key's other routes are not limited by it.
    assert api.client.get(ROUTE, headers=api.auth("admin")).status_code == 200


def test_the_database_down_is_a_503(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    def down(*_: object, **__: object) -> None:
        raise connection_lost("SELECT", "the database is down")

    monkeypatch.setattr(api.services.store, "read", down)
    response = api.client.get(ROUTE, headers=api.auth("admin"))
    assert response.status_code == 503
    assert response.json()["type"] == "/problems/database-unavailable"
    assert "retry-after" in response.headers
