"""Database fixtures for every suite that needs one (``tests/conftest.py`` loads this plugin).

``store`` is a migrated, empty ``Store``, parametrized over both backends, so a test that asks
for it proves its behaviour on each: SQLite in a file under ``tmp_path``, and PostgreSQL in a
schema of its own (``search_path``) inside the session's database (``postgres_url``), dropped
after the test. No test sees another's rows. ``store_url`` is the same database, not yet
opened: for tests of migrations and of commands that open the database themselves.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.pool import NullPool

from freehours.store.database import Store

BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgresql", id="postgresql", marks=pytest.mark.postgres),
]


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """URL of an empty database, on each backend in turn."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'freehours.db'}"
        return
    postgres_url: str = request.getfixturevalue("postgres_url")
    with postgres_schema(postgres_url) as url:
        yield url


@contextmanager
def postgres_schema(postgres_url: str, prefix: str = "test") -> Iterator[str]:
    """A new, empty schema in the database of ``postgres_url``: the URL that uses it (its
    ``search_path``), the schema dropped with everything in it afterwards."""
    schema = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(postgres_url, poolclass=NullPool)
    with admin.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    url = sa.make_url(postgres_url).update_query_dict({"options": f"-csearch_path={schema}"})
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    """A migrated, empty ``Store`` on each backend in turn."""
    with Store.open(store_url) as opened:
        yield opened
