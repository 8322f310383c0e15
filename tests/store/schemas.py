"""Migrated PostgreSQL schemas for the tests, made once and used again (``PostgresSchemas``).

Making a schema, by replaying the statements Alembic sent, costs PostgreSQL 0.15-0.2 s of CPU
and dropping it 0.05 s more; about a thousand tests ask for one, on a 2-core machine that the
suite keeps busy. A test's schema is instead emptied after it and handed to a later test: every
table's rows deleted, the rows the migrations put in written back from a pristine copy, and
every sequence set to its start, in one transaction (about 15 ms). It is used again only if it is
still the schema the migrations made and nothing a test did to it could reach the next test:

- its catalogue (tables, columns and defaults, constraints, indexes, triggers, functions, types,
  partitions, sequences, privileges) and its ``alembic_version`` row are as made (a
  ``fingerprint``), so a test that altered, detached or dropped anything has its schema dropped;
- at most ``REUSE_ROWS_AT_MOST`` rows were deleted (dead rows a later test would scan) and
  PostgreSQL has gathered no statistics on it (a later test's plans are those of a new schema);
- nothing holds a lock it needs for longer than ``lock_timeout``.

Otherwise it is dropped and a new one made, as every schema was before.
"""

from __future__ import annotations

import hashlib
import queue
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.pool import NullPool

from freehours.store import schema
from freehours.store.engine import create_engine

#: A statement as sent to the driver: its text, its parameters, and whether ``executemany``.
Statement = tuple[str, Any, bool]

#: Schemas the clerk keeps ready ahead of the tests.
AHEAD = 1

#: More rows than this deleted from a schema, and it is dropped rather than used again.
REUSE_ROWS_AT_MOST = 500

#: What the migrations made, read from the catalogue with the schema on the ``search_path`` (so
#: that nothing is qualified by its name); object ids are left out, being new in every schema.
_CATALOGUE = [
    """SELECT c.relname, c.relkind, c.relpersistence, c.relrowsecurity, c.relacl::text,
              c.reloptions::text, pg_get_expr(c.relpartbound, c.oid),
              CASE WHEN c.relkind IN ('v', 'm') THEN pg_get_viewdef(c.oid) END
       FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace ORDER BY 1""",
    """SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
              a.attisdropped, a.attidentity, a.attgenerated, pg_get_expr(d.adbin, d.adrelid)
       FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
       LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
       WHERE c.relnamespace = current_schema()::regnamespace AND a.attnum > 0 ORDER BY 1, 2""",
    """SELECT c.relname, k.conname, pg_get_constraintdef(k.oid)
       FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
       WHERE c.relnamespace = current_schema()::regnamespace ORDER BY 1, 2, 3""",
    """SELECT pg_get_indexdef(i.indexrelid)
       FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
       WHERE c.relnamespace = current_schema()::regnamespace ORDER BY 1""",
    """SELECT c.relname, t.tgname, t.tgenabled, pg_get_triggerdef(t.oid)
       FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
       WHERE c.relnamespace = current_schema()::regnamespace AND NOT t.tgisinternal
       ORDER BY 1, 2""",
    """SELECT pg_get_functiondef(p.oid) FROM pg_proc p
       WHERE p.pronamespace = current_schema()::regnamespace ORDER BY 1""",
    """SELECT t.typname, t.typtype, e.enumlabel FROM pg_type t
       LEFT JOIN pg_enum e ON e.enumtypid = t.oid
       WHERE t.typnamespace = current_schema()::regnamespace ORDER BY 1, e.enumsortorder""",
    """SELECT c.relname, s.seqtypid::regtype::text, s.seqstart, s.seqincrement, s.seqmax,
              s.seqmin, s.seqcycle
       FROM pg_sequence s JOIN pg_class c ON c.oid = s.seqrelid
       WHERE c.relnamespace = current_schema()::regnamespace ORDER BY 1""",
    """SELECT c.relname, p.polname, pg_get_expr(p.polqual, p.polrelid)
       FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid
       WHERE c.relnamespace = current_schema()::regnamespace ORDER BY 1, 2""",
    "SELECT version_num FROM alembic_version ORDER BY 1",
]

#: Whether PostgreSQL has vacuumed or analysed a table of the schema (statistics a new schema
#: would not have).
_STATISTICS = """SELECT count(*) FROM pg_stat_user_tables WHERE schemaname = current_schema()
    AND (last_vacuum IS NOT NULL OR last_autovacuum IS NOT NULL
         OR last_analyze IS NOT NULL OR last_autoanalyze IS NOT NULL)"""


def schema_url(postgres_url: str, name: str) -> str:
    """``postgres_url`` with ``name`` as its ``search_path``."""
    url = sa.make_url(postgres_url).update_query_dict({"options": f"-csearch_path={name}"})
    return url.render_as_string(hide_password=False)


