"""Database fixtures for every suite that needs one (``tests/conftest.py`` loads this plugin).

``store`` is a migrated, empty ``Store``, parametrized over both backends, so a test that asks
for it proves its behaviour on each; ``store_url`` is the same database, not yet opened, for
tests of commands that open it themselves. No test sees another's rows.

Migrating with Alembic takes 0.3-0.8 s, and most tests need a migrated database, so the
migrations run once per session (per pytest-xdist worker, so always those of the checkout under
test) and each test gets a copy of the result:

- SQLite: the migrated file, copied.
- PostgreSQL: a schema of its own (``search_path``) in the session's database
  (``postgres_url``), made by replaying the statements Alembic sent, in one transaction, by a
  thread that keeps one ready ahead of the next test and drops used ones behind it
  (``PostgresSchemas``).

Why not ``CREATE DATABASE copy TEMPLATE migrated``: PostgreSQL 15 copies the 7.9 MB of a
database's catalogues through its write-ahead log and checkpoints on every ``DROP DATABASE``.
Measured on ``tests/store -n 2`` beside other suites on the same server, a copy and its drop
took 1.5-4 s (a replayed schema: 0.3 s) and the run took longer than migrating each test.

Tests of the migrations themselves, and of ``freehours db upgrade``, ask for
``empty_store_url``: a database with no schema at all.
"""

from __future__ import annotations

import queue
import shutil
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import event
from sqlalchemy.pool import NullPool

from freehours.store import schema
from freehours.store.database import Store
from freehours.store.engine import create_engine
from freehours.store.partitions import PG_INDEXES
from freehours.store.tables import metadata

BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgresql", id="postgresql", marks=pytest.mark.postgres),
]

#: A statement as sent to the driver: its text, its parameters, and whether ``executemany``.
Statement = tuple[str, Any, bool]


def _schema_url(postgres_url: str, name: str) -> str:
    url = sa.make_url(postgres_url).update_query_dict({"options": f"-csearch_path={name}"})
    return url.render_as_string(hide_password=False)


