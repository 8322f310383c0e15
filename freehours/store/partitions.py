"""PostgreSQL's partitioned history: the layout (migration 0006) and its upkeep (``Partitions``).

On PostgreSQL the tables that grow with time are partitioned by range of a date, one partition a
month; SQLite keeps them as plain tables (``tables.py`` is one ``metadata`` for both, and
nothing here runs there: ``Partitions`` answers that nothing was done).

- ``meter_days``, ``quotas``, ``ledger_entries`` and ``quota_events`` by ``day`` (the NEM date
  or the quota's local date): a day's settlement, a NMI's day and the console's day overview
  name the day, so each reads one partition. ``quota_events``' key becomes (id, day): a
  partitioned table's unique keys include its partition key.
- ``jobs`` by LIST of ``state``: ``jobs_live`` holds the unfinished (AVAILABLE, RUNNING,
  RETRYABLE), ``jobs_done`` the finished, itself by range of ``finalized_at`` (UTC months).
  Why: the one rule jobs keep, at most one unfinished job per (kind, key), is a partial unique
  index, and PostgreSQL allows a unique index on a partitioned table only if it includes the
  partition key. On ``jobs_live`` alone it needs none: every unfinished job is there, so the
  index there is the whole rule, and ``enqueue`` inserts into ``jobs_live`` (its ``ON
  CONFLICT`` names that index; ``Driver.live_jobs``). A claim, the heartbeat and the rescuer
  read only ``jobs_live`` (their ``state`` conditions prune the rest), and finished jobs age out
  by dropping whole months of ``jobs_done``. The alternative, a side table of unfinished keys
  kept by every statement that finishes or revives a job, was more code on every path for the
  same rule. The cost: a job that finishes moves between partitions (PostgreSQL deletes and
  inserts it), and a transaction that was waiting to update that row then fails with a
  serialization error instead of finding it gone. ``Jobs.enqueue`` is the one caller that
  could meet it in a user's transaction, and retries it (``Driver.moved_concurrently``); the
  worker's heartbeat and rescuer already try again on their next round.

Why a month: a day's settlement touches one month, so a month of ``meter_days`` (about 3 million
rows for 100,000 customers) is what one query reads at most, small enough to index and vacuum
quickly; twelve partitions a year per table keep planning cheap (planning time grows with the
partitions a query cannot prune at plan time), where daily ones would be 1,800 a year over
five tables; and retention counts in months anyway (billing history in years).

Each partitioned table also has a DEFAULT partition: an insert never fails for want of a
partition (a clock far off, a meter read years old). It should stay empty: partitions are created
``ahead`` months in advance (by migration 0006 and then by the scheduled upkeep). Rows that land
there anyway are moved out by the next upkeep, which makes their months (moving the rows in, in
its transaction) unless they are past keeping; what stays is counted (logged, and in
``freehours_partition_default_rows``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime

import sqlalchemy as sa

from freehours.store.repository import Repository


@dataclass(frozen=True, slots=True)
class Layout:
    """A table partitioned by month of ``column``: new months are created under ``parent``.

    ``timestamp``: the column is a timestamptz (months in UTC), else a date. ``archive``: a
    detached month is kept as a table of its own (billing history: an operator archives it, then
    drops it), else it is dropped (finished jobs)."""

    parent: str
    column: str
    timestamp: bool = False
    archive: bool = True


#: The billing history, in the order months are detached: ``ledger_entries`` before the
#: ``quotas`` its foreign key refers to.
HISTORY = (
    Layout("ledger_entries", "day"),
    Layout("quota_events", "day"),
    Layout("meter_days", "day"),
    Layout("quotas", "day"),
)
#: Finished jobs, by the month they finished in.
JOBS = (Layout("jobs_done", "finalized_at", timestamp=True, archive=False),)
LAYOUTS = HISTORY + JOBS

#: The partitions of ``jobs`` by state.
LIVE_JOBS = "jobs_live"
#: How long the upkeep waits for a table's lock before it gives up until its next round.
UPKEEP_LOCK_TIMEOUT_MS = 500
UNFINISHED = ("AVAILABLE", "RUNNING", "RETRYABLE")
FINISHED = ("COMPLETED", "DISCARDED", "CANCELLED")

#: Indexes that differ from ``tables.py`` on PostgreSQL: the unique one is ``jobs_live``'s (not
#: the whole table's), and ``ix_jobs_id`` stands in for the primary key ``jobs`` cannot have
#: (a key of a partitioned table includes its partition keys, and ``finalized_at`` is NULL
#: while a job is unfinished; ids come from the sequence, so they stay unique).
PG_INDEXES = frozenset({"uq_jobs_kind_key_unfinished", "ix_jobs_id"})

_MONTH = re.compile(r"_(\d{4})_(\d{2})$")


def month_of(moment: date | datetime) -> date:
    """The first day of ``moment``'s month (a datetime's in UTC)."""
    if isinstance(moment, datetime):
        moment = moment.astimezone(UTC).date()
    return moment.replace(day=1)


def add_months(month: date, months: int) -> date:
    index = month.year * 12 + month.month - 1 + months
    return date(index // 12, index % 12 + 1, 1)


def partition_name(layout: Layout, month: date) -> str:
    return f"{layout.parent}_{month.year:04d}_{month.month:02d}"


def default_name(layout: Layout) -> str:
    return f"{layout.parent}_default"


def _bound(layout: Layout, month: date) -> str:
    return f"'{month.isoformat()} 00:00:00+00'" if layout.timestamp else f"'{month.isoformat()}'"


def _exists(conn: sa.Connection, name: str) -> bool:
    return conn.scalar(sa.text("SELECT to_regclass(:name) IS NOT NULL"), {"name": name}) is True


def _columns(conn: sa.Connection, table: str) -> str:
    names = conn.scalars(
        sa.text(
            "SELECT attname FROM pg_attribute WHERE attrelid = CAST(:table AS regclass) "
            "AND attnum > 0 AND NOT attisdropped ORDER BY attnum"
        ),
        {"table": table},
    ).all()
    return ", ".join(f'"{name}"' for name in names)


def create_month(conn: sa.Connection, layout: Layout, month: date) -> bool:
    """Create ``month``'s partition of ``layout`` unless it exists (attached or detached);
    whether it was created. Rows of that month already in the default partition move into it."""
    name = partition_name(layout, month)
    if _exists(conn, name):
        return False
    low, high = _bound(layout, month), _bound(layout, add_months(month, 1))
    default = default_name(layout)
    in_month = f'"{layout.column}" >= {low} AND "{layout.column}" < {high}'
    stray = conn.scalar(sa.text(f"SELECT EXISTS (SELECT FROM {default} WHERE {in_month})"))
    columns = _columns(conn, layout.parent)
    if stray:
        conn.exec_driver_sql(
            f"CREATE TEMPORARY TABLE freehours_moving ON COMMIT DROP AS "
            f"SELECT {columns} FROM {default} WITH NO DATA"
        )
        conn.exec_driver_sql(
            f"WITH moved AS (DELETE FROM {default} WHERE {in_month} RETURNING {columns}) "
            f"INSERT INTO freehours_moving SELECT {columns} FROM moved"
        )
    conn.exec_driver_sql(
        f"CREATE TABLE {name} PARTITION OF {layout.parent} FOR VALUES FROM ({low}) TO ({high})"
    )
    if stray:
        conn.exec_driver_sql(
            f"INSERT INTO {layout.parent} ({columns}) SELECT {columns} FROM freehours_moving"
        )
        conn.exec_driver_sql("DROP TABLE freehours_moving")
    return True


def attached_months(conn: sa.Connection, layout: Layout) -> list[date]:
    """The months ``layout`` has a partition for, oldest first."""
    names = conn.scalars(
        sa.text(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = CAST(:parent AS regclass)"
        ),
        {"parent": layout.parent},
    ).all()
    months = []
    for name in names:
        found = _MONTH.search(name)
        if found and name == f"{layout.parent}{found.group(0)}":
            months.append(date(int(found.group(1)), int(found.group(2)), 1))
    return sorted(months)


def detach_month(conn: sa.Connection, layout: Layout, month: date) -> None:
    """Detach ``month`` from ``layout``: kept as a table of its own (its foreign keys dropped,
    so that the months it referred to can go too) or dropped."""
    name = partition_name(layout, month)
    conn.exec_driver_sql(f"ALTER TABLE {layout.parent} DETACH PARTITION {name}")
    if not layout.archive:
        conn.exec_driver_sql(f"DROP TABLE {name}")
        return
    foreign = conn.scalars(
        sa.text(
            "SELECT conname FROM pg_constraint "
            "WHERE conrelid = CAST(:name AS regclass) AND contype = 'f' AND conparentid = 0"
        ),
        {"name": name},
    ).all()
    for constraint in foreign:
        conn.exec_driver_sql(f'ALTER TABLE {name} DROP CONSTRAINT "{constraint}"')


def default_rows(conn: sa.Connection, layout: Layout, *, at_most: int = 1_000_000) -> int:
    """How many rows ``layout``'s default partition holds (counted up to ``at_most``)."""
    count = conn.scalar(
        sa.text(f"SELECT count(*) FROM (SELECT FROM {default_name(layout)} LIMIT {at_most}) AS d")
    )
    return int(count or 0)


