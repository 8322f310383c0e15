"""The database seam: a driver and an engine per URL, and how long to wait on the database.

Two backends, each with its driver (``freehours.store.driver``): SQLite, the embedded default
(``freehours.store.sqlite``), and PostgreSQL through psycopg 3 (``freehours.store.postgresql``);
plain ``postgresql://`` URLs are taken to mean it. Which one a URL names is decided here, once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import sqlalchemy as sa

from freehours.errors import ConfigurationError

if TYPE_CHECKING:
    from freehours.settings import Settings
    from freehours.store.driver import Driver


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
    #: Bulk ingest lifts both for its own statements
    #: (``Driver.without_statement_timeout``).
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


def create_engine(url: str, timeouts: Timeouts | None = None) -> sa.Engine:
    """An engine for ``url``: ``sqlite:///PATH`` or ``postgresql[+psycopg]://...``; on
    PostgreSQL with ``timeouts`` (default: the settings' defaults)."""
    driver, parsed = _driver_and_url(url)
    return driver.create_engine(parsed, timeouts or Timeouts())


def shown_url(url: str) -> str:
    """``url`` as it may be shown: without its password."""
    return sa.make_url(url).render_as_string(hide_password=True)


def driver_of(engine: sa.Engine) -> Driver:
    """The driver of an engine ``create_engine`` made."""
    return _driver_and_url(engine.url)[0]


def _driver_and_url(url: str | sa.URL) -> tuple[Driver, sa.URL]:
    try:
        parsed = sa.make_url(url)
    except sa.exc.ArgumentError as exc:
        raise ConfigurationError(f"database URL {url!r} cannot be parsed: {exc}") from exc
    if parsed.drivername in ("postgresql", "postgres", "postgresql+psycopg"):
        # Imported here: SQLite deployments never import psycopg.
        from freehours.store.postgresql import POSTGRESQL  # noqa: PLC0415

        return POSTGRESQL, parsed.set(drivername="postgresql+psycopg")
    if parsed.drivername in ("sqlite", "sqlite+pysqlite"):
        if parsed.database in (None, "", ":memory:"):
            raise ConfigurationError(
                f"database URL {url!r}: an in-memory SQLite database lives and dies with one "
                "connection; freehours needs a file, sqlite:///PATH"
            )
        from freehours.store.sqlite import SQLITE  # noqa: PLC0415

        return SQLITE, parsed
    raise ConfigurationError(
        f"database URL {parsed.render_as_string()!r}: freehours runs on sqlite:/// or "
        "postgresql+psycopg://, not on "
        f"{parsed.drivername}"
    )
