"""PostgreSQL's partitioned history: migration 0006 moves a database there, queries prune to
the partitions they need (their plans, ``EXPLAIN (FORMAT JSON)``), and the scheduled upkeep
creates months ahead and detaches old ones."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
from alembic import command
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from prometheus_client import REGISTRY
from structlog.testing import capture_logs

from freehours.clock import ManualClock
from freehours.settings import Settings
from freehours.store import maintenance, partitions, schema
from freehours.store.database import Store
from freehours.store.engine import create_engine
from freehours.store.partitions import (
    CREATION,
    HISTORY,
    JOBS,
    add_months,
    attached_months,
    month_of,
)
from tests.store.schemas import postgres_schema
from tests.support import eventually

NOW = datetime(2026, 6, 15, 3, 0, tzinfo=UTC)


@pytest.fixture
def pg_url(postgres_url: str) -> Iterator[str]:
    with postgres_schema(postgres_url) as url:
        yield url


def _partitions(conn: sa.Connection, parent: str) -> list[str]:
    return sorted(
        conn.scalars(
            sa.text(
                "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                "WHERE i.inhparent = CAST(:parent AS regclass)"
            ),
            {"parent": parent},
        )
    )


def _relkind(conn: sa.Connection, table: str) -> str:
    return str(
        conn.scalar(
            sa.text("SELECT relkind FROM pg_class WHERE oid = CAST(:t AS regclass)"), {"t": table}
        )
    )


_AT_0005 = """
INSERT INTO plans VALUES ('p', '{}', '2025-01-01T00:00:00Z');
INSERT INTO customers (nmi, plan_id, region, updated_at) VALUES ('NMI0000001', 'p', 'NSW', now());
INSERT INTO meter_days VALUES
  ('NMI0000001', 'E1', '2025-11-30', 30, 'KWH', 'x', repeat('A', 48), NULL, now()),
  ('NMI0000001', 'E1', '2026-02-01', 30, 'KWH', 'x', repeat('A', 48), NULL, now());
INSERT INTO quotas VALUES
  ('NMI0000001', '2025-11-30', 1, 'COMPLETED', 1, 1, NULL, '1.5', '0.30', now(), NULL, 1);
INSERT INTO ledger_entries VALUES ('NMI0000001', '2025-11-30', 1, '1.5', '0.30', now());
INSERT INTO quota_events (nmi, day, version, at, status, fence, attempts)
  VALUES ('NMI0000001', '2025-11-30', 1, now(), 'COMPLETED', 1, 1);
INSERT INTO jobs (kind, key, payload, state, run_at, deadline, attempts, max_attempts, snoozes,
  runs, created_at, finalized_at) VALUES
  ('settle', 'a', '{}', 'COMPLETED', now(), now(), 1, 5, 0, 1, now(), '2026-01-03T00:00:00Z'),
  ('settle', 'b', '{}', 'AVAILABLE', now(), now() + interval '1 day', 0, 5, 0, 0, now(), NULL);
