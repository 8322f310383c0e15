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
  serialization error instead of finding it gone. Every statement of ``Jobs`` that locks live
  jobs others may finish meets it in a savepoint (``Jobs._past_moves``, which
  ``Driver.moved_concurrently`` tells): ``enqueue`` then inserts again, and the worker's
  heartbeat and rescuer run their statement again at once, without the jobs finished by then
  (``make bench``'s jobs section, thousands of short jobs a second, failed a heartbeat round
  every few seconds before).

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

A foreign key between two of them (``FOREIGN_KEYS``: ``ledger_entries`` refers to ``quotas``)
binds their moves. PostgreSQL makes a month's partition only once the default holds no row of
that month, and a referred row cannot leave the default (a delete, checked at the end of the
statement) while a row refers to it. So a month of ``quotas`` is made with the ``ledger_entries``
rows that refer to its rows moved out first, wherever they are, and back in last, after the
quotas, in one transaction; and ``ledger_entries``' month with them, if it is missing, so that
they move once. Months are made referred table first (``CREATION``) and detached referring
table first (``HISTORY``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
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


@dataclass(frozen=True, slots=True)
class ForeignKey:
    """``referring``'s foreign key on ``columns`` to the same-named columns of ``referred``,
    both partitioned by month of the same column (one of ``columns``)."""

    referring: Layout
    columns: tuple[str, ...]
    referred: str


#: Every foreign key between partitioned tables (migration 0006; tests/store/test_partitions.py
#: checks the database has no other). None refers to a table that itself refers to another.
FOREIGN_KEYS = (ForeignKey(HISTORY[0], ("nmi", "day", "version"), "quotas"),)
#: The order months are created in: a referred table before the tables referring to it.
CREATION = tuple(reversed(HISTORY))
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


def _in_month(layout: Layout, month: date, alias: str = "") -> str:
    low, high = _bound(layout, month), _bound(layout, add_months(month, 1))
    column = f'{alias}"{layout.column}"'
    return f"{column} >= {low} AND {column} < {high}"


def _set_aside(conn: sa.Connection, table: str, delete: str) -> None:
    """Move the rows ``delete`` (a ``DELETE FROM ... AS r``) takes out of ``table`` to a
    temporary table of the transaction, for ``_put_back``."""
    columns = _columns(conn, table)
    returning = ", ".join(f"r.{column}" for column in columns.split(", "))
    conn.exec_driver_sql(
        f"CREATE TEMPORARY TABLE freehours_moving_{table} ON COMMIT DROP AS "
        f"SELECT {columns} FROM {table} WITH NO DATA"
    )
    conn.exec_driver_sql(
        f"WITH moved AS ({delete} RETURNING {returning}) "
        f"INSERT INTO freehours_moving_{table} SELECT {columns} FROM moved"
    )


def _put_back(conn: sa.Connection, table: str) -> None:
    """Insert what ``_set_aside`` moved out of ``table`` into it again: each row to the
    partition of its month."""
    columns = _columns(conn, table)
    conn.exec_driver_sql(
        f"INSERT INTO {table} ({columns}) SELECT {columns} FROM freehours_moving_{table}"
    )
    conn.exec_driver_sql(f"DROP TABLE freehours_moving_{table}")


def create_month(conn: sa.Connection, layout: Layout, month: date) -> list[str]:
    """Create ``month``'s partition of ``layout`` unless it exists (attached or detached); the
    partitions created. Rows of that month in the default partition move into it, and with
    them the rows of the tables referring to them (``FOREIGN_KEYS``), whose month is made too."""
    name = partition_name(layout, month)
    if _exists(conn, name):
        return []
    default = default_name(layout)
    stray = conn.scalar(
        sa.text(f"SELECT EXISTS (SELECT FROM {default} WHERE {_in_month(layout, month)})")
    )
    referring = [key for key in FOREIGN_KEYS if stray and key.referred == layout.parent]
    # The referring rows go first: deleting a row they refer to fails at the end of its
    # statement. Every row of the month refers to a row in the default (the month has no
    # partition yet), so these are all of the month's, from its partition or the default.
    for key in referring:
        same = " AND ".join(f'r."{column}" = d."{column}"' for column in key.columns)
        _set_aside(
            conn,
            key.referring.parent,
            f"DELETE FROM {key.referring.parent} AS r USING {default} AS d WHERE {same} "
            f"AND {_in_month(key.referring, month, 'r.')} AND {_in_month(layout, month, 'd.')}",
        )
    if stray:
        _set_aside(
            conn, layout.parent, f"DELETE FROM {default} AS r WHERE {_in_month(layout, month)}"
        )
    low, high = _bound(layout, month), _bound(layout, add_months(month, 1))
    conn.exec_driver_sql(
        f"CREATE TABLE {name} PARTITION OF {layout.parent} FOR VALUES FROM ({low}) TO ({high})"
    )
    created = [name]
    if stray:
        _put_back(conn, layout.parent)
    for key in referring:
        # Their month too, if missing (none of its rows is left in the default): they move once.
        created += create_month(conn, key.referring, month)
        _put_back(conn, key.referring.parent)
    return created


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


class Partitions(Repository):
    """The months of the partitioned tables: created ahead, detached when they age out. Each
    method is one step of the upkeep for one table, in the caller's transaction
    (``freehours.store.maintenance`` gives each its own); none does anything on a database that does
    not partition (SQLite)."""

    __slots__ = ()

    def create(self, layout: Layout, months: Iterable[date]) -> list[str]:
        """Create those of ``months`` that ``layout`` lacks, moving in rows of theirs that are
        in its default partition (and what refers to them: ``create_month``); the partitions
        created."""
        if not self._driver.partitions:
            return []
        self._give_up_waiting()
        created: list[str] = []
        # A move takes as long as the rows in the default, once (a month loaded before going
        # live): cut off by the statement timeout, it would start over, and fail, every hour.
        with self._driver.without_statement_timeout(self._conn):
            for month in months:
                created += create_month(self._conn, layout, month)
        return created

    def strays(self, layout: Layout, *, since: date) -> list[date]:
        """The months from ``since`` on of rows in ``layout``'s default partition: they came
        before their partition was made. Older ones are past keeping, and stay there."""
        if not self._driver.partitions:
            return []
        self._give_up_waiting()
        return [month for month in stray_months(self._conn, layout) if month >= since]

    def detach(self, layout: Layout, *, before: date) -> list[str]:
        """Detach (``detach_month``) every month of ``layout`` before ``before``; their names."""
        if not self._driver.partitions:
            return []
        self._give_up_waiting()
        detached = []
        for month in attached_months(self._conn, layout):
            if month < before:
                detach_month(self._conn, layout, month)
                detached.append(partition_name(layout, month))
        return detached

    def in_default(self, layout: Layout) -> int:
        """How many rows ``layout``'s default partition holds (``default_rows``)."""
        if not self._driver.partitions:
            return 0
        self._give_up_waiting()
        return default_rows(self._conn, layout)

    def _give_up_waiting(self) -> None:
        # Creating and detaching lock the parent table (and a foreign key's referenced one):
        # rather fail, and try again next time, than queue every query behind a long one, or
        # wait long enough (PostgreSQL's deadlock_timeout is 1 s) to be part of a deadlock in
        # which a request could be the one cancelled. Reading a default waits for those of
        # another process's upkeep, or an operator's: as short a wait, the same next time.
        self._conn.exec_driver_sql(f"SET LOCAL lock_timeout = '{UPKEEP_LOCK_TIMEOUT_MS}ms'")
