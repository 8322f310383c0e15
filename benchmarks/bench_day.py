"""A retailer's day at scale: N customers' day of NEM12 ingested, settled and billed on
PostgreSQL by the project's own commands, then every invariant checked.

``python -m benchmarks day --customers N [N ...]`` (``make bench-day``: 10,000, 100,000 and
1,000,000). For each N, in a database of its own (``FREEHOURS_BENCH_DATABASE_URL``, default the
local PostgreSQL), created, migrated and dropped here:

1. **Set-up, not measured.** N customers across the four regions (one in four each, on its
   region's built-in plan, billed monthly from the 1st), loaded by ``COPY``; and the day's NEM12
   files as meter data providers send them, ``FILE_NMIS`` NMIs a file: each NMI's E1 and B1 for
   31 July 2026, 30-minute, a tenth of them 5-minute. Their values are those of
   ``PROFILES`` simulated households (``freehours.sim.meters``), written by
   ``freehours.meterdata.writer``, each NMI drawing one.
2. **Ingest**: ``freehours nem12 import`` over the files, ``IMPORTERS`` processes at once (the
   files shared between them): every file one transaction, each scheduling its quotas' settlement
   jobs. Timed from the first process's start to the last one's exit.
3. **Settlement**: ``WORKERS`` ``freehours worker`` processes are started once the import is
   done. The day is past, every free window over and its data in: every quota is due from that
   moment, the *due time*, as it is when a day's files land the next morning. Timed from the due
   time to the last quota's ``completed_at``; the quotas settled are counted every ``SAMPLE``
   seconds for the plot.
4. **Bills**: ``freehours invoices run --no-wait`` as of the first moment July is past its data
   deadline everywhere, run by the same workers: an invoice per customer for July.
5. **Checks**, in SQL over every row: every channel-day and interval value stored, a quota per
   customer and every one COMPLETED, one ledger entry per quota version summing to its free
   energy, one invoice per customer whose free kWh is the ledger's. A broken one fails the bench.

Printed for each N: ingest rate (values and channel-days a second), due time to last quota
settled, settlements a second, the bill run, peak memory of every process (``ru_maxrss`` of an
import, ``VmHWM`` of a worker), and database bytes per customer-day. The goal (issue 18) is stated
at 1,000,000 customers: the day ingested in under 2 minutes and settled within 10 minutes of its
due time; each smaller N is held to the same pace per customer. With two sizes or more, the cost
per customer of the largest is compared with the next (goal: within 20% from 100,000 to
1,000,000). A plot of quotas settled over time goes to ``bench-out/day-N.png``.
"""

from __future__ import annotations

import argparse
import io
import os
import random
import resource
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import psycopg
import sqlalchemy as sa
from matplotlib.figure import Figure
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from benchmarks.bench_ingest import DEFAULT_SERVER
from benchmarks.scale import size
from benchmarks.workers import BIN, peak_rss, start, start_worker, stop_worker
from freehours.domain.invoicing import Period
from freehours.domain.time import Region
from freehours.meterdata.writer import write_nem12
from freehours.plans import builtin_document
from freehours.settings import Settings
from freehours.sim.demo import invoice_as_of
from freehours.sim.meters import households, meter_days
from freehours.store import partitions
from freehours.store.database import Store
from tests.databases import fresh_postgres_database

DAY = date(2026, 7, 31)
JULY = Period(date(2026, 7, 1), DAY)
#: The region's plan, and the first digit of its NMIs (as AEMO allocates them by state).
REGIONS = {
    Region.NSW: ("sso-nsw", "4"),
    Region.SEQ: ("sso-seq", "3"),
    Region.SA: ("sso-sa", "2"),
    Region.VIC: ("mps-vic", "6"),
}
#: Distinct simulated households whose days the NMIs share; prime, so that NMI n's profile,
#: region and interval length vary independently.
PROFILES = 97
#: One NMI in ``FIVE_MINUTE_EVERY`` reads at 5 minutes.
FIVE_MINUTE_EVERY = 10
FILE_NMIS = 1_000
IMPORTERS = 2
WORKERS = 2
#: The goals at 1,000,000 customers (issue 18), held per customer at every size.
GOAL_CUSTOMERS = 1_000_000
INGEST_GOAL = 120.0
SETTLE_GOAL = 600.0
#: Largest to next size: the cost per customer may grow by at most this much.
FLAT_GOAL = 1.2
#: A phase that has not finished in this long is broken, not slow.
PHASE_TIMEOUT = 7200.0
OUT = Path("bench-out")
SEED = 18

