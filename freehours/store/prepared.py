"""Hot-path statements: compiled once per dialect, run on the DBAPI cursor of the caller's
connection, inside the caller's transaction.

``Connection.execute`` spends 150-250 microseconds of Python per statement on psycopg (70-90 on
pysqlite) building an execution context, a result object and its rows; the driver itself needs
5 (pysqlite) to 75 (psycopg). A settlement runs about eight statements, so on the hot path that
layer was most of the request. A ``Prepared`` statement is the same Core construct, compiled once
per dialect with the bind and result processors of its columns' types (the table's
``TypeDecorator`` rules apply as they do through ``execute``), and run on a DBAPI cursor kept
for the purpose on each database connection: rows come back as tuples in the statement's column
order.

What ``execute`` does besides is kept: driver errors are raised as SQLAlchemy's ``DBAPIError``
classes (so ``IntegrityError`` and ``DataError`` mean what they mean everywhere else), and a
connection the driver lost is invalidated, never returned to the pool. Not kept: engine events
around each cursor execution (freehours registers none) and expanding ``IN`` parameters (the
statements here bind scalars).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.expression import ClauseElement

Processor = Callable[[Any], Any] | None


@dataclass(frozen=True, slots=True)
class _Compiled:
    sql: str
    positional: tuple[str, ...] | None  # bind names in order, for qmark dialects (SQLite)
    defaults: dict[str, Any]  # values bound in the construct itself (a LIMIT, say)
    binds: tuple[tuple[str, Processor], ...]
    results: tuple[Processor, ...]
    has_results: bool


_CURSOR = "freehours_prepared_cursor"


def _cursor(conn: sa.Connection) -> Any:
    """The DBAPI cursor the connection's prepared statements share: made once per database
    connection (kept in its ``info``, which SQLAlchemy clears when it replaces the connection)
    rather than once per statement. A connection serves one thread at a time, and every
    statement here fetches all its rows before the next runs."""
    pooled = conn.connection
    cursor = pooled.info.get(_CURSOR)
    if cursor is None:
        cursor = pooled.info[_CURSOR] = pooled.dbapi_connection.cursor()  # type: ignore[union-attr]
    return cursor


def run_script(conn: sa.Connection, sql: str) -> None:
    """Run ``sql``, statements without parameters (several, ``;``-separated, in one round trip
    on PostgreSQL), on the connection's prepared-statement cursor."""
    cursor = _cursor(conn)
    try:
        cursor.execute(sql)
    except conn.dialect.loaded_dbapi.Error as exc:
        Prepared._raise(conn, sql, (), exc, cursor)


class Prepared:
    """One Core statement, run on the DBAPI cursor of a connection's current transaction."""

    def __init__(self, statement: ClauseElement, *, plan_each_time: bool = False) -> None:
        """``plan_each_time``: never a prepared statement on the server (psycopg prepares a
        statement it has run five times, and the server then reuses one generic plan), but a
        plan for each execution's own values. For a statement over a batch of keys in arrays:
        a generic plan cannot prune partitions while planning, and one made while a table was
        small (a day's partition at the start of its burst; no ``ANALYZE`` since) stays a scan
        of the whole partition as it grows."""
        self.statement = statement
        self._compiled: dict[str, _Compiled] = {}
        self._options = {"prepare": False} if plan_each_time else {}

    def rows(self, conn: sa.Connection, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        """Run the statement with ``params`` (by bind name); its rows, processed, if it has any."""
        compiled = self._compiled.get(conn.dialect.name) or self._compile(conn.dialect)
        values = dict(compiled.defaults)
        values.update(params)
        for name, process in compiled.binds:
            if process is not None:
                values[name] = process(values[name])
        bound: Sequence[Any] | Mapping[str, Any] = (
            values if compiled.positional is None else [values[n] for n in compiled.positional]
        )
        cursor = _cursor(conn)
        try:
            if self._options and conn.dialect.driver == "psycopg":
                cursor.execute(compiled.sql, bound, **self._options)
            else:
                cursor.execute(compiled.sql, bound)
            raw = cursor.fetchall() if compiled.has_results else []
        except conn.dialect.loaded_dbapi.Error as exc:
            self._raise(conn, compiled.sql, bound, exc, cursor)
        results = compiled.results
        if not any(results):
            return [tuple(row) for row in raw]
        return [
            tuple(value if p is None else p(value) for p, value in zip(results, row, strict=True))
            for row in raw
        ]

    def many(self, conn: sa.Connection, params: Sequence[Mapping[str, Any]]) -> None:
        """Run the statement once for each of ``params``, in one ``executemany`` (psycopg sends
        them in one pipeline, so many rows cost about one round trip); rows it returns are
        discarded."""
        if not params:
            return
        compiled = self._compiled.get(conn.dialect.name) or self._compile(conn.dialect)
        bound: list[Sequence[Any] | Mapping[str, Any]] = []
        for one in params:
            values = dict(compiled.defaults)
            values.update(one)
            for name, process in compiled.binds:
                if process is not None:
                    values[name] = process(values[name])
            bound.append(
                values if compiled.positional is None else [values[n] for n in compiled.positional]
            )
        cursor = _cursor(conn)
        try:
            cursor.executemany(compiled.sql, bound)
        except conn.dialect.loaded_dbapi.Error as exc:
            self._raise(conn, compiled.sql, bound[0], exc, cursor)

    def first(self, conn: sa.Connection, params: Mapping[str, Any]) -> tuple[Any, ...] | None:
        rows = self.rows(conn, params)
        return rows[0] if rows else None

    def _compile(self, dialect: Dialect) -> _Compiled:
        compiled = self.statement.compile(dialect=dialect)
        assert isinstance(compiled, SQLCompiler), "a statement compiles to SQL"
        binds = tuple(
            (name, bind.type.dialect_impl(dialect).bind_processor(dialect))
            for name, bind in ((n, compiled.binds[n]) for n in compiled.params)
        )
        columns = list(getattr(self.statement, "exported_columns", ()))
        results = tuple(
            column.type.dialect_impl(dialect).result_processor(dialect, None) for column in columns
        )
        made = _Compiled(
            sql=compiled.string,
            positional=tuple(compiled.positiontup or ()) if compiled.positional else None,
            defaults={n: v for n, v in compiled.params.items() if v is not None},
            binds=binds,
            results=results,
            has_results=bool(columns),
        )
        self._compiled[dialect.name] = made
        return made

    @staticmethod
    def _raise(
        conn: sa.Connection,
        sql: str,
        params: Sequence[Any] | Mapping[str, Any],
        exc: Any,
        cursor: Any,
    ) -> None:
        dialect = conn.dialect
        if dialect.is_disconnect(exc, conn.connection.dbapi_connection, cursor):
            conn.invalidate(exc)
        raise sa.exc.DBAPIError.instance(
            sql, params, exc, dialect.loaded_dbapi.Error, dialect=dialect
        ) from exc
