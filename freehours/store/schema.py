"""The schema's version: Alembic migrations shipped in the package, driven from Python.

- ``upgrade(engine)`` applies every migration not yet applied (``freehours db upgrade``).
- ``prepare(engine)`` is what opening a database does: a new, empty database is migrated there and
  then; an existing one must already be current.
- ``require_current(engine)`` raises ``ConfigurationError`` naming ``freehours db upgrade`` when
  the database is behind this freehours (and a different message when it is ahead).

Migrations live in ``migrations/versions``, written by hand against ``tables.py``; a test checks
that they produce exactly the schema the tables describe, on SQLite and PostgreSQL. Each is named
after its revision (``0006_partitions.py`` is revision ``0006``, revised from the one before; a
test holds them to it), so that opening a current database reads the head from the file names
and the database's revision with one query: Alembic (and the template engine it brings, half a
second of a command's start-up) is imported only to migrate or to explain a refusal.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa

from freehours.errors import ConfigurationError
from freehours.store.engine import driver_of

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = Path(__file__).resolve().parent / "migrations"

#: PostgreSQL advisory lock key held while migrating, so that two processes opening one new
#: database at once migrate it once (the second waits, then finds it current). Any fixed
#: bigint works; this is "freehours" in ASCII, truncated to fit.
_MIGRATION_LOCK = 0x66726565686F7572


#: A migration's file name: its revision, then what it does.
_MIGRATION_FILE = re.compile(r"(\d{4})_\w+\.py")


def _config(connection: sa.Connection | None = None) -> Config:
    from alembic.config import Config  # noqa: PLC0415 - only to migrate (see the docstring)

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    """The revision this freehours' tables correspond to: the newest migration's."""
    revisions = [
        found.group(1)
        for path in (MIGRATIONS / "versions").iterdir()
        if (found := _MIGRATION_FILE.fullmatch(path.name))
    ]
    if not revisions:
        raise ConfigurationError(f"no migrations found in {MIGRATIONS}")
    return max(revisions)


def current_revision(connection: sa.Connection) -> str | None:
    """The database's revision, or None where no freehours schema has been created."""
    if not sa.inspect(connection).has_table("alembic_version"):
        return None
    revisions = connection.scalars(sa.text("SELECT version_num FROM alembic_version")).all()
    if len(revisions) > 1:
        raise ConfigurationError(f"the database is at several schema revisions: {revisions}")
    return revisions[0] if revisions else None


def _where(engine: sa.Engine) -> str:
    return engine.url.render_as_string(hide_password=True)


@contextmanager
def _reaching(engine: sa.Engine) -> Iterator[None]:
    """A database that cannot be reached or used is the environment's problem: say which."""
    try:
        yield
    except sa.exc.OperationalError as exc:
        raise ConfigurationError(f"database at {_where(engine)}: {exc.orig}") from exc


def migrations() -> list[str]:
    """Every migration this freehours has, in order: its file names without ``.py``
    (``0008_partitions``), whose first four digits are the revision."""
    return sorted(
        path.stem
        for path in (MIGRATIONS / "versions").iterdir()
        if _MIGRATION_FILE.fullmatch(path.name)
    )


@dataclass(frozen=True, slots=True)
class Status:
    """Where a database's schema stands: its revision (None: no freehours schema), this
    freehours' newest, and the migrations between them."""

    current: str | None
    head: str
    pending: tuple[str, ...]

    @property
    def is_current(self) -> bool:
        return self.current == self.head


def status(engine: sa.Engine) -> Status:
    """The database's schema against this freehours' migrations; refused (``ConfigurationError``)
    for a revision this freehours does not know."""
    with _reaching(engine), driver_of(engine).read(engine) as connection:
        current = current_revision(connection)
    _refuse_unknown(engine, current)
    return Status(current, head_revision(), _after(current))


def _after(current: str | None) -> tuple[str, ...]:
    return tuple(name for name in migrations() if current is None or name[:4] > current)


def upgrade(engine: sa.Engine) -> str:
    """Apply every pending migration in one transaction; return the revision reached."""
    return migrate(engine)[1]


def migrate(engine: sa.Engine) -> tuple[tuple[str, ...], str]:
    """Apply every pending migration in one transaction (under a lock, so that two at once take
    turns): the migrations applied, none when the database was current, and the revision
    reached."""
    from alembic import command  # noqa: PLC0415 - only to migrate (see the docstring)
    from alembic.util import CommandError  # noqa: PLC0415

    driver = driver_of(engine)
    with _reaching(engine), driver.write(engine) as connection:
        driver.hold_exclusive(connection, _MIGRATION_LOCK)
        current = current_revision(connection)
        _refuse_unknown(engine, current)
        try:
            command.upgrade(_config(connection), "head")
        except CommandError as exc:
            raise ConfigurationError(f"database at {_where(engine)}: {exc}") from exc
        return _after(current), head_revision()


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
    from alembic.script import ScriptDirectory  # noqa: PLC0415 - only to explain a refusal
    from alembic.util import CommandError  # noqa: PLC0415

    script = ScriptDirectory.from_config(_config())
    try:
        script.get_revision(current)
    except CommandError as exc:
        raise ConfigurationError(
            f"database at {_where(engine)} is at schema revision {current}, which this "
            "freehours does not know: a newer freehours migrated it; run that version"
        ) from exc
