"""Invoicing: an invoice run over 100,000 accounts with a month of settled days each, on
PostgreSQL, by two worker processes; invoices finalised per second and the workers' peak memory.

The goal (issue 16): at least 500 invoices finalised a second, memory flat in the number of
accounts. For each of ``ACCOUNTS`` (10,000, then 100,000) a fresh database is created
(``FREEHOURS_BENCH_DATABASE_URL``, default the local PostgreSQL), migrated by ``Store.open``,
loaded, invoiced, checked and dropped.

The load is not measured. Each account is a customer on the built-in plan ``sso-nsw`` (NSW) with
July 2026 settled: E1 and B1 day rows, 30-minute, stored as ``freehours.store.meter`` stores
them; for each local day a COMPLETED quota version 1 and its ledger entry. A settlement of 3.1
million quotas would take far longer than what it feeds, so the bench writes these rows itself,
with ``COPY`` on a psycopg connection of its own: the one place it writes SQL directly. Their
free energy is what the settlement computes (``freehours.settlement.energy.free_energy``), worked
out once for each of ``PATTERNS`` day profiles and each date, and shared by the accounts.

The run is what production does: ``Invoicing.start_run`` as of 10 August 2026, its plan job
and batch jobs run by two ``freehours worker`` processes (default settings: 4 threads each,
batches of ``FREEHOURS_INVOICE_BATCH_SIZE`` accounts, at most 2 batches held by a worker at once:
``freehours.workers.invoice.BatchTask.hold``, so both share a run's batches), started before the
run and idle until it.
Invoices per second are counted from the run's ``requested_at`` to its ``finished_at``, and over
the documents' ``finalised_at`` (when the first batch began finalising to when the last did: the
batches' own pace, without the plan job and the first batches' drafting). Also printed: batch
attempts that failed and were retried (from the workers' logs), and each worker's peak memory
(``VmHWM``), idle and after the run.

Then the run is checked: one invoice per account, serials 1 to N without a gap, and the invoice's
free kWh the ledger's for a sample of accounts.

``FREEHOURS_BENCH_INVOICE_ACCOUNTS`` (comma-separated) runs other sizes instead, for a quicker
look (``2000,10000``: under a minute); the goal is stated at 100,000.
"""

from __future__ import annotations

import os
import random
import subprocess
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import psycopg
import sqlalchemy as sa

from benchmarks.bench_day import copy_lines
from benchmarks.scale import size
from benchmarks.workers import failures, peak_rss, start_worker, stop_worker, warnings_only
from freehours.clock import SystemClock
from freehours.domain.invoicing import Series
from freehours.domain.profiles import DayProfiles
from freehours.domain.reads import IntervalDay
from freehours.domain.time import Region
from freehours.invoicing.service import Invoicing
from freehours.plans import builtin_document
from freehours.plans.document import parse_plan
from freehours.settlement.energy import free_energy
from freehours.store.database import Store
from freehours.store.meter import encode_values
from freehours.store.tables import documents, ledger_entries
from tests.databases import fresh_postgres_database

DEFAULT_ADMIN_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
#: Accounts of each run: memory at the first and the last is compared.
ACCOUNTS = size((10_000, 100_000), (50, 100))
GOAL_RATE = 500  # invoices/s
WORKERS = 2
PLAN_ID = "sso-nsw"
JULY = [date(2026, 7, 1) + timedelta(days=n) for n in range(31)]
AS_OF = datetime(2026, 8, 10, tzinfo=UTC)
STAMP = datetime(2026, 7, 31, 23, 0, tzinfo=UTC)
#: Consumption profiles: account n has ``PATTERNS[n % len(PATTERNS)]`` times the base day.
PATTERNS = (Decimal("1"), Decimal("0.6"), Decimal("1.4"), Decimal("2.2"))
INTERVALS = 48
#: Accounts whose invoice is compared with their ledger.
SAMPLE = 50
#: A run that has not finished in this long is broken, not slow.
RUN_TIMEOUT = 1200.0


def run() -> None:
    admin_url = os.environ.get("FREEHOURS_BENCH_DATABASE_URL", DEFAULT_ADMIN_URL)
    counts = _accounts()
    peaks = {}
    with warnings_only():  # ``start_run`` logs each run it starts
        for accounts in counts:
            peaks[accounts] = _measure(admin_url, accounts)
    if len(counts) > 1:
        low, high = peaks[counts[0]], peaks[counts[-1]]
        print(
            f"invoicing postgres: worker peak memory {low / 2**20:,.0f} MiB at {counts[0]:,}"
            f" accounts, {high / 2**20:,.0f} MiB at {counts[-1]:,}: {high / low:.2f}x"
            " (goal: flat, near 1x)"
        )


