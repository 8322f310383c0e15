"""Failing dependencies, through a TCP proxy in front of the real PostgreSQL and Redis, under a
real ``freehours serve``.

Redis cut, black-holed or slow: settlements and reads still answer 200, and the server stops
asking Redis after its first failure (counted at the proxy) until its retry time. The database
cut or black-holed: every /v1 route answers 503 problem+json with Retry-After, /readyz a 503
naming the database in fixed words; once the proxy passes again, everything recovers by itself.
Every request waits at most 10 s: an answer that does not come is a failure (a hang), however
the server's timeouts are set.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import httpx
import pytest

from freehours.observability.measured import FRESH_SECONDS, MEASURE_TIMEOUT_SECONDS
from tests.api.conftest import PLAN
from tests.faults.conftest import DAYS, FIRST_DAY, NMI, Deployment
from tests.faults.proxy import Mode
from tests.meterdata.nem12_text import channel, day, nem12
from tests.support import eventually

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]

PROBLEM_JSON = "application/problem+json"
#: Requests per Redis fault: without the breaker each would try Redis two to four times.
REQUESTS = 20


def settle(api: httpx.Client, n: int) -> httpx.Response:
    """Settle day ``n`` (fresh the first time: cache read, claim, complete, cache write)."""
    return api.post(
        "/v1/free-energy/settlements",
        json={"nmi": NMI, "date": (FIRST_DAY + timedelta(days=n)).isoformat()},
    )


def read(api: httpx.Client, n: int) -> httpx.Response:
    return api.get(f"/v1/free-energy/settlements/{NMI}/{FIRST_DAY + timedelta(days=n)}")


def metric(api: httpx.Client, name: str) -> float:
    """The sum of a counter's samples on /metrics (0 when it has none yet)."""
    total = 0.0
    for line in api.get("/metrics").text.splitlines():
        if line.startswith((name + "{", name + " ")):
            total += float(line.rsplit(" ", 1)[1])
    return total


@pytest.mark.parametrize(("mode", "delay"), [("cut", 0.0), ("blackhole", 0.0), ("slow", 0.03)])
def test_settlements_and_reads_go_on_without_redis_and_redis_is_not_asked_each_time(
    deployment: Deployment, mode: Mode, delay: float
) -> None:
    with deployment.client() as api:
        assert settle(api, 0).status_code == 200  # Redis in use: connections open
        deployment.redis.set_mode(mode, delay)
        answers = []
        for n in range(1, REQUESTS + 1):
            answers.append(settle(api, n % DAYS))
            answers.append(read(api, n % DAYS))
        tried = deployment.redis.counts.client_chunks + deployment.redis.counts.connections
        assert [a.status_code for a in answers] == [200] * (2 * REQUESTS)
        assert {a.json()["status"] for a in answers} == {"COMPLETED"}
        # After the first failure Redis is left alone (retry after 1 s here): a few tries, where
        # every request would otherwise have asked it two to four times.
        assert tried <= 12, deployment.redis.counts
        assert metric(api, "freehours_redis_unavailable_total") >= 1
        assert metric(api, "freehours_redis_bypassed_total") >= REQUESTS
        # Ready (the service runs on without Redis), and it says Redis is not answering.
        ready = api.get("/readyz")
        assert ready.status_code == 200
        assert ready.json() == {"status": "degraded", "database": "ok", "redis": "unavailable"}

        # Redis back: after the retry time (1 s), a request tries it, and it is used again. (On
        # a busy machine the first try may itself be slower than the limit and leave Redis
        # alone for another second: what must hold is that it is used again, not when.)
        deployment.redis.set_mode("pass")

        def used_again() -> bool:
            before = deployment.redis.counts.client_chunks
            assert settle(api, 0).status_code == 200
            return deployment.redis.counts.client_chunks > before

        eventually(used_again, within=20, what="Redis used again once it answers", every=0.2)
        for n in range(REQUESTS):
            assert settle(api, n % DAYS).status_code == 200
        ready = eventually(
            lambda: (answer := api.get("/readyz")).json()["redis"] == "ok" and answer,
            within=20,
            what="/readyz saying Redis answers",
        )
        assert ready.status_code == 200
        assert ready.json() == {"status": "ok", "database": "ok", "redis": "ok"}


