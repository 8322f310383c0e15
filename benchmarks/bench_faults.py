"""Failing dependencies (issue 13): a real ``freehours serve`` on 127.0.0.1, its Redis and then its
PostgreSQL behind a ``FaultProxy`` (tests/faults/proxy.py), with the default timeouts (a smoke
run shortens those it waits out: ``SMOKE_TIMEOUTS``).

Redis healthy, hung (black-holed), killed (cut) and slow: fresh settlements from 8 concurrent
clients, their p50 and p99 latency, and what each fault added beside the limit (250 ms); and how
often the server still tried Redis. Then the database black-holed: how long until requests and
/readyz answer 503, beside their bounds, and how long until the server is ready again once the
database answers.
"""

from __future__ import annotations

import os
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import date
from urllib.parse import urlsplit

import httpx
import redis
import sqlalchemy as sa

from benchmarks.bench_api import prepare, quotas, settle_requests
from benchmarks.bench_ingest import DEFAULT_SERVER
from benchmarks.loadgen import LoadResult, load
from benchmarks.scale import size
from freehours.api.keys import Scope
from freehours.api.routes.operations import READY_TIMEOUT_SECONDS
from freehours.settings import Settings
from tests.databases import fresh_postgres_database
from tests.faults.proxy import Mode, fault_proxy
from tests.servers import api_server

LIMIT_ADDED_MS = 250.0
CONNECTIONS = 8
PER_PHASE = size(300, 30)
NMIS = size(100, 10)
DAYS = 20
FIRST_DAY = date(2026, 7, 1)
DEFAULT_REDIS = "redis://127.0.0.1:6379/0"
#: A smoke run's settings (``benchmarks.scale``), for the server and for the bounds this process
#: prints: the timeouts the black-holed database waits out (statement 15 s, connect and pool
#: 5 s), and how long Redis is bypassed after a fault (5 s), which each Redis fault waits out.
SMOKE_TIMEOUTS: dict[str, float] = size(
    {},
    {
        "database_statement_timeout_seconds": 2,
        "database_connect_timeout_seconds": 2,
        "database_pool_timeout_seconds": 2,
        "redis_retry_seconds": 1,
    },
)

#: (name, proxy mode, seconds each chunk waits in ``slow``)
REDIS_PHASES: list[tuple[str, Mode, float]] = [
    ("healthy", "pass", 0.0),
    ("hung", "blackhole", 0.0),
    ("killed", "cut", 0.0),
    ("slow (+30 ms a call)", "slow", 0.015),
    ("slow (+200 ms a call)", "slow", 0.1),
]


def run() -> None:
    server = os.environ.get("FREEHOURS_BENCH_DATABASE_URL", DEFAULT_SERVER)
    redis_url = os.environ.get("FREEHOURS_BENCH_REDIS_URL", DEFAULT_REDIS)
    try:
        redis.Redis.from_url(redis_url, socket_connect_timeout=2).ping()
    except redis.RedisError as exc:
        print(f"faults: not measured: Redis at {redis_url}: {exc}")
        return
    try:
        with fresh_postgres_database(server, prefix="freehours_bench") as url:
            key = prepare(url, NMIS, DAYS, Scope.ADMIN)
            due = quotas(NMIS, DAYS)
            _redis_faults(url, redis_url, key, due)
            _database_blackholed(url, redis_url, key, due[len(REDIS_PHASES) * PER_PHASE :])
    except sa.exc.OperationalError as exc:
        print(f"faults: not measured: {server}: {exc.orig}")


def _redis_faults(url: str, redis_url: str, key: str, quotas: list[tuple[str, date]]) -> None:
    settings = Settings(**SMOKE_TIMEOUTS)
    target = urlsplit(redis_url)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    with fault_proxy(target.hostname or "127.0.0.1", target.port or 6379) as proxy:
        env = _env(url, f"redis://127.0.0.1:{proxy.port}{target.path}")
        with api_server(env) as api:
            port = int(urlsplit(api).port or 0)
            _warm(api, key)
            healthy: LoadResult | None = None
            for n, (name, mode, delay) in enumerate(REDIS_PHASES):
                proxy.set_mode(mode, delay)
                batch = quotas[n * PER_PHASE : (n + 1) * PER_PHASE]
                result = load("127.0.0.1", port, settle_requests(batch, headers), CONNECTIONS)
                tried = proxy.counts.client_chunks + proxy.counts.connections
                proxy.set_mode("pass")
                healthy = healthy or result
                _report(name, result, healthy, tried)
                if mode != "pass":
                    _until_redis_used(api, settings.redis_retry_seconds)


