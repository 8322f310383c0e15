"""Database fixtures for every suite that needs one (``tests/conftest.py`` loads this plugin).

``store`` is a migrated, empty ``Store``, parametrized over both backends, so a test that asks
for it proves its behaviour on each; ``store_url`` is the same database, not yet opened, for
tests of commands that open it themselves. No test sees another's rows.

Migrating with Alembic takes 0.3-0.8 s, and most tests need a migrated database, so the
migrations run once per session (per pytest-xdist worker, so always those of the checkout under
test) and each test gets a copy of the result:

- SQLite: the migrated file, copied.
- PostgreSQL: a schema of its own (``search_path``) in the session's database
  (``postgres_url``), made by replaying the statements Alembic sent, in one transaction, and
  emptied after the test for a later one where nothing the test did could reach it
  (``tests/store/schemas.py``), by a thread that keeps one ready ahead of the next test.

Why not ``CREATE DATABASE copy TEMPLATE migrated``: PostgreSQL 15 copies the 7.9 MB of a
database's catalogues through its write-ahead log and checkpoints on every ``DROP DATABASE``.
Measured on ``tests/store -n 2`` beside other suites on the same server, a copy and its drop
took 1.5-4 s (a replayed schema: 0.3 s) and the run took longer than migrating each test.

Tests of the migrations themselves, and of ``freehours db upgrade``, ask for
``empty_store_url``: a database with no schema at all.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from freehours.store import schema
from freehours.store.database import Store
from freehours.store.engine import create_engine
from freehours.store.partitions import PG_INDEXES
from freehours.store.tables import metadata
from tests.store.schemas import PostgresSchemas, postgres_schema

BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgresql", id="postgresql", marks=pytest.mark.postgres),
]


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
    with PostgresSchemas(postgres_url) as schemas:
        yield schemas


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
    with postgres_schema(postgres_url) as url:
        yield url


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    """A migrated, empty ``Store`` on each backend in turn."""
    with Store.open(store_url) as opened:
        yield opened
