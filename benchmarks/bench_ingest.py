"""NEM12 bulk ingest: the reference file into PostgreSQL (goal) and SQLite, reading included;
then a retailer's day (issue 18) through ``freehours nem12 import``.

The file is the reader benchmark's (1,000 NMIs x 31 days x E1+B1 at 30 minutes: 2,976,000
values), generated into ./bench-out/ when missing. PostgreSQL gets a fresh database, created and
dropped here, on the server at FREEHOURS_BENCH_DATABASE_URL (default: the local one); SQLite a
new file. Each is timed from opening the file to the commit, as ``freehours nem12 import`` does it.

The day: ``FREEHOURS_BENCH_DAY_CUSTOMERS`` customers (default 20,000) registered across the four
regions in a fresh PostgreSQL database, one NEM date of E1 and B1 for each (a tenth at 5-minute),
in MDP files of 1,000 NMIs (``benchmarks.dayload``), loaded by ``freehours nem12 import`` as a
whole process: every settlement job scheduled, every file recorded. Its figures are projected
linearly to 1,000,000 customers against issue 18's two minutes.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import sqlalchemy as sa

from benchmarks.bench_nem12 import OUT, bench_file
from benchmarks.dayload import register_customers, write_day_files
from benchmarks.processes import freehours
from freehours.domain.time import NEM_TIME
from freehours.meterdata.nem12 import read_days
from freehours.store.database import Store
from freehours.store.tables import ingestions, jobs, meter_days

#: Interval values per second into PostgreSQL, reading included (issue 4).
GOAL = 200_000
DEFAULT_SERVER = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
#: Issue 18: a million customers' day ingested in under two minutes.
DAY_CUSTOMERS_GOAL = 1_000_000
DAY_SECONDS_GOAL = 120.0


def run() -> None:
    path = bench_file()
    server = os.environ.get("FREEHOURS_BENCH_DATABASE_URL", DEFAULT_SERVER)
    try:
        with _fresh_postgres_database(server) as url:
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
    try:
        with _fresh_postgres_database(server) as url:
            _day(url, int(os.environ.get("FREEHOURS_BENCH_DAY_CUSTOMERS", "20000")))
    except sa.exc.OperationalError as exc:
        print(f"ingest day: not measured: {server}: {exc.orig}")


def _day(url: str, customers: int) -> None:
    """A retailer's day of ``customers`` through ``freehours nem12 import``, as a process."""
    day = (datetime.now(NEM_TIME) - timedelta(days=1)).date()
    paths = write_day_files(OUT / f"day-{customers}", customers, day)
    with Store.open(url) as store:
        register_customers(store, customers)
    command = freehours("nem12", "import", *map(str, paths))
    environment = {**os.environ, "FREEHOURS_DATABASE_URL": url}
    started = time.perf_counter()
    subprocess.run(command, env=environment, check=True, capture_output=True)
    seconds = time.perf_counter() - started
    with Store.open(url) as store, store.read() as unit:
        conn = unit.connection
        values = int(
            conn.scalar(sa.select(sa.func.sum(sa.func.length(meter_days.c.qualities)))) or 0
        )
        days = int(conn.scalar(sa.select(sa.func.count()).select_from(meter_days)) or 0)
        scheduled = int(conn.scalar(sa.select(sa.func.count()).select_from(jobs)) or 0)
        recorded = int(conn.scalar(sa.select(sa.func.count()).select_from(ingestions)) or 0)
    if days != 2 * customers or scheduled != customers or recorded != len(paths):
        raise RuntimeError(
            f"ingest day: expected {2 * customers:,} channel-days, {customers:,} jobs and"
            f" {len(paths)} ingestions; got {days:,}, {scheduled:,} and {recorded}"
        )
    per_100k = seconds / customers * 100_000
    projected = per_100k * DAY_CUSTOMERS_GOAL / 100_000
    print(
        f"ingest day: {customers:,} customers in {len(paths)} files through nem12 import,"
        f" {seconds:.1f} s: {values / seconds:,.0f} values/s, {days / seconds:,.0f}"
        f" channel-days/s, {per_100k:.1f} s per 100,000 customers, {scheduled:,} jobs enqueued"
    )
    print(
        f"ingest day: projected to {DAY_CUSTOMERS_GOAL:,} customers: {projected:,.0f} s:"
        f" {DAY_SECONDS_GOAL / projected:.2f}x goal (<= {DAY_SECONDS_GOAL:.0f} s)"
    )


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


@contextmanager
def _fresh_postgres_database(server: str) -> Iterator[str]:
    """A new, empty database on ``server``, dropped (connections and all) afterwards."""
    admin = sa.create_engine(server, isolation_level="AUTOCOMMIT")
    name = f"freehours_bench_{uuid.uuid4().hex[:12]}"
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    try:
        yield admin.url.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
