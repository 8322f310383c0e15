"""The dialect driver: everything freehours does differently on PostgreSQL and on SQLite.

The repositories (``quotas``, ``meter``, ``catalog``, ``jobs``, ``keys``, ``idempotency``) write
SQL once, in SQLAlchemy Core, and ask their ``Driver`` for the few things the two databases do
differently: how a write transaction begins and what it locks, the conflict-handling insert,
the bulk load of a staging table, advisory locks, notifications, and the statements PostgreSQL
runs in one where SQLite needs two. ``freehours.store.postgresql`` and ``freehours.store.sqlite``
implement it; they are the only modules that name a dialect, and the conformance suite
(``tests/store/test_conformance.py``) runs every repository on both.

A driver is stateless apart from the statements it prepares (``prepared``), so each dialect has
one, shared by every engine of that dialect.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import sqlalchemy as sa
from sqlalchemy.sql.expression import ClauseElement

from freehours.store.prepared import Prepared

if TYPE_CHECKING:
    from freehours.store.timeouts import Timeouts


class Notifications(Protocol):
    """A connection listening on a channel (``Driver.listen``)."""

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a notification; whether one came."""


class Driver(ABC):
    """What one database dialect does its own way. See the module docstring."""

    #: ``"postgresql"`` or ``"sqlite"``: for messages and metrics labels, never for branching.
    name: ClassVar[str]
    #: Whether ``listen`` can wake a worker (else workers poll).
    listens: ClassVar[bool]
    #: Whether writers run side by side (else they take turns, and more threads only queue).
    parallel_writers: ClassVar[bool]
    #: The driver-level exceptions a connection used outside SQLAlchemy (``listen``) raises.
    errors: ClassVar[tuple[type[Exception], ...]]
    #: Whether the history and the jobs are partitioned (``freehours.store.partitions``).
    partitions: ClassVar[bool] = False
    #: Whether a statement may take a batch's rows as one array per column (``unnest``).
    takes_arrays: ClassVar[bool] = False

    def __init__(self) -> None:
        self._prepared: dict[Callable[[Driver], ClauseElement], Prepared] = {}
        self._prepared_lock = threading.Lock()
        self._staging_ddl: dict[str, tuple[str, str]] = {}

    # --- engines and transactions --------------------------------------------------------------

    @abstractmethod
    def create_engine(self, url: sa.URL, timeouts: Timeouts) -> sa.Engine:
        """An engine for ``url``, configured for freehours."""

    @abstractmethod
    def write(
        self, engine: sa.Engine, lock: str | None = None
    ) -> AbstractContextManager[sa.Connection]:
        """A transaction that will write, holding the named ``lock`` (``freehours.store.locks``)
        exclusively from its ``BEGIN``; committed on exit, rolled back on an exception."""

    @abstractmethod
    def autocommit(self, engine: sa.Engine) -> AbstractContextManager[sa.Connection]:
        """A connection whose statements each commit on their own."""

    @contextmanager
    def read(self, engine: sa.Engine) -> Iterator[sa.Connection]:
        """A transaction that only reads; committed on exit."""
        with engine.begin() as connection:
            yield connection

    @abstractmethod
    def without_statement_timeout(self, conn: sa.Connection) -> AbstractContextManager[None]:
        """Lift the statement timeout, and the client's wait for an answer, for the rest of the
        transaction on ``conn``: for bulk statements whose time grows with their input."""

    # --- statements ----------------------------------------------------------------------------

    @abstractmethod
    def _insert(self, table: sa.Table) -> Any:
        """The dialect's ``INSERT`` construct, which has ``ON CONFLICT``."""

    def insert_or_ignore(
        self,
        table: sa.Table,
        *,
        index_elements: Sequence[str] | None = None,
        index_where: sa.ColumnElement[bool] | sa.TextClause | None = None,
    ) -> sa.Insert:
        """``INSERT ... ON CONFLICT DO NOTHING`` into ``table`` (give it ``values``)."""
        insert: sa.Insert = self._insert(table).on_conflict_do_nothing(
            index_elements=index_elements, index_where=index_where
        )
        return insert

    def live_jobs(self, jobs: sa.Table) -> sa.Table:
        """The table a new (unfinished) job is inserted into, the one whose partial unique index
        keeps a (kind, key) to one unfinished job: ``jobs`` itself, or its partition of the
        unfinished jobs where it is partitioned."""
        return jobs

    def moved_concurrently(self, error: sa.exc.DBAPIError) -> bool:
        """Whether ``error`` is a row the statement waited for having moved to another
        partition meanwhile (it finished): never, where nothing is partitioned."""
        return False

    def upsert(
        self,
        table: sa.Table,
        *,
        key: Sequence[str],
        update: Iterable[str],
        where: Callable[[sa.ColumnCollection[str, Any]], sa.ColumnElement[bool]] | None = None,
    ) -> sa.Insert:
        """``INSERT ... ON CONFLICT (key) DO UPDATE`` setting the ``update`` columns to the
        incoming row's, where ``where(excluded)`` holds (give it ``values`` or ``from_select``)."""
        insert = self._insert(table)
        excluded = insert.excluded
        upsert: sa.Insert = insert.on_conflict_do_update(
            index_elements=list(key),
            set_={name: excluded[name] for name in update},
            where=None if where is None else where(excluded),
        )
        return upsert

    def prepared(self, build: Callable[[Driver], ClauseElement]) -> Prepared:
        """The ``Prepared`` statement ``build`` makes for this driver: built once, then kept
        (``build`` is a module-level function, so it is its own key)."""
        prepared = self._prepared.get(build)
        if prepared is None:
            with self._prepared_lock:
                prepared = self._prepared.setdefault(build, Prepared(build(self)))
        return prepared

    @abstractmethod
    def where_pairs(
        self,
        statement: sa.Update,
        columns: tuple[sa.Column[int], sa.Column[int]],
        pairs: Collection[tuple[int, int]],
    ) -> sa.Update:
        """``statement`` restricted to rows whose two integer ``columns`` are one of ``pairs``."""

    @abstractmethod
    def write_and_insert(
        self,
        conn: sa.Connection,
        params: dict[str, Any],
        *,
        together: Prepared,
        write: Prepared,
        inserts: Sequence[Prepared],
    ) -> bool:
        """A write (an insert or update returning the row it wrote) and the inserts keyed by
        that row: ``together`` (one statement whose write, and all but the last insert, are
        ``WITH``s, returning a row when it inserted) where the database allows it, else
        ``write``, then each of ``inserts`` if it returned a row. Whether the write wrote its
        row."""

    @abstractmethod
    def write_and_insert_many(
        self,
        conn: sa.Connection,
        params: Sequence[dict[str, Any]],
        *,
        arrays: Prepared,
        separate: Sequence[Prepared],
    ) -> None:
        """``write_and_insert`` for many rows the caller holds locked (so every write writes):
        where the database takes arrays, ``arrays`` once for all of them (each parameter the
        array of that parameter's values, row by row: ``columns``); else each of ``separate``
        (the write, then the inserts keyed by its row, none returning rows) once per row, each
        statement's rows in one ``executemany``."""

    @abstractmethod
    def upsert_counting(
        self,
        conn: sa.Connection,
        upsert: sa.Insert,
        returning: Sequence[sa.ColumnElement[Any]],
        *,
        incoming: int,
        existing: sa.Select[Any],
    ) -> tuple[int, Sequence[sa.Row[Any]]]:
        """Run ``upsert`` of ``incoming`` rows: how many it inserted (not updated), and the
        ``returning`` columns of every row it wrote. ``existing`` counts the incoming rows
        already stored, for a database that cannot tell an insert from an update afterwards."""

    @abstractmethod
    def epoch_seconds(self, column: sa.ColumnElement[Any]) -> sa.ColumnElement[float]:
        """Seconds since 1970 of a ``UtcDateTime`` column: for grouping times into buckets."""

    #: Whether SQL sums ``DecimalText`` exactly (PostgreSQL's numeric); where not (SQLite's
    #: numbers are floats), the rows are summed in Python instead.
    sums_decimals: bool = False

    # --- bulk load -----------------------------------------------------------------------------

    @abstractmethod
    def stage(self, conn: sa.Connection, table: sa.Table, rows: Iterable[tuple[Any, ...]]) -> int:
        """Load ``rows`` (in ``table``'s column order) into the empty table ``table`` as fast as
        the database can take them; how many. ``rows`` is consumed once, streaming."""

    @contextmanager
    def staging(self, conn: sa.Connection, table: sa.Table) -> Iterator[sa.Table]:
        """The TEMPORARY ``table``, made empty for the block and dropped after it, in the
        caller's transaction: if the block raises, the caller's rollback takes it away. Its
        ``CREATE`` and ``DROP`` are compiled once (``Table.create`` compiles them anew each
        time: 3% of an import's CPU at one file a transaction)."""
        ddl = self._staging_ddl.get(table.name)
        if ddl is None:
            ddl = self._staging_ddl[table.name] = (
                str(sa.schema.CreateTable(table).compile(dialect=conn.dialect)),
                str(sa.schema.DropTable(table).compile(dialect=conn.dialect)),
            )
        conn.exec_driver_sql(ddl[0])
        yield table
        conn.exec_driver_sql(ddl[1])

    # --- locks and notifications ---------------------------------------------------------------

    @abstractmethod
    def hold_shared(self, conn: sa.Connection, keys: Sequence[int]) -> None:
        """Hold the advisory locks ``keys`` (sorted) shared until the transaction ends."""

    @abstractmethod
    def hold_exclusive(self, conn: sa.Connection, key: int) -> None:
        """Hold the advisory lock ``key`` exclusively until the transaction ends."""

    @abstractmethod
    def try_hold_exclusive(self, conn: sa.Connection, keys: Sequence[int]) -> set[int]:
        """Take those of the advisory locks ``keys`` that are free, exclusively until the
        transaction ends, without waiting for any: the keys taken. Taking none while another
        transaction holds it, a caller that holds several never waits in a cycle."""

    @abstractmethod
    def notify(self, conn: sa.Connection, channel: str) -> None:
        """Wake the listeners of ``channel`` when the transaction commits."""

    @abstractmethod
    def listen(self, engine: sa.Engine, channel: str) -> AbstractContextManager[Notifications]:
        """A connection of its own listening on ``channel``; where the database has no
        notifications (``listens`` is False), a listener that is never notified."""


