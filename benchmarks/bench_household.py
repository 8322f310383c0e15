"""Each customer's page and the usage API under 50 concurrent users, over real HTTP, against a
retailer's volume in PostgreSQL (issue 35's goal: the page p95 under 200 ms and
``GET /v1/customers/{nmi}/usage`` p95 under 100 ms, with 1,000,000 customers).

A fresh database (``FREEHOURS_BENCH_DATABASE_URL``, default the local PostgreSQL) is loaded in
two parts:

- ``VISITED`` customers (``FREEHOURS_BENCH_HOUSEHOLD_VISITED``, default 10,000) through the
  product: July 2026 settled (``bench_invoicing._load``), invoiced by a run in this process
  (their invoices, with the better offer check and use compared), and each given a page
  (``unit.pages.page_for``) and a signed link to it;
- the rest of ``CUSTOMERS`` (``FREEHOURS_BENCH_HOUSEHOLD_CUSTOMERS``, default 1,000,000) written
  server-side (``INSERT ... SELECT`` over ``generate_series``, as ``bench_console`` and
  ``bench_history`` write theirs): each customer on the same plan, with a page, July's meter
  days (E1 and B1, 30-minute, written a day at a time as ingestion writes them) and July's
  COMPLETED quotas, in July's partitions; then ``VACUUM ANALYZE``.

So July's partitions of ``meter_days`` and ``quotas`` hold what a million customers make in a
month: what a page or a usage request of July reads. With ``FREEHOURS_BENCH_HOUSEHOLD_QUOTA_MONTHS``
(``MONTHS``, default 1: July alone; 12: a year, August 2025 to July 2026) every customer also has a
COMPLETED quota for each day of the months before July, in their months' partitions, written
server-side a day at a time from July's. A request reads its period's months alone
(``tests/store/test_partitions.py``); those months are there to show it. Before writing them the
bench checks that the database's disk (when it is this machine's) has room for them at
``QUOTA_BYTES`` each, and stops saying how much they need if not: a year of quotas at a million
customers (365 million rows) does not fit this machine's disk beside July's meter data.

``freehours serve --processes 2`` answers on a free loopback port. ``USERS`` connections
(keep-alive, each one request at a time: ``benchmarks.loadgen``) ask pages of visited customers
(``GET /my/{token}``, drawn at random among them), then usage requests of July
(``GET /v1/customers/{nmi}/usage?from=2026-07-01&to=2026-07-31``, read key) of customers drawn
from the whole million; each twice: ``REQUESTS / 2`` with each user pausing ``THINK`` seconds on
average before each request (users reading their answers), then ``REQUESTS`` flat out (each
user asking again as soon as answered: what the two processes can answer, and the latency that
queueing for them adds). Every answer must be 200.
"""

from __future__ import annotations

import os
import random
import shutil
import time
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import sqlalchemy as sa

from benchmarks import bench_day
from benchmarks.bench_invoicing import AS_OF, DEFAULT_ADMIN_URL, JULY, PATTERNS, PLAN_ID, _load
from benchmarks.loadgen import LoadResult, load, request
from benchmarks.scale import size
from benchmarks.workers import warnings_only
from freehours.api.keys import Scope, create_key
from freehours.clock import SystemClock
from freehours.domain.page_links import sign
from freehours.invoicing.model import InvoicingPolicy
from freehours.invoicing.service import Invoicing
from freehours.store import partitions
from freehours.store.database import Store
from tests.databases import fresh_postgres_database
from tests.servers import api_process

CUSTOMERS = size(1_000_000, 200)
VISITED = size(10_000, 20)
USERS = 50
REQUESTS = size(3_000, 100)
WARM_UP = size(200, 10)
#: Each user's mean pause between requests (exponential), in the first of the two runs of each.
THINK = size(1.0, 0.05)
#: Months of quotas, July's and those before (a smoke run writes June's too, to run that path).
MONTHS = size(1, 2)
#: Bytes a quota takes with its indexes, for the disk check (measured: 270 at a million).
QUOTA_BYTES = 300
#: Room left on the database's disk after the quotas, for everything else it writes meanwhile.
DISK_MARGIN = 10 * 10**9
PAGE = "the customer's page"
USAGE = "GET /v1/customers/{nmi}/usage (July)"
GOALS_MS = {PAGE: 200.0, USAGE: 100.0}
SECRET = "bench-page-secret-of-at-least-32-characters"
#: SQL: the accounts written server-side, ``n``.
SERIES = "generate_series(CAST(:first AS integer), CAST(:last AS integer)) n"
#: SQL: the NMI of account ``n``, as ``bench_invoicing._nmi`` writes it.
NMI_SQL = "'4' || lpad(n::text, 9, '0')"


