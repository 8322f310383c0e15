"""The SQLite driver: the embedded default, one writer at a time.

WAL (readers never wait for the writer), a busy timeout, foreign keys on, and freehours issues
``BEGIN`` itself (pysqlite's own transaction handling is switched off) so that a writer takes the
write lock up front with ``BEGIN IMMEDIATE``: a transaction that reads, then writes, could
otherwise find another writer got there first and fail at once instead of waiting. The write
lock excludes every other writer, so named locks and row locks need nothing more; there is no
server to notify or to time out.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, ClassVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.dialects import sqlite

from freehours.store.driver import Driver, Notifications
from freehours.store.prepared import Prepared

if TYPE_CHECKING:
    from freehours.store.timeouts import Timeouts

#: How long a SQLite writer waits for another's write lock before giving up, in milliseconds.
#: Importing the reference NEM12 file (2,976,000 values) holds the lock for about 8 s on these
#: machines: room for a few such imports ahead in the queue. A writer that has waited longer is
#: better told the database is busy.
SQLITE_BUSY_TIMEOUT_MS = 30_000

#: Rows sent to a staging table per executemany: bounds memory, not the transaction.
_STAGING_BATCH = 5_000

#: The execution option that makes the next ``BEGIN`` on a connection ``BEGIN IMMEDIATE``
#: (or, ``_AUTOCOMMIT``, no ``BEGIN`` at all).
_BEGIN_OPTION = "freehours_sqlite_begin"
_AUTOCOMMIT = "AUTOCOMMIT"
_BEGIN = {mode: Prepared(sa.text(f"BEGIN {mode}")) for mode in ("DEFERRED", "IMMEDIATE")}

_WRITER_LOCKS: weakref.WeakKeyDictionary[sa.Engine, threading.Lock] = weakref.WeakKeyDictionary()
_WRITER_LOCKS_GUARD = threading.Lock()


class SQLite(Driver):
    name: ClassVar[str] = "sqlite"
    listens: ClassVar[bool] = False
    parallel_writers: ClassVar[bool] = False
    errors: ClassVar[tuple[type[Exception], ...]] = ()

    def create_engine(self, url: sa.URL, timeouts: Timeouts) -> sa.Engine:
        engine = sa.create_engine(url, pool_use_lifo=True)

        @event.listens_for(engine, "connect")
        def _configure(dbapi_connection: Any, _record: Any) -> None:
            # None = autocommit at the driver level: freehours' own BEGIN (below) starts
            # transactions.
            dbapi_connection.isolation_level = None
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode = WAL")
            # In WAL mode NORMAL syncs at checkpoints, not at every commit: a crashed process
            # loses nothing and the file cannot corrupt; only a power cut may roll back the last
            # commits. FULL would cost a disk flush per commit, which caps the embedded default
            # at about a hundred settlements a second on these machines. Deployments that need
            # every commit on disk at once run on PostgreSQL.
            cursor.execute("PRAGMA synchronous = NORMAL")
            cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
            cursor.execute("PRAGMA foreign_keys = ON")
            cursor.close()

        @event.listens_for(engine, "begin")
        def _begin(connection: sa.Connection) -> None:
            mode = connection.get_execution_options().get(_BEGIN_OPTION, "DEFERRED")
            if mode != _AUTOCOMMIT:
                _BEGIN[mode].rows(connection, {})

        return engine

    @contextmanager
    def write(self, engine: sa.Engine, lock: str | None = None) -> Iterator[sa.Connection]:
        # ``lock`` needs nothing: the write lock, held from BEGIN IMMEDIATE, excludes every
        # other writer.
        with _writer(engine, "IMMEDIATE") as connection, connection.begin():
            yield connection

    @contextmanager
    def autocommit(self, engine: sa.Engine) -> Iterator[sa.Connection]:
        # pysqlite runs with its own transaction handling off (``_configure``): with no BEGIN,
        # each statement is its own transaction.
        with _writer(engine, _AUTOCOMMIT) as connection:
            yield connection

    @contextmanager
    def without_statement_timeout(self, conn: sa.Connection) -> Iterator[None]:
        yield  # SQLite has no statement timeout

    def _insert(self, table: sa.Table) -> Any:
        return sqlite.insert(table)

    def epoch_seconds(self, column: sa.ColumnElement[Any]) -> sa.ColumnElement[float]:
        # Stored as UTC text (``UtcDateTime``), which strftime reads as UTC.
        return sa.cast(sa.func.strftime("%s", column), sa.Float)

    def where_pairs(
        self,
        statement: sa.Update,
        columns: tuple[sa.Column[int], sa.Column[int]],
        pairs: Collection[tuple[int, int]],
    ) -> sa.Update:
        return statement.where(sa.tuple_(*columns).in_(list(pairs)))

    def write_and_insert(
        self,
        conn: sa.Connection,
        params: dict[str, Any],
        *,
        together: Prepared,
        write: Prepared,
        inserts: Sequence[Prepared],
    ) -> bool:
        # SQLite's WITH takes no INSERT or UPDATE: a statement each, in the caller's transaction.
        if not write.rows(conn, params):
            return False
        for insert in inserts:
            insert.rows(conn, params)
        return True

    def write_and_insert_many(
        self,
        conn: sa.Connection,
        params: Sequence[dict[str, Any]],
        *,
        arrays: Prepared,
        separate: Sequence[Prepared],
    ) -> None:
        for statement in separate:
            statement.many(conn, params)

    def upsert_counting(
        self,
        conn: sa.Connection,
        upsert: sa.Insert,
        returning: Sequence[sa.ColumnElement[Any]],
        *,
        incoming: int,
        existing: sa.Select[Any],
    ) -> tuple[int, Sequence[sa.Row[Any]]]:
        # The write transaction holds the database, so what is stored now is what the upsert
        # meets.
        stored = int(conn.scalar(existing) or 0)
        written = conn.execute(upsert.returning(*returning)).all()
        return incoming - stored, written

    def stage(self, conn: sa.Connection, table: sa.Table, rows: Iterable[tuple[Any, ...]]) -> int:
        # SQLAlchemy's parameter handling per row cost more than SQLite's inserts (2 s of 8 for
        # the reference file): the statement is compiled once and each value converted by its
        # column's own bind processor, remembered per value, since a file's dates and stamps
        # repeat.
        insert = str(table.insert().compile(dialect=conn.dialect))
        converters = [
            _remembered(column.type.bind_processor(conn.dialect)) for column in table.columns
        ]
        staged = 0
        batch: list[tuple[Any, ...]] = []
        for row in rows:
            batch.append(
                tuple([convert(value) for convert, value in zip(converters, row, strict=True)])
            )
            if len(batch) == _STAGING_BATCH:
                conn.exec_driver_sql(insert, batch)
                staged += len(batch)
                batch = []
        if batch:
            conn.exec_driver_sql(insert, batch)
            staged += len(batch)
        return staged

    def hold_shared(self, conn: sa.Connection, keys: Sequence[int]) -> None:
        return None  # the write transaction holds the database's one write lock

    def hold_exclusive(self, conn: sa.Connection, key: int) -> None:
        return None  # the write transaction holds the database's one write lock

    def try_hold_exclusive(self, conn: sa.Connection, keys: Sequence[int]) -> set[int]:
        return set(keys)  # the write transaction holds the database's one write lock

    def notify(self, conn: sa.Connection, channel: str) -> None:
        return None  # no listeners: SQLite workers poll

    @contextmanager
    def listen(self, engine: sa.Engine, channel: str) -> Iterator[Notifications]:
        yield _Unnotified()  # nothing is ever notified (``listens`` is False): workers poll


class _Unnotified:
    """A listener on a database without notifications: waiting is sleeping, and no wait ends in
    a notification."""

    def __init__(self) -> None:
        self._never = threading.Event()

    def wait(self, timeout: float) -> bool:
        self._never.wait(timeout)
        return False


@contextmanager
def _writer(engine: sa.Engine, begin: str) -> Iterator[sa.Connection]:
    """A connection that will write, holding this process's writer lock, its next ``BEGIN``
    made ``BEGIN {begin}`` (or none, ``_AUTOCOMMIT``).

    SQLite has one writer at a time. Threads of this process queue for it on a lock, in order;
    left to SQLite's busy handler they would poll with sleeps of up to 100 ms each, which under
    load costs more than the writes. Other processes still wait in the busy handler, up to the
    busy timeout.
    """
    with _writer_lock(engine), engine.connect() as connection:
        connection.execution_options(**{_BEGIN_OPTION: begin})
        yield connection


def _writer_lock(engine: sa.Engine) -> threading.Lock:
    with _WRITER_LOCKS_GUARD:
        lock = _WRITER_LOCKS.get(engine)
        if lock is None:
            lock = _WRITER_LOCKS[engine] = threading.Lock()
        return lock


def _remembered(processor: Callable[[Any], Any] | None) -> Callable[[Any], Any]:
    if processor is None:
        return _same
    return functools.lru_cache(maxsize=4096)(processor)


def _same(value: Any) -> Any:
    return value


SQLITE = SQLite()
