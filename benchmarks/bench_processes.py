"""Settlement over real HTTP from ``freehours serve --processes N`` (N = 1, 2) on PostgreSQL, 32
concurrent clients: what another API process adds on this machine (docs/deployment.md, "Sizing").

Each run settles every quota once for real (claim, rate, complete with its ledger entry), then
asks for them all again (replays, answered from the in-process cache of whichever process gets
the request). The load generator runs on the same cores as the server: on a 2-core machine a
second process competes with it and with PostgreSQL, so the figure is a floor, not a ceiling.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

from benchmarks.bench_api import CONNECTIONS, _figures, prepare, quotas, settle_requests
from benchmarks.bench_ingest import DEFAULT_SERVER
from benchmarks.loadgen import load
from benchmarks.scale import size
from tests.databases import fresh_postgres_database
from tests.servers import FREEHOURS, free_port, stop, wait_until_up

PROCESSES = size((1, 2), (1, 2))


def run() -> None:
    server = os.environ.get("FREEHOURS_BENCH_DATABASE_URL", DEFAULT_SERVER)
    rates: dict[int, float] = {}
    for processes in PROCESSES:
        with fresh_postgres_database(server, prefix="freehours_bench") as url:
            key = prepare(url)
            due = quotas()
            headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
            with _serve(url, processes) as port:
                fresh = load("127.0.0.1", port, settle_requests(due, headers), CONNECTIONS)
                replay = load("127.0.0.1", port, settle_requests(due, headers), CONNECTIONS)
        if fresh.statuses != {200: len(due)} or replay.statuses != {200: len(due)}:
            raise SystemExit(f"unexpected answers: {fresh.statuses}, {replay.statuses}")
        rates[processes] = fresh.rate
        print(f"processes {processes} settlements: {_figures(fresh)}")
        print(f"processes {processes} replays: {_figures(replay)}")
    print(f"processes: 2 processes settle {rates[2] / rates[1]:.2f}x what 1 does on this machine")


@contextmanager
def _serve(url: str, processes: int) -> Iterator[int]:
    port = free_port()
    env = {
        **os.environ,
        "FREEHOURS_DATABASE_URL": url,
        "FREEHOURS_RATE_LIMIT_PER_CLIENT": "1000000/minute",
    }
    env.pop("FREEHOURS_REDIS_URL", None)  # as bench_api: the in-process cache
    process = subprocess.Popen(
        [FREEHOURS, "serve", "--port", str(port), "--processes", str(processes)],
        env=env,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_until_up(f"http://127.0.0.1:{port}", process)
        yield port
    finally:
        stop(process)
