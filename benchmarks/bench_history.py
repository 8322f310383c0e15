"""A day's ingest and settlement on a database that holds a year of history, against the same
day on an empty one: what the partitioned layout (migration 0006) is for.

``python -m benchmarks history`` (a section of ``make bench``). For
``FREEHOURS_BENCH_HISTORY_CUSTOMERS`` customers (default 10,000), two databases of their own
(``FREEHOURS_BENCH_DATABASE_URL``, default the local PostgreSQL):

- *empty*: the customers, then the day of ``benchmarks.bench_day`` (31 July 2026) ingested by
  ``freehours nem12 import`` and settled by two ``freehours worker`` processes;
- *a year*: the same, after the 365 days before it were loaded as they would be after a year of
  running: each day's E1 and B1 rows (30-minute), a COMPLETED quota, its ledger entry and its
  quota events (LOCKED, COMPLETED), each in its month's partition, then ``VACUUM ANALYZE`` as
  autovacuum would. The history is written by ``INSERT ... SELECT`` over ``generate_series`` in
  PostgreSQL itself, every day's rows the same text: it is there to be stored and indexed, not
  read. Finished jobs are not loaded: they are dropped after ``FREEHOURS_JOB_RETENTION_HOURS``.

Goal (issue 18): the day's settlement on a year of history within 20% of the empty database's
(history over empty <= 1.2), and its ingest likewise. Issue 18 states it at 100,000 customers:
36.5 million customer-days, about 95 GB at the measured bytes per customer-day, more than this
machine's disk has free; the default is a tenth of that.
"""

from __future__ import annotations

import os
import time
from datetime import timedelta

import sqlalchemy as sa

from benchmarks import bench_day
from benchmarks.bench_ingest import DEFAULT_SERVER
from benchmarks.scale import size
from freehours.store import partitions
from tests.databases import fresh_postgres_database

DAYS = 365
CUSTOMERS = size(10_000, 50)
FIRST = bench_day.DAY - timedelta(days=DAYS)
LAST = bench_day.DAY - timedelta(days=1)
GOAL = 1.2
#: One day's values as a household's meter reads them (kWh, three decimals), and the free
#: energy its quota settled.
E1 = ",".join(["0.250"] * 22 + ["0.500"] * 6 + ["0.250"] * 20)
B1 = ",".join(["0.000"] * 20 + ["0.100"] * 10 + ["0.000"] * 18)
FREE_KWH, FREE_VALUE = "3.000", "0.00"

HISTORY = [
    (
        "meter_days",
        "INSERT INTO meter_days (nmi, suffix, day, interval_minutes, uom, interval_values,"
        " qualities, update_datetime, received_at)"
        " SELECT c.nmi, s.suffix, d::date, 30, 'KWH', s.vals, repeat('A', 48),"
        " d + interval '27 hours', d + interval '28 hours'"
        " FROM customers c CROSS JOIN generate_series(CAST(:first AS date), CAST(:last AS date),"
        " interval '1 day') d CROSS JOIN (VALUES ('E1', :e1), ('B1', :b1)) s(suffix, vals)",
    ),
    (
        "quotas",
        "INSERT INTO quotas (nmi, day, version, status, fence, attempts, locked_until, free_kwh,"
        " free_value, completed_at, reason, revision)"
        " SELECT c.nmi, d::date, 1, 'COMPLETED', 1, 0, NULL, :kwh, :value,"
        " d + interval '29 hours', NULL, 1"
        " FROM customers c CROSS JOIN generate_series(CAST(:first AS date), CAST(:last AS date),"
        " interval '1 day') d",
    ),
    (
        "ledger_entries",
        "INSERT INTO ledger_entries (nmi, day, version, kwh, amount, booked_at)"
        " SELECT nmi, day, version, free_kwh, free_value, completed_at FROM quotas",
    ),
    (
        "quota_events",
        "INSERT INTO quota_events (nmi, day, version, at, status, fence, attempts)"
        " SELECT q.nmi, q.day, 1, q.completed_at - e.before, e.status, 1, 0 FROM quotas q"
        " CROSS JOIN (VALUES ('LOCKED', interval '1 second'), ('COMPLETED', interval '0'))"
        " e(status, before)",
    ),
]


def run() -> None:
    server = os.environ.get("FREEHOURS_BENCH_DATABASE_URL", DEFAULT_SERVER)
    customers = int(os.environ.get("FREEHOURS_BENCH_HISTORY_CUSTOMERS", CUSTOMERS))
    empty = bench_day.Figures(customers)
    with fresh_postgres_database(server, prefix="freehours_bench") as url:
        bench_day._measure(url, empty, importers=2, workers=2, bill=False)
    year = bench_day.Figures(customers)
    loaded: dict[str, float] = {}
    with fresh_postgres_database(server, prefix="freehours_bench") as url:
        bench_day._measure(
            url,
            year,
            importers=2,
            workers=2,
            bill=False,
            history=lambda url, n: loaded.update(_load_history(url)),
        )
        history_bytes = _history_bytes(url)
    print(
        f"history postgres {customers:,} customers: a year loaded ({customers * DAYS:,}"
        f" customer-days, {history_bytes / 1e9:,.1f} GB) in {sum(loaded.values()):.0f} s ("
        + ", ".join(f"{table} {seconds:.0f} s" for table, seconds in loaded.items())
        + ")"
    )
    for what, on_year, on_empty in (
        ("ingest", year.ingest_seconds, empty.ingest_seconds),
        ("settlement", year.settle_seconds, empty.settle_seconds),
    ):
        ratio = on_year / on_empty
        print(
            f"history postgres {customers:,} customers: the day's {what} {on_year:.1f} s on a"
            f" year of history, {on_empty:.1f} s on an empty database: {ratio:.2f}x"
            f" (goal <= {GOAL}): {ratio / GOAL:.2f}x goal"
        )


def _load_history(url: str) -> dict[str, float]:
    """The year before the day, month by month in its partitions; seconds per table."""
    took = {}
    with (
        bench_day.stderr.status(f"a year of history: {DAYS} days"),
        bench_day._connect(url) as conn,
    ):
        month = partitions.month_of(FIRST)
        while month <= LAST:
            for layout in partitions.HISTORY:
                partitions.create_month(conn, layout, month)
            month = partitions.add_months(month, 1)
        conn.commit()
        parameters = {
            "first": FIRST,
            "last": LAST,
            "e1": E1,
            "b1": B1,
            "kwh": FREE_KWH,
            "value": FREE_VALUE,
        }
        for table, statement in HISTORY:
            started = time.perf_counter()
            conn.execute(sa.text(statement), parameters)
            conn.commit()
            # Statistics before the next table's foreign key checks look these rows up.
            conn.execute(sa.text(f"ANALYZE {table}"))
            conn.commit()
            took[table] = time.perf_counter() - started
        for layout in partitions.HISTORY:
            if partitions.default_rows(conn, layout):
                raise SystemExit(f"history: rows of {layout.parent} in its default partition")
    with bench_day._engine(url).connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        started = time.perf_counter()
        conn.execute(sa.text("VACUUM ANALYZE"))
        took["vacuum analyze"] = time.perf_counter() - started
    return took


def _history_bytes(url: str) -> int:
    with bench_day._connect(url) as conn:
        return int(
            conn.execute(sa.text("SELECT pg_database_size(current_database())")).scalar_one()
        )
