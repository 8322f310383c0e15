"""Settlement over real HTTP on 127.0.0.1, 32 concurrent clients, on SQLite and on PostgreSQL,
beside the same stack's floor (one ``SELECT 1`` transaction) measured in the same run.

Every settlement request settles a different quota for real (claim, rate, complete with its
ledger entry); those that arrive while the server's settlement threads are busy are settled
together (``freehours.api.batching``: the requests a batch is printed); a second pass asks for
the same quotas again (replays, answered from the cache).
Goal (issue 36; issue 4's was half): fresh settlements at least three quarters of the floor's
throughput, on each database (where the time goes: docs/scale.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import httpx

from benchmarks.bench_ingest import DEFAULT_SERVER
from benchmarks.loadgen import LoadResult, load, request
from benchmarks.scale import size
from freehours.api.keys import Scope, create_key
from freehours.domain.reads import IntervalDay
from freehours.domain.time import NEM_TIME, Region
from freehours.plans import builtin_document
from freehours.store.database import Store
from tests.databases import fresh_postgres_database
from tests.metrics import Samples
from tests.servers import free_port

GOAL = 0.75
NMIS = size(500, 20)
DAYS = size(6, 2)
FLOOR_REQUESTS = size(4000, 100)
CONNECTIONS = 32
FIRST_DAY = date(2026, 7, 1)


def run() -> None:
    with tempfile.TemporaryDirectory(prefix="freehours-bench-") as directory:
        _measure("sqlite", f"sqlite:///{Path(directory) / 'api.db'}")
    server = os.environ.get("FREEHOURS_BENCH_DATABASE_URL", DEFAULT_SERVER)
    with fresh_postgres_database(server, prefix="freehours_bench") as url:
        _measure("postgres", url)


def _measure(backend: str, url: str) -> None:
    key = prepare(url)
    due = quotas()
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    with _server(url) as port:
        floor = load("127.0.0.1", port, _floor_requests("/bench/floor"), CONNECTIONS)
        threads = load(
            "127.0.0.1", port, _floor_requests("/bench/floor-settle-threads"), CONNECTIONS
        )
        before = _batches(port)
        fresh = load("127.0.0.1", port, settle_requests(due, headers), CONNECTIONS)
        after = _batches(port)
        replay = load("127.0.0.1", port, settle_requests(due, headers), CONNECTIONS)
    _check(fresh, replay, len(due))
    batches, settled = after[0] - before[0], after[1] - before[1]
    print(f"api {backend} floor (SELECT 1): {_figures(floor)}")
    print(f"api {backend} floor on the settlement's threads: {_figures(threads)}")
    print(
        f"api {backend} settlements: {_figures(fresh)}: {fresh.rate / floor.rate:.2f} of the "
        f"floor (goal >= {GOAL}); {fresh.rate / threads.rate:.2f} of the floor on its threads;"
        f" {settled / batches:.1f} requests a batch ({batches:.0f} batches)"
    )
    print(f"api {backend} replays: {_figures(replay)}: {replay.rate / floor.rate:.2f} of the floor")


def _figures(result: LoadResult) -> str:
    return (
        f"{result.rate:,.0f} req/s, p50 {result.p50_ms:.1f} ms, p99 {result.p99_ms:.1f} ms "
        f"({result.requests} requests)"
    )


def _batches(port: int) -> tuple[float, float]:
    """The server's settlement batches so far, and the requests in them (its /metrics)."""
    samples = Samples.scrape(port)
    name = "freehours_api_settlement_batch_size"
    return samples.value(f"{name}_count"), samples.value(f"{name}_sum")


def _check(fresh: LoadResult, replay: LoadResult, count: int) -> None:
    if fresh.statuses != {200: count} or replay.statuses != {200: count}:
        raise SystemExit(f"unexpected answers: fresh {fresh.statuses}, replay {replay.statuses}")


def _floor_requests(path: str) -> Iterator[bytes]:
    raw = request("GET", path, {})
    return iter([raw] * FLOOR_REQUESTS)


def settle_requests(quotas: list[tuple[str, date]], headers: dict[str, str]) -> Iterator[bytes]:
    """A settlement request for each (NMI, date) of ``quotas``."""
    for nmi, day in quotas:
        body = json.dumps({"nmi": nmi, "date": day.isoformat()}).encode()
        yield request("POST", "/v1/free-energy/settlements", headers, body)


def quotas(nmis: int = NMIS, days: int = DAYS) -> list[tuple[str, date]]:
    """The (NMI, date) of every quota ``prepare`` made due: day by day, every NMI."""
    return [
        (f"BENCH{n:05d}", FIRST_DAY + timedelta(days=d)) for d in range(days) for n in range(nmis)
    ]


def prepare(url: str, nmis: int = NMIS, days: int = DAYS, scope: Scope = Scope.SETTLE) -> str:
    """Customers BENCH00000... on sso-nsw, ``days`` days of reads each (and one more), and a
    key of ``scope``: its secret."""
    now = datetime.now(UTC)
    stamp = datetime.combine(FIRST_DAY + timedelta(days=days + 2), datetime.min.time(), NEM_TIME)
    with Store.open(url) as store, store.write() as unit:
        unit.catalog.put_plan("sso-nsw", builtin_document("sso-nsw"), updated_at=now)
        for n in range(nmis):
            nmi = f"BENCH{n:05d}"
            unit.catalog.put_customer(nmi, plan_id="sso-nsw", region=Region.NSW, updated_at=now)
        readings = (
            IntervalDay(
                f"BENCH{n:05d}",
                "E1",
                FIRST_DAY + timedelta(days=d),
                30,
                tuple(Decimal("0.3") + Decimal(i % 7) / 10 for i in range(48)),
                "A" * 48,
                stamp,
            )
            for n in range(nmis)
            for d in range(days + 1)
        )
        unit.meter.ingest_days(readings, received_at=now)
        _, secret = create_key(unit.keys, frozenset({scope}), "bench", now)
    return secret


@contextmanager
def _server(url: str) -> Iterator[int]:
    port = free_port()
    env = {
        **os.environ,
        "FREEHOURS_DATABASE_URL": url,
        "FREEHOURS_RATE_LIMIT_PER_CLIENT": "1000000/minute",
    }
    env.pop("FREEHOURS_REDIS_URL", None)
    # Its request lines go where a server's go, not to this terminal.
    process = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.serve_api", str(port)],
        env=env,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        yield port
    finally:
        process.terminate()
        process.wait(timeout=10)
