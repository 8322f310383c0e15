"""History partitioned on PostgreSQL: meter data, quotas, ledger, quota events by month of their
day, jobs by state (the finished by month); nothing changes on SQLite.

Each table is renamed aside, recreated partitioned with the same columns, defaults and checks,
given a default partition and a partition for every month from its oldest row (at most ten
years back: older rows go to the default) to ``PARTITIONS_AHEAD_MONTHS`` ahead, filled from the
old one, which is then dropped; keys, indexes and the foreign key are built on the filled tables,
under the names ``tables.py`` gives them. One transaction: a failure leaves the database at 0005.
The layout and why: ``freehours.store.partitions``.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

from datetime import UTC, date, datetime

import sqlalchemy as sa
from alembic import op

from freehours.defaults import PARTITIONS_AHEAD_MONTHS
from freehours.store import partitions as p

revision = "0006"
down_revision: str | None = "0005"
branch_labels: tuple[str, ...] | None = None
depends_on: tuple[str, ...] | None = None

_ASIDE = "_unpartitioned"
#: The tables partitioned by ``day``, their keys, and their sequence (if any).
_BY_DAY = {
    "quotas": ("nmi, day, version", None),
    "ledger_entries": ("nmi, day, version", None),
    "meter_days": ("nmi, suffix, day", None),
    "quota_events": ("id, day", "id"),
}
_UNFINISHED = "state IN ('AVAILABLE', 'RUNNING', 'RETRYABLE')"
_WAITING = "state IN ('AVAILABLE', 'RETRYABLE')"
_FINISHED = "('COMPLETED', 'DISCARDED', 'CANCELLED')"
#: Indexes of the partitioned tables, as tables.py names them (on ``jobs`` every partition has
#: them; the unique one is ``jobs_live``'s alone).
_INDEXES = (
    "CREATE INDEX ix_meter_days_day ON meter_days (day)",
    "CREATE INDEX ix_quotas_day_nmi ON quotas (day, nmi)",
    "CREATE INDEX ix_quotas_status_day_nmi ON quotas (status, day, nmi)",
    "CREATE INDEX ix_quota_events_nmi_day_id ON quota_events (nmi, day, id)",
    "CREATE INDEX ix_quota_events_at ON quota_events (at)",
    "CREATE INDEX ix_jobs_id ON jobs (id)",
    f"CREATE INDEX ix_jobs_due ON jobs (kind, run_at, id) WHERE {_WAITING}",
    "CREATE INDEX ix_jobs_leased ON jobs (lease_until) WHERE state = 'RUNNING'",
    "CREATE INDEX ix_jobs_state_id ON jobs (state, id)",
    "CREATE INDEX ix_jobs_kind_id ON jobs (kind, id)",
    "CREATE INDEX ix_jobs_key_id ON jobs (key, id)",
    f"CREATE UNIQUE INDEX uq_jobs_kind_key_unfinished ON jobs_live (kind, key) WHERE {_UNFINISHED}",
)
_LEDGER_FK = (
    "ALTER TABLE ledger_entries ADD CONSTRAINT fk_ledger_entries_nmi_day_version_quotas "
    "FOREIGN KEY (nmi, day, version) REFERENCES quotas (nmi, day, version)"
)
#: Months before this many are not given partitions of their own.
_MONTHS_BACK = 120


def _months(oldest: date | datetime | None, now: datetime) -> list[date]:
    this_month = p.month_of(now)
    first = p.add_months(this_month, -_MONTHS_BACK)
    start = this_month if oldest is None else max(first, min(p.month_of(oldest), this_month))
    last = p.add_months(this_month, PARTITIONS_AHEAD_MONTHS)
    months = [start]
    while months[-1] < last:
        months.append(p.add_months(months[-1], 1))
    return months


def _copy(conn: sa.Connection, table: str) -> None:
    conn.exec_driver_sql(f"INSERT INTO {table} SELECT * FROM {table}{_ASIDE}")


def _keep_sequence(conn: sa.Connection, table: str, column: str) -> None:
    # The BIGSERIAL's sequence (named as PostgreSQL names it) moves to the new table.
    conn.exec_driver_sql(f"ALTER SEQUENCE {table}_{column}_seq OWNED BY {table}.{column}")


def upgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name != "postgresql":
        return
    now = datetime.now(UTC)
    for table in (*_BY_DAY, "jobs"):
        conn.exec_driver_sql(f"ALTER TABLE {table} RENAME TO {table}{_ASIDE}")
    layouts = {layout.parent: layout for layout in p.LAYOUTS}
    for table in _BY_DAY:
        conn.exec_driver_sql(
            f"CREATE TABLE {table} (LIKE {table}{_ASIDE} INCLUDING DEFAULTS INCLUDING "
            "CONSTRAINTS) PARTITION BY RANGE (day)"
        )
        oldest = conn.scalar(sa.text(f"SELECT min(day) FROM {table}{_ASIDE}"))
        p.create_layout(conn, [layouts[table]], _months(oldest, now))
    conn.exec_driver_sql(
        f"CREATE TABLE jobs (LIKE jobs{_ASIDE} INCLUDING DEFAULTS INCLUDING CONSTRAINTS) "
        "PARTITION BY LIST (state)"
    )
    conn.exec_driver_sql(
        f"CREATE TABLE {p.LIVE_JOBS} PARTITION OF jobs FOR VALUES IN {tuple(p.UNFINISHED)}"
    )
    conn.exec_driver_sql(
        f"CREATE TABLE jobs_done PARTITION OF jobs FOR VALUES IN {tuple(p.FINISHED)} "
        "PARTITION BY RANGE (finalized_at)"
    )
    oldest_job = conn.scalar(
        sa.text(f"SELECT min(finalized_at) FROM jobs{_ASIDE} WHERE state IN {_FINISHED}")
    )
    p.create_layout(conn, p.JOBS, _months(oldest_job, now))
    for table in (*_BY_DAY, "jobs"):
        _copy(conn, table)
    _keep_sequence(conn, "quota_events", "id")
    _keep_sequence(conn, "jobs", "id")
    for table in ("ledger_entries", "quotas", "meter_days", "quota_events", "jobs"):
        conn.exec_driver_sql(f"DROP TABLE {table}{_ASIDE}")
    for table, (key, _) in _BY_DAY.items():
        conn.exec_driver_sql(f"ALTER TABLE {table} ADD CONSTRAINT pk_{table} PRIMARY KEY ({key})")
    for statement in _INDEXES:
        conn.exec_driver_sql(statement)
    conn.exec_driver_sql(_LEDGER_FK)


def downgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name != "postgresql":
        return
    for table in (*_BY_DAY, "jobs"):
        conn.exec_driver_sql(f"ALTER TABLE {table} RENAME TO {table}{_ASIDE}")
        conn.exec_driver_sql(
            f"CREATE TABLE {table} (LIKE {table}{_ASIDE} INCLUDING DEFAULTS INCLUDING CONSTRAINTS)"
        )
        _copy(conn, table)
    _keep_sequence(conn, "quota_events", "id")
    _keep_sequence(conn, "jobs", "id")
    for table in ("ledger_entries", "quotas", "meter_days", "quota_events", "jobs"):
        conn.exec_driver_sql(f"DROP TABLE {table}{_ASIDE} CASCADE")
    keys = {**{table: key for table, (key, _) in _BY_DAY.items()}, "quota_events": "id"}
    for table, key in {**keys, "jobs": "id"}.items():
        conn.exec_driver_sql(f"ALTER TABLE {table} ADD CONSTRAINT pk_{table} PRIMARY KEY ({key})")
    for statement in _INDEXES:
        if "ix_jobs_id" in statement:
            continue
        conn.exec_driver_sql(statement.replace(f"ON {p.LIVE_JOBS} ", "ON jobs "))
    conn.exec_driver_sql(_LEDGER_FK)