def _accounts() -> tuple[int, ...]:
    given = os.environ.get("FREEHOURS_BENCH_INVOICE_ACCOUNTS")
    if not given:
        return ACCOUNTS
    return tuple(int(n) for n in given.split(","))


def _measure(admin_url: str, accounts: int) -> int:
    """One run over ``accounts`` in a database of its own; the workers' largest peak RSS."""
    with (
        fresh_postgres_database(admin_url, prefix="freehours_bench") as url,
        Store.open(url) as store,
        tempfile.TemporaryDirectory() as logs,
    ):
        paths = [Path(logs) / f"worker-{n}.log" for n in range(WORKERS)]
        workers = [start_worker(url, path) for path in paths]
        try:
            started = time.perf_counter()
            took = _load(store, url, accounts)
            loaded = time.perf_counter() - started
            peaks = _invoice(store, accounts, workers, paths)
        finally:
            for worker in workers:
                stop_worker(worker)
        _check(store, accounts)
        print(
            f"invoicing postgres {accounts:,} accounts: loaded in {loaded:.0f} s ("
            + ", ".join(f"{table} {seconds:.1f} s" for table, seconds in took.items())
            + "), checked: one invoice each, serials 1 to N, free kWh as the ledger's"
            f" for {min(SAMPLE, accounts)}"
        )
    return max(peaks)


# --- the load ---------------------------------------------------------------------------------


def _nmi(n: int) -> str:
    return f"4{n:09d}"


def _consumption(day: date, scale: Decimal) -> IntervalDay:
    values = tuple(
        (Decimal("0.500") if 22 <= i < 28 else Decimal("0.250")) * scale for i in range(INTERVALS)
    )
    return IntervalDay("4000000000", "E1", day, 30, values, "A" * INTERVALS, STAMP)


def _export(day: date) -> IntervalDay:
    values = tuple(Decimal("0.100") if 20 <= i < 30 else Decimal(0) for i in range(INTERVALS))
    return IntervalDay("4000000000", "B1", day, 30, values, "A" * INTERVALS, STAMP)


def _load(
    store: Store, url: str, accounts: int, meter_dates: list[date] = JULY
) -> dict[str, float]:
    """Load ``accounts`` settled accounts (July settled; meter data on ``meter_dates``, each
    date's rows the pattern's July ones); the seconds each table took."""
    took: dict[str, float] = {}
    now = datetime.now(UTC)
    with store.write() as unit:
        stored = unit.catalog.put_plan(PLAN_ID, builtin_document(PLAN_ID), updated_at=now)
    plan = parse_plan(stored.document, source=PLAN_ID)
    profiles = DayProfiles(plan)
    # Every pattern's day rows, and its free energy on each date as the settlement works it out.
    rows: list[dict[date, list[IntervalDay]]] = []
    free: list[dict[date, tuple[Decimal, Decimal]]] = []
    for scale in PATTERNS:
        days = {day: [_consumption(day, scale), _export(day)] for day in JULY}
        rows.append(days)
        free.append(
            {
                day: free_energy(
                    plan,
                    profiles,
                    [row for nem in plan.nem_dates(day) for row in days.get(nem, [])],
                    day,
                )
                for day in JULY
            }
        )
    stamp = STAMP.isoformat()
    received = now.isoformat()
    meter_text = [
        {
            day: [
                f"{row.suffix}\t{day.isoformat()}\t30\tKWH\t{encode_values(row.values)}\t"
                f"{row.qualities}\t{stamp}\t{received}\n"
                for row in pattern[JULY[0]]
            ]
            for day in meter_dates
        }
        for pattern in rows
    ]
    quota_text = [
        {
            day: (
                f"{day.isoformat()}\t1\tCOMPLETED\t1\t0\t\\N\t{kwh}\t{value}\t{received}\t\\N\t2\n",
                f"{day.isoformat()}\t1\t{kwh}\t{value}\t{received}\n",
            )
            for day, (kwh, value) in pattern.items()
        }
        for pattern in free
    ]

    def customer_lines() -> Iterator[str]:
        for n in range(accounts):
            yield f"{_nmi(n)}\t{PLAN_ID}\t{Region.NSW.value}\t{received}\tmonthly\t1\t21\n"

    def meter_lines() -> Iterator[str]:
        for n in range(accounts):
            nmi = _nmi(n)
            pattern = meter_text[n % len(PATTERNS)]
            for day in meter_dates:
                for line in pattern[day]:
                    yield f"{nmi}\t{line}"

    def quota_lines(which: int) -> Iterator[str]:
        for n in range(accounts):
            nmi = _nmi(n)
            pattern = quota_text[n % len(PATTERNS)]
            for day in JULY:
                yield f"{nmi}\t{pattern[day][which]}"

    conninfo = sa.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(conninfo) as conn:
        conn.execute("SET synchronous_commit = off")
        for table, columns, lines in (
            (
                "customers",
                "nmi, plan_id, region, updated_at, billing_frequency, anchor_day,"
                " payment_term_days",
                customer_lines(),
            ),
            (
                "meter_days",
                "nmi, suffix, day, interval_minutes, uom, interval_values, qualities,"
                " update_datetime, received_at",
                meter_lines(),
            ),
            (
                "quotas",
                "nmi, day, version, status, fence, attempts, locked_until, free_kwh, free_value,"
                " completed_at, reason, revision",
                quota_lines(0),
            ),
            ("ledger_entries", "nmi, day, version, kwh, amount, booked_at", quota_lines(1)),
        ):
            started = time.perf_counter()
            copy_lines(conn, table, columns, lines)
            conn.commit()
            took[table] = time.perf_counter() - started
        conn.autocommit = True
        started = time.perf_counter()
        conn.execute("VACUUM ANALYZE")
        took["vacuum analyze"] = time.perf_counter() - started
    return took


