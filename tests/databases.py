"""A PostgreSQL database of its own, created empty (or as a copy of another) and dropped after:
for the test session, a test that needs a whole database, or a benchmark."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa


@contextmanager
def fresh_postgres_database(
    server: str, *, prefix: str = "freehours_test", template: str | None = None
) -> Iterator[str]:
    """The URL of a new database on ``server`` (the URL of one it can connect to), named
    ``prefix`` and a random suffix, empty or a copy of ``template``; dropped afterwards,
    whatever is still connected to it."""
    admin = sa.create_engine(server, isolation_level="AUTOCOMMIT")
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    copy = f' TEMPLATE "{template}"' if template else ""
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"{copy}'))
    try:
        yield sa.make_url(server).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