def columns(params: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """Rows of parameters (each by name, all with the same names) as one array per name."""
    return {name: [row[name] for row in params] for name in params[0]} if params else {}


def each_key(
    query: sa.Select[Any],
    key_columns: Sequence[sa.ColumnElement[Any]],
    names: Sequence[str],
    order_by: Sequence[str],
    *,
    for_update: bool = False,
) -> sa.Select[Any]:
    """For a database that takes arrays (``Driver.takes_arrays``): ``query``'s rows for each of
    a batch's keys (values of ``key_columns``), given as one array per column, bound as
    ``names`` (``columns`` turns rows of keys into them); ordered by ``order_by`` (names of
    ``query``'s columns), and locked for the transaction, in that order, when ``for_update``.

    One statement text whatever the number of keys, so it is compiled and parsed once, where an
    ``IN`` list of N keys is a new statement at every N. Each key's rows are looked up on their
    own (a ``LATERAL`` join, pruned to the key's partition as it runs): whatever the planner
    guesses of a table it has no statistics of yet (a day's partition filling up, with
    autovacuum behind or off), it cannot turn a batch's look-up into a scan of the partition,
    which would read every customer's rows of the day for each batch."""
    from sqlalchemy.dialects import postgresql  # noqa: PLC0415 - the databases that take arrays

    keys = (
        sa.func.unnest(
            *(
                sa.bindparam(name, type_=postgresql.ARRAY(column.type))
                for name, column in zip(names, key_columns, strict=True)
            )
        )
        .table_valued(*names)
        .render_derived(name="batch_key")
    )
    found = (
        query.where(
            *(column == keys.c[name] for name, column in zip(names, key_columns, strict=True))
        )
        # OFFSET 0: a subquery PostgreSQL may not pull up into the join, where a hash join over
        # a scan of the table is one of its choices again; run once per key, the cheapest plan
        # of 64 runs is 64 index look-ups.
        .offset(sa.literal_column("0"))
        .lateral("found")
    )
    statement = (
        sa.select(*found.c)
        .select_from(keys.join(found, sa.true()))
        .order_by(*(found.c[name] for name in order_by))
    )
    return statement.with_for_update(of=sa.table(found.name)) if for_update else statement