def run() -> None:
    admin_url = os.environ.get("FREEHOURS_BENCH_DATABASE_URL", DEFAULT_ADMIN_URL)
    customers = int(os.environ.get("FREEHOURS_BENCH_HOUSEHOLD_CUSTOMERS", CUSTOMERS))
    visited = min(int(os.environ.get("FREEHOURS_BENCH_HOUSEHOLD_VISITED", VISITED)), customers)
    requests = int(os.environ.get("FREEHOURS_BENCH_HOUSEHOLD_REQUESTS", REQUESTS))
    months = int(os.environ.get("FREEHOURS_BENCH_HOUSEHOLD_QUOTA_MONTHS", MONTHS))
    earlier = _earlier_days(months)
    with (
        warnings_only(),
        fresh_postgres_database(admin_url, prefix="freehours_bench") as url,
    ):
        _check_room(url, customers * len(earlier))
        started = time.perf_counter()
        tokens, key = _load_visited(url, visited, earlier)
        took = _load_rest(url, visited, customers, earlier)
        loaded = time.perf_counter() - started
        sizes = _sizes(url)
        env = {
            "FREEHOURS_DATABASE_URL": url,
            "FREEHOURS_PAGE_SECRET": SECRET,
            "FREEHOURS_RATE_LIMIT_PAGES": "100000000/minute",
            "FREEHOURS_RATE_LIMIT_PER_CLIENT": "100000000/minute",
            "FREEHOURS_RATE_LIMIT_PER_NMI": "100000000/minute",
            "FREEHOURS_LOG_LEVEL": "warning",
        }
        with api_process(env, extra_args=["--processes", "2"]) as (base, _):
            port = int(base.rsplit(":", 1)[1])
            results = {
                (what, think): _measure(
                    port, make(requests if think == 0 else requests // 2), think
                )
                for what, make in (
                    (PAGE, lambda count: _page_requests(tokens, count)),
                    (USAGE, lambda count: _usage_requests(key, customers, count)),
                )
                for think in (THINK, 0.0)
            }
    print(
        f"household postgres {customers:,} customers ({visited:,} invoiced through the product),"
        f" July's meter days and quotas of each: loaded in {loaded:.0f} s ("
        + ", ".join(f"{what} {seconds:.0f} s" for what, seconds in took.items())
        + f"); {sizes['quotas_rows']:,} quotas in July's partition,"
        f" {sizes['quota_bytes']:.0f} bytes a quota with its indexes; {sizes['all_rows']:,}"
        f" quotas in all ({months} month{'s' if months > 1 else ''}),"
        f" {sizes['all_bytes'] / 1e9:,.1f} GB; a year of quotas at"
        f" {customers:,} customers is {sizes['quota_bytes'] * customers * 365 / 1e9:,.0f} GB"
    )
    for (what, think), result in results.items():
        goal = GOALS_MS[what]
        p95 = result.percentile(95) * 1000
        how = f"pausing {think:g} s on average between requests" if think else "flat out"
        print(
            f"household postgres {customers:,} customers, {months} month"
            f"{'s' if months > 1 else ''} of quotas, {USERS} users {how}: {what}"
            f" p50 {result.p50_ms:.1f} ms, p95 {p95:.1f} ms, p99 {result.p99_ms:.1f} ms,"
            f" {result.rate:.0f} a second (goal p95 < {goal:.0f} ms: {p95 / goal:.2f}x the goal)"
        )


def _measure(port: int, requests: list[bytes], think: float) -> LoadResult:
    load("127.0.0.1", port, iter(requests[:WARM_UP]), connections=USERS)
    result = load("127.0.0.1", port, iter(requests[WARM_UP:]), connections=USERS, think=think)
    if set(result.statuses) != {200}:
        raise SystemExit(f"household: answers {result.statuses}, every one should be 200")
    return result


def _page_requests(tokens: list[str], count: int) -> list[bytes]:
    chosen = random.Random(1).choices(tokens, k=count + WARM_UP)
    return [request("GET", f"/my/{token}", {}) for token in chosen]


def _usage_requests(key: str, customers: int, count: int) -> list[bytes]:
    draw = random.Random(2)
    headers = {"Authorization": f"Bearer {key}"}
    return [
        request(
            "GET",
            f"/v1/customers/4{draw.randrange(customers):09d}/usage?from=2026-07-01&to=2026-07-31",
            headers,
        )
        for _ in range(count + WARM_UP)
    ]


def _earlier_days(months: int) -> list[date]:
    """The days of the ``months - 1`` months before July 2026, oldest first."""
    if not 1 <= months <= 12:
        raise SystemExit(f"FREEHOURS_BENCH_HOUSEHOLD_QUOTA_MONTHS: {months} is not 1 to 12")
    first = partitions.add_months(JULY[0], 1 - months)
    return [first + timedelta(days=n) for n in range((JULY[0] - first).days)]


def _check_room(url: str, quotas: int) -> None:
    """Stop, saying what ``quotas`` more rows need, when the database's disk is this machine's
    and has not room for them (at ``QUOTA_BYTES`` each, ``DISK_MARGIN`` left)."""
    if not quotas:
        return
    with bench_day._connect(url) as conn:
        directory = Path(conn.execute(sa.text("SHOW data_directory")).scalar_one())
    if not directory.exists():  # another machine's database: its operator knows its disk
        return
    free = shutil.disk_usage(directory).free
    needed = quotas * QUOTA_BYTES
    if needed + DISK_MARGIN > free:
        raise SystemExit(
            f"household: {quotas:,} quotas before July need about {needed / 1e9:,.0f} GB"
            f" ({QUOTA_BYTES} bytes each) and {DISK_MARGIN / 1e9:.0f} GB to spare; the disk of"
            f" {directory} has {free / 1e9:,.0f} GB free. Fewer customers"
            " (FREEHOURS_BENCH_HOUSEHOLD_CUSTOMERS) or months"
            " (FREEHOURS_BENCH_HOUSEHOLD_QUOTA_MONTHS), or a larger disk."
        )


def _load_visited(url: str, visited: int, earlier: list[date]) -> tuple[list[str], str]:
    """The visited customers through the product: their July settled and invoiced, a page
    each; their links, and a read key. The partitions of July and of ``earlier``'s months are
    made first."""
    with Store.open(url) as store:
        with bench_day._connect(url) as conn:
            for month in sorted({partitions.month_of(day) for day in [*earlier, JULY[0]]}):
                for layout in partitions.CREATION:
                    partitions.create_month(conn, layout, month)
            conn.commit()
        _load(store, url, visited)
        clock = SystemClock()
        done = Invoicing(store, clock, InvoicingPolicy()).run_once(as_of=AS_OF)
        assert done.counts.invoices == visited, done.counts
        now = clock.now()
        expires = int(now.timestamp()) + 86_400
        with store.write() as unit:
            tokens = [
                sign(unit.pages.page_for(f"4{n:09d}", at=now), expires, SECRET.encode())
                for n in range(visited)
            ]
            _, key = create_key(unit.keys, frozenset({Scope.READ}), "bench", now)
    return tokens, key


def _load_rest(url: str, visited: int, customers: int, earlier: list[date]) -> dict[str, float]:
    """Customers ``visited`` to ``customers`` written server-side: each a copy of the visited
    account of its pattern (``n % len(PATTERNS)``); then every customer's quotas of the
    ``earlier`` days; the seconds each table took."""
    took: dict[str, float] = {}
    span = {"first": visited, "last": customers - 1, "patterns": len(PATTERNS)}
    with bench_day._connect(url) as conn:
        conn.execute(sa.text("SET synchronous_commit = off"))
        for table, statements in _statements(earlier):
            started = time.perf_counter()
            with bench_day.stderr.status(f"household: {table}"):
                for statement, parameters in statements:
                    conn.execute(sa.text(statement), {**span, **parameters})
                    conn.commit()
            took[table] = time.perf_counter() - started
    with bench_day._engine(url).connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        started = time.perf_counter()
        conn.execute(sa.text("VACUUM ANALYZE"))
        took["vacuum analyze"] = time.perf_counter() - started
    return took


def _statements(
    earlier: list[date],
) -> Iterator[tuple[str, list[tuple[str, dict[str, object]]]]]:
    now = datetime.now(UTC)
    yield (
        "customers",
        [
            (
                "INSERT INTO customers (nmi, plan_id, region, updated_at, billing_frequency,"
                f" anchor_day, payment_term_days) SELECT {NMI_SQL}, :plan, 'NSW', :now,"
                f" 'monthly', 1, 21 FROM {SERIES}",
                {"plan": PLAN_ID, "now": now},
            )
        ],
    )
    yield (
        "customer pages",
        [
            (
                "INSERT INTO customer_pages (page_id, nmi, created_at)"
                f" SELECT left(md5(n::text || 'page'), 22), {NMI_SQL}, :now"
                f" FROM {SERIES}",
                {"now": now},
            )
        ],
    )
    # A day at a time, every customer's rows of it: as ingestion writes them.
    yield (
        "meter days",
        [
            (
                "INSERT INTO meter_days (nmi, suffix, day, interval_minutes, uom,"
                " interval_values, qualities, update_datetime, received_at)"
                f" SELECT {NMI_SQL}, m.suffix, m.day, m.interval_minutes, m.uom,"
                " m.interval_values, m.qualities, m.update_datetime, m.received_at"
                f" FROM {SERIES}"
                " JOIN meter_days m ON m.nmi = '4' || lpad((n % :patterns)::text, 9, '0')"
                " AND m.day = :day",
                {"day": day},
            )
            for day in JULY
        ],
    )
    yield ("quotas", [(COPY_QUOTAS, {"day": day, "july": day}) for day in JULY])
    # Every customer's, visited ones included, a day at a time: July's of the same day of the
    # month, COMPLETED.
    yield (
        "quotas before July",
        [(COPY_QUOTAS, {"day": day, "july": JULY[day.day - 1], "first": 0}) for day in earlier],
    )


#: SQL: account ``n``'s quota of ``:day``, a copy of its pattern account's of ``:july``.
COPY_QUOTAS = (
    "INSERT INTO quotas (nmi, day, version, status, fence, attempts, locked_until, free_kwh,"
    " free_value, completed_at, reason, revision)"
    f" SELECT {NMI_SQL}, CAST(:day AS date), q.version, q.status, q.fence, q.attempts,"
    " q.locked_until, q.free_kwh, q.free_value, q.completed_at, q.reason, q.revision"
    f" FROM {SERIES}"
    " JOIN quotas q ON q.nmi = '4' || lpad((n % :patterns)::text, 9, '0') AND q.day = :july"
)


def _sizes(url: str) -> dict[str, float]:
    """July's quotas: how many, and the bytes each takes with its indexes; all the quotas: how
    many, and their bytes."""
    (quotas,) = [layout for layout in partitions.HISTORY if layout.parent == "quotas"]
    month = partitions.partition_name(quotas, JULY[0])
    with bench_day._connect(url) as conn:
        rows, size = conn.execute(
            sa.text(f"SELECT count(*), pg_total_relation_size('{month}') FROM {month}")
        ).one()
        all_rows = conn.execute(sa.text("SELECT count(*) FROM quotas")).scalar_one()
        all_bytes = conn.execute(
            sa.text(
                "SELECT coalesce(sum(pg_total_relation_size(inhrelid)), 0) FROM pg_inherits"
                " WHERE inhparent = 'quotas'::regclass"
            )
        ).scalar_one()
    return {
        "quotas_rows": rows,
        "quota_bytes": size / max(rows, 1),
        "all_rows": all_rows,
        "all_bytes": int(all_bytes),
    }