stderr = Console(stderr=True)


@dataclass
class Figures:
    """What one size measured."""

    customers: int
    channel_days: int = 0
    values: int = 0
    file_bytes: int = 0
    ingest_seconds: float = 0.0
    ingest_cpu: float = 0.0
    import_peaks: list[int] = field(default_factory=list)
    jobs: int = 0
    settle_seconds: float = 0.0
    settled: list[tuple[float, int]] = field(default_factory=list)
    bill_seconds: float = 0.0
    invoices: int = 0
    worker_peaks: list[int] = field(default_factory=list)
    worker_cpu: float = 0.0
    database_bytes: int = 0
    tables: dict[str, int] = field(default_factory=dict)

    def per_customer(self) -> dict[str, float]:
        """The costs compared between sizes: seconds, CPU seconds and bytes per customer."""
        n = self.customers
        return {
            "ingest s": self.ingest_seconds / n,
            "settle s": self.settle_seconds / n,
            "bill s": self.bill_seconds / n,
            "bytes": self.database_bytes / n,
        }


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks day", description=__doc__)
    parser.add_argument("--customers", type=int, nargs="+", default=[size(10_000, 100)])
    parser.add_argument("--importers", type=int, default=IMPORTERS)
    parser.add_argument("--workers", type=int, default=WORKERS)
    parser.add_argument(
        "--no-bills",
        dest="bills",
        action="store_false",
        help="ingest and settle only: no bill run, and no invoices in the bytes per customer-day",
    )
    args = parser.parse_args(argv)
    server = os.environ.get("FREEHOURS_BENCH_DATABASE_URL", DEFAULT_SERVER)
    measured = []
    for customers in args.customers:
        figures = Figures(customers)
        with fresh_postgres_database(server, prefix="freehours_bench") as url:
            _measure(url, figures, importers=args.importers, workers=args.workers, bill=args.bills)
        _report(figures)
        measured.append(figures)
    if len(measured) > 1:
        _compare(measured[-2], measured[-1])


def run() -> None:
    """``make bench``'s section: the day at 10,000 customers (``make bench-day`` for more)."""
    main([])


# --- the set-up --------------------------------------------------------------------------------


def _nmi(n: int) -> str:
    return f"{REGIONS[_region(n)][1]}{n:09d}"


def _region(n: int) -> Region:
    return list(REGIONS)[n % len(REGIONS)]


def _templates() -> dict[int, list[str]]:
    """For each interval length, ``PROFILES`` households' records of the day (200 and 300, as
    the writer writes them), their NMI a ``{nmi}`` for any NMI to drop in."""
    rng = random.Random(SEED)
    homes = households(PROFILES, rng)
    templates: dict[int, list[str]] = {}
    for minutes in (30, 5):
        kept = []
        for home in homes:
            text = io.StringIO(newline="")
            write_nem12(meter_days(home, DAY, 1, rng, interval_minutes=minutes), text)
            records = text.getvalue().splitlines(keepends=True)[1:-1]  # no 100, no 900
            if not all(line.startswith(("200,", "300,")) for line in records):
                raise RuntimeError(f"expected only 200 and 300 records, got {records}")
            # Values and stamps are never ten digits long: the NMI is only in the 200 records.
            kept.append("".join(records).replace(home.nmi, "{nmi}"))
        templates[minutes] = kept
    return templates


def _write_files(directory: Path, customers: int) -> tuple[list[Path], int, int]:
    """The day's NEM12 files; with the channel-days and interval values they hold."""
    templates = _templates()
    paths = []
    channel_days = values = 0
    header = f"100,NEM12,{datetime(2026, 8, 1, 4, 0):%Y%m%d%H%M},MDP,RETAILER\r\n"
    for first in range(0, customers, FILE_NMIS):
        path = directory / f"nem12-{DAY:%Y%m%d}-{first // FILE_NMIS:05d}.csv"
        chunk = [header]
        for n in range(first, min(first + FILE_NMIS, customers)):
            minutes = 5 if n % FIVE_MINUTE_EVERY == 0 else 30
            chunk.append(templates[minutes][n % PROFILES].format(nmi=_nmi(n)))
            channel_days += 2
            values += 2 * 1440 // minutes
        chunk.append("900\r\n")
        path.write_text("".join(chunk), encoding="ascii", newline="")
        paths.append(path)
    return paths, channel_days, values


