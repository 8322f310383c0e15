"""Commands that work on an existing database refuse, rather than make an empty one, where none
is named and the default file is not there."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from freehours.errors import ConfigurationError

_P = ParamSpec("_P")
_R = TypeVar("_R")


def needs_database(command: Callable[_P, _R]) -> Callable[_P, _R]:
    """Mark ``command`` (under its ``@app.command()``) as one that works on an existing
    database: run without FREEHOURS_DATABASE_URL, it refuses (exit 1) where the default SQLite
    file is not there, rather than make an empty database in the working directory
    (``require_database``). ``docs/cli.md`` says so for each command marked."""

    @functools.wraps(command)
    def checked(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        require_database()
        return command(*args, **kwargs)

    checked.__dict__["needs_database"] = True
    return checked


def require_database() -> None:
    """Raise ``ConfigurationError`` when FREEHOURS_DATABASE_URL is not set and the default
    database, ``./freehours.db``, does not exist. ``freehours db upgrade`` creates it; a URL that
    is set is opened as it is named (a new, empty database there is migrated)."""
    from pathlib import Path

    from freehours.settings import Settings, get_settings

    if "database_url" in get_settings().model_fields_set:
        return
    default: str = Settings.model_fields["database_url"].default
    path = default.removeprefix("sqlite:///")
    if not Path(path).exists():
        raise ConfigurationError(
            f"no database at {path} (FREEHOURS_DATABASE_URL is not set); set it, or create one"
            " with 'freehours db upgrade'"
        )
