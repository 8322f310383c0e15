"""A ``freehours serve`` process whose PostgreSQL and Redis are each behind a ``FaultProxy``.

The data (a plan, a customer, days of reads) and the key are written straight to the database;
only the server goes through the proxies, so that a test can cut, black-hole or slow either
dependency under it and see what its clients get.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from urllib.parse import urlsplit

import httpx
import pytest
import sqlalchemy as sa

from freehours.domain.reads import IntervalDay
from freehours.domain.time import NEM_TIME, Region
from freehours.store.database import Store
from tests.api.conftest import PLAN
from tests.faults.proxy import FaultProxy, fault_proxy
from tests.servers import api_server, freehours
from tests.store.fixtures import PostgresSchemas

NMI = "FAULT00001"
FIRST_DAY = date(2026, 6, 1)  # long past: every day is due and its data complete
DAYS = 40

#: The server's timeouts, short so that each test waits seconds, not the defaults' half minute.
SERVER_TIMEOUTS = {
    "FREEHOURS_DATABASE_CONNECT_TIMEOUT_SECONDS": "2",
    "FREEHOURS_DATABASE_STATEMENT_TIMEOUT_SECONDS": "2",
    "FREEHOURS_DATABASE_POOL_TIMEOUT_SECONDS": "2",
    "FREEHOURS_REDIS_RETRY_SECONDS": "1",
    # The key stays known while the database is away (a replay is then answered from the cache).
    "FREEHOURS_API_KEY_CACHE_SECONDS": "600",
}


@dataclass
class Deployment:
    url: str
    database: FaultProxy
    redis: FaultProxy
    key: str

    def client(self) -> httpx.Client:
        """A client that waits up to 10 s: a hang detector, not a latency check."""
        return httpx.Client(
            base_url=self.url, timeout=10.0, headers={"Authorization": f"Bearer {self.key}"}
        )


def _prepare(url: str) -> None:
    now = datetime.now(UTC)
    with Store.open(url) as store, store.write() as unit:
        unit.catalog.put_plan("test-nsw", PLAN, updated_at=now)
        unit.catalog.put_customer(NMI, plan_id="test-nsw", region=Region.NSW, updated_at=now)
        days = [
            IntervalDay(
                NMI,
                "E1",
                FIRST_DAY + timedelta(days=n),
                30,
                (Decimal("0.400"),) * 48,
                "A" * 48,
                datetime(2026, 7, 20, tzinfo=NEM_TIME),
            )
            for n in range(DAYS + 1)
        ]
        unit.meter.ingest_days(days, received_at=now)


@pytest.fixture
def deployment(postgres_schemas: PostgresSchemas, redis_url: str) -> Iterator[Deployment]:
    redis_target = urlsplit(redis_url)
    with postgres_schemas.migrated() as direct_url:
        direct = sa.make_url(direct_url)
        _prepare(direct_url)
        key = freehours(
            "keys", "create", "--scope", "admin", env={"FREEHOURS_DATABASE_URL": direct_url}
        )
        with (
            fault_proxy(direct.host or "127.0.0.1", direct.port or 5432) as database,
            fault_proxy(redis_target.hostname or "127.0.0.1", redis_target.port or 6379) as redis,
        ):
            proxied = direct.set(host="127.0.0.1", port=database.port)
            env = {
                "FREEHOURS_DATABASE_URL": proxied.render_as_string(hide_password=False),
                "FREEHOURS_REDIS_URL": f"redis://127.0.0.1:{redis.port}{redis_target.path}",
                "FREEHOURS_REDIS_PREFIX": f"test:{uuid.uuid4().hex[:12]}:",
                "FREEHOURS_RATE_LIMIT_PER_NMI": "100000/minute",
                **SERVER_TIMEOUTS,
            }
            with api_server(env) as url:
                yield Deployment(url, database, redis, key)