def _load_customers(url: str, customers: int) -> None:
    now = datetime.now(UTC)
    with Store.open(url) as store, store.write() as unit:
        for plan_id, _ in REGIONS.values():
            unit.catalog.put_plan(plan_id, builtin_document(plan_id), updated_at=now)

    def lines() -> Iterator[str]:
        for n in range(customers):
            region = _region(n)
            plan_id = REGIONS[region][0]
            yield f"{_nmi(n)}\t{plan_id}\t{region.value}\t{now.isoformat()}\tmonthly\t1\t21\n"

    with psycopg.connect(_conninfo(url)) as conn:
        copy_lines(
            conn,
            "customers",
            "nmi, plan_id, region, updated_at, billing_frequency, anchor_day, payment_term_days",
            lines(),
        )
        conn.commit()
        conn.autocommit = True
        conn.execute("VACUUM ANALYZE customers")


def copy_lines(conn: psycopg.Connection, table: str, columns: str, lines: Iterable[str]) -> None:
    """``COPY table (columns) FROM STDIN`` of tab-separated ``lines``, 10,000 to a write."""
    with conn.cursor() as cursor, cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
        chunk: list[str] = []
        for line in lines:
            chunk.append(line)
            if len(chunk) >= 10_000:
                copy.write("".join(chunk))
                chunk.clear()
        if chunk:
            copy.write("".join(chunk))


def _conninfo(url: str) -> str:
    return sa.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


# --- the day -----------------------------------------------------------------------------------


def _measure(
    url: str,
    figures: Figures,
    *,
    importers: int,
    workers: int,
    bill: bool = True,
    history: Callable[[str, int], None] | None = None,
) -> None:
    """The day of ``figures.customers`` in the new database at ``url``; ``history`` loads what
    the database holds already (after the customers, before the day), ``bill`` runs the bills."""
    n = figures.customers
    stderr.rule(f"a day of {n:,} customers")
    with Store.open(url):
        pass  # migrated: the empty database's size is the baseline
    _partition_day(url)
    empty = _database_bytes(url)
    with tempfile.TemporaryDirectory(prefix="freehours-day-") as scratch:
        directory = Path(scratch)
        with stderr.status(f"set-up: {n:,} customers and their NEM12 files"):
            _load_customers(url, n)
            files, figures.channel_days, figures.values = _write_files(directory, n)
        figures.file_bytes = sum(path.stat().st_size for path in files)
        if history is not None:
            history(url, n)
            empty = _database_bytes(url)
        _ingest(url, files, figures, importers, directory)
        _settle_and_bill(url, figures, workers, directory, bill=bill)
    _check(url, figures, bills=bill)
    figures.database_bytes = _database_bytes(url) - empty
    figures.tables = _table_bytes(url)
    _plot(figures)


def _partition_day(url: str) -> None:
    """``DAY``'s month of each history table, as the scheduled upkeep makes every month ahead
    of its days. Without it the day (fixed in the past) lands in the DEFAULT partitions, and the
    workers' first upkeep moves every row of it during the settlement: twice the bytes (the
    moved rows' dead versions) and a share of the cores the settlement is measured on."""
    with _engine(url).begin() as conn:
        for layout in partitions.HISTORY:
            partitions.create_month(conn, layout, partitions.month_of(DAY))


def _ingest(url: str, files: list[Path], figures: Figures, importers: int, logs: Path) -> None:
    shares = [files[k::importers] for k in range(importers) if files[k::importers]]
    with stderr.status(
        f"ingest: {len(files):,} files ({figures.file_bytes / 1e6:,.0f} MB) by"
        f" {len(shares)} processes of freehours nem12 import"
    ):
        started = time.perf_counter()
        processes = [
            start(["nem12", "import", *map(str, share)], url, logs / f"import-{k}.log")
            for k, share in enumerate(shares)
        ]
        for k, process in enumerate(processes):
            _, status, usage = os.wait4(process.pid, 0)
            process.returncode = os.waitstatus_to_exitcode(status)
            if process.returncode != 0:
                log = (logs / f"import-{k}.log").read_text()[-2000:]
                raise SystemExit(f"day: nem12 import exited {process.returncode}:\n{log}")
            figures.import_peaks.append(usage.ru_maxrss * 1024)
            figures.ingest_cpu += usage.ru_utime + usage.ru_stime
        figures.ingest_seconds = time.perf_counter() - started
    with _connect(url) as conn:
        figures.jobs = conn.execute(
            sa.text("SELECT count(*) FROM jobs WHERE kind = 'settle'")
        ).scalar_one()