def stray_months(conn: sa.Connection, layout: Layout, *, at_most: int = 24) -> list[date]:
    """The months (up to ``at_most``) of the rows in ``layout``'s default partition."""
    utc = " AT TIME ZONE 'UTC'" if layout.timestamp else ""
    months = conn.scalars(
        sa.text(
            f"SELECT DISTINCT CAST(date_trunc('month', {layout.column}{utc}) AS date) "
            f"FROM {default_name(layout)} WHERE {layout.column} IS NOT NULL LIMIT {at_most}"
        )
    ).all()
    return sorted(months)


def create_layout(conn: sa.Connection, layouts: Iterable[Layout], months: Sequence[date]) -> None:
    """The default partition and the ``months`` of each of ``layouts`` (migration 0006)."""
    for layout in layouts:
        conn.exec_driver_sql(
            f"CREATE TABLE {default_name(layout)} PARTITION OF {layout.parent} DEFAULT"
        )
        for month in months:
            create_month(conn, layout, month)


@dataclass(slots=True)
class Upkept:
    """What one upkeep did: partitions created and detached, and rows found in defaults."""

    created: list[str] = field(default_factory=list)
    detached: list[str] = field(default_factory=list)
    in_default: dict[str, int] = field(default_factory=dict)


class Partitions(Repository):
    """The months of the partitioned tables: created ahead, detached when they age out."""

    __slots__ = ()

    def upkeep(
        self, layouts: Sequence[Layout], *, now: datetime, ahead: int, before: datetime
    ) -> Upkept:
        """Create this month and the ``ahead`` after it, detach every month wholly before
        ``before`` (its day, for a date column), for each of ``layouts``. Nothing on a database
        that does not partition (SQLite)."""
        upkept = Upkept()
        if not self._driver.partitions:
            return upkept
        # Creating and detaching lock the parent table (and a foreign key's referenced one):
        # rather fail, and try again next time, than queue every query behind a long one, or
        # wait long enough (PostgreSQL's deadlock_timeout is 1 s) to be part of a deadlock in
        # which a request could be the one cancelled.
        self._conn.exec_driver_sql(f"SET LOCAL lock_timeout = '{UPKEEP_LOCK_TIMEOUT_MS}ms'")
        this_month = month_of(now)
        for layout in layouts:
            for month in (add_months(this_month, n) for n in range(ahead + 1)):
                if create_month(self._conn, layout, month):
                    upkept.created.append(partition_name(layout, month))
        cutoff = month_of(before)  # months before this one ended before ``before``
        for layout in layouts:
            # Rows that found no partition (they came before theirs was made): their months are
            # made now, and the rows moved in, unless the months are past keeping.
            for month in stray_months(self._conn, layout):
                if month >= cutoff and create_month(self._conn, layout, month):
                    upkept.created.append(partition_name(layout, month))
        for layout in layouts:
            for month in attached_months(self._conn, layout):
                if month < cutoff:
                    detach_month(self._conn, layout, month)
                    upkept.detached.append(partition_name(layout, month))
            upkept.in_default[layout.parent] = default_rows(self._conn, layout)
        return upkept
