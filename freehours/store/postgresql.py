"""The PostgreSQL driver (psycopg 3): timeouts on every wait, ``COPY``, advisory locks, LISTEN.

Every wait on the server is bounded (``Timeouts``): a connection, a statement (the server's
``statement_timeout``, and the client's own deadline one second later, for a server that cannot
even cancel), a pooled connection, and TCP. A write transaction is an ordinary READ COMMITTED
one: rows are locked with ``SELECT ... FOR UPDATE``; a named lock (``freehours.store.locks``)
is an advisory transaction lock taken with the ``BEGIN``, in the same round trip.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar, cast

import psycopg
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.dialects import postgresql

from freehours.store import locks, partitions
from freehours.store.driver import Driver, Notifications, columns
from freehours.store.prepared import Prepared, run_script
from freehours.store.timeouts import POOL_BURST, Timeouts

_AUTOCOMMIT = "AUTOCOMMIT"

_HOLD_SHARED = Prepared(
    sa.text("SELECT pg_advisory_xact_lock_shared(k) FROM unnest(CAST(:keys AS bigint[])) AS k")
)
_HOLD_EXCLUSIVE = Prepared(sa.text("SELECT pg_advisory_xact_lock(:key)"))
_TRY_EXCLUSIVE = Prepared(
    sa.text(
        "SELECT k FROM unnest(CAST(:keys AS bigint[])) WITH ORDINALITY AS t(k, n)"
        " WHERE pg_try_advisory_xact_lock(k) ORDER BY n"
    ).columns(k=sa.BigInteger)
)
_NOTIFY = Prepared(sa.text("SELECT pg_notify(:channel, '')"))


@functools.cache
def _answering_connection() -> type[Any]:
    """A psycopg connection class that waits for an answer at most ``answer_timeout`` seconds.

    libpq has no read timeout: a server that stops answering (black-holed behind a proxy that
    still acknowledges, or past what keepalives notice) holds the calling thread for ever. Past
    the deadline the connection is closed (its state is unknown), so SQLAlchemy invalidates it
    rather than pooling it, and the caller gets an OperationalError."""

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


@functools.cache
def _live_jobs(jobs: sa.Table) -> sa.Table:
    """``jobs``' partition of unfinished jobs, for statements (``freehours.store.partitions``)."""
    return jobs.to_metadata(sa.MetaData(), name=partitions.LIVE_JOBS)


class _Listening:
    def __init__(self, connection: psycopg.Connection[Any]) -> None:
        self._connection = connection

    def wait(self, timeout: float) -> bool:
        return any(True for _ in self._connection.notifies(timeout=timeout, stop_after=1))


