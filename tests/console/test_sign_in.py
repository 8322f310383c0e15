"""Signing in to the console: which keys may, the session cookie, its end, and the checks every
form makes (its origin, its CSRF token), on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.api.conftest import Api
from tests.console.conftest import ORIGIN, csrf_of, sign_in


def test_a_page_without_a_session_sends_the_browser_to_sign_in_and_back(api: Api) -> None:
    answer = api.client.get("/console/quotas?state=ABORTED", follow_redirects=False)
    assert answer.status_code == 303
    assert answer.headers["location"] == "/console/sign-in?next=/console/quotas%3Fstate%3DABORTED"
    page = api.client.get(answer.headers["location"])
    assert page.status_code == 200
    assert '<label for="key">API key</label>' in page.text
    assert 'value="/console/quotas?state=ABORTED"' in page.text
    signed = api.client.post(
        "/console/sign-in",
        data={"key": api.keys["read"], "next": "/console/quotas?state=ABORTED"},
        headers=ORIGIN,
        follow_redirects=False,
    )
    assert signed.headers["location"] == "/console/quotas?state=ABORTED"


def test_the_session_cookie_is_httponly_strict_and_for_the_console_only(api: Api) -> None:
    answer = api.client.post(
        "/console/sign-in",
        data={"key": api.keys["admin"], "next": "/console/"},
        headers=ORIGIN,
        follow_redirects=False,
    )
    cookie = answer.headers["set-cookie"]
    assert cookie.startswith("freehours_session=")
    attributes = {part.strip().split("=")[0].lower() for part in cookie.split(";")[1:]}
    assert {"httponly", "samesite", "path", "max-age"} <= attributes
    assert "samesite=strict" in cookie.lower()
    assert "path=/console" in cookie.lower()
    assert "max-age=28800" in cookie.lower()  # FREEHOURS_CONSOLE_SESSION_MINUTES: 480
    assert "secure" not in attributes  # served over plain HTTP here; over TLS it is Secure
    # The secret typed in is not the cookie: a session is a token of its own.
    assert api.keys["admin"] not in cookie


@pytest.mark.parametrize(
    ("scope", "status", "said"),
    [
        ("ingest", 403, "needs read or admin"),
        ("settle", 403, "needs read or admin"),
    ],
)
def test_a_key_that_may_not_read_is_refused(api: Api, scope: str, status: int, said: str) -> None:
    answer = api.client.post(
        "/console/sign-in", data={"key": api.keys[scope]}, headers=ORIGIN, follow_redirects=False
    )
    assert answer.status_code == status
    assert said in answer.text
    assert "freehours_session" not in answer.headers.get("set-cookie", "")


def test_an_unknown_key_is_refused_and_counted_against_the_address(api: Api) -> None:
    answer = api.client.post(
        "/console/sign-in", data={"key": "fh_nonsense"}, headers=ORIGIN, follow_redirects=False
    )
    assert answer.status_code == 401
    assert "unknown or revoked" in answer.text
    assert 'aria-invalid="true"' in answer.text


def test_a_sign_in_from_another_site_is_refused_before_the_key_is_looked_at(api: Api) -> None:
    for headers in ({"Origin": "https://evil.example"}, {}):
        answer = api.client.post(
            "/console/sign-in", data={"key": api.keys["admin"]}, headers=headers
        )
        assert answer.status_code == 403
        assert "own pages" in answer.text
        assert "freehours_session" not in answer.headers.get("set-cookie", "")


def test_a_referer_of_the_console_stands_in_for_a_missing_origin(api: Api) -> None:
    answer = api.client.post(
        "/console/sign-in",
        data={"key": api.keys["read"]},
        headers={"Referer": "http://testserver/console/sign-in"},
        follow_redirects=False,
    )
    assert answer.status_code == 303


def test_next_never_leads_off_the_console(api: Api) -> None:
    for next_path in (
        "https://evil.example/",
        "//evil.example/console",
        "/v1/plans",
        "/console\\x",
    ):
        answer = api.client.post(
            "/console/sign-in",
            data={"key": api.keys["read"], "next": next_path},
            headers=ORIGIN,
            follow_redirects=False,
        )
        assert answer.headers["location"] == "/console/", next_path


def test_sign_out_ends_the_session_and_is_in_the_audit_log(api: Api) -> None:
    sign_in(api.client, api.keys["read"])
    page = api.client.get("/console/")
    assert page.status_code == 200
    token = csrf_of(page.text)
    cookie = api.client.cookies.get("freehours_session")
    # Without the session's CSRF token the sign-out is refused: another page cannot sign you out.
    refused = api.client.post("/console/sign-out", data={"csrf_token": "x"}, headers=ORIGIN)
    assert refused.status_code == 403
    out = api.client.post(
        "/console/sign-out", data={"csrf_token": token}, headers=ORIGIN, follow_redirects=False
    )
    assert out.status_code == 303
    assert 'freehours_session=""' in out.headers["set-cookie"]
    # The old cookie, kept by someone, no longer works.
    api.client.cookies.set("freehours_session", cookie or "", path="/console")
    assert api.client.get("/console/", follow_redirects=False).status_code == 303
    audit = api.client.get("/v1/audit", headers=api.auth("read")).json()["items"]
    assert [entry["action"] for entry in audit] == ["session.sign_out", "session.sign_in"]
    assert {entry["key_name"] for entry in audit} == {"read"}


def test_a_session_expires(api: Api) -> None:
    sign_in(api.client, api.keys["read"])
    api.clock.advance(timedelta(minutes=479).total_seconds())
    assert api.client.get("/console/", follow_redirects=False).status_code == 200
    api.clock.advance(timedelta(minutes=2).total_seconds())
    answer = api.client.get("/console/", follow_redirects=False)
    assert answer.status_code == 303
    assert answer.headers["location"].startswith("/console/sign-in")


def test_a_session_ends_when_its_key_is_revoked(api: Api) -> None:
    sign_in(api.client, api.keys["read"])
    read_id = next(
        entry for entry in api.client.get("/v1/audit", headers=api.auth("read")).json()["items"]
    )["key_id"]
    with api.services.store.write() as unit:
        unit.keys.revoke(read_id, api.clock.now())
    assert api.client.get("/console/", follow_redirects=False).status_code == 303


def test_a_forged_or_oversized_cookie_is_no_session(api: Api) -> None:
    for value in ("forged", "x" * 5000):
        api.client.cookies.set("freehours_session", value, path="/console")
        assert api.client.get("/console/", follow_redirects=False).status_code == 303


def test_pages_say_what_they_may_load(admin: Api) -> None:
    page = admin.client.get("/console/")
    policy = page.headers["content-security-policy"]
    assert "default-src 'none'" in policy
    assert "script-src 'self'" in policy
    assert "frame-ancestors 'none'" in policy
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["cache-control"] == "no-store"
    # Every asset is the package's own: no address elsewhere.
    assert "http://" not in page.text.replace("http://testserver", "")
    assert "https://" not in page.text
    for asset in ("/console/static/console.css", "/console/static/console.js"):
        served = admin.client.get(asset)
        assert served.status_code == 200
        assert len(served.content) > 500


def test_the_audit_api_refuses_a_position_past_any_id(api: Api) -> None:
    # A 64-bit id is the largest either database stores: one past it is the caller's mistake.
    answer = api.client.get("/v1/audit", params={"before": 2**63}, headers=api.auth("read"))
    assert answer.status_code == 422
    assert answer.headers["content-type"].startswith("application/problem+json")
    assert "before" in answer.text
    largest = api.client.get("/v1/audit", params={"before": 2**63 - 1}, headers=api.auth("read"))
    assert largest.status_code == 200


@pytest.mark.parametrize(
    ("path", "location"),
    [("/console", "/console/"), ("/console/", "/console/sign-in?next=/console/")],
)
def test_redirects_are_relative_whatever_the_host_header(
    api: Api, path: str, location: str
) -> None:
    answer = api.client.get(path, headers={"Host": "evil.example"}, follow_redirects=False)
    assert answer.status_code in (303, 307)
    assert answer.headers["location"] == location


def test_a_path_with_a_trailing_slash_is_not_redirected_to_the_host_header(api: Api) -> None:
    answer = api.client.get(
        "/v1/audit/", headers={"Host": "evil.example", **api.auth("read")}, follow_redirects=False
    )
    assert answer.status_code == 404  # /v1/audit is the route; no redirect to it
    assert "location" not in answer.headers