def _settle_and_bill(
    url: str, figures: Figures, workers: int, logs: Path, *, bill: bool = True
) -> None:
    n = figures.customers
    # Each count reads the day's quotas and the live jobs: polled no more often than costs
    # the database a few per cent at any size (a second apart at 1,000,000 took a fifth of a
    # core from the workers it measures). The times come from completed_at, not from the polls.
    every = max(1.0, n / 50_000)
    due = datetime.now(UTC)
    started = time.perf_counter()
    processes = [start_worker(url, logs / f"worker-{k}.log") for k in range(workers)]
    try:
        with _progress() as progress:
            task = progress.add_task(f"settlement by {workers} workers", total=n)
            while True:
                done, waiting = _settle_counts(url)
                figures.settled.append((time.perf_counter() - started, done))
                progress.update(task, completed=done)
                if waiting == 0:
                    break
                _alive(processes)
                if time.perf_counter() - started > PHASE_TIMEOUT:
                    raise SystemExit(f"day: settlement unfinished after {PHASE_TIMEOUT:g} s")
                time.sleep(every)
        with _connect(url) as conn:
            last = conn.execute(
                sa.text("SELECT max(completed_at) FROM quotas WHERE day = :day"), {"day": DAY}
            ).scalar_one()
        figures.settle_seconds = (last - due).total_seconds()
        if bill:
            figures.invoices, figures.bill_seconds = _bill(url, processes, logs)
        figures.worker_peaks = [peak_rss(process.pid) for process in processes]
        figures.worker_cpu = sum(_cpu_seconds(process.pid) for process in processes)
    finally:
        for process in processes:
            stop_worker(process)


def _settle_counts(url: str) -> tuple[int, int]:
    """Quotas COMPLETED, and settlement jobs not finished."""
    with _connect(url) as conn:
        done = conn.execute(
            sa.text("SELECT count(*) FROM quotas WHERE status = 'COMPLETED' AND day = :day"),
            {"day": DAY},
        ).scalar_one()
        waiting = conn.execute(
            sa.text(
                "SELECT count(*) FROM jobs WHERE kind = 'settle'"
                " AND state IN ('AVAILABLE', 'RUNNING', 'RETRYABLE')"
            )
        ).scalar_one()
    return int(done), int(waiting)


def _bill(url: str, workers: list[subprocess.Popen[bytes]], logs: Path) -> tuple[int, float]:
    """The July invoice run, started by the command, run by the workers: invoices, seconds."""
    as_of = invoice_as_of(JULY, timedelta(hours=Settings().data_deadline_hours))
    started = time.perf_counter()
    answer = subprocess.run(
        [str(BIN / "freehours"), "invoices", "run", "--as-of", as_of.isoformat(), "--no-wait"],
        env={**os.environ, "FREEHOURS_DATABASE_URL": url, "FREEHOURS_LOG_LEVEL": "warning"},
        capture_output=True,
        text=True,
        check=False,
    )
    if answer.returncode != 0:
        raise SystemExit(f"day: invoices run exited {answer.returncode}: {answer.stderr[-2000:]}")
    run_id = answer.stdout.strip()
    with _progress() as progress:
        task = progress.add_task("bill run", total=None)
        while True:
            with _connect(url) as conn:
                # The run's own count, kept by each batch as it finalises: counting the run's
                # documents every second read them all again each time (the index's entries, and
                # with autovacuum off every row too), a second of a core at a million.
                finished, invoices = conn.execute(
                    sa.text(
                        "SELECT finished_at IS NOT NULL, invoices FROM invoice_runs"
                        " WHERE run_id = :run"
                    ),
                    {"run": run_id},
                ).one()
            progress.update(task, completed=invoices)
            if finished:
                return int(invoices), time.perf_counter() - started
            _alive(workers)
            if time.perf_counter() - started > PHASE_TIMEOUT:
                raise SystemExit(f"day: the bill run unfinished after {PHASE_TIMEOUT:g} s")
            time.sleep(1.0)


def _alive(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        if process.poll() is not None:
            raise SystemExit(f"day: a worker exited with {process.returncode}")


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=stderr,
        transient=True,
    )


