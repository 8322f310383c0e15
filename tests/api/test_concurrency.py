"""Against real PostgreSQL and Redis, over real HTTP: many concurrent requests for one quota book
exactly one credit, and every answer is 200 COMPLETED with one body or 409 LOCKED with
Retry-After of at least 1 — with one API process, and with two sharing Redis."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, date, datetime
from decimal import Decimal

import httpx
import pytest

from freehours.domain.reads import IntervalDay
from freehours.domain.time import NEM_TIME, Region
from freehours.store.database import Store
from tests.api.conftest import PLAN
from tests.servers import api_server, freehours
from tests.store.fixtures import PostgresSchemas

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]

DAY = date(2026, 7, 1)  # long past: due, and its data is complete
REQUESTS = 50


@pytest.fixture
def deployment(postgres_schemas: PostgresSchemas, redis_url: str) -> Iterator[dict[str, str]]:
    """A fresh, migrated PostgreSQL schema with a customer and a day of reads, and the env."""
    with postgres_schemas.migrated() as url:
        yield {
            "FREEHOURS_DATABASE_URL": url,
            "FREEHOURS_REDIS_URL": redis_url,
            "FREEHOURS_REDIS_PREFIX": f"test:{uuid.uuid4().hex[:12]}:",
            "FREEHOURS_RATE_LIMIT_PER_NMI": "10000/minute",
        }


def prepare(env: dict[str, str], nmi: str) -> str:
    now = datetime.now(UTC)
    with Store.open(env["FREEHOURS_DATABASE_URL"]) as store, store.write() as unit:
        unit.catalog.put_plan("test-nsw", PLAN, updated_at=now)
        unit.catalog.put_customer(nmi, plan_id="test-nsw", region=Region.NSW, updated_at=now)
        day = IntervalDay(
            nmi,
            "E1",
            DAY,
            30,
            (Decimal("0.400"),) * 48,
            "A" * 48,
            datetime(2026, 7, 2, tzinfo=NEM_TIME),
        )
        unit.meter.ingest_days([day], received_at=now)
    return freehours("keys", "create", "--scope", "settle", env=env)


def storm(urls: list[str], key: str, nmi: str) -> list[httpx.Response]:
    headers = {"Authorization": f"Bearer {key}"}
    body = {"nmi": nmi, "date": DAY.isoformat()}
    with httpx.Client(timeout=30.0, limits=httpx.Limits(max_connections=REQUESTS)) as client:

        def send(i: int) -> httpx.Response:
            url = urls[i % len(urls)]
            return client.post(f"{url}/v1/free-energy/settlements", json=body, headers=headers)

        with ThreadPoolExecutor(max_workers=REQUESTS) as pool:
            return list(pool.map(send, range(REQUESTS)))


def check(env: dict[str, str], nmi: str, answers: list[httpx.Response]) -> None:
    completed = [a.json() for a in answers if a.status_code == 200]
    locked = [a for a in answers if a.status_code == 409]
    assert len(completed) + len(locked) == REQUESTS, {a.status_code for a in answers}
    assert completed, "at least one request settled"
    assert all(body == completed[0] for body in completed)
    assert completed[0]["status"] == "COMPLETED"
    assert completed[0]["free_kwh"] == "2.400"
    for answer in locked:
        assert answer.json()["status"] == "LOCKED"
        assert int(answer.headers["Retry-After"]) >= 1
    with Store.open(env["FREEHOURS_DATABASE_URL"]) as store, store.read() as unit:
        entries = unit.quotas.ledger(nmi)
    assert [(e.version, e.kwh) for e in entries] == [(1, Decimal("2.400"))]


def test_one_process_books_one_credit_for_fifty_concurrent_requests(
    deployment: dict[str, str],
) -> None:
    nmi = "CONC000001"
    key = prepare(deployment, nmi)
    with api_server(deployment) as url:
        answers = storm([url], key, nmi)
    check(deployment, nmi, answers)


def test_two_processes_sharing_redis_book_one_credit(deployment: dict[str, str]) -> None:
    nmi = "CONC000002"
    key = prepare(deployment, nmi)
    with api_server(deployment) as first, api_server(deployment) as second:
        answers = storm([first, second], key, nmi)
        # Once settled, every later answer from either process is the same replay.
        later = storm([first, second], key, nmi)
    check(deployment, nmi, answers)
    assert {a.status_code for a in later} == {200}
    assert all(a.headers["Idempotent-Replayed"] == "true" for a in later)
