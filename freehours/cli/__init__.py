"""The ``freehours`` command line: thin Typer commands that parse, call and print.

Exit status: 0 on success, 2 on bad usage or bad input (the message on stderr names the file and
line), 1 on other failures.

A command imports only what it uses: each lives in a module of its own that registers it on
``app`` when imported, and ``LazyCommands`` (``freehours.cli.root``) imports that module only
when its command runs (``freehours --help`` lists them from ``COMMANDS`` without importing any).
Beside the commands: ``listing`` (lists as tables or JSON), ``tables``, ``options`` (shared
options and their parsers), ``dbguard`` (commands that need a database), ``logs``, ``progress``,
``gcpause``.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from freehours.cli.root import COMMANDS, app, load, load_every
from freehours.errors import FreehoursError, InputError

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["COMMANDS", "app", "err_console", "load", "load_every", "main"]

#: Standard error as Rich prints to it: made when first used (``__getattr__``), so that a
#: command that prints nothing through Rich (``nem12 inspect`` into a pipe) starts without it.
err_console: Console


def __getattr__(name: str) -> Any:
    if name != "err_console":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return _err_console()


def _err_console() -> Console:
    made: Console | None = globals().get("err_console")
    if made is None:
        from rich.console import Console

        made = globals()["err_console"] = Console(stderr=True)
    return made


def main() -> None:
    """Entry point: run the app, turning freehours errors into messages and exit codes."""
    try:
        app()
    except InputError as exc:
        _err_console().print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except FreehoursError as exc:
        _err_console().print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        sys.exit(1)
