"""The errors the domain raises: the root of freehours' exception tree and the branches that pure
rules need (refused input, a plan that is not valid). A value outside its range is a
``freehours.domain.reads.RangeError``, a ``ValueError``, beside them.

They live here so that ``freehours.domain`` imports nothing from outside itself; the rest of
freehours imports them from ``freehours.errors``, which draws the whole tree.
"""

from __future__ import annotations


class FreehoursError(Exception):
    """Root of every error freehours raises on purpose."""


class InputError(FreehoursError):
    """Input that freehours refuses: the message says what is wrong and where."""


class PlanError(InputError):
    """A tariff plan that is not valid: ``source`` is the file or plan id, ``key`` the TOML key."""

    def __init__(self, message: str, *, source: str, key: str | None = None) -> None:
        self.reason = message
        self.source = source
        self.key = key
        where = source if key is None else f"{source}: {key}"
        super().__init__(f"{where}: {message}")
