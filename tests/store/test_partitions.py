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

from freehours import maintenance
from freehours.clock import ManualClock
from freehours.store import schema
from freehours.store.database import Store
from freehours.store.engine import create_engine
from freehours.store.partitions import HISTORY, JOBS, add_months, attached_months, month_of

NOW = datetime(2026, 6, 15, 3, 0, tzinfo=UTC)


@pytest.fixture
def pg_url(postgres_url: str) -> Iterator[str]:
    from tests.store.fixtures import _postgres_schema  # noqa: PLC0415

    with _postgres_schema(postgres_url) as url:
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
            unit.partitions.upkeep(HISTORY, now=NOW, ahead=3, before=NOW - timedelta(days=9999))
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
