"""An API over a real store (SQLite and PostgreSQL), a manual clock, and keys of every scope."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from freehours.api.app import create_app
from freehours.api.keys import Scope, create_key
from freehours.api.ratelimit import RateLimits
from freehours.api.services import Services
from freehours.clock import ManualClock
from freehours.operations.runtime import Runtime
from freehours.settings import Settings
from freehours.store.database import Store
from tests.mail.conftest import smtp
from tests.servers import freehours
from tests.test_settlement import PLAN

__all__ = [
    "PLAN",
    "START",
    "Api",
    "serving",
    "smtp",
]  # PLAN: the settlement tests' plan, for the API's tests too

#: The test client's address: a loopback one, as a client on the API's own host has.
LOOPBACK = ("127.0.0.1", 50000)

# 2026-07-01 14:15 AEST: the NSW window of 1 July has ended and its grace has passed.
START = datetime(2026, 7, 1, 4, 15, tzinfo=UTC)


@dataclass
class Api:
    client: TestClient
    services: Services
    clock: ManualClock
    keys: dict[str, str]

    def auth(self, scope: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[scope]}"}


@pytest.fixture
def settings() -> Settings:
    return Settings(database_url="sqlite://", max_batch_reads=100, max_upload_bytes=200_000)


@pytest.fixture
def api(store: Store, settings: Settings) -> Iterator[Api]:
    with serving(store, settings) as api:
        yield api


@contextmanager
def serving(store: Store, settings: Settings) -> Iterator[Api]:
    """The API over ``store`` with ``settings``, its lifespan running, and a key of each scope."""
    clock = ManualClock(START)
    # Settlements per NMI counted per day: the sliding window's estimate lets one more through
    # when a test's 21 requests straddle the end of a window, which a minute's did now and then.
    limits = RateLimits.open(
        None, "1000/minute", "20/day", pages=settings.rate_limit_pages, clock=clock
    )
    services = Services(Runtime.on(store, settings, clock), limits)
    keys = {}
    with store.write() as unit:
        for scope in Scope:
            _, keys[scope.value] = create_key(unit.keys, frozenset({scope}), scope.value, START)
        _, keys["ingest+read"] = create_key(
            unit.keys, frozenset({Scope.INGEST, Scope.READ}), "both", START
        )
    with TestClient(create_app(services), client=LOOPBACK) as client:
        yield Api(client, services, clock, keys)


@pytest.fixture
def database(tmp_path: Path) -> dict[str, str]:
    """The environment of a ``freehours serve`` process run by a test: a migrated SQLite file."""
    env = {"FREEHOURS_DATABASE_URL": f"sqlite:///{tmp_path / 'serve.db'}"}
    freehours("db", "upgrade", env=env)
    return env
