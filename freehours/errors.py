"""The one exception root of freehours.

    FreehoursError                  anything freehours raises on purpose
    +-- InputError                  bad input from a user or a file: exit 2, HTTP 4xx
    |   +-- NEM12Error              a NEM12 file that cannot be read; names file, line and field
    |   +-- PlanError               a tariff plan that is not valid; names file and key
    +-- ConfigurationError          settings or environment that cannot work (exit 1)

Library errors are translated at the seam where they arise (``raise ... from exc``), so callers
only ever catch these.
"""

from __future__ import annotations


class FreehoursError(Exception):
    """Root of every error freehours raises on purpose."""


class InputError(FreehoursError):
    """Input that freehours refuses: the message says what is wrong and where."""


class NEM12Error(InputError):
    """A NEM12 file that cannot be read.

    ``source`` is the file's name, ``line`` the 1-based physical line (None when the problem is
    the file as a whole), ``field`` the record field concerned (None when not one field).
    """

    def __init__(
        self, message: str, *, source: str, line: int | None = None, field: str | None = None
    ) -> None:
        self.reason = message
        self.source = source
        self.line = line
        self.field = field
        where = source if line is None else f"{source}:{line}"
        what = f" (field {field})" if field else ""
        super().__init__(f"{where}: {message}{what}")


class PlanError(InputError):
    """A tariff plan that is not valid: ``source`` is the file or plan id, ``key`` the TOML key."""

    def __init__(self, message: str, *, source: str, key: str | None = None) -> None:
        self.reason = message
        self.source = source
        self.key = key
        where = source if key is None else f"{source}: {key}"
        super().__init__(f"{where}: {message}")


class ConfigurationError(FreehoursError):
    """Settings or an environment that cannot work."""
