"""The operations console: each page's p50 and p95 over real HTTP, against a retailer's volume in
PostgreSQL.

The goal (issue 17): every page answers in under 200 ms (p95) with 1,000,000 quotas and 1,000,000
jobs. A fresh database is created (``FREEHOURS_BENCH_DATABASE_URL``, default the local
PostgreSQL), migrated by ``Store.open``, seeded, served by ``freehours serve`` and dropped.

The seed is ``CUSTOMERS`` customers, a quarter in each region on its built-in plan, with ``DAYS``
local days of quotas each, up to today (``CUSTOMERS * DAYS`` quotas, about 3% of them with a
second version), and what a retailer's database has beside them:

- quotas: the newest version mostly COMPLETED (free kWh and value as decimal text), some PENDING
  (waiting for data, or released after a failed attempt), LOCKED (``locked_until`` in the
  future: being settled now), ABORTED (attempts ran out, with the reason); today's all PENDING
  or LOCKED. Every COMPLETED version has its ledger entry (a second version's is the
  adjustment).
- quota_events: each write of each version (created, claimed, released, completed or aborted:
  three for most, more for those retried), with the trace of the attempt that wrote it, the
  times spread through the afternoon and evening after the day's window.
- jobs: a ``settle`` job per quota version (key ``"{nmi}:{date}"``) in the state its quota says
  (COMPLETED; DISCARDED with its error and every attempt's in ``errors``; RETRYABLE; AVAILABLE;
  RUNNING; a few CANCELLED), ids in the order they were made; and last month's invoice run, its
  ``invoice-run`` job, its ``invoice-batch`` jobs of 500 NMIs each and its invoices.
- ``INGESTIONS`` ingestions over the days, ``AUDIT_ENTRIES`` audit entries, ``AGENTS`` agents, an
  ingest key and the admin key the benchmark signs in with (``create_key`` through the store).

A settlement of a million quotas would take far longer than the console it feeds, so the bench
writes these rows itself, server-side (``INSERT ... SELECT`` from ``generate_series`` on a
psycopg connection of its own: the one place it writes SQL directly), then ``VACUUM ANALYZE``
(what autovacuum leaves after inserts: the visibility map set, the statistics current).

Then ``freehours serve`` answers on a free loopback port; the bench signs in once
(``POST /console/sign-in``) and asks each page in ``pages`` ``WARM_UP`` times, then ``REQUESTS``
times one after another, timing each from the request to the last byte of the answer. A page
whose p95 misses the goal is asked once more in this process (the same app on the same
database) with its SQL recorded, and the slowest statements' ``EXPLAIN ANALYZE`` printed; the
section then fails (``SystemExit``) naming the pages.

``FREEHOURS_BENCH_CONSOLE_CUSTOMERS`` seeds another number of customers instead, for a quicker
look (``400``: a hundredth of the volume, seeded in seconds); the goal is stated at 40,000.
"""

from __future__ import annotations

import os
import re
import statistics
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urljoin

import httpx
import psycopg
import sqlalchemy as sa

from benchmarks.scale import goal_missed, size
from freehours.api.keys import Scope, create_key
from freehours.domain.time import NEM_TIME, REGION_ZONES, Region
from freehours.plans import builtin_document
from freehours.settlement.model import ATTEMPT_FAILED, INCOMPLETE_AT_DEADLINE
from freehours.store import partitions
from freehours.store.database import Store
from tests.databases import fresh_postgres_database
from tests.servers import api_process

DEFAULT_ADMIN_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
CUSTOMERS = size(40_000, 400)
DAYS = 25
INGESTIONS = size(20_000, 200)
AUDIT_ENTRIES = size(5_000, 50)
AGENTS = 6
#: The accounts of an invoice batch job (``FREEHOURS_INVOICE_BATCH_SIZE``'s default).
BATCH_SIZE = 500
GOAL_MS = 200.0  # p95 of every page
WARM_UP = size(5, 1)
REQUESTS = size(60, 3)
#: The statements of a slow page whose plans are printed, slowest first.
EXPLAINED = 3
#: Each region's built-in plan and the first digit of its NMIs (AEMO's allocation by state).
PLANS = {Region.NSW: "sso-nsw", Region.SEQ: "sso-seq", Region.SA: "sso-sa", Region.VIC: "mps-vic"}
NMI_PREFIX = {Region.NSW: "4", Region.SEQ: "3", Region.SA: "2", Region.VIC: "6"}
#: Each region's price of the free energy, $/kWh: the free value is kWh times this, to the cent.
RATES = {Region.NSW: "0.2850", Region.SEQ: "0.2610", Region.SA: "0.3420", Region.VIC: "0.2730"}
MAX_ATTEMPTS = 5
ATTEMPT_ERRORS = (
    "OperationalError: (psycopg.errors.QueryCanceled) canceling statement due to statement timeout",
    "TimeoutError: the meter data store did not answer within 5 s",
)
WAITING = "waiting for the window's meter data (until the data deadline)"
GAVE_UP = f"gave up after {MAX_ATTEMPTS} attempts: {ATTEMPT_FAILED}"