def _record_migrations(postgres_url: str) -> list[Statement]:
    """Migrate a scratch schema with Alembic; what it sent that changed the schema (not the
    look-ups, SELECTs, it made to decide, nor its advisory lock)."""
    name = f"record_{uuid.uuid4().hex[:12]}"
    sent: list[Statement] = []
    with _postgres_schema(postgres_url, name) as url:
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
    and drops them: it keeps one ready ahead of the next test, and drops a test's schema after
    it, so that a test waits for neither unless it outruns the clerk.
    """

    def __init__(self, postgres_url: str) -> None:
        self.postgres_url = postgres_url
        self.statements = _record_migrations(postgres_url)
        self._engine = sa.create_engine(postgres_url, poolclass=NullPool)
        self._ready: queue.Queue[str | BaseException] = queue.Queue()
        self._changed = threading.Condition()
        self._wanted = 1  # schemas to make ahead
        self._used: list[str] = []  # schemas to drop
        self._closing = False
        self._clerk = threading.Thread(target=self._run, name="postgres-schemas", daemon=True)
        self._clerk.start()

    def _run(self) -> None:
        """The clerk: make the schemas wanted first (a test may be waiting), then drop used
        ones, until closed. A failure ends it, handed to every test that then wants one."""
        try:
            while task := self._next_task():
                verb, name = task
                if verb == "make":
                    self._make(name)
                    self._ready.put(name)
                else:
                    with self._engine.begin() as conn:
                        conn.exec_driver_sql(f'DROP SCHEMA "{name}" CASCADE')
        except BaseException as exc:  # noqa: BLE001 - whatever it is, the tests are told
            self._ready.put(exc)

    def _next_task(self) -> tuple[str, str] | None:
        with self._changed:
            self._changed.wait_for(lambda: self._wanted or self._used or self._closing)
            if self._wanted and not self._closing:
                self._wanted -= 1
                return "make", f"test_{uuid.uuid4().hex[:12]}"
            if self._used:
                return "drop", self._used.pop()
            return None

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

    @contextmanager
    def migrated(self) -> Iterator[str]:
        """A new schema at the head revision: the URL that uses it; dropped afterwards."""
        ready = self._ready.get()
        if isinstance(ready, BaseException):
            self._ready.put(ready)  # for the next test, which would wait for ever
            raise ready
        with self._changed:
            self._wanted += 1
            self._changed.notify()
        try:
            yield _schema_url(self.postgres_url, ready)
        finally:
            with self._changed:
                self._used.append(ready)
                self._changed.notify()

    def close(self) -> None:
        """Drop every schema made."""
        with self._changed:
            self._closing = True
            self._changed.notify()
        self._clerk.join()
        while not self._ready.empty():
            ready = self._ready.get()
            if isinstance(ready, str):
                with self._engine.begin() as conn:
                    conn.exec_driver_sql(f'DROP SCHEMA "{ready}" CASCADE')
        self._engine.dispose()


def schema_differences(conn: sa.Connection) -> list[Any]:
    """How the database on ``conn`` differs from ``tables.py`` (Alembic's comparison).

    PostgreSQL's partitions are the tables' storage, not tables of the schema (nor are the
    copies PostgreSQL makes of the ledger's foreign key, one to each quotas partition); and on
    ``jobs`` two indexes differ by design (``freehours.store.partitions.PG_INDEXES``)."""
    postgresql = conn.dialect.name == "postgresql"
    partitions = set(
        conn.scalars(sa.text("SELECT relname FROM pg_class WHERE relispartition"))
        if postgresql
        else ()
    )

    def include(obj: Any, name: str | None, kind: str, reflected: bool, _: object) -> bool:
        if kind == "table" and name in partitions:
            return False
        if kind == "foreign_key_constraint" and reflected:
            return obj.referred_table.name not in partitions
        return not (kind == "index" and postgresql and name in PG_INDEXES)

    context = MigrationContext.configure(conn, opts={"include_object": include})
    return list(compare_metadata(context, metadata))


@pytest.fixture(scope="session")
def postgres_schemas(postgres_url: str) -> Iterator[PostgresSchemas]:
    """Migrated PostgreSQL schemas, one per ``migrated()``, in the session's database."""
    schemas = PostgresSchemas(postgres_url)
    try:
        yield schemas
    finally:
        schemas.close()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file at the head revision, for tests to copy; made once per session (worker)."""
    path = tmp_path_factory.mktemp("template") / "freehours.db"
    engine = create_engine(f"sqlite:///{path}")
    try:
        schema.upgrade(engine)
    finally:
        engine.dispose()
    # The last connection closed checkpointed the write-ahead log: the file is the whole database.
    assert not path.with_name(f"{path.name}-wal").exists()
    return path


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """URL of a database of its own at the head revision, on each backend in turn."""
    if request.param == "sqlite":
        template: Path = request.getfixturevalue("sqlite_template")
        path = tmp_path / "freehours.db"
        shutil.copyfile(template, path)
        yield f"sqlite:///{path}"
        return
    schemas: PostgresSchemas = request.getfixturevalue("postgres_schemas")
    with schemas.migrated() as url:
        yield url


@pytest.fixture(params=BACKENDS)
def empty_store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """URL of an empty database (no freehours schema), on each backend in turn."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'freehours.db'}"
        return
    postgres_url: str = request.getfixturevalue("postgres_url")
    with _postgres_schema(postgres_url) as url:
        yield url


@contextmanager
def _postgres_schema(postgres_url: str, name: str | None = None) -> Iterator[str]:
    """A new, empty schema in the database of ``postgres_url``: the URL that uses it (its
    ``search_path``), the schema dropped with everything in it afterwards."""
    name = name or f"test_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(postgres_url, poolclass=NullPool)
    with admin.begin() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{name}"')
    try:
        yield _schema_url(postgres_url, name)
    finally:
        with admin.begin() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA "{name}" CASCADE')
        admin.dispose()


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    """A migrated, empty ``Store`` on each backend in turn."""
    with Store.open(store_url) as opened:
        yield opened
