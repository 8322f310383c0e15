"""The database seam: a driver and an engine per URL, and how long to wait on the database.

Two backends, each with its driver (``freehours.store.driver``): SQLite, the embedded default
(``freehours.store.sqlite``), and PostgreSQL through psycopg 3 (``freehours.store.postgresql``);
plain ``postgresql://`` URLs are taken to mean it. Which one a URL names is decided here, once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sqlalchemy as sa

from freehours.errors import ConfigurationError
from freehours.store.timeouts import Timeouts

if TYPE_CHECKING:
    from freehours.store.driver import Driver


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