def run() -> None:
    admin_url = os.environ.get("FREEHOURS_BENCH_DATABASE_URL", DEFAULT_ADMIN_URL)
    customers = int(os.environ.get("FREEHOURS_BENCH_CONSOLE_CUSTOMERS", CUSTOMERS))
    with fresh_postgres_database(admin_url, prefix="freehours_bench") as url:
        with Store.open(url) as store:
            started = time.perf_counter()
            seed = _seed(store, url, customers)
            seconds = time.perf_counter() - started
        print(
            f"console postgres: seeded {customers:,} customers, {seed.counts['quotas']:,} quota"
            f" versions, {seed.counts['jobs']:,} jobs in {seconds:.0f} s ("
            + ", ".join(f"{table} {took:.1f} s" for table, took in seed.took.items())
            + ")"
        )
        slow = _measure(url, seed)
    if slow:
        goal_missed(
            f"console postgres: FAIL: {len(slow)} pages over {GOAL_MS:.0f} ms p95: "
            + ", ".join(slow)
        )


# --- the seed ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Seed:
    """What the pages are asked about, the admin key's secret, and what the seed took."""

    secret: str
    today: date
    day: date  # a seeded day before today
    nmi: str  # an NMI whose quota on ``day`` has two versions, the first retried
    job_id: int  # a DISCARDED settle job, with its errors
    counts: dict[str, int]
    took: dict[str, float]


def _months(first: date, last: date) -> list[date]:
    """The first day of each month from ``first``'s to ``last``'s."""
    months = [partitions.month_of(first)]
    while months[-1] < partitions.month_of(last):
        months.append(partitions.add_months(months[-1], 1))
    return months