def _report(name: str, result: LoadResult, healthy: LoadResult, tried: int) -> None:
    if result.statuses != {200: result.requests}:
        raise SystemExit(f"faults redis {name}: unexpected answers {result.statuses}")
    added_p50 = max(0.0, result.p50_ms - healthy.p50_ms)
    added_p99 = max(0.0, result.p99_ms - healthy.p99_ms)
    print(
        f"faults redis {name}: p50 {result.p50_ms:.1f} ms, p99 {result.p99_ms:.1f} ms "
        f"({result.requests} settlements, all 200, {result.rate:,.0f}/s); added p50 "
        f"{added_p50:.1f} ms, p99 {added_p99:.1f} ms: {added_p99 / LIMIT_ADDED_MS:.2f} of the "
        f"limit ({LIMIT_ADDED_MS:.0f} ms); Redis asked {tried} times"
    )


def _database_blackholed(
    url: str, redis_url: str, key: str, quotas: list[tuple[str, date]]
) -> None:
    settings = Settings(**SMOKE_TIMEOUTS)
    answer = settings.database_statement_timeout_seconds + 1
    bound = settings.database_pool_timeout_seconds + max(
        answer, settings.database_connect_timeout_seconds
    )
    target = sa.make_url(url)
    with fault_proxy(target.host or "127.0.0.1", target.port or 5432) as proxy:
        proxied = target.set(host="127.0.0.1", port=proxy.port).render_as_string(
            hide_password=False
        )
        with (
            api_server(_env(proxied, redis_url)) as api,
            httpx.Client(
                base_url=api, timeout=bound + 30, headers={"Authorization": f"Bearer {key}"}
            ) as client,
        ):
            _warm(api, key)
            proxy.set_mode("blackhole")

            def timed(call: str, n: int) -> tuple[str, int, float]:
                started = time.perf_counter()
                if call == "readyz":
                    status = client.get("/readyz").status_code
                else:
                    nmi, day = quotas[n]
                    body = {"nmi": nmi, "date": day.isoformat()}
                    status = client.post("/v1/free-energy/settlements", json=body).status_code
                return call, status, time.perf_counter() - started

            calls = [("settle", n) for n in range(CONNECTIONS)] + [("readyz", 0)]
            with ThreadPoolExecutor(max_workers=len(calls)) as pool:
                answers = list(pool.map(lambda c: timed(*c), calls))
            proxy.set_mode("pass")
            started = time.perf_counter()
            while client.get("/readyz").status_code != 200:
                time.sleep(0.1)
            recovered = time.perf_counter() - started
    settles = [(status, seconds) for call, status, seconds in answers if call == "settle"]
    ready = next((status, seconds) for call, status, seconds in answers if call == "readyz")
    statuses = sorted({status for status, _ in settles})
    slowest = max(seconds for _, seconds in settles)
    print(
        f"faults database black-holed: {len(settles)} settlements answered {statuses} within "
        f"{slowest:.1f} s (bound {bound:.0f} s: pool wait + the longest of connect and answer "
        f"timeouts): {slowest / bound:.2f} of it"
    )
    ready_bound = READY_TIMEOUT_SECONDS + 0.25  # its timeout, and a moment to answer
    print(
        f"faults database black-holed: /readyz answered {ready[0]} in {ready[1]:.2f} s "
        f"(bound {ready_bound:.2f} s): {ready[1] / ready_bound:.2f} of it; "
        f"ready again {recovered:.1f} s after the database answered"
    )


def _env(database_url: str, redis_url: str) -> dict[str, str]:
    return {
        "FREEHOURS_DATABASE_URL": database_url,
        "FREEHOURS_REDIS_URL": redis_url,
        "FREEHOURS_REDIS_PREFIX": f"bench:{uuid.uuid4().hex[:12]}:",
        "FREEHOURS_RATE_LIMIT_PER_CLIENT": "1000000/minute",
        "FREEHOURS_RATE_LIMIT_PER_NMI": "1000000/minute",
    } | {f"FREEHOURS_{name.upper()}": str(value) for name, value in SMOKE_TIMEOUTS.items()}


def _until_redis_used(api: str, retry_seconds: float) -> None:
    """Back to healthy for the next phase: after its retry time the breaker lets one call try
    Redis (here /readyz's ping), and closes once it answers in time."""
    with httpx.Client(base_url=api, timeout=30) as client:
        for _ in range(5):
            time.sleep(retry_seconds + 0.1)
            if client.get("/readyz").json().get("redis") == "ok":
                return
    raise SystemExit("faults: the server did not use Redis again once it answered")


def _warm(api: str, key: str) -> None:
    """A few requests, so that connections are open and the breaker has seen Redis answer."""
    with httpx.Client(base_url=api, timeout=30) as client:
        for _ in range(5):
            client.get("/readyz")
            client.get(
                f"/v1/customers/BENCH00000/bill?from={FIRST_DAY}&to={FIRST_DAY}",
                headers={"Authorization": f"Bearer {key}"},
            )