def every_route(api: httpx.Client, n: int) -> dict[str, Callable[[], httpx.Response]]:
    """One request per /v1 route, each one that succeeds when the database answers (once day
    ``n`` is settled)."""
    reads = [{"start": "2026-07-15T00:00:00+10:00", "kwh": "0.100"}]
    upload = nem12(channel(NMI), day("20260715"))
    keys = iter(range(1_000_000))
    return {
        "put plan": lambda: api.put("/v1/plans/test-nsw", json=PLAN),
        "put customer": lambda: api.put(
            f"/v1/customers/{NMI}", json={"plan_id": "test-nsw", "region": "NSW"}
        ),
        "post reads": lambda: api.post(
            "/v1/meter-readings",
            json={"nmi": NMI, "suffix": "E1", "interval_minutes": 30, "reads": reads},
            headers={"Idempotency-Key": f"reads-{time.time_ns()}-{next(keys)}"},
        ),
        "post nem12": lambda: api.post(
            "/v1/meter-readings/nem12",
            content=upload.encode(),
            headers={
                "Content-Type": "text/csv",
                "Idempotency-Key": f"nem12-{time.time_ns()}-{next(keys)}",
            },
        ),
        "settle": lambda: settle(api, n),
        "read settlement": lambda: read(api, n),
        "bill": lambda: api.get(
            f"/v1/customers/{NMI}/bill", params={"from": "2026-06-01", "to": "2026-06-30"}
        ),
    }


def all_at_once(routes: dict[str, Callable[[], httpx.Response]]) -> dict[str, httpx.Response]:
    with ThreadPoolExecutor(max_workers=len(routes)) as pool:
        futures = {name: pool.submit(call) for name, call in routes.items()}
        return {name: future.result() for name, future in futures.items()}


@pytest.mark.parametrize("mode", ["cut", "blackhole"])
def test_without_the_database_every_route_is_a_503_problem_and_recovers_by_itself(
    deployment: Deployment, mode: Mode
) -> None:
    with deployment.client() as api:
        assert settle(api, 1).status_code == 200
        routes = every_route(api, 1)
        before = all_at_once(routes)
        assert {name: a.status_code for name, a in before.items()} == dict.fromkeys(routes, 200)

        deployment.database.set_mode(mode)
        # A day not settled yet, so that its settlement needs the database (a settled one is
        # answered from the cache, database or not: checked below).
        down = all_at_once(every_route(api, 2))
        for name, answer in down.items():
            assert answer.status_code == 503, (name, answer.text)
            assert answer.headers["content-type"] == PROBLEM_JSON, name
            assert int(answer.headers["Retry-After"]) >= 1, name
            assert answer.json()["type"] == "/problems/database-unavailable", name
            assert "psycopg" not in answer.text, name
            assert "SELECT" not in answer.text, name
        # A settled quota is answered from the cache meanwhile. (On a loaded machine a Redis call
        # can pass the slow mark and Redis be bypassed for FREEHOURS_REDIS_RETRY_SECONDS: then
        # the database is asked, and that is a 503 until Redis is used again.)
        replay = eventually(
            lambda: (answer := settle(api, 1)).status_code == 200 and answer,
            within=10,
            what="a replay from the cache",
        )
        assert replay.headers["Idempotent-Replayed"] == "true"
        ready = api.get("/readyz")
        assert ready.status_code == 503
        assert int(ready.headers["Retry-After"]) >= 1
        # Fixed words only: nothing of the driver's message, host or SQL.
        assert ready.json() == {
            "status": "unavailable",
            "database": "unavailable" if mode == "cut" else "not answering",
            "redis": "ok",
        }

        deployment.database.set_mode("pass")
        eventually(
            lambda: api.get("/readyz").status_code == 200,
            within=30,
            what="the server recovering by itself",
            every=0.2,
        )
        after = all_at_once(routes)
        assert {name: a.status_code for name, a in after.items()} == dict.fromkeys(routes, 200)
        assert settle(api, 2).json()["status"] == "COMPLETED"


@pytest.mark.parametrize("mode", ["cut", "blackhole"])
def test_without_the_database_metrics_answer_in_time_without_the_series_it_would_count(
    deployment: Deployment, mode: Mode
) -> None:
    with deployment.client() as api:
        assert "freehours_jobs_stuck 0.0" in api.get("/metrics").text.splitlines()
        deployment.database.set_mode(mode)
        time.sleep(FRESH_SECONDS)  # the count just made is not reused
        began = time.monotonic()
        down = api.get("/metrics")
        took = time.monotonic() - began
        assert down.status_code == 200
        assert took < MEASURE_TIMEOUT_SECONDS + 2.0, took  # its wait for the count, and no more
        names = {line.split("{")[0].split(" ")[0] for line in down.text.splitlines()}
        assert "freehours_jobs_stuck" not in names  # not counted: left out, not made up
        assert "freehours_http_requests_total" in names  # the rest is there

        deployment.database.set_mode("pass")
        eventually(
            lambda: "freehours_jobs_stuck 0.0" in api.get("/metrics").text.splitlines(),
            within=30,
            what="the count back once the database answers",
            every=0.5,
        )