def _cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of process ``pid`` so far (``/proc/PID/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# --- the checks --------------------------------------------------------------------------------

#: Each check is a query that counts what breaks it, and what it means when it is not zero.
CHECKS = {
    "channel-days not stored": "SELECT :channel_days - count(*) FROM meter_days WHERE day = :day",
    "interval values not stored": (
        "SELECT :values - coalesce(sum(length(qualities)), 0) FROM meter_days WHERE day = :day"
    ),
    "customers without a quota for the day": (
        "SELECT count(*) FROM customers c WHERE NOT EXISTS"
        " (SELECT 1 FROM quotas q WHERE q.nmi = c.nmi AND q.day = :day)"
    ),
    "quotas not COMPLETED": (
        "SELECT count(*) FROM quotas q WHERE q.status <> 'COMPLETED' AND q.version ="
        " (SELECT max(version) FROM quotas v WHERE v.nmi = q.nmi AND v.day = q.day)"
    ),
    "quota versions without exactly one ledger entry": (
        "SELECT count(*) FROM quotas q WHERE q.status = 'COMPLETED' AND (SELECT count(*)"
        " FROM ledger_entries l WHERE (l.nmi, l.day, l.version) = (q.nmi, q.day, q.version))"
        " <> 1"
    ),
    "ledger entries without a COMPLETED quota version": (
        "SELECT count(*) FROM ledger_entries l WHERE NOT EXISTS (SELECT 1 FROM quotas q"
        " WHERE (q.nmi, q.day, q.version) = (l.nmi, l.day, l.version)"
        " AND q.status = 'COMPLETED')"
    ),
    "quota days whose ledger does not sum to the newest version's free energy": (
        "SELECT count(*) FROM (SELECT l.nmi, l.day, sum(l.kwh::numeric) AS booked"
        " FROM ledger_entries l GROUP BY l.nmi, l.day) b JOIN LATERAL (SELECT free_kwh"
        " FROM quotas q WHERE q.nmi = b.nmi AND q.day = b.day ORDER BY version DESC LIMIT 1)"
        " newest ON true WHERE newest.free_kwh::numeric <> b.booked"
    ),
}
#: The bills' checks, when the bills were run.
BILL_CHECKS = {
    "customers without exactly one invoice": (
        "SELECT count(*) FROM customers c WHERE (SELECT count(*) FROM documents d"
        " WHERE d.nmi = c.nmi AND d.document_type = 'invoice') <> 1"
    ),
    "invoices whose free kWh is not the customer's ledger": (
        "SELECT count(*) FROM documents d WHERE d.free_kwh::numeric <> (SELECT"
        " coalesce(sum(l.kwh::numeric), 0) FROM ledger_entries l WHERE l.nmi = d.nmi)"
    ),
}


def _check(url: str, figures: Figures, *, bills: bool = True) -> None:
    broken = []
    with stderr.status("checks: every row"), _connect(url) as conn:
        parameters = {"channel_days": figures.channel_days, "values": figures.values, "day": DAY}
        for what, query in {**CHECKS, **(BILL_CHECKS if bills else {})}.items():
            count = conn.execute(sa.text(query), parameters).scalar_one()
            if count:
                broken.append(f"{count:,} {what}")
    if broken:
        raise SystemExit(f"day {figures.customers:,} customers: " + "; ".join(broken))


def _database_bytes(url: str) -> int:
    with _connect(url) as conn:
        return int(
            conn.execute(sa.text("SELECT pg_database_size(current_database())")).scalar_one()
        )


def _table_bytes(url: str) -> dict[str, int]:
    """The largest tables, indexes and TOAST included; a partitioned one with its partitions."""
    with _connect(url) as conn:
        rows = conn.execute(
            sa.text(
                "SELECT c.relname, coalesce((SELECT sum(pg_total_relation_size(t.relid))"
                " FROM pg_partition_tree(c.oid) t), pg_total_relation_size(c.oid)) AS size"
                " FROM pg_class c"
                " JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')"
                " AND NOT c.relispartition ORDER BY size DESC LIMIT 7"
            )
        ).all()
    return {name: int(size) for name, size in rows}


def _connect(url: str) -> sa.Connection:
    return _engine(url).connect()


_ENGINES: dict[str, sa.Engine] = {}


def _engine(url: str) -> sa.Engine:
    if url not in _ENGINES:
        _ENGINES[url] = sa.create_engine(url, pool_size=1, max_overflow=0)
    return _ENGINES[url]


# --- what is printed ---------------------------------------------------------------------------


def _report(f: Figures) -> None:
    for engine in _ENGINES.values():
        engine.dispose()
    _ENGINES.clear()
    n = f.customers
    scale = n / GOAL_CUSTOMERS
    ingest_goal, settle_goal = INGEST_GOAL * scale, SETTLE_GOAL * scale
    mib = 2**20
    print(
        f"day postgres {n:,} customers: ingest {f.channel_days:,} channel-days,"
        f" {f.values:,} values ({f.file_bytes / 1e6:,.0f} MB of NEM12) in {f.ingest_seconds:.1f} s:"
        f" {f.values / f.ingest_seconds:,.0f} values/s,"
        f" {f.channel_days / f.ingest_seconds:,.0f} channel-days/s,"
        f" {f.jobs:,} settlement jobs scheduled;"
        f" {f.ingest_seconds / ingest_goal:.2f}x the goal's pace"
        f" ({INGEST_GOAL:.0f} s per {GOAL_CUSTOMERS:,}: {ingest_goal:.1f} s here)"
    )
    print(
        f"day postgres {n:,} customers: due time to last quota settled {f.settle_seconds:.1f} s,"
        f" {n / f.settle_seconds:,.0f} settlements/s;"
        f" {f.settle_seconds / settle_goal:.2f}x the goal's pace"
        f" ({SETTLE_GOAL:.0f} s per {GOAL_CUSTOMERS:,}: {settle_goal:.1f} s here)"
    )
    if f.bill_seconds:
        print(
            f"day postgres {n:,} customers: bill run {f.invoices:,} invoices in"
            f" {f.bill_seconds:.1f} s, {f.invoices / f.bill_seconds:,.0f} invoices/s"
        )
    print(
        f"day postgres {n:,} customers: peak memory: imports"
        f" {', '.join(f'{peak / mib:,.0f}' for peak in f.import_peaks)} MiB, workers"
        f" {', '.join(f'{peak / mib:,.0f}' for peak in f.worker_peaks)} MiB, this process"
        f" {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MiB;"
        f" CPU: imports {f.ingest_cpu:.0f} s, workers {f.worker_cpu:.0f} s"
    )
    print(
        f"day postgres {n:,} customers: database {f.database_bytes / 1e6:,.0f} MB,"
        f" {f.database_bytes / n:,.0f} bytes per customer-day ("
        + ", ".join(f"{name} {size / n:,.0f}" for name, size in f.tables.items())
        + "); checked: every value stored, every quota COMPLETED with one ledger entry"
        + (", one invoice per customer with the ledger's free kWh" if f.bill_seconds else "")
    )


def _compare(smaller: Figures, larger: Figures) -> None:
    low, high = smaller.per_customer(), larger.per_customer()
    ratios = {name: high[name] / low[name] for name in low if low[name]}
    worst = max(ratios.values())
    print(
        f"day postgres cost per customer, {larger.customers:,} against {smaller.customers:,}: "
        + ", ".join(f"{name} {ratio:.2f}x" for name, ratio in ratios.items())
        + f"; worst {worst:.2f}x (goal <= {FLAT_GOAL:.1f}x): {worst / FLAT_GOAL:.2f}x goal"
    )


def _plot(f: Figures) -> None:
    """Quotas settled over time from the due time, against the goal's pace."""
    OUT.mkdir(exist_ok=True)
    figure = Figure(figsize=(8, 4.5), layout="constrained")
    axes = figure.subplots()
    seconds = [t for t, _ in f.settled]
    axes.plot(seconds, [done for _, done in f.settled], label="quotas settled", color="#1f6f8b")
    goal = SETTLE_GOAL * f.customers / GOAL_CUSTOMERS
    axes.plot([0, goal], [0, f.customers], linestyle="--", color="#999", label="the goal's pace")
    axes.set_xlabel("seconds since the due time")
    axes.set_ylabel("quotas COMPLETED")
    axes.set_title(f"A day of {f.customers:,} customers settled by the workers")
    axes.legend(loc="lower right")
    axes.grid(alpha=0.3)
    path = OUT / f"day-{f.customers}.png"
    figure.savefig(path, dpi=110)
    print(f"day postgres {f.customers:,} customers: plot {path}")


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