@contextmanager
def postgres_schema(postgres_url: str, name: str | None = None) -> Iterator[str]:
    """A new, empty schema in the database of ``postgres_url``: the URL that uses it (its
    ``search_path``), the schema dropped with everything in it afterwards."""
    name = name or f"test_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(postgres_url, poolclass=NullPool)
    with admin.begin() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{name}"')
    try:
        yield schema_url(postgres_url, name)
    finally:
        with admin.begin() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA "{name}" CASCADE')
        admin.dispose()


def record_migrations(postgres_url: str) -> list[Statement]:
    """Migrate a scratch schema with Alembic; what it sent that changed the schema (not the
    look-ups, SELECTs, it made to decide, nor its advisory lock)."""
    name = f"record_{uuid.uuid4().hex[:12]}"
    sent: list[Statement] = []
    with postgres_schema(postgres_url, name) as url:
        engine = create_engine(url)

        @event.listens_for(engine, "before_cursor_execute")
        def _record(*args: Any) -> None:
            _conn, _cursor, statement, parameters, _context, many = args
            sent.append((statement, parameters, many))

        try:
            schema.upgrade(engine)
        finally:
            engine.dispose()
    changes = [each for each in sent if not each[0].lstrip().upper().startswith("SELECT")]
    assert not any(name in statement for statement, _, _ in changes), "a schema named in SQL"
    return changes


