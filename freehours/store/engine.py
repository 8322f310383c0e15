"""The database seam: an engine per URL, and transactions that read or write.

Two backends. SQLite is the embedded default: WAL (readers never wait for the writer), a busy
timeout, foreign keys on, and freehours issues ``BEGIN`` itself (pysqlite's own transaction
handling is switched off) so that a writer can take the write lock up front with
``BEGIN IMMEDIATE``: a transaction that reads, then writes, could otherwise find another writer
got there first and fail at once instead of waiting. PostgreSQL goes through psycopg 3; plain
``postgresql://`` URLs are taken to mean it.

Write transactions (``write_transaction``, ``Store.write``) are where anything that reads in
order to write belongs: the settlement's ``claim`` (which also selects ``FOR UPDATE``, a no-op
on SQLite, where the whole database is locked already), ingestion, migrations.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy import event

from freehours.errors import ConfigurationError
from freehours.store import locks
from freehours.store.prepared import Prepared, run_script

if TYPE_CHECKING:
    from freehours.settings import Settings

#: How long a SQLite writer waits for another's write lock before giving up, in milliseconds.
#: Importing the reference NEM12 file (2,976,000 values) holds the lock for about 8 s on these
#: machines: room for a few such imports ahead in the queue. A writer that has waited longer is
#: better told the database is busy.
SQLITE_BUSY_TIMEOUT_MS = 30_000

#: The execution option that makes the next ``BEGIN`` on a SQLite connection ``BEGIN IMMEDIATE``
#: (or, ``_AUTOCOMMIT``, no ``BEGIN`` at all).
_SQLITE_BEGIN = "freehours_sqlite_begin"
_AUTOCOMMIT = "AUTOCOMMIT"


@dataclass(frozen=True, slots=True)
class Timeouts:
    """How long freehours waits on the database before it says it is unavailable (503).

    A database that is down answers at once (connection refused); one that is black-holed (a
    dead host, a partition, a hung proxy) answers never, and without these limits every request
    that touches it would wait for ever, each holding a thread and a pooled connection. The
    defaults are those of the ``FREEHOURS_DATABASE_*_SECONDS`` settings."""

    #: A new connection (libpq ``connect_timeout``, whole seconds, at least 2).
    connect: int = 5
    #: One statement, on the server (``statement_timeout``); the client waits one second more
    #: for any answer, so that a server which cannot cancel (black-holed) is given up on too.
    #: Bulk ingest lifts both for its own statements (``without_statement_timeout``).
    statement: float = 15.0
    #: A free connection from the pool.
    pool: float = 5.0
    #: Unacknowledged data or keepalives on a connection (``tcp_user_timeout``).
    tcp: int = 15

    @classmethod
    def from_settings(cls, settings: Settings) -> Timeouts:
        return cls(
            connect=settings.database_connect_timeout_seconds,
            statement=settings.database_statement_timeout_seconds,
            pool=settings.database_pool_timeout_seconds,
            tcp=settings.database_tcp_timeout_seconds,
        )

    @property
    def answer(self) -> float:
        """How long the client waits for any answer to a statement."""
        return self.statement + 1.0


@functools.cache
def _answering_connection() -> type[Any]:
    """A psycopg connection class that waits for an answer at most ``answer_timeout`` seconds
    (defined on first use: SQLite deployments never import psycopg).

    libpq has no read timeout: a server that stops answering (black-holed behind a proxy that
    still acknowledges, or past what keepalives notice) holds the calling thread for ever. Past
    the deadline the connection is closed (its state is unknown), so SQLAlchemy invalidates it
    rather than pooling it, and the caller gets an OperationalError."""
    import psycopg  # noqa: PLC0415 - SQLite deployments never import it

    class AnsweringConnection(psycopg.Connection[Any]):
        answer_timeout: float | None = None

        def wait(self, gen: Any, interval: float = 0.1, timeout: float | None = None) -> Any:
            if timeout is not None:
                # The caller's own deadline (``notifies(timeout=...)``: no notification within
                # it is an answer, not a failure): psycopg handles its expiry.
                return super().wait(gen, interval, timeout)
            try:
                return super().wait(gen, interval, self.answer_timeout)
            except psycopg.errors._WaitTimeout as exc:  # psycopg's own deadline
                self.pgconn.finish()
                raise psycopg.OperationalError(
                    f"the database did not answer within {self.answer_timeout} s"
                ) from exc

    return AnsweringConnection


def _postgresql_engine(url: sa.URL, timeouts: Timeouts) -> sa.Engine:
    # The URL may carry libpq ``options`` of its own (a search_path): the timeout is added.
    options = url.query.get("options", "")
    if isinstance(options, tuple):
        options = " ".join(options)
    statement_ms = max(1, int(timeouts.statement * 1000))
    keepalive_idle = max(1, timeouts.tcp // 3)
    engine = sa.create_engine(
        url,
        pool_timeout=timeouts.pool,
        connect_args={
            "connect_timeout": timeouts.connect,
            "options": f"{options} -c statement_timeout={statement_ms}".strip(),
            "keepalives": 1,
            "keepalives_idle": keepalive_idle,
            "keepalives_interval": keepalive_idle,
            "keepalives_count": 3,
            "tcp_user_timeout": timeouts.tcp * 1000,
        },
    )

    @event.listens_for(engine, "do_connect")
    def _connect(_dialect: Any, _record: Any, cargs: Any, cparams: dict[str, Any]) -> Any:
        connection = _answering_connection().connect(*cargs, **cparams)
        connection.answer_timeout = timeouts.answer
        return connection

    return engine


def create_engine(url: str, timeouts: Timeouts | None = None) -> sa.Engine:
    """An engine for ``url``: ``sqlite:///PATH`` or ``postgresql[+psycopg]://...``; on
    PostgreSQL with ``timeouts`` (default: the settings' defaults)."""
    try:
        parsed = sa.make_url(url)
    except sa.exc.ArgumentError as exc:
        raise ConfigurationError(f"database URL {url!r} cannot be parsed: {exc}") from exc
    if parsed.drivername in ("postgresql", "postgres", "postgresql+psycopg"):
        return _postgresql_engine(
            parsed.set(drivername="postgresql+psycopg"), timeouts or Timeouts()
        )
    if parsed.drivername in ("sqlite", "sqlite+pysqlite"):
        if parsed.database in (None, "", ":memory:"):
            raise ConfigurationError(
                f"database URL {url!r}: an in-memory SQLite database lives and dies with one "
                "connection; freehours needs a file, sqlite:///PATH"
            )
        return _sqlite_engine(parsed)
    raise ConfigurationError(
        f"database URL {parsed.render_as_string()!r}: freehours runs on sqlite:/// or "
        "postgresql+psycopg://, not on "
        f"{parsed.drivername}"
    )


_BEGIN = {mode: Prepared(sa.text(f"BEGIN {mode}")) for mode in ("DEFERRED", "IMMEDIATE")}


def _sqlite_engine(url: sa.URL) -> sa.Engine:
    engine = sa.create_engine(url, pool_use_lifo=True)

    @event.listens_for(engine, "connect")
    def _configure(dbapi_connection: Any, _record: Any) -> None:
        # None = autocommit at the driver level: freehours' own BEGIN (below) starts transactions.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode = WAL")
        # In WAL mode NORMAL syncs at checkpoints, not at every commit: a crashed process loses
        # nothing and the file cannot corrupt; only a power cut may roll back the last commits.
        # FULL would cost a disk flush per commit, which caps the embedded default at about a
        # hundred settlements a second on these machines. Deployments that need every commit on
        # disk at once run on PostgreSQL.
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(connection: sa.Connection) -> None:
        mode = connection.get_execution_options().get(_SQLITE_BEGIN, "DEFERRED")
        if mode != _AUTOCOMMIT:
            _BEGIN[mode].rows(connection, {})

    return engine


@contextmanager
def without_statement_timeout(conn: sa.Connection) -> Iterator[None]:
    """Lift the statement timeout, and the client's wait for an answer, for the rest of the
    transaction on ``conn`` (PostgreSQL; a no-op on SQLite).

    For bulk statements whose time grows with their input, bounded by the input's own limits
    instead: an ingest's ``COPY`` lasts as long as its file takes to parse and its upsert as
    long as its rows take to write. A dead peer is still noticed by the TCP timeouts."""
    if conn.dialect.name != "postgresql":
        yield
        return
    run_script(conn, "SET LOCAL statement_timeout = 0")
    driver = conn.connection.driver_connection
    saved = getattr(driver, "answer_timeout", None)
    driver.answer_timeout = None  # type: ignore[union-attr]
    try:
        yield
    finally:
        driver.answer_timeout = saved  # type: ignore[union-attr]


@contextmanager
def write_transaction(engine: sa.Engine, lock: str | None = None) -> Iterator[sa.Connection]:
    """A transaction that will write: committed on exit, rolled back on an exception.

    On SQLite it begins with ``BEGIN IMMEDIATE``, so it holds the database's write lock from its
    first statement (waiting up to the busy timeout for it). On PostgreSQL it is an ordinary
    READ COMMITTED transaction: lock rows with ``SELECT ... FOR UPDATE``; ``lock`` names a lock
    (``freehours.store.locks``) held exclusively from its ``BEGIN`` (SQLite's write lock already
    excludes every other writer).
    """
    if engine.dialect.name == "sqlite":
        with _sqlite_writer(engine, "IMMEDIATE") as connection, connection.begin():
            yield connection
        return
    if lock is None:
        with engine.begin() as connection:
            yield connection
        return
    # freehours begins and ends this one itself, so that its BEGIN and the lock take one round
    # trip (psycopg would send its own BEGIN alone). A statement through ``execute`` may begin
    # SQLAlchemy's own (empty) transaction: ending it when the connection closes sends nothing.
    with autocommit_connection(engine) as connection:
        run_script(connection, locks.begin_exclusive(lock))
        try:
            yield connection
            run_script(connection, "COMMIT")
        except BaseException:
            if not connection.invalidated:
                run_script(connection, "ROLLBACK")
            raise


@contextmanager
def autocommit_connection(engine: sa.Engine) -> Iterator[sa.Connection]:
    """A connection with no transaction: each statement commits on its own.

    For a write that is one statement, and the reads it depends on: it saves the ``BEGIN`` and
    ``COMMIT`` a transaction costs (on PostgreSQL a round trip each). Nothing is rolled back on an
    exception, so two writes that must stand or fall together belong in ``write_transaction``.
    On SQLite it holds this process's writer lock, as ``write_transaction`` does.
    """
    if engine.dialect.name == "sqlite":
        # pysqlite runs with its own transaction handling off (``_configure``): with no BEGIN,
        # each statement is its own transaction.
        with _sqlite_writer(engine, _AUTOCOMMIT) as connection:
            yield connection
        return
    with engine.connect() as connection:
        connection.execution_options(isolation_level=_AUTOCOMMIT)
        yield connection


@contextmanager
def _sqlite_writer(engine: sa.Engine, begin: str) -> Iterator[sa.Connection]:
    """A SQLite connection that will write, holding this process's writer lock, its next
    ``BEGIN`` made ``BEGIN {begin}`` (or none, ``_AUTOCOMMIT``).

    SQLite has one writer at a time. Threads of this process queue for it on a lock, in order;
    left to SQLite's busy handler they would poll with sleeps of up to 100 ms each, which under
    load costs more than the writes. Other processes still wait in the busy handler, up to the
    busy timeout.
    """
    with _writer_lock(engine), engine.connect() as connection:
        connection.execution_options(**{_SQLITE_BEGIN: begin})
        yield connection


_WRITER_LOCKS: weakref.WeakKeyDictionary[sa.Engine, threading.Lock] = weakref.WeakKeyDictionary()
_WRITER_LOCKS_GUARD = threading.Lock()


def _writer_lock(engine: sa.Engine) -> threading.Lock:
    with _WRITER_LOCKS_GUARD:
        lock = _WRITER_LOCKS.get(engine)
        if lock is None:
            lock = _WRITER_LOCKS[engine] = threading.Lock()
        return lock


@contextmanager
def read_transaction(engine: sa.Engine) -> Iterator[sa.Connection]:
    """A transaction that only reads (a deferred one on SQLite); committed on exit."""
    with engine.begin() as connection:
        yield connection
