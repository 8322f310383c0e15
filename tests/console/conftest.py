"""The console over a real store (SQLite and PostgreSQL): the API's test client, and a browser's
way of signing in (a form POST from the console's own origin, its cookie kept by the client)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from freehours.settings import Settings
from freehours.store.database import Store
from tests.api.conftest import Api, serving

ORIGIN = {"Origin": "http://testserver"}


@pytest.fixture
def settings() -> Settings:
    return Settings(database_url="sqlite://")


@pytest.fixture
def api(store: Store, settings: Settings) -> Iterator[Api]:
    with serving(store, settings) as api:
        yield api


def sign_in(client: TestClient, secret: str) -> None:
    """Sign ``client`` in with the key ``secret``; it keeps the session cookie."""
    answer = client.post(
        "/console/sign-in",
        data={"key": secret, "next": "/console/"},
        headers=ORIGIN,
        follow_redirects=False,
    )
    assert answer.status_code == 303, answer.text
    assert client.cookies.get("freehours_session")


def csrf_of(html: str) -> str:
    """The CSRF token a page's forms carry."""
    match = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert match, "the page has no form with a CSRF token"
    return match.group(1)


@pytest.fixture
def admin(api: Api) -> Api:
    """The API's client, signed in to the console with the admin key."""
    sign_in(api.client, api.keys["admin"])
    return api
