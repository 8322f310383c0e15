"""Issue 13, item 4, as it was found: against a real ``freehours serve`` on PostgreSQL and Redis,
the hostile dates and numbers are 422s naming the field, nothing is stored, and what used to be a
500 for ever afterwards (a customer for that NMI, its bills, its settlements) answers."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest
import sqlalchemy as sa
from sqlalchemy.pool import NullPool

from tests.api.conftest import PLAN
from tests.meterdata.nem12_text import channel, day, nem12
from tests.servers import api_server, freehours
from tests.store.fixtures import PostgresSchemas

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]

NMI = "4102000077"


@pytest.fixture
def deployment(postgres_schemas: PostgresSchemas, redis_url: str) -> Iterator[dict[str, str]]:
    """A fresh, migrated PostgreSQL schema, and the env to serve it."""
    with postgres_schemas.migrated() as url:
        env = {
            "FREEHOURS_DATABASE_URL": url,
            "FREEHOURS_REDIS_URL": redis_url,
            "FREEHOURS_REDIS_PREFIX": f"test:{uuid.uuid4().hex[:12]}:",
        }
        yield env


def count(env: dict[str, str], table: str) -> int:
    engine = sa.create_engine(env["FREEHOURS_DATABASE_URL"], poolclass=NullPool)
    try:
        with engine.connect() as conn:
            return int(conn.scalar(sa.text(f"SELECT count(*) FROM {table}")) or 0)
    finally:
        engine.dispose()


def test_the_hostile_values_of_the_issue_are_422s_and_nothing_after_them_is_a_500(
    deployment: dict[str, str],
) -> None:
    key = freehours("keys", "create", "--scope", "admin", env=deployment)
    auth = {"Authorization": f"Bearer {key}"}
    far = (datetime.now(UTC) + timedelta(days=400)).date()
    with api_server(deployment) as url, httpx.Client(base_url=url, headers=auth) as client:
        upload = client.post(
            "/v1/meter-readings/nem12",
            content=nem12(channel(NMI), day("99991231")).encode(),
            headers={"Idempotency-Key": "n1", "Content-Type": "text/csv"},
        )
        assert upload.status_code == 422
        assert "upload.csv:3: 9999-12-31" in upload.json()["detail"]
        assert "(field IntervalDate)" in upload.json()["detail"]

        for number, (start, kwh, field) in enumerate(
            [
                ("0001-01-01T00:00:00+10:00", "1", "body.reads.0.start"),
                ("9999-12-31T23:30:00+10:00", "1", "body.reads.0.start"),
                ("2026-07-01T11:00:00+10:00", "1e999999", "body.reads.0.kwh"),
                ("2026-07-01T11:00:00+10:00", "1e-999999", "body.reads.0.kwh"),
                ("2026-07-01T11:00:00+10:00", "\u0663", "body.reads.0.kwh"),
            ]
        ):
            body = {
                "nmi": NMI,
                "suffix": "E1",
                "interval_minutes": 30,
                "reads": [{"start": start, "kwh": kwh, "quality": "A"}],
            }
            answer = client.post(
                "/v1/meter-readings", json=body, headers={"Idempotency-Key": f"r{number}"}
            )
            assert answer.status_code == 422, answer.text
            assert [error["field"] for error in answer.json()["errors"]] == [field]
        assert count(deployment, "meter_days") == 0

        hostile_plan = {**PLAN, "daily_supply_charge": "1e999999"}
        refused = client.put("/v1/plans/test-nsw", json=hostile_plan)
        assert refused.status_code == 422
        assert "daily_supply_charge" in refused.json()["detail"]
        assert count(deployment, "plans") == 0

        assert client.put("/v1/plans/test-nsw", json=PLAN).status_code == 200
        customer = {"plan_id": "test-nsw", "region": "NSW"}
        assert client.put(f"/v1/customers/{NMI}", json=customer).status_code == 200
        bill = client.get(
            f"/v1/customers/{NMI}/bill", params={"from": "2026-07-01", "to": "2026-07-02"}
        )
        assert bill.status_code == 200
        for first, last in (("0001-01-01", "0001-01-02"), ("9999-12-30", "9999-12-31")):
            answer = client.get(f"/v1/customers/{NMI}/bill", params={"from": first, "to": last})
            assert answer.status_code == 422
            assert answer.json()["errors"][0]["field"] == "query.from"

        settle = client.post(
            "/v1/free-energy/settlements", json={"nmi": NMI, "date": far.isoformat()}
        )
        assert settle.status_code == 422
        assert "Retry-After" not in settle.headers
        assert settle.json()["errors"][0]["field"] == "body.date"
        assert count(deployment, "quotas") == 0