# --- the run ----------------------------------------------------------------------------------


def _invoice(
    store: Store, accounts: int, workers: list[subprocess.Popen[bytes]], logs: list[Path]
) -> list[int]:
    for worker in workers:
        if worker.poll() is not None:
            raise RuntimeError(f"worker process exited with {worker.returncode} before the run")
    before = [peak_rss(worker.pid) for worker in workers]
    invoicing = Invoicing(store, SystemClock())
    run = invoicing.start_run(as_of=AS_OF)
    deadline = time.monotonic() + RUN_TIMEOUT
    while True:
        with store.read() as unit:
            done = unit.invoices.get_run(run.run_id)
        assert done is not None
        if done.finished:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"the run did not finish in {RUN_TIMEOUT:g} s: {done}")
        for worker in workers:
            if worker.poll() is not None:
                raise RuntimeError(f"worker process exited with {worker.returncode}")
        time.sleep(0.1)
    peaks = [peak_rss(worker.pid) for worker in workers]
    assert done.finished_at is not None
    seconds = (done.finished_at - done.requested_at).total_seconds()
    with store.read() as unit:
        d = documents.c
        first, last = unit.connection.execute(
            sa.select(sa.func.min(d.finalised_at), sa.func.max(d.finalised_at))
        ).one()
    invoices = done.counts.invoices
    rate = invoices / seconds
    batched = (last - first).total_seconds()
    print(
        f"invoicing postgres {accounts:,} accounts, {WORKERS} worker processes: {invoices:,}"
        f" invoices in {seconds:.1f} s: {rate:,.0f} invoices/s (goal >= {GOAL_RATE}):"
        f" {rate / GOAL_RATE:.2f}x; first to last batch committed {batched:.1f} s"
        f" ({invoices / max(batched, 1e-6):,.0f}/s); worker peak memory"
        f" {', '.join(f'{peak / 2**20:,.0f}' for peak in peaks)} MiB"
        f" (idle {', '.join(f'{peak / 2**20:,.0f}' for peak in before)})"
    )
    failed = failures(logs)
    if failed:
        print(
            f"invoicing postgres {accounts:,} accounts: {len(failed)} batch attempts failed"
            f" (retried), the first: {failed[0].splitlines()[0]}"
        )
    return peaks


def _check(store: Store, accounts: int) -> None:
    with store.read() as unit:
        d = documents.c
        total, nmis = unit.connection.execute(
            sa.select(sa.func.count(), sa.func.count(sa.distinct(d.nmi)))
        ).one()
        if (total, nmis) != (accounts, accounts):
            raise SystemExit(f"invoicing: {total} documents for {nmis} of {accounts} accounts")
        serials = unit.invoices.serials(Series.INVOICE)
        if serials != list(range(1, accounts + 1)):
            raise SystemExit("invoicing: the invoice serials are not 1 to N without a gap")
        sample = sorted(random.Random(16).sample(range(accounts), min(SAMPLE, accounts)))
        for n in sample:
            nmi = _nmi(n)
            invoiced = unit.connection.scalar(sa.select(d.free_kwh).where(d.nmi == nmi))
            e = ledger_entries.c
            booked = sum(unit.connection.scalars(sa.select(e.kwh).where(e.nmi == nmi)), Decimal(0))
            if invoiced != booked:
                raise SystemExit(f"invoicing: {nmi} invoiced {invoiced} kWh free, ledger {booked}")


if __name__ == "__main__":
    run()
