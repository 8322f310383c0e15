"""``freehours customers import`` of 100,000 customers, each with a contact, into a fresh
PostgreSQL database (issue 34: under 30 s), timed as a whole process, start-up included.

The file is generated into ./bench-out/ when missing: the four built-in plans in turn, billing
cycles and anchor days varied, every customer with a name and a two-line supply address, half
with an email address and email delivery.
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import time
from pathlib import Path

import sqlalchemy as sa

from benchmarks.bench_ingest import DEFAULT_SERVER
from benchmarks.scale import size
from tests.databases import fresh_postgres_database

#: Seconds for 100,000 customers (issue 34).
GOAL_SECONDS = 30.0
CUSTOMERS = size(100_000, 500)
_PLANS = (
    ("sso-nsw", "NSW", "Newtown NSW 2042"),
    ("sso-seq", "SEQ", "Brisbane QLD 4000"),
    ("sso-sa", "SA", "Adelaide SA 5000"),
    ("mps-vic", "VIC", "Carlton VIC 3053"),
)


def customer_file(customers: int = CUSTOMERS) -> Path:
    """The benchmark's customer file of ``customers`` rows, made once."""
    path = Path("bench-out") / f"customers-{customers}.csv"
    if path.exists():
        return path
    path.parent.mkdir(exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow(
            ["nmi", "plan_id", "region", "billing_cycle", "anchor_day", "name",
             "supply_address_1", "supply_address_2", "email", "delivery"]
        )  # fmt: skip
        for n in range(customers):
            plan, region, locality = _PLANS[n % len(_PLANS)]
            emailed = n % 2 == 1
            writer.writerow(
                [f"62{n:08d}", plan, region, "quarterly" if n % 3 == 0 else "monthly",
                 1 + n % 28, f"Customer {n}", f"{n} Example Street", locality,
                 f"customer{n}@example.com" if emailed else "", "email" if emailed else "post"]
            )  # fmt: skip
    return path


def run(customers: int = CUSTOMERS) -> None:
    path = customer_file(customers)
    server = os.environ.get("FREEHOURS_BENCH_DATABASE_URL", DEFAULT_SERVER)
    try:
        with fresh_postgres_database(server, prefix="freehours_bench") as url:
            environment = {**os.environ, "FREEHOURS_DATABASE_URL": url}
            freehours = [str(Path(sys.executable).with_name("freehours"))]
            subprocess.run([*freehours, "db", "upgrade"], env=environment, check=True,
                           capture_output=True)  # fmt: skip
            started = time.perf_counter()
            subprocess.run([*freehours, "customers", "import", str(path)], env=environment,
                           check=True, capture_output=True)  # fmt: skip
            seconds = time.perf_counter() - started
            with sa.create_engine(url).connect() as conn:
                stored = conn.scalar(sa.text("SELECT count(*) FROM customer_contacts"))
    except sa.exc.OperationalError as exc:
        print(f"customers import postgres: not measured: {server}: {exc.orig}")
        return
    if stored != customers:
        raise RuntimeError(f"customers import: {stored} contacts stored of {customers}")
    goal = GOAL_SECONDS * customers / CUSTOMERS
    print(
        f"customers import postgres: {customers:,} customers in {seconds:.1f} s"
        f" ({customers / seconds:,.0f}/s, a whole process): {goal / seconds:.2f}x goal"
        f" (<= {goal:.0f} s)"
    )
