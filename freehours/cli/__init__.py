"""The ``freehours`` command line: thin Typer commands that parse, call and print.

Exit status: 0 on success, 2 on bad usage or bad input (the message on stderr names the file and
line), 1 on other failures.
"""

from __future__ import annotations

import sys
from typing import Annotated, Self

import typer
from rich.console import Console
from rich.progress import Progress

from freehours.errors import FreehoursError, InputError

app = typer.Typer(
    name="freehours",
    help="Metering-to-billing for daily free-energy windows: NEM12 in, quotas settled, bills out.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err_console = Console(stderr=True)

#: The long-running commands' ``--metrics-port`` and ``--metrics-host``.
MetricsPort = Annotated[
    int | None, typer.Option("--metrics-port", help="serve Prometheus metrics on this port")
]
MetricsHost = Annotated[str, typer.Option("--metrics-host", help="address for --metrics-port")]


class ProgressDisplay:
    """A command's Rich progress, shown for the span of a ``with`` block (disabled by the
    subclass's ``Progress`` where the console is not a terminal)."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress

    def __enter__(self) -> Self:
        self._progress.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._progress.stop()


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


# Command modules register themselves on ``app`` when imported.
from freehours.cli import (  # noqa: E402, F401
    agent,
    bill,
    db,
    demo,
    keys,
    nem12,
    nem12_import,
    plans,
    serve,
    simulate,
    worker,
)
