"""NEM12 bulk ingest: the reference file into PostgreSQL (goal) and SQLite, reading included.

The file is the reader benchmark's (1,000 NMIs x 31 days x E1+B1 at 30 minutes: 2,976,000
values), generated into ./bench-out/ when missing. PostgreSQL gets a fresh database, created and
dropped here, on the server at FREEHOURS_BENCH_DATABASE_URL (default: the local one); SQLite a
new file. Each is timed from opening the file to the commit, as ``freehours nem12 import`` does it.
"""

from __future__ import annotations

import os
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import sqlalchemy as sa

from benchmarks.bench_nem12 import bench_file
from freehours.meterdata.nem12 import read_days
from freehours.store.database import Store
from freehours.store.tables import meter_days
from tests.databases import fresh_postgres_database

#: Interval values per second into PostgreSQL, reading included (issue 4).
GOAL = 200_000
DEFAULT_SERVER = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"


def run() -> None:
    path = bench_file()
    server = os.environ.get("FREEHOURS_BENCH_DATABASE_URL", DEFAULT_SERVER)
    try:
        with fresh_postgres_database(server, prefix="freehours_bench") as url:
            values, seconds = _ingest(url, path)
    except sa.exc.OperationalError as exc:
        print(f"ingest postgres: not measured: {server}: {exc.orig}")
    else:
        rate = values / seconds
        print(
            f"ingest postgres: {rate:,.0f} values/s ({seconds:.1f} s): "
            f"{rate / GOAL:.2f}x goal (>= {GOAL:,})"
        )
    with tempfile.TemporaryDirectory(prefix="freehours-bench-") as directory:
        values, seconds = _ingest(f"sqlite:///{Path(directory) / 'ingest.db'}", path)
    print(f"ingest sqlite: {values / seconds:,.0f} values/s ({seconds:.1f} s), no goal")


def _ingest(url: str, path: Path) -> tuple[int, float]:
    """Import ``path`` into the new database at ``url``; return values stored and seconds taken."""
    with Store.open(url) as store:
        started = time.perf_counter()
        with store.write() as unit:
            counts = unit.meter.ingest_days(read_days(path), received_at=datetime.now(UTC))
        seconds = time.perf_counter() - started
        with store.read() as unit:
            intervals = unit.connection.scalar(
                sa.select(sa.func.sum(sa.func.length(meter_days.c.qualities)))
            )
    if counts.accepted != counts.total or not intervals:
        raise RuntimeError(f"{url}: expected every day new, got {counts}")
    return int(intervals), seconds