def _seed(store: Store, url: str, customers: int) -> Seed:
    now = datetime.now(UTC)
    today = now.astimezone(NEM_TIME).date()
    first = today - timedelta(days=DAYS - 1)
    with store.write() as unit:
        for plan_id in PLANS.values():
            unit.catalog.put_plan(plan_id, builtin_document(plan_id), updated_at=now)
        admin, secret = create_key(unit.keys, frozenset({Scope.ADMIN}), "ops-admin", now)
        ingest, _ = create_key(unit.keys, frozenset({Scope.INGEST}), "meter-agents", now)
        # The months of the seed (from the invoiced period before its first day), as a database
        # that has been running has them: the migration makes this month's on, so on the 1st to
        # the 24th of a month the seed's first days fell in the default partitions, and the
        # server's upkeep at its start moved them out (a million rows) while it was measured.
        months = _months(partitions.month_of(first) - timedelta(days=1), today)
        for layout in partitions.CREATION + partitions.JOBS:
            unit.partitions.create(layout, months)
    params: dict[str, Any] = {
        "customers": customers,
        "first": first,
        "today": today,
        "now": now,
        "admin_id": admin.id,
        "admin_name": admin.name,
        "ingest_id": ingest.id,
        "batch_size": BATCH_SIZE,
        "ingestions": max(1, INGESTIONS * customers // CUSTOMERS),
        "audit": max(1, AUDIT_ENTRIES * customers // CUSTOMERS),
        "agents": AGENTS,
        "max_attempts": MAX_ATTEMPTS,
        "failed": ATTEMPT_FAILED,
        "incomplete": INCOMPLETE_AT_DEADLINE,
        "waiting": WAITING,
        "gave_up": GAVE_UP,
        "error_a": ATTEMPT_ERRORS[0],
        "error_b": ATTEMPT_ERRORS[1],
        "run_id": uuid.uuid4().hex,
        "period_start": (first.replace(day=1) - timedelta(days=1)).replace(day=1),
        "period_end": first.replace(day=1) - timedelta(days=1),
        "issued": first.replace(day=1),
    }
    took: dict[str, float] = {}
    conninfo = sa.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(conninfo, cursor_factory=psycopg.ClientCursor) as conn:
        for setting in (
            "synchronous_commit = off",
            "temp_buffers = '1GB'",
            "work_mem = '256MB'",
            "maintenance_work_mem = '1GB'",
            # The seed's rows keep their foreign keys by construction: not checked row by row.
            "session_replication_role = replica",
        ):
            conn.execute(f"SET {setting}")
        # The big tables' indexes are made after their rows, each in one sort, not row by row:
        # as the database has them (a partitioned table's, and a partition's own, such as the
        # unfinished jobs' unique key), read from its catalogue, dropped, and made again after.
        indexes = [(str(name), str(made)) for name, made in conn.execute(_INDEX_DEFINITIONS)]
        for name, _ in indexes:
            conn.execute(f'DROP INDEX "{name}"')
        for step, statements in _STEPS:
            started = time.perf_counter()
            for statement in statements:
                conn.execute(statement, params)
            conn.commit()
            took[step] = time.perf_counter() - started
        started = time.perf_counter()
        for _, made in indexes:
            conn.execute(made.replace(" ON ONLY ", " ON "))
        conn.commit()
        took["indexes"] = time.perf_counter() - started
        conn.autocommit = True
        started = time.perf_counter()
        # What autovacuum does to a table after its inserts (PostgreSQL 13 and later): its
        # visibility map set, so that a count reads its index alone, as in production.
        conn.execute("VACUUM ANALYZE")
        took["analyze"] = time.perf_counter() - started
        counts = {
            table: int(row[0])
            for table in ("quotas", "jobs", "quota_events", "ledger_entries")
            if (row := conn.execute(f"SELECT count(*) FROM {table}").fetchone()) is not None
        }
        picked = conn.execute(
            "SELECT nmi, day FROM quotas WHERE version = 2 AND day < %(today)s"
            " ORDER BY day DESC, nmi LIMIT 1",
            params,
        ).fetchone()
        job = conn.execute(
            "SELECT id FROM jobs WHERE state = 'DISCARDED' AND kind = 'settle' ORDER BY id DESC"
            " LIMIT 1"
        ).fetchone()
    if picked is None or job is None:
        raise SystemExit("console: the seed has no quota with two versions or no DISCARDED job")
    with store.read() as unit:
        for layout in partitions.LAYOUTS:
            if unit.partitions.in_default(layout):
                raise SystemExit(f"console: rows of {layout.parent} in its default partition")
    return Seed(secret, today, picked[1], picked[0], int(job[0]), counts, took)


#: The indexes of the big tables and of their partitions, but those of a constraint (a primary
#: key) and those a partitioned table's index made on a partition (dropped and made with it).
_INDEX_DEFINITIONS = """
    SELECT index.relname, pg_get_indexdef(i.indexrelid)
    FROM pg_index i
    JOIN pg_class index ON index.oid = i.indexrelid
    JOIN pg_class tab ON tab.oid = i.indrelid
    WHERE (tab.relname IN ('quotas', 'ledger_entries', 'quota_events', 'jobs')
           OR tab.oid IN (SELECT inhrelid FROM pg_inherits JOIN pg_class parent
                          ON parent.oid = inhparent
                          WHERE parent.relname IN ('quotas', 'ledger_entries', 'quota_events',
                                                   'jobs')))
      AND NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conindid = i.indexrelid)
      AND NOT EXISTS (SELECT 1 FROM pg_inherits WHERE inhrelid = i.indexrelid)
    ORDER BY index.relname
"""

_ZONES = ", ".join(
    f"({n}, '{region.value}', '{PLANS[region]}', '{NMI_PREFIX[region]}',"
    f" '{REGION_ZONES[region]}', {RATES[region]})"
    for n, region in enumerate(Region)
)

# A quota version's writes, by its last state and whether an attempt failed on the way: each
# (status, fence, attempts, reason) in order. The quota row is the last of them.
_SCRIPTS: dict[tuple[str, bool], list[tuple[str, int, int, str | None]]] = {
    ("COMPLETED", False): [
        ("PENDING", 0, 0, None),
        ("LOCKED", 1, 0, None),
        ("COMPLETED", 1, 0, None),
    ],
    ("COMPLETED", True): [
        ("PENDING", 0, 0, None),
        ("LOCKED", 1, 0, None),
        ("PENDING", 1, 1, "failed"),
        ("LOCKED", 2, 1, "failed"),
        ("COMPLETED", 2, 1, None),
    ],
    ("PENDING", False): [
        ("PENDING", 0, 0, None),
        ("LOCKED", 1, 0, None),
        ("PENDING", 1, 0, "waiting"),
    ],
    ("PENDING", True): [
        ("PENDING", 0, 0, None),
        ("LOCKED", 1, 0, None),
        ("PENDING", 1, 1, "failed"),
    ],
    ("LOCKED", False): [("PENDING", 0, 0, None), ("LOCKED", 1, 0, None)],
    ("LOCKED", True): [
        ("PENDING", 0, 0, None),
        ("LOCKED", 1, 0, None),
        ("PENDING", 1, 1, "failed"),
        ("LOCKED", 2, 1, "failed"),
    ],
    ("ABORTED", True): [
        ("PENDING", 0, 0, None),
        *(
            write
            for k in range(1, MAX_ATTEMPTS + 1)
            for write in (
                ("LOCKED", k, k - 1, None if k == 1 else "failed"),
                ("PENDING", k, k, "failed") if k < MAX_ATTEMPTS else ("ABORTED", k, k, "gave_up"),
            )
        ),
    ],
}
_SCRIPT_ROWS = ", ".join(
    f"('{status}', {str(retried).lower()}, {seq}, '{write}', {fence}, {attempts},"
    f" {'NULL' if reason is None else repr(reason)}, {str(seq == len(script)).lower()})"
    for (status, retried), script in _SCRIPTS.items()
    for seq, (write, fence, attempts, reason) in enumerate(script, start=1)
)

_CUSTOMERS = [
    f"CREATE TEMP TABLE zones (i, region, plan_id, prefix, zone, rate) AS VALUES {_ZONES}",
    f"CREATE TEMP TABLE script (status, retried, seq, write, fence, attempts, reason, last)"
    f" AS VALUES {_SCRIPT_ROWS}",
    """
    INSERT INTO customers (nmi, plan_id, region, updated_at, billing_frequency, anchor_day,
                           payment_term_days)
    SELECT z.prefix || lpad(n::text, 9, '0'), z.plan_id, z.region,
           %(now)s - interval '400 days' + mod(n, 300) * interval '1 day', 'monthly', 1, 21
    FROM generate_series(0, %(customers)s - 1) n JOIN zones z ON z.i = mod(n, 4)
    """,
]

# Each table's rows are written in the order production writes them (by the time of the
# version's first write): a day's quotas lie together on disk, as they do in production.
#
# Every quota version: its last state, whether an attempt failed, the time its first write was
# made (``t0``), its free energy and value, and those of the version before (for the ledger).
_VERSIONS = [
    """
    CREATE TEMP TABLE qv AS
    WITH d AS (
        SELECT c.nmi, c.region, z.zone, z.rate, day::date AS day,
               mod(abs(hashtext(c.nmi || ':' || day::date)), 1000) AS h,
               mod(abs(hashtext(day::date || ':' || c.nmi)), 1000000) AS g
        FROM customers c JOIN zones z ON z.region = c.region
        CROSS JOIN generate_series(%(first)s::date, %(today)s::date, interval '1 day') day
    ), v AS (
        SELECT d.*,
               CASE WHEN d.day < %(today)s::date - 1 AND mod(g, 100) < 3 THEN 2 ELSE 1
               END AS versions,
               CASE WHEN d.day = %(today)s::date THEN
                        CASE WHEN h < 850 THEN 'PENDING' ELSE 'LOCKED' END
                    WHEN h < 900 THEN 'COMPLETED' WHEN h < 940 THEN 'PENDING'
                    WHEN h < 965 THEN 'LOCKED' ELSE 'ABORTED' END AS newest_status
        FROM d
    ), q AS (
        SELECT v.nmi, v.region, v.rate, v.day, v.h, v.g, version, version = v.versions AS newest,
               CASE WHEN version < v.versions THEN 'COMPLETED' ELSE v.newest_status END AS status,
               CASE WHEN version = v.versions AND v.newest_status = 'LOCKED'
                    THEN %(now)s - mod(v.g, 600) * interval '1 second'
                    ELSE least(((v.day + time '14:00') AT TIME ZONE v.zone)
                               + (version - 1) * interval '1 day'
                               + mod(v.g, 36000) * interval '1 second',
                               %(now)s - interval '10 minutes' - mod(v.g, 3600) * interval '1 s')
               END AS t0,
               (mod(v.g, 5000) + (version - 1) * (mod(v.h, 200) + 1))::numeric / 1000 AS kwh,
               (mod(v.h, 200) + 1)::numeric / 1000 AS delta
        FROM v CROSS JOIN LATERAL generate_series(1, v.versions) version
    )
    SELECT q.*,
           q.status = 'ABORTED' OR mod(q.g / 100, 20) = 0 AS retried,
           round(q.kwh * q.rate, 2) AS value,
           round((q.kwh - q.delta) * q.rate, 2) AS previous_value
    FROM q
    """,
    "ANALYZE qv",
]

_QUOTAS = [
    """
    INSERT INTO quotas (nmi, day, version, status, fence, attempts, locked_until, free_kwh,
                        free_value, completed_at, reason, revision)
    SELECT qv.nmi, qv.day, qv.version, qv.status, s.fence, s.attempts,
           CASE WHEN qv.status = 'LOCKED' THEN %(now)s + interval '5 minutes' END,
           CASE WHEN qv.status = 'COMPLETED' THEN qv.kwh::numeric(10, 3)::text END,
           CASE WHEN qv.status = 'COMPLETED' THEN qv.value::text END,
           CASE WHEN qv.status IN ('COMPLETED', 'ABORTED')
                THEN qv.t0 + (s.seq - 1) * interval '37 seconds' END,
           CASE s.reason WHEN 'failed' THEN %(failed)s WHEN 'waiting' THEN %(waiting)s
                         WHEN 'gave_up' THEN %(gave_up)s
                ELSE CASE WHEN qv.status = 'COMPLETED' AND mod(qv.g, 50) = 7
                          THEN %(incomplete)s END END,
           s.seq - 1
    FROM qv JOIN script s ON (s.status, s.retried, s.last) = (qv.status, qv.retried, true)
    ORDER BY qv.t0, qv.nmi
    """,
]

_LEDGER = [
    """
    INSERT INTO ledger_entries (nmi, day, version, kwh, amount, booked_at)
    SELECT qv.nmi, qv.day, qv.version,
           CASE WHEN qv.version = 1 THEN qv.kwh ELSE qv.delta END::numeric(10, 3)::text,
           CASE WHEN qv.version = 1 THEN qv.value ELSE qv.value - qv.previous_value END::text,
           qv.t0 + (s.seq - 1) * interval '37 seconds'
    FROM qv JOIN script s ON (s.status, s.retried, s.last) = (qv.status, qv.retried, true)
    WHERE qv.status = 'COMPLETED'
    ORDER BY qv.t0, qv.nmi
    """,
]

# Each write, in the order they were made; an attempt's writes share its trace.
_EVENTS = [
    """
    INSERT INTO quota_events (nmi, day, version, at, status, fence, attempts, reason, trace_id)
    SELECT qv.nmi, qv.day, qv.version, qv.t0 + (s.seq - 1) * interval '37 seconds', s.write,
           s.fence, s.attempts,
           CASE s.reason WHEN 'failed' THEN %(failed)s WHEN 'waiting' THEN %(waiting)s
                         WHEN 'gave_up' THEN %(gave_up)s END,
           md5(qv.nmi || qv.day || qv.version || ':' || s.fence)
    FROM qv JOIN script s ON (s.status, s.retried) = (qv.status, qv.retried)
    ORDER BY qv.t0 + (s.seq - 1) * interval '37 seconds'
    """,
]

# A settle job per quota version, in the state its quota's newest write says; ids in the order
# they were made.
_JOBS = [
    """
    CREATE TEMP TABLE jq AS
    SELECT qv.*, s.fence, s.attempts,
           md5(qv.nmi || qv.day || qv.version || ':' || s.fence) AS trace,
           CASE WHEN qv.status = 'COMPLETED' THEN 'COMPLETED'
                WHEN qv.status = 'ABORTED' THEN 'DISCARDED'
                WHEN qv.status = 'LOCKED' THEN 'RUNNING'
                WHEN qv.day < %(today)s AND mod(qv.g, 10) = 3 THEN 'CANCELLED'
                WHEN s.attempts > 0 THEN 'RETRYABLE'
                ELSE 'AVAILABLE' END AS state
    FROM qv JOIN script s ON (s.status, s.retried, s.last) = (qv.status, qv.retried, true)
    """,
    """
    INSERT INTO jobs (kind, key, payload, state, run_at, deadline, attempts, max_attempts,
                      snoozes, runs, worker, lease_until, rerun_at, created_at, attempted_at,
                      finalized_at, outcome, error, errors, traceparent)
    SELECT 'settle', jq.nmi || ':' || jq.day,
           '{"date":"' || jq.day || '","nmi":"' || jq.nmi || '","version":' || jq.version || '}',
           jq.state,
           CASE WHEN jq.state IN ('AVAILABLE', 'RETRYABLE')
                THEN %(now)s + mod(jq.g, 3600) * interval '1 second' ELSE jq.t0 END,
           jq.t0 + interval '3 days', jq.attempts, %(max_attempts)s,
           CASE WHEN jq.state = 'AVAILABLE' AND jq.fence > 0 THEN 1 ELSE 0 END, jq.fence,
           CASE WHEN jq.state = 'RUNNING'
                THEN 'worker-' || mod(jq.g, 2) || ':' || (1000 + mod(jq.h, 50)) END,
           CASE WHEN jq.state = 'RUNNING' THEN %(now)s + interval '30 seconds' END,
           NULL, jq.t0,
           CASE WHEN jq.fence > 0 THEN jq.t0 + interval '37 seconds' END,
           CASE WHEN jq.state IN ('COMPLETED', 'DISCARDED', 'CANCELLED')
                THEN jq.t0 + jq.fence * interval '74 seconds' END,
           CASE jq.state WHEN 'COMPLETED' THEN 'settled'
                         WHEN 'DISCARDED' THEN 'aborted: ' || %(gave_up)s
                         WHEN 'CANCELLED' THEN 'cancelled' END,
           CASE WHEN jq.attempts > 0 THEN
                CASE WHEN mod(jq.g, 2) = 0 THEN %(error_a)s ELSE %(error_b)s END END,
           CASE WHEN jq.attempts > 0 THEN (
                SELECT json_agg(json_build_object(
                           'attempt', a,
                           'at', to_char((jq.t0 + a * interval '74 seconds') AT TIME ZONE 'UTC',
                                         'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"'),
                           'error', CASE WHEN mod(jq.g + a, 2) = 1 THEN %(error_a)s
                                         ELSE %(error_b)s END) ORDER BY a)::text
                FROM generate_series(1, jq.attempts) a) END,
           '00-' || jq.trace || '-' || left(md5(jq.trace), 16) || '-01'
    FROM jq
    ORDER BY jq.t0, jq.nmi
    """,
    # Last month's invoice run: its plan job, a job per batch of 500 accounts, its invoices.
    """
    INSERT INTO invoice_runs (run_id, state, requested_at, as_of, batches, batches_done,
                              accounts, invoices, credit_notes, adjustment_invoices, waiting,
                              held, notes, finished_at)
    SELECT %(run_id)s, 'COMPLETED', r.at, r.at, b, b, n, n, 0, 0, 0, 0, '[]',
           r.at + interval '5 minutes'
    FROM (SELECT count(*) AS n, ceil(count(*)::numeric / %(batch_size)s)::int AS b,
                 (%(issued)s::date + time '02:00') AT TIME ZONE 'Australia/Sydney' AS at
          FROM customers) r
    """,
    """
    INSERT INTO jobs (kind, key, payload, state, run_at, deadline, attempts, max_attempts,
                      snoozes, runs, created_at, attempted_at, finalized_at, outcome)
    SELECT 'invoice-run', r.run_id, '{"run_id":"' || r.run_id || '"}', 'COMPLETED',
           r.requested_at, r.requested_at + interval '1 day', 0, 10, 0, 1, r.requested_at,
           r.requested_at, r.requested_at + interval '2 seconds', r.batches || ' batches'
    FROM invoice_runs r
    """,
    """
    INSERT INTO jobs (kind, key, payload, state, run_at, deadline, attempts, max_attempts,
                      snoozes, runs, created_at, attempted_at, finalized_at, outcome, error,
                      errors)
    SELECT 'invoice-batch', r.run_id || ':' || b.batch,
           '{"batch":' || b.batch || ',"nmis":' || b.nmis || ',"run_id":"' || r.run_id || '"}',
           'COMPLETED', r.requested_at, r.requested_at + interval '1 day',
           CASE WHEN mod(b.batch, 16) = 5 THEN 1 ELSE 0 END, 10, 0,
           CASE WHEN mod(b.batch, 16) = 5 THEN 2 ELSE 1 END, r.requested_at,
           r.requested_at + b.batch * interval '3 seconds',
           r.requested_at + (b.batch + 1) * interval '3 seconds', b.accounts || ' invoices',
           CASE WHEN mod(b.batch, 16) = 5 THEN %(error_a)s END,
           CASE WHEN mod(b.batch, 16) = 5 THEN
                '[{"at":"' || to_char(r.requested_at AT TIME ZONE 'UTC',
                                      'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"')
                || '","attempt":1,"error":' || to_json(%(error_a)s::text) || '}]' END
    FROM invoice_runs r,
         (SELECT (rank - 1) / %(batch_size)s AS batch, count(*) AS accounts,
                 '["' || string_agg(nmi, '","' ORDER BY nmi) || '"]' AS nmis
          FROM (SELECT nmi, row_number() OVER (ORDER BY nmi) AS rank FROM customers) c
          GROUP BY 1) b
    ORDER BY b.batch
    """,
    """
    INSERT INTO documents (number, series, serial, document_type, nmi, period_start, period_end,
                           sequence, corrects, run_id, issue_date, due_date, finalised_at,
                           plan_id, region, time_zone, subtotal, gst, total, consumption_kwh,
                           free_kwh, free_value, over_cap_kwh, export_kwh, reason, lines, days,
                           plan_document, retailer)
    SELECT 'INV-' || lpad(c.rank::text, 8, '0'), 'invoice', c.rank, 'invoice', c.nmi,
           %(period_start)s, %(period_end)s, 0, NULL, r.run_id, %(issued)s,
           %(issued)s::date + 21, r.requested_at + (c.rank / %(batch_size)s) * interval '3 s',
           c.plan_id, c.region, z.zone, (c.total / 1.1)::numeric(12, 2)::text,
           (c.total - (c.total / 1.1)::numeric(12, 2))::numeric(12, 2)::text, c.total::text,
           (300 + mod(c.rank, 500))::numeric(10, 3)::text,
           (60 + mod(c.rank, 90))::numeric(10, 3)::text,
           round((60 + mod(c.rank, 90)) * z.rate, 2)::text, '0.000',
           (100 + mod(c.rank, 200))::numeric(10, 3)::text, NULL,
           '[["usage","Energy","300.000","kWh","0.30","' || c.total || '"]]', '[]',
           p.document, '{"name":"Example Energy"}'
    FROM (SELECT nmi, plan_id, region, row_number() OVER (ORDER BY nmi) AS rank,
                 (80 + mod(abs(hashtext(nmi)), 20000)::numeric / 100)::numeric(12, 2) AS total
          FROM customers) c
    JOIN zones z ON z.region = c.region JOIN plans p ON p.plan_id = c.plan_id,
    invoice_runs r
    ORDER BY c.rank
    """,
    """
    UPDATE document_counters SET next_number = (SELECT count(*) + 1 FROM documents)
    WHERE series = 'invoice'
    """,
]

_OTHERS = [
    """
    INSERT INTO ingestions (received_at, source, name, key_id, agent, bytes, accepted,
                            superseded, unchanged, stale, trace_id)
    SELECT (%(first)s::date + time '00:00') AT TIME ZONE 'Australia/Sydney'
               + (%(now)s - ((%(first)s::date + time '00:00') AT TIME ZONE 'Australia/Sydney'))
                 * i / %(ingestions)s,
           CASE WHEN mod(i, 20) < 14 THEN 'nem12' WHEN mod(i, 20) < 19 THEN 'reads'
                ELSE 'import' END,
           CASE WHEN mod(i, 20) < 14 THEN 'nem12#' || lpad(i::text, 10, '0')
                    || '#MDPACME#RETAILER.csv'
                WHEN mod(i, 20) = 19 THEN '/srv/nem12/archive-' || i || '.zip' END,
           CASE WHEN mod(i, 20) < 19 THEN %(ingest_id)s ELSE NULL END,
           CASE WHEN mod(i, 20) < 19 THEN 'agent-' || (1 + mod(i, %(agents)s)) END,
           20000 + mod(abs(hashtext(i::text)), 2000000), 50 + mod(i * 7, 4000), mod(i, 13),
           mod(i, 29), mod(i, 97) / 90, md5('ingestion' || i)
    FROM generate_series(1, %(ingestions)s) i
    """,
    """
    INSERT INTO audit_log (at, key_id, key_name, action, target, outcome, reason, before,
                           after, trace_id)
    SELECT %(now)s - (%(audit)s - i) * interval '7 minutes', %(admin_id)s, %(admin_name)s,
           (ARRAY['session.sign_in', 'job.retry', 'job.cancel', 'quota.reopen', 'job.retry',
                  'key.revoke'])[1 + mod(i, 6)],
           CASE mod(i, 6) WHEN 0 THEN 'key:' || %(admin_id)s WHEN 3 THEN 'quota:4'
                || lpad(mod(i * 13, %(customers)s)::text, 9, '0') || ':' || %(first)s::date
                WHEN 5 THEN 'key:key_' || lpad(i::text, 12, '0')
                ELSE 'job:' || (1 + mod(i * 7919, %(customers)s * 25)) END,
           CASE WHEN mod(i, 31) = 4 THEN 'conflict' ELSE 'done' END,
           CASE WHEN mod(i, 6) IN (1, 2, 3) THEN 'meter data corrected by the MDP, ticket '
                || (4000 + i) END,
           CASE WHEN mod(i, 6) <> 0 THEN '{"state":"DISCARDED"}' END,
           CASE WHEN mod(i, 6) <> 0 THEN '{"state":"AVAILABLE"}' END,
           md5('audit' || i)
    FROM generate_series(1, %(audit)s) i
    """,
    """
    INSERT INTO agents (name, breaker, trips, version, address, last_seen_at)
    SELECT 'agent-' || i, CASE WHEN i = 3 THEN 'open' WHEN i = 5 THEN 'half-open' ELSE 'closed'
           END, CASE WHEN i IN (3, 5) THEN i * 2 ELSE 0 END, '1.4.' || mod(i, 3),
           '10.20.0.' || (10 + i), %(now)s - i * interval '41 seconds'
    FROM generate_series(1, %(agents)s) i
    """,
]

_STEPS = (
    ("customers", _CUSTOMERS),
    ("versions", _VERSIONS),
    ("quotas", _QUOTAS),
    ("ledger", _LEDGER),
    ("quota_events", _EVENTS),
    ("jobs and invoices", _JOBS),
    ("ingestions, audit, agents", _OTHERS),
)


# --- the pages --------------------------------------------------------------------------------


def _measure(url: str, seed: Seed) -> list[str]:
    """Time each page; the names of those whose p95 missed the goal."""
    env = {
        "FREEHOURS_DATABASE_URL": url,
        "FREEHOURS_RATE_LIMIT_PER_CLIENT": "1000000/minute",
        "FREEHOURS_LOG_LEVEL": "warning",
    }
    slow = []
    with api_process(env) as (base, _), _signed_in(base, seed.secret) as client:
        for name, path in pages(client, seed):
            times = _time(client, path)
            p50 = statistics.median(times)
            p95 = statistics.quantiles(times, n=20, method="inclusive")[-1]
            verdict = "" if p95 < GOAL_MS else ": FAIL"
            print(
                f"console postgres {name} ({path}): p50 {p50:.1f} ms, p95 {p95:.1f} ms"
                f" (goal < {GOAL_MS:.0f} ms): {p95 / GOAL_MS:.2f} of the goal{verdict}"
            )
            if p95 >= GOAL_MS:
                slow.append(name)
                _explain(url, client, path)
    return slow


@contextmanager
def _signed_in(base: str, secret: str) -> Iterator[httpx.Client]:
    """A client of ``base`` holding a console session of the key ``secret``."""
    with httpx.Client(base_url=base, timeout=30.0) as client:
        answer = client.post(
            "/console/sign-in",
            data={"key": secret, "next": "/console/"},
            headers={"Origin": base},
        )
        if answer.status_code != 303 or "freehours_session" not in answer.cookies:
            raise SystemExit(
                f"console: sign-in answered {answer.status_code} without a session: "
                f"{answer.text[:300]}"
            )
        yield client


def pages(client: httpx.Client, seed: Seed) -> Iterator[tuple[str, str]]:
    """Each page timed, by name: its path and query."""
    day = seed.day.isoformat()
    yield "overview today", "/console/"
    yield "overview of a day", f"/console/?day={day}"
    yield "quotas", "/console/quotas"
    yield "quotas page 2", _next(client, "/console/quotas")
    yield "quotas ABORTED", "/console/quotas?state=ABORTED"
    yield "quotas VIC", "/console/quotas?region=VIC"
    yield "quotas of a day", f"/console/quotas?day={day}"
    yield "quotas of an NMI", f"/console/quotas?nmi={seed.nmi}"
    yield "quotas PENDING, NSW, a day", f"/console/quotas?state=PENDING&region=NSW&day={day}"
    yield "a quota", f"/console/quotas/{seed.nmi}/{day}"
    yield "jobs", "/console/jobs"
    yield "jobs DISCARDED", "/console/jobs?state=DISCARDED"
    yield "jobs settle COMPLETED", "/console/jobs?kind=settle&state=COMPLETED"
    yield "jobs page 2", _next(client, "/console/jobs")
    yield "a job", f"/console/jobs/{seed.job_id}"
    yield "ingestion", "/console/ingestion"
    yield "audit", "/console/audit"
    yield "invoices", "/console/invoices"
    yield "settings", "/console/settings"


class _NextLink(HTMLParser):
    """The ``href`` of the first element with ``rel="next"``."""

    def __init__(self) -> None:
        super().__init__()
        self.href: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if self.href is None and "next" in (values.get("rel") or "").split():
            self.href = values.get("href")


def _next(client: httpx.Client, path: str) -> str:
    """The path of the page after ``path``: its ``rel="next"`` link."""
    answer = _get(client, path)
    parser = _NextLink()
    parser.feed(answer.text)
    if parser.href is None:
        raise SystemExit(f"console: {path} has no rel=next link")
    return urljoin(f"{client.base_url}{path}", parser.href).removeprefix(str(client.base_url))


def _get(client: httpx.Client, path: str) -> httpx.Response:
    answer = client.get(path)
    if answer.status_code != 200:
        raise SystemExit(f"console: {path} answered {answer.status_code}: {answer.text[:300]}")
    return answer


def _time(client: httpx.Client, path: str) -> list[float]:
    """``REQUESTS`` answers to ``path`` after ``WARM_UP`` untimed: each one's milliseconds."""
    for _ in range(WARM_UP):
        _get(client, path)
    times = []
    for _ in range(REQUESTS):
        started = time.perf_counter()
        _get(client, path)
        times.append((time.perf_counter() - started) * 1e3)
    return times


# --- why a page is slow -----------------------------------------------------------------------


def _explain(url: str, client: httpx.Client, path: str) -> None:
    """The plans of the slowest statements ``path`` runs: the page asked once more in this
    process, by the same app on the same database, with its SQL recorded."""
    from fastapi.testclient import TestClient  # noqa: PLC0415 - only when a page is slow

    from freehours.api.app import create_app  # noqa: PLC0415
    from freehours.api.services import Services  # noqa: PLC0415
    from freehours.settings import Settings  # noqa: PLC0415

    recorded: list[tuple[float, str, Any]] = []

    def before(conn: Any, cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        conn.info["started"] = time.perf_counter()

    def after(conn: Any, cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        took = (time.perf_counter() - conn.info.pop("started")) * 1e3
        recorded.append((took, statement, parameters))

    services = Services.from_settings(Settings(database_url=url))
    engine = services.store.engine
    sa.event.listen(engine, "before_cursor_execute", before)
    sa.event.listen(engine, "after_cursor_execute", after)
    try:
        with TestClient(create_app(services), base_url=str(client.base_url)) as local:
            local.cookies.update(client.cookies)
            local.get(path)
    finally:
        sa.event.remove(engine, "before_cursor_execute", before)
        sa.event.remove(engine, "after_cursor_execute", after)
    recorded.sort(key=lambda entry: entry[0], reverse=True)
    conninfo = sa.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        for took, statement, parameters in recorded[:EXPLAINED]:
            print(f"console postgres {path}: {took:.1f} ms: {_one_line(statement)}")
            if not statement.lstrip().upper().startswith(("SELECT", "WITH")):
                continue
            plan = conn.execute(f"EXPLAIN (ANALYZE, BUFFERS) {statement}", parameters).fetchall()
            for (line,) in plan:
                print(f"    {line}")


def _one_line(statement: str) -> str:
    return re.sub(r"\s+", " ", statement).strip()


if __name__ == "__main__":
    run()
