"""The schema's version: Alembic migrations shipped in the package, driven from Python.

- ``upgrade(engine)`` applies every migration not yet applied (``freehours db upgrade``).
- ``prepare(engine)`` is what opening a database does: a new, empty database is migrated there and
  then; an existing one must already be current.
- ``require_current(engine)`` raises ``ConfigurationError`` naming ``freehours db upgrade`` when
  the database is behind this freehours (and a different message when it is ahead).

Migrations live in ``migrations/versions``, written by hand against ``tables.py``; a test checks
that they produce exactly the schema the tables describe, on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError

from freehours.errors import ConfigurationError
from freehours.store.engine import driver_of

MIGRATIONS = Path(__file__).resolve().parent / "migrations"

#: PostgreSQL advisory lock key held while migrating, so that two processes opening one new
#: database at once migrate it once (the second waits, then finds it current). Any fixed
#: bigint works; this is "freehours" in ASCII, truncated to fit.
_MIGRATION_LOCK = 0x66726565686F7572


def _config(connection: sa.Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    """The revision this freehours' tables correspond to."""
    head = ScriptDirectory.from_config(_config()).get_current_head()
    if head is None:
        raise ConfigurationError(f"no migrations found in {MIGRATIONS}")
    return head


def current_revision(connection: sa.Connection) -> str | None:
    """The database's revision, or None where no freehours schema has been created."""
    return MigrationContext.configure(connection).get_current_revision()


def _where(engine: sa.Engine) -> str:
    return engine.url.render_as_string(hide_password=True)


@contextmanager
def _reaching(engine: sa.Engine) -> Iterator[None]:
    """A database that cannot be reached or used is the environment's problem: say which."""
    try:
        yield
    except sa.exc.OperationalError as exc:
        raise ConfigurationError(f"database at {_where(engine)}: {exc.orig}") from exc


def upgrade(engine: sa.Engine) -> str:
    """Apply every pending migration in one transaction; return the revision reached."""
    driver = driver_of(engine)
    with _reaching(engine), driver.write(engine) as connection:
        driver.hold_exclusive(connection, _MIGRATION_LOCK)
        _refuse_unknown(engine, current_revision(connection))
        try:
            command.upgrade(_config(connection), "head")
        except CommandError as exc:
            raise ConfigurationError(f"database at {_where(engine)}: {exc}") from exc
        return head_revision()


def require_current(engine: sa.Engine) -> None:
    """Raise ``ConfigurationError`` unless the database is at this freehours' revision."""
    with _reaching(engine), driver_of(engine).read(engine) as connection:
        current = current_revision(connection)
    head = head_revision()
    if current == head:
        return
    _refuse_unknown(engine, current)
    where = _where(engine)
    if current is None:
        raise ConfigurationError(
            f"database at {where} has no freehours schema: run `freehours db upgrade`"
        )
    raise ConfigurationError(
        f"database at {where} is at schema revision {current}, this freehours needs {head}: "
        "run `freehours db upgrade`"
    )


def prepare(engine: sa.Engine) -> None:
    """Make ``engine``'s database usable: migrate it if it is new, else require it current."""
    with _reaching(engine), driver_of(engine).read(engine) as connection:
        current = current_revision(connection)
    if current is None:
        upgrade(engine)
    else:
        require_current(engine)


def _refuse_unknown(engine: sa.Engine, current: str | None) -> None:
    if current is None:
        return
    script = ScriptDirectory.from_config(_config())
    try:
        script.get_revision(current)
    except CommandError as exc:
        raise ConfigurationError(
            f"database at {_where(engine)} is at schema revision {current}, which this "
            "freehours does not know: a newer freehours migrated it; run that version"
        ) from exc