class PostgresSchemas:
    """Migrated schemas in one PostgreSQL database, one per ``migrated()``.

    A thread of the session's own (the clerk) makes them, by replaying what Alembic sent once,
    and empties a test's schema after it for a later test, or drops it (the module's docstring
    says when): it keeps one ready ahead of the next test, so that a test waits for none unless
    it outruns the clerk.
    """

    def __init__(self, postgres_url: str) -> None:
        self.postgres_url = postgres_url
        self.statements = record_migrations(postgres_url)
        self._engine = sa.create_engine(postgres_url, poolclass=NullPool)
        self._pristine = self._new_name("pristine")
        self._make(self._pristine)
        self._fingerprint, self._tables, self._seeded, self._sequences = self._survey()
        self._reuse = self._can_skip_triggers()
        self._ready: queue.Queue[str | BaseException] = queue.Queue()
        self._changed = threading.Condition()
        self._used: list[str] = []  # schemas to empty (or drop)
        self._closing = False
        self._idle = False
        self.reused = 0  # how many schemas were handed out again (the tests read it)
        self._clerk = threading.Thread(target=self._run, name="postgres-schemas", daemon=True)
        self._clerk.start()

    @staticmethod
    def _new_name(prefix: str = "test") -> str:
        return f"{prefix}_{uuid.uuid4().hex[:12]}"

    def _run(self) -> None:
        """The clerk: a used schema emptied for a later test first (or dropped), else one made
        while fewer than ``AHEAD`` are ready, until closed. A failure ends it, handed to every test
        that then wants one."""
        try:
            while task := self._next_task():
                verb, name = task
                if verb == "reuse" and self._emptied(name):
                    self.reused += 1
                    self._ready.put(name)
                elif verb == "make":
                    self._make(name)
                    self._ready.put(name)
                else:
                    self._drop(name)
        except BaseException as exc:  # noqa: BLE001 - whatever it is, the tests are told
            self._ready.put(exc)

    def _next_task(self) -> tuple[str, str] | None:
        with self._changed:
            self._idle = True
            self._changed.notify_all()
            self._changed.wait_for(lambda: self._used or self._short() or self._closing)
            self._idle = False
            if self._used:
                name = self._used.pop()
                return ("reuse" if self._reuse and not self._closing else "drop"), name
            if self._closing:
                return None
            return "make", self._new_name()

    def _short(self) -> bool:
        """Fewer schemas ready than ``AHEAD``."""
        return self._ready.qsize() < AHEAD

    def _make(self, name: str) -> None:
        """A new schema, migrated, in one transaction: what Alembic sent, sent again."""
        connection = self._engine.raw_connection()
        try:
            cursor = connection.cursor()
            cursor.execute(f'CREATE SCHEMA "{name}"')
            cursor.execute(f'SET LOCAL search_path TO "{name}"')
            for statement, parameters, many in self.statements:
                if many:
                    cursor.executemany(statement, parameters)
                else:
                    cursor.execute(statement, parameters)
            cursor.close()
            connection.commit()
        finally:
            connection.close()

    def _drop(self, name: str) -> None:
        with self._engine.begin() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA "{name}" CASCADE')

    @staticmethod
    def _read_fingerprint(cursor: Any, name: str) -> str:
        """What the schema ``name`` on the cursor's ``search_path`` holds (``_CATALOGUE``), as
        a digest in which its name is left out (some definitions qualify by it)."""
        digest = hashlib.sha256()
        for query in _CATALOGUE:
            cursor.execute(query)
            digest.update(repr(cursor.fetchall()).replace(name, "").encode())
        return digest.hexdigest()

    def _survey(self) -> tuple[str, list[str], list[str], list[tuple[str, int]]]:
        """Of the pristine schema: its fingerprint, its tables (partitioned ones, not their
        partitions), those the migrations put rows in, and its sequences with their starts."""
        connection = self._engine.raw_connection()
        try:
            cursor = connection.cursor()
            cursor.execute(f'SET search_path TO "{self._pristine}"')
            fingerprint = self._read_fingerprint(cursor, self._pristine)
            cursor.execute(
                "SELECT relname FROM pg_class WHERE relnamespace = current_schema()::regnamespace"
                " AND relkind IN ('r', 'p') AND NOT relispartition"
                " AND relname <> 'alembic_version' ORDER BY 1"
            )
            tables = [name for (name,) in cursor.fetchall()]
            seeded = []
            for table in tables:
                cursor.execute(f'SELECT EXISTS (SELECT FROM "{table}")')
                if cursor.fetchone()[0]:
                    seeded.append(table)
            cursor.execute(
                "SELECT sequencename, start_value FROM pg_sequences"
                " WHERE schemaname = current_schema() ORDER BY 1"
            )
            sequences = [(name, int(start)) for name, start in cursor.fetchall()]
            connection.rollback()
            return fingerprint, tables, seeded, sequences
        finally:
            connection.close()

    def _can_skip_triggers(self) -> bool:
        """Whether this role may set ``session_replication_role`` (a superuser may): rows are
        deleted with the triggers and foreign keys off, which keep finalised documents, say,
        from ever being deleted. Otherwise no schema is used twice."""
        connection = self._engine.raw_connection()
        try:
            connection.cursor().execute("SET LOCAL session_replication_role = replica")
        except psycopg.Error:  # not this role
            return False
        else:
            return True
        finally:
            connection.rollback()
            connection.close()

    def _emptied(self, name: str) -> bool:
        """``name`` emptied as the migrations left it, in one transaction; False (and nothing
        done) when it should not be used again."""
        connection = self._engine.raw_connection()
        try:
            cursor = connection.cursor()
            cursor.execute("SET LOCAL lock_timeout = '2s'")
            cursor.execute(f'SET LOCAL search_path TO "{name}"')
            emptied = self._empty(cursor, name)
            if emptied:
                connection.commit()
        except psycopg.Error:  # a lock not had in time, a table a test dropped
            return False
        else:
            return emptied
        finally:
            connection.rollback()
            connection.close()

    def _empty(self, cursor: Any, name: str) -> bool:
        if self._read_fingerprint(cursor, name) != self._fingerprint:
            return False
        cursor.execute(_STATISTICS)
        if cursor.fetchone()[0]:
            return False
        cursor.execute("SET LOCAL session_replication_role = replica")
        deleted = 0
        for table in self._tables:
            cursor.execute(f'DELETE FROM "{table}"')
            deleted += cursor.rowcount
        if deleted > REUSE_ROWS_AT_MOST:
            return False
        for table in self._seeded:
            cursor.execute(f'INSERT INTO "{table}" SELECT * FROM "{self._pristine}"."{table}"')
        for sequence, start in self._sequences:
            cursor.execute("SELECT setval(%s, %s, false)", (sequence, start))
        return True

    @contextmanager
    def migrated(self) -> Iterator[str]:
        """A schema at the head revision, with no rows but those the migrations wrote: the URL
        that uses it; emptied for another test afterwards, or dropped."""
        ready = self._ready.get()
        if isinstance(ready, BaseException):
            self._ready.put(ready)  # for the next test, which would wait for ever
            raise ready
        with self._changed:
            self._changed.notify_all()  # one fewer ready
        try:
            yield schema_url(self.postgres_url, ready)
        finally:
            with self._changed:
                self._used.append(ready)
                self._changed.notify_all()

    def quiet(self, timeout: float = 30.0) -> None:
        """Until the clerk has nothing left to do: every used schema emptied or dropped, and
        ``AHEAD`` ready (for the tests of this class)."""
        with self._changed:
            done = self._changed.wait_for(
                lambda: self._idle and not self._used and not self._short(), timeout
            )
        assert done, f"the clerk still busy after {timeout} s"

    def __enter__(self) -> PostgresSchemas:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        """Drop every schema made."""
        with self._changed:
            self._closing = True
            self._changed.notify_all()
        self._clerk.join()
        while not self._ready.empty():
            ready = self._ready.get()
            if isinstance(ready, str):
                self._drop(ready)
        self._drop(self._pristine)
        self._engine.dispose()