class PostgreSQL(Driver):
    name: ClassVar[str] = "postgresql"
    listens: ClassVar[bool] = True
    parallel_writers: ClassVar[bool] = True
    errors: ClassVar[tuple[type[Exception], ...]] = (psycopg.Error,)
    partitions: ClassVar[bool] = True
    takes_arrays: ClassVar[bool] = True

    def create_engine(self, url: sa.URL, timeouts: Timeouts) -> sa.Engine:
        # The URL may carry libpq ``options`` of its own (a search_path): the timeout is added.
        options = url.query.get("options", "")
        if isinstance(options, tuple):
            options = " ".join(options)
        statement_ms = max(1, int(timeouts.statement * 1000))
        keepalive_idle = max(1, timeouts.tcp // 3)
        engine = sa.create_engine(
            url,
            pool_size=timeouts.pool_size,
            max_overflow=POOL_BURST,
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

    @contextmanager
    def write(self, engine: sa.Engine, lock: str | None = None) -> Iterator[sa.Connection]:
        if lock is None:
            with engine.begin() as connection:
                yield connection
            return
        # freehours begins and ends this one itself, so that its BEGIN and the lock take one
        # round trip (psycopg would send its own BEGIN alone). A statement through ``execute``
        # may begin SQLAlchemy's own (empty) transaction: ending it when the connection closes
        # sends nothing.
        with self.autocommit(engine) as connection:
            run_script(connection, f"BEGIN; SELECT pg_advisory_xact_lock({locks.key(lock)})")
            try:
                yield connection
                run_script(connection, "COMMIT")
            except BaseException:
                if not connection.invalidated:
                    run_script(connection, "ROLLBACK")
                raise

    @contextmanager
    def autocommit(self, engine: sa.Engine) -> Iterator[sa.Connection]:
        with engine.connect() as connection:
            connection.execution_options(isolation_level=_AUTOCOMMIT)
            yield connection

    @contextmanager
    def without_statement_timeout(self, conn: sa.Connection) -> Iterator[None]:
        run_script(conn, "SET LOCAL statement_timeout = 0")
        driver = conn.connection.driver_connection
        saved = getattr(driver, "answer_timeout", None)
        driver.answer_timeout = None  # type: ignore[union-attr]
        try:
            yield
        finally:
            driver.answer_timeout = saved  # type: ignore[union-attr]

    def _insert(self, table: sa.Table) -> Any:
        return postgresql.insert(table)

    def live_jobs(self, jobs: sa.Table) -> sa.Table:
        return _live_jobs(jobs)

    def moved_concurrently(self, error: sa.exc.DBAPIError) -> bool:
        # PostgreSQL's words for it, under SQLSTATE 40001 (serialization_failure).
        return isinstance(error.orig, psycopg.errors.SerializationFailure) and (
            "moved to another partition" in str(error.orig)
        )

    sums_decimals = True

    def epoch_seconds(self, column: sa.ColumnElement[Any]) -> sa.ColumnElement[float]:
        return sa.cast(sa.extract("epoch", column), sa.Float)

    def where_pairs(
        self,
        statement: sa.Update,
        columns: tuple[sa.Column[int], sa.Column[int]],
        pairs: Collection[tuple[int, int]],
    ) -> sa.Update:
        # A join with the pairs as two arrays: one statement text whatever their number (so
        # psycopg prepares it once), and a plan of primary-key lookups, which is what PostgreSQL
        # picks for a handful of rows joined by the key.
        first, second = columns
        pair = (
            sa.func.unnest(
                sa.literal([a for a, _ in pairs], postgresql.ARRAY(sa.BigInteger)),
                sa.literal([b for _, b in pairs], postgresql.ARRAY(sa.Integer)),
            )
            .table_valued("a", "b")
            .render_derived(name="pair")
        )
        return statement.where(first == pair.c.a, second == pair.c.b)

    def write_and_insert(
        self,
        conn: sa.Connection,
        params: dict[str, Any],
        *,
        together: Prepared,
        write: Prepared,
        inserts: Sequence[Prepared],
    ) -> bool:
        return bool(together.rows(conn, params))

    def write_and_insert_many(
        self,
        conn: sa.Connection,
        params: Sequence[dict[str, Any]],
        *,
        arrays: Prepared,
        separate: Sequence[Prepared],
    ) -> None:
        if params:
            arrays.rows(conn, columns(params))

    def upsert_counting(
        self,
        conn: sa.Connection,
        upsert: sa.Insert,
        returning: Sequence[sa.ColumnElement[Any]],
        *,
        incoming: int,
        existing: sa.Select[Any],
    ) -> tuple[int, Sequence[sa.Row[Any]]]:
        # A partitioned table's RETURNING has no system columns (xmax, 0 on a row version the
        # statement inserted, would tell an insert from an update). So the incoming rows
        # already stored are counted first, in the same statement (one snapshot): exact, but
        # for a row of the same key that a concurrent ingest commits in between, counted here
        # as inserted although the upsert then updates (or keeps) it; the rows written are
        # right either way, only the split of the counts can be off by such rows.
        pre = existing.cte("freehours_existing")
        up = upsert.returning(*returning).cte("freehours_written")
        stored = sa.select(pre).scalar_subquery().label("freehours_stored")
        rows = cast(Sequence[sa.Row[Any]], conn.execute(sa.select(*up.c, stored)).all())
        count = rows[0].freehours_stored if rows else conn.scalar(sa.select(pre))
        return incoming - int(count or 0), rows

    def stage(self, conn: sa.Connection, table: sa.Table, rows: Iterable[tuple[Any, ...]]) -> int:
        driver = conn.connection.driver_connection
        if not isinstance(driver, psycopg.Connection):
            raise TypeError(f"PostgreSQL through psycopg 3 expected, not {type(driver).__name__}")
        columns = ", ".join(column.name for column in table.columns)
        staged = 0
        # Binary: each value sent as the server keeps it. In text, psycopg wrote (3.6 us a
        # meter row, 0.8 in binary) and the server parsed back every date, timestamp and
        # number.
        with (
            driver.cursor() as cursor,
            cursor.copy(f"COPY {table.name} ({columns}) FROM STDIN (FORMAT BINARY)") as copy,
        ):
            copy.set_types(_copy_types(driver, conn.dialect, table))
            for row in rows:
                copy.write_row(row)
                staged += 1
        return staged

    def hold_shared(self, conn: sa.Connection, keys: Sequence[int]) -> None:
        if keys:
            _HOLD_SHARED.rows(conn, {"keys": list(keys)})

    def hold_exclusive(self, conn: sa.Connection, key: int) -> None:
        _HOLD_EXCLUSIVE.rows(conn, {"key": key})

    def try_hold_exclusive(self, conn: sa.Connection, keys: Sequence[int]) -> set[int]:
        if not keys:
            return set()
        return {row[0] for row in _TRY_EXCLUSIVE.rows(conn, {"keys": list(keys)})}

    def notify(self, conn: sa.Connection, channel: str) -> None:
        _NOTIFY.rows(conn, {"channel": channel})

    @contextmanager
    def listen(self, engine: sa.Engine, channel: str) -> Iterator[Notifications]:
        pooled = engine.raw_connection()
        connection: Any = pooled.driver_connection
        pooled.detach()  # a connection of its own, LISTENing, never returned to the pool
        try:
            connection.rollback()
            connection.autocommit = True
            connection.execute(f"LISTEN {channel}")
            yield _Listening(connection)
        finally:
            pooled.close()


POSTGRESQL = PostgreSQL()


def _copy_types(
    connection: psycopg.Connection[Any], dialect: sa.Dialect, table: sa.Table
) -> list[int]:
    """The type of each of ``table``'s columns, for a binary ``COPY``: psycopg's, by the name
    PostgreSQL gives it (``VARCHAR(10)`` is ``varchar``); computed once per table."""
    cached = _COPY_TYPES.get(table.name)
    if cached is None:
        cached = []
        for column in table.columns:
            name = column.type.compile(dialect=dialect).split("(")[0].lower()
            info = connection.adapters.types.get(name)
            if info is None:
                raise TypeError(f"{table.name}.{column.name}: no psycopg type for {name!r}")
            cached.append(info.oid)
        _COPY_TYPES[table.name] = cached
    return cached


_COPY_TYPES: dict[str, list[int]] = {}
