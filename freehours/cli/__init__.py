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

from rich.console import Console

from freehours.cli.root import COMMANDS, app, load
from freehours.errors import FreehoursError, InputError

__all__ = ["COMMANDS", "app", "err_console", "load", "main"]

err_console = Console(stderr=True)


def main() -> None:
    """Entry point: run the app, turning freehours errors into messages and exit codes."""
    try:
        app()
    except InputError as exc:
        err_console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except FreehoursError as exc:
        err_console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        sys.exit(1)