"""


def test_migration_0006_moves_a_database_at_0005_to_the_partitioned_layout(pg_url: str) -> None:
    engine = create_engine(pg_url)
    try:
        with engine.begin() as conn:
            command.upgrade(schema._config(conn), "0005")
            for statement in _AT_0005.strip().split(";\n"):
                conn.exec_driver_sql(statement)
        counts_before = _counts(engine)
        assert schema.upgrade(engine) == schema.head_revision()  # 0006 and any later
        assert _counts(engine) == counts_before
        with engine.connect() as conn:
            for table in ("meter_days", "quotas", "ledger_entries", "quota_events", "jobs"):
                assert _relkind(conn, table) == "p", table
            meter = _partitions(conn, "meter_days")
            assert {"meter_days_2025_11", "meter_days_2026_02", "meter_days_default"} <= set(meter)
            assert _partitions(conn, "jobs") == ["jobs_done", "jobs_live"]
            assert "jobs_done_2026_01" in _partitions(conn, "jobs_done")
            assert conn.scalar(sa.text("SELECT count(*) FROM meter_days_default")) == 0
            assert conn.scalar(sa.text("SELECT key FROM jobs_live")) == "b"
    finally:
        engine.dispose()
    # The application works on it: the unique unfinished job holds, new ids follow the old.
    with Store.open(pg_url) as store, store.write() as unit:
        later = NOW + timedelta(days=400)
        assert unit.jobs.enqueue("settle", "b", {}, run_at=later, now=later) is None
        fresh = unit.jobs.enqueue("settle", "a", {}, run_at=later, now=later)
        assert fresh is not None
        assert fresh > 2
        assert [job.key for job in unit.jobs.history("settle", "a")] == ["a", "a"]


def _counts(engine: sa.Engine) -> dict[str, int]:
    tables = ("meter_days", "quotas", "ledger_entries", "quota_events", "jobs", "customers")
    with engine.connect() as conn:
        return {t: int(conn.scalar(sa.text(f"SELECT count(*) FROM {t}")) or 0) for t in tables}


# --- pruning ----------------------------------------------------------------------------------


class _Statements:
    """Every statement an engine's new connections run, with its parameters (through
    SQLAlchemy or a ``Prepared`` one on the cursor): to EXPLAIN them afterwards."""

    def __init__(self, engine: sa.Engine) -> None:
        seen: list[tuple[str, Any]] = []
        self.seen = seen

        class Recording(psycopg.Cursor[Any]):
            def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
                text = str(query)
                if text.lstrip().upper().startswith(("SELECT", "UPDATE", "WITH", "DELETE")):
                    seen.append((text, params))
                return super().execute(query, params, **kwargs)

        engine.dispose()
        sa.event.listen(
            engine, "connect", lambda dbapi, _: setattr(dbapi, "cursor_factory", Recording)
        )


def _scanned(conn: sa.Connection, statement: str, parameters: Any) -> set[str]:
    """The relations the plan of ``statement`` reads (every node's ``Relation Name``)."""
    driver: Any = conn.connection.driver_connection
    cursor = psycopg.ClientCursor(driver)  # the parameters in the text: a plan for the values
    cursor.execute(f"EXPLAIN (FORMAT JSON) {statement}", parameters)
    plan = cursor.fetchone()[0]
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if "Relation Name" in node:
                found.add(node["Relation Name"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(plan if not isinstance(plan, str) else json.loads(plan))
    return found


def test_a_days_reads_and_the_job_claim_prune_to_one_partition(pg_url: str) -> None:
    day = date(2026, 7, 20)
    with Store.open(pg_url) as store:
        with store.write() as unit:
            for layout in CREATION:
                unit.partitions.create(layout, [month_of(day)])
        statements = _Statements(store.engine)
        with store.read() as unit:
            unit.meter.days_for("NMI0000001", [day])
            unit.quotas.latest("NMI0000001", day)
            unit.quotas.ledger("NMI0000001", day)
            unit.quotas.events("NMI0000001", day)
            unit.console.regions_of_day(day)
        with store.write() as unit:
            unit.jobs.claim("w", ["settle"], 10, now=NOW, lease=timedelta(seconds=30))
        with store.engine.connect() as conn:
            plans = [(s, _scanned(conn, s, p)) for s, p in statements.seen]
    partitioned = ("meter_days", "quotas", "ledger_entries", "quota_events", "jobs")
    wanted = {f"{table}_2026_07" for table in partitioned} | {"jobs_live"}
    assert sum(1 for _, scanned in plans if scanned & wanted) >= 6
    for statement, scanned in plans:
        # The parent a ModifyTable node names (the claim's UPDATE) is not a scan.
        read = {name for name in scanned if name.startswith(partitioned)} - {"jobs"}
        if not read:
            continue  # customers, the schema's revision
        for name in read:
            assert name.endswith("_2026_07") or name == "jobs_live", (statement, scanned)
        tables = {name.rsplit("_2026_07", 1)[0] for name in read}
        assert len(read) == len(tables), (statement, scanned)  # one partition per table


# --- the scheduled upkeep ---------------------------------------------------------------------


def _name(table: str, month: date) -> str:
    return f"{table}_{month.year:04d}_{month.month:02d}"


def _aged(conn: sa.Connection, now: datetime) -> dict[str, int]:
    """How many partitions the upkeep should detach at ``now``: 13 months (of 31 days) of
    history, every table's; a week of finished jobs."""
    history = month_of(now - timedelta(days=13 * 31))
    jobs = month_of(now - timedelta(days=7))
    return {
        "history_partitions": sum(
            1 for layout in HISTORY for m in attached_months(conn, layout) if m < history
        ),
        "job_partitions": sum(1 for m in attached_months(conn, JOBS[0]) if m < jobs),
    }


def test_the_upkeep_creates_months_ahead_and_detaches_old_ones(pg_url: str) -> None:
    # Two years past the months the migration made (from the real clock), on a fake one.
    start = add_months(month_of(datetime.now(UTC)), 24)
    clock = ManualClock(datetime.combine(start, time(3), UTC) + timedelta(days=14))
    stray = add_months(start, 9)  # a month nobody has made yet
    with Store.open(pg_url) as store:
        history = maintenance.history_partitions(months=13, ahead=2)
        jobs = maintenance.job_partitions(timedelta(days=7), ahead=2)
        retention = maintenance.Retention(store, clock, [history, jobs])
        with store.write() as unit:
            # An event of a month nobody created: the default takes it, the upkeep moves it.
            unit.connection.execute(
                sa.text(
                    "INSERT INTO quota_events (nmi, day, version, at, status, fence, attempts) "
                    "VALUES ('NMI0000001', :day, 1, now(), 'PENDING', 0, 0)"
                ),
                {"day": stray + timedelta(days=1)},
            )
        # The migration's months (around the real date) are long past on this clock.
        with store.read() as unit:
            expected = _aged(unit.connection, clock.now())
        assert retention.run() == expected
        with store.read() as unit:
            conn = unit.connection
            for month in (start, add_months(start, 1), add_months(start, 2)):
                assert _name("meter_days", month) in _partitions(conn, "meter_days")
                assert _name("jobs_done", month) in _partitions(conn, "jobs_done")
            assert _name("meter_days", add_months(start, 3)) not in _partitions(conn, "meter_days")
            # The stray event's month was made, and the event moved in.
            assert conn.scalar(sa.text(f"SELECT count(*) FROM {_name('quota_events', stray)}")) == 1
            assert conn.scalar(sa.text("SELECT count(*) FROM quota_events_default")) == 0

        # Fifteen months on: months ahead are made, old ones go.
        later = add_months(start, 15)
        clock.set(datetime.combine(later, time(1), UTC))
        with store.read() as unit:
            expected = _aged(unit.connection, clock.now())
        detached = retention.run()
        with store.read() as unit:
            conn = unit.connection
            meter = _partitions(conn, "meter_days")
            assert _name("meter_days", add_months(later, 2)) in meter
            # 13 months kept (of 31 days): ``start`` ended over 403 days ago, the next did not.
            assert _name("meter_days", start) not in meter
            assert _name("meter_days", add_months(start, 1)) in meter
            # Detached history stays, as a table of its own, to archive.
            kept = sa.text("SELECT to_regclass(:name) IS NOT NULL")
            assert conn.scalar(kept, {"name": _name("meter_days", start)})
            assert conn.scalar(kept, {"name": _name("ledger_entries", start)})
            # Finished jobs kept 7 days: every month before the last one dropped.
            assert _partitions(conn, "jobs_done") == [
                *(_name("jobs_done", add_months(later, n)) for n in range(3)),
                "jobs_done_default",
            ]
            assert not conn.scalar(kept, {"name": _name("jobs_done", start)})
        assert detached == expected
        assert expected == {"history_partitions": 4, "job_partitions": 3}


# --- months loaded in any order ---------------------------------------------------------------

#: The month the migration made first (it goes by the real clock), as the database of a retailer
#: who goes live now.
LIVE = month_of(datetime.now(UTC))
#: Months of data loaded: before the database was made (the retailer's history, loaded before
#: going live), the present one, and one past the months made ahead.
LOADED = (add_months(LIVE, -5), add_months(LIVE, -1), LIVE, add_months(LIVE, 6))
#: A month's rows: two NMIs on its first and last days; one day settled twice (version 2, its
#: ledger entry the adjustment), every quota COMPLETED with its ledger entries, and one finished
#: job a day.
_LOAD = """
INSERT INTO meter_days (nmi, suffix, day, interval_minutes, uom, interval_values, qualities,
  received_at)
  SELECT nmi, 'E1', day, 30, 'KWH', 'x', repeat('A', 48), now() FROM loaded;
INSERT INTO quotas (nmi, day, version, status, fence, attempts, free_kwh, free_value,
  completed_at, revision)
  SELECT nmi, day, v, 'COMPLETED', v, 1, CASE v WHEN 1 THEN '1.5' ELSE '2.0' END, '0.30', now(), v
  FROM loaded, generate_series(1, versions) AS v;
INSERT INTO ledger_entries (nmi, day, version, kwh, amount, booked_at)
  SELECT nmi, day, v, CASE v WHEN 1 THEN '1.5' ELSE '0.5' END, '0.30', now()
  FROM loaded, generate_series(1, versions) AS v;
INSERT INTO quota_events (nmi, day, version, at, status, fence, attempts)
  SELECT nmi, day, versions, now(), 'COMPLETED', 1, 1 FROM loaded;
INSERT INTO jobs (kind, key, payload, state, run_at, deadline, attempts, max_attempts, snoozes,
  runs, created_at, finalized_at)
  SELECT 'settle', nmi || ':' || day, '{}', 'COMPLETED', now(), now(), 1, 5, 0, 1, now(),
    day + time '12:00' FROM loaded
"""
_LOADED = (
    "CREATE TEMPORARY TABLE loaded ON COMMIT DROP AS SELECT nmi, day, "
    "CASE WHEN nmi = 'NMI0000001' AND day = :first THEN 2 ELSE 1 END AS versions "
    "FROM unnest(CAST(ARRAY['NMI0000001', 'NMI0000002'] AS text[])) AS nmi, "
    "unnest(CAST(ARRAY[:first, :last] AS date[])) AS day"
)
#: Each partitioned table, its partition key, and its rows' key.
_KEYS = {
    "meter_days": ("day", "nmi, suffix, day"),
    "quotas": ("day", "nmi, day, version"),
    "ledger_entries": ("day", "nmi, day, version"),
    "quota_events": ("day", "nmi, day, version"),
    "jobs_done": ("finalized_at", "key"),
}


def _load(store: Store, month: date) -> None:
    last = add_months(month, 1) - timedelta(days=1)
    with store.write() as unit:
        unit.connection.execute(sa.text(_LOADED), {"first": month, "last": last})
        for statement in _LOAD.strip().split(";\n"):
            unit.connection.exec_driver_sql(statement)


def _rows(conn: sa.Connection) -> dict[str, list[tuple[Any, ...]]]:
    """Each table's rows (by key, sorted), with the partition each is in."""
    return {
        table: [
            tuple(row)
            for row in conn.execute(
                sa.text(f"SELECT {key}, {column}, tableoid::regclass::text FROM {table}")
            )
        ]
        for table, (column, key) in _KEYS.items()
    }


def _ledger_checks() -> dict[str, str]:
    """The day benchmark's checks of settlement and ledger that hold for any set of days."""
    from benchmarks.bench_day import CHECKS  # noqa: PLC0415 - matplotlib, for this test alone

    return {what: query for what, query in CHECKS.items() if ":" not in query}


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    order=st.permutations(LOADED),
    upkeep_after=st.lists(st.booleans(), min_size=len(LOADED), max_size=len(LOADED)),
    ledger_alone=st.sets(st.sampled_from(LOADED)),
)
@example(  # the operator's: the past month loaded, its ledger month made alone (as before the fix)
    order=list(LOADED), upkeep_after=[False] * len(LOADED), ledger_alone={LOADED[0]}
)
def test_months_loaded_in_any_order_end_in_their_partitions_after_the_upkeep(
    postgres_url: str, order: list[date], upkeep_after: list[bool], ledger_alone: set[date]
) -> None:
    """Data of past, present and future months, loaded in any order, with or without an upkeep
    between loads, and a ledger month made without its quotas' (an upkeep before this fix):
    after the upkeep no row is lost or repeated, each is in its month's partition, the foreign
    key holds, and settlement and ledger agree."""
    clock = ManualClock(datetime.combine(LIVE, time(3), UTC) + timedelta(days=3))
    failures = _upkeep_failures()
    with postgres_schema(postgres_url) as url, Store.open(url) as store:
        retention = maintenance.Retention(
            store,
            clock,
            [
                maintenance.job_partitions(timedelta(days=400), ahead=3),
                maintenance.history_partitions(months=84, ahead=3),
            ],
        )
        for month, upkeep in zip(order, upkeep_after, strict=True):
            if month in ledger_alone:
                with store.write() as unit:
                    partitions.create_month(unit.connection, HISTORY[0], month)
            _load(store, month)
            if upkeep:
                assert retention.run().keys() == {"job_partitions", "history_partitions"}
        with store.read() as unit:
            before = _rows(unit.connection)
        assert retention.run().keys() == {"job_partitions", "history_partitions"}
        assert _upkeep_failures() == failures
        with store.read() as unit:
            conn = unit.connection
            after = _rows(conn)
            for table, rows in after.items():
                # No row lost or repeated, whichever partition it was in.
                assert sorted(row[:-1] for row in rows) == sorted(r[:-1] for r in before[table])
                settled = table in ("quotas", "ledger_entries")  # one day of each month twice
                assert len(rows) == len(LOADED) * (5 if settled else 4)
                for *_, moment, partition in rows:
                    assert partition == f"{table}_{month_of(moment):%Y_%m}", (table, moment)
            for what, query in _ledger_checks().items():
                assert conn.execute(sa.text(query)).scalar_one() == 0, what
            invalid = (
                "SELECT count(*) FROM pg_constraint WHERE contype = 'f' AND NOT convalidated "
                "AND connamespace = CAST(current_schema() AS regnamespace)"
            )
            assert conn.scalar(sa.text(invalid)) == 0


def _upkeep_failures() -> float:
    return sum(
        sample.value
        for family in REGISTRY.collect()
        if family.name == "freehours_upkeep_failures"
        for sample in family.samples
        if sample.name.endswith("_total")
    )


def test_every_foreign_key_between_partitioned_tables_is_moved_with_its_rows(pg_url: str) -> None:
    """``FOREIGN_KEYS`` are all the foreign keys that refer to a partitioned table (a month of
    it could not be made while another one, unknown, referred to rows in its default)."""
    found = (
        "SELECT c.conrelid::regclass::text, c.confrelid::regclass::text, "
        "ARRAY(SELECT attname FROM unnest(c.conkey) WITH ORDINALITY AS k(attnum, n) "
        "  JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum ORDER BY n), "
        "ARRAY(SELECT attname FROM unnest(c.confkey) WITH ORDINALITY AS k(attnum, n) "
        "  JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.attnum ORDER BY n) "
        "FROM pg_constraint c JOIN pg_class r ON r.oid = c.confrelid "
        "WHERE c.contype = 'f' AND c.conparentid = 0 AND r.relkind = 'p' "
        "AND c.connamespace = CAST(current_schema() AS regnamespace)"
    )
    with Store.open(pg_url) as store, store.read() as unit:
        keys = {
            (referring, referred, tuple(columns), tuple(referred_columns))
            for referring, referred, columns, referred_columns in unit.connection.execute(
                sa.text(found)
            )
        }
    assert keys == {
        (key.referring.parent, key.referred, key.columns, key.columns)
        for key in partitions.FOREIGN_KEYS
    }
    referring = {key.referring.parent for key in partitions.FOREIGN_KEYS}
    assert not referring & {key.referred for key in partitions.FOREIGN_KEYS}  # no chain
    for key in partitions.FOREIGN_KEYS:
        assert key.referring.column in key.columns


def test_a_table_whose_upkeep_fails_stops_no_other_and_is_counted(pg_url: str) -> None:
    """``meter_days`` held locked by another transaction: its steps give up (the lock timeout),
    every other table's months are made, and the failure is logged and counted."""
    start = add_months(month_of(datetime.now(UTC)), 24)  # months the migration did not make
    clock = ManualClock(datetime.combine(start, time(3), UTC))
    history = maintenance.history_partitions(months=84, ahead=1)
    before = {
        table: REGISTRY.get_sample_value("freehours_upkeep_failures_total", {"table": table}) or 0
        for table in ("meter_days", "quotas")
    }
    with Store.open(pg_url) as store, store.engine.connect() as locker:
        retention = maintenance.Retention(store, clock, [history])
        locker.exec_driver_sql("LOCK TABLE meter_days IN ACCESS EXCLUSIVE MODE")
        with capture_logs() as logs:
            assert retention.run() == {"history_partitions": 0}
        locker.rollback()
        with store.read() as unit:
            conn = unit.connection
            for table in ("quotas", "ledger_entries", "quota_events"):
                assert _name(table, start) in _partitions(conn, table)
            assert _name("meter_days", start) not in _partitions(conn, "meter_days")
    failed = [entry for entry in logs if entry["event"] == "upkeep_failed"]
    assert {entry["table"] for entry in failed} == {"meter_days"}
    assert failed[0]["error"] == "OperationalError(LockNotAvailable)"
    assert set(failed[0]) == {"event", "log_level", "table", "error"}  # never the data
    after = REGISTRY.get_sample_value("freehours_upkeep_failures_total", {"table": "meter_days"})
    assert after == before["meter_days"] + len(failed)
    quotas = REGISTRY.get_sample_value("freehours_upkeep_failures_total", {"table": "quotas"})
    assert (quotas or 0) == before["quotas"]
    succeeded = REGISTRY.get_sample_value(
        "freehours_upkeep_last_success_timestamp_seconds", {"table": "quotas"}
    )
    assert succeeded == clock.now().timestamp()


def test_an_api_process_moves_a_settled_month_loaded_before_it_out_of_the_defaults_as_it_starts(
    pg_url: str,
) -> None:
    """The operator's: a month before the database's first loaded and settled, then the API
    started: its retention at start makes the month and moves quotas and ledger entries in."""
    from tests.api.conftest import serving  # noqa: PLC0415 - the API's lifespan, for this test

    month = add_months(month_of(datetime.now(UTC)), -5)
    with Store.open(pg_url) as store:
        _load(store, month)
        settings = Settings(database_url=pg_url)

        def moved() -> bool:
            with store.read() as unit:
                conn = unit.connection
                return all(
                    conn.scalar(sa.text(f"SELECT count(*) FROM {table}_default")) == 0
                    and _name(table, month) in _partitions(conn, table)
                    for table in ("quotas", "ledger_entries", "meter_days", "quota_events")
                )

        with serving(store, settings):
            eventually(moved, what="the month's partitions made, its rows moved in")
