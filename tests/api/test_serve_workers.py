"""``freehours serve --workers N``: reads posted for a past day end in a COMPLETED quota with no
call to the settlement API, settled by the server's own workers (in each of its API processes,
with ``--processes``)."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import httpx
import pytest

from freehours.domain.time import NEM_TIME
from tests.api.conftest import PLAN
from tests.servers import api_server, freehours
from tests.support import eventually

pytestmark = pytest.mark.slow

NMI = "SERVE00001"


@pytest.mark.parametrize(
    "options",
    [["--workers", "2"], ["--processes", "2", "--workers", "1"]],
    ids=["one process", "two processes"],
)
def test_posted_reads_are_settled_by_the_servers_own_workers(
    tmp_path: Path, options: list[str]
) -> None:
    env = {"FREEHOURS_DATABASE_URL": f"sqlite:///{tmp_path / 'serve.db'}"}
    key = freehours("keys", "create", "--scope", "admin", env=env)
    auth = {"Authorization": f"Bearer {key}"}
    first = datetime(2026, 7, 1, tzinfo=NEM_TIME)
    reads = [
        {"start": (first + timedelta(minutes=30 * i)).isoformat(), "kwh": "0.250"}
        for i in range(48)
    ]
    with api_server(env, extra_args=options) as url, httpx.Client(base_url=url) as api:
        assert api.put("/v1/plans/test-nsw", json=PLAN, headers=auth).status_code == 200
        customer = {"plan_id": "test-nsw", "region": "NSW"}
        assert api.put(f"/v1/customers/{NMI}", json=customer, headers=auth).status_code == 200
        body = {"nmi": NMI, "suffix": "E1", "interval_minutes": 30, "reads": reads}
        posted = api.post(
            "/v1/meter-readings", json=body, headers={**auth, "Idempotency-Key": "day-1"}
        )
        assert posted.json() == {"accepted": 48, "superseded": 0, "unchanged": 0}

        def settled() -> dict[str, object] | None:
            answer = api.get(f"/v1/free-energy/settlements/{NMI}/2026-07-01", headers=auth)
            if answer.status_code != 200:
                return None
            state: dict[str, object] = answer.json()
            return state if state["status"] == "COMPLETED" else None

        state = eventually(
            settled, within=30, what="the settlement by the servers' workers", every=0.1
        )
    assert state["status"] == "COMPLETED"
    assert state["free_kwh"] == "1.500"  # six half-hours of 0.25 kWh in 11:00-14:00
