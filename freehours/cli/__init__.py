"""The ``freehours`` command line: thin Typer commands that parse, call and print.

Exit status: 0 on success, 2 on bad usage or bad input (the message on stderr names the file and
line), 1 on other failures.

A command imports only what it uses: each lives in a module of its own that registers it on
``app`` when imported, and ``LazyCommands`` imports that module only when its command runs
(``freehours --help`` lists them from ``COMMANDS`` without importing any).
"""

from __future__ import annotations

import functools
import gc
import importlib
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, ParamSpec, Self, TypeVar

import typer
from rich.console import Console
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

from freehours.errors import ConfigurationError, FreehoursError, InputError

if TYPE_CHECKING:
    from rich.progress import Progress

    from freehours.settings import Settings


@contextmanager
def cyclic_gc_paused(*, collect: bool = True) -> Iterator[None]:
    """Python's cyclic garbage collector off for one batch of work (a bill run, a NEM12 file
    imported), then one pass over what the batch left young, and the collector back on.

    A batch frees what it makes by reference counting as it goes, or keeps it to its end, and
    makes few reference cycles. The collector cannot know that: it walks the young objects every
    few hundred allocations and, now and then, every object of the process, imports included.
    Measured: a bill run's reader file, 0.17 s of the collector in a 2.6 s run; an import of 50
    of the day bench's files, 1.16 s of 8.5 s. With ``collect``, a pass at the end frees the
    batch's cycles (the objects made while the collector was off are all still young), so a
    command of many batches does not grow with them; a command of one batch, whose process ends
    with it, need not walk what it kept. Back on afterwards, as commands also run inside other
    processes (tests).
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collect:
            gc.collect(0)
        if enabled:
            gc.enable()


@dataclass(frozen=True)
class Command:
    """A top-level command: the modules that register it, and its one-line help."""

    modules: tuple[str, ...]
    help: str


#: Every top-level command, in the order ``--help`` lists them. A test holds each ``help`` to
#: the registered command's own.
COMMANDS = {
    "agent": Command(
        ("agent",), "The meter agent: sends reads to the API, spools to disk when it cannot."
    ),
    "bill": Command(
        ("bill",),
        "Bill each NMI in a NEM12 file under a plan: free energy in the window up to the daily"
        " cap, the rest at its time-of-use band, supply, feed-in and GST.",
    ),
    "demo": Command(
        ("demo",),
        "Run freehours end to end: a real HTTP API on 127.0.0.1, plans and customers in every"
        " region, the meter agent's simulated meters, settlement workers, settlements under"
        " injected faults, bills, invoices and a credit note for a late revision.",
    ),
    "serve": Command(
        ("serve",),
        "Serve the HTTP API: --processes N API processes on one port, each with --workers N"
        " settlement job threads.",
    ),
    "worker": Command(
        ("worker",),
        "Run due jobs from the database (FREEHOURS_DATABASE_URL) until SIGTERM or SIGINT.",
    ),
    "nem12": Command(
        ("nem12", "nem12_import"), "NEM12 interval meter data files (CSV, zip or gzip)."
    ),
    "db": Command(
        ("db",), "The database at FREEHOURS_DATABASE_URL (default sqlite:///./freehours.db)."
    ),
    "keys": Command(("keys",), "API keys for the HTTP API (scopes: ingest, settle, read, admin)."),
    "plans": Command(
        ("plans",), "Tariff plans: check a plan file (TOML), store a plan, list the built-in plans."
    ),
    "customers": Command(
        ("customers",), "Customers: the plan an NMI is on, its region and its billing cycle."
    ),
    "settlements": Command(
        ("settlements",), "Settlements: schedule the days with reads that no job settles."
    ),
    "invoices": Command(
        ("invoices",),
        "Invoices and credit notes: run the invoicing, list the documents, show one (PDF, HTML).",
    ),
    "webhooks": Command(
        ("webhooks",),
        "Webhook endpoints: register, list, rotate, enable; deliveries and their attempts,"
        " replayed with the same webhook-id.",
    ),
    "simulate": Command(
        ("simulate",), "Simulations that replay what freehours is built to survive."
    ),
}


class _Option(TyperOption):
    """An option as freehours' help shows it: its metavar after its name (``--port PORT``), and
    nothing after a flag. (Typer shows a Python type there, ``<int>`` or ``<bool>``, and still
    does for an option without a metavar: ``tests/cli/test_help.py`` refuses that.)"""

    def display_type_rich(self, ctx: Any) -> str | None:
        if self.is_flag:
            return None
        return super().display_type_rich(ctx)


class _Argument(TyperArgument):
    """An argument as freehours' help shows it: its metavar alone, ``FILE...`` where it takes
    several, the same in the usage line (required ``FILE``, optional ``[FILE]``), without a
    Python type beside it."""

    def display_type_rich(self, ctx: Any) -> str | None:
        return None if self.metavar else super().display_type_rich(ctx)

    @property
    def display_name_raw(self) -> str:
        name: str = self.metavar or self.name or ""
        return f"{name}..." if self.nargs != 1 else name

    def get_usage_pieces(self, ctx: Any) -> list[str]:
        name = self.display_name_raw
        return [name if self.required else f"[{name}]"]


def _shown(param: Any) -> Any:
    """``param`` (a Typer option or argument, or None) made to show itself as freehours' help
    does: a change of class to the subclass above, which adds no state."""
    if isinstance(param, TyperOption):
        param.__class__ = _Option
    elif isinstance(param, TyperArgument):
        param.__class__ = _Argument
    return param


def _show_params(command: Any) -> Any:
    """``command`` and its sub-commands, each parameter and help option shown by ``_shown``."""
    for param in command.params:
        _shown(param)
    _shown(command.get_help_option(typer.Context(command)))
    for sub_command in getattr(command, "commands", {}).values():
        _show_params(sub_command)
    return command


class LazyCommands(TyperGroup):
    """The top-level group: lists ``COMMANDS`` as they are written there, and builds a command
    (importing its modules) only to run it. (Contexts and commands are typed ``Any``: they are
    those of the click that Typer carries inside it.)"""

    def get_help_option(self, ctx: Any) -> Any:
        return _shown(super().get_help_option(ctx))

    def format_help(self, ctx: Any, formatter: Any) -> None:
        for param in self.params:  # its own options (--version) shown as the commands' are
            _shown(param)
        super().format_help(ctx, formatter)  # Rich's help, printed as it is made
        _print_settings()

    def list_commands(self, ctx: Any) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = COMMANDS.get(cmd_name)
        if command is None:
            return None
        # What a listing needs: the name and its help, no import.
        return TyperCommand(cmd_name, help=command.help, short_help=command.help)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        if args and args[0] in COMMANDS:
            return args[0], load(args[0]), args[1:]
        return super().resolve_command(ctx, args)


def _print_settings() -> None:
    """Every FREEHOURS_* setting, its default and what it is, in a panel like Typer's, from
    ``settings.json`` (which ``python -m freehours.cli.docs`` writes from the settings' models:
    importing them would cost ``--help`` pydantic's start-up)."""
    import json
    from pathlib import Path

    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold cyan", no_wrap=True)
    table.add_column()
    for setting in json.loads(Path(__file__).with_name("settings.json").read_text("utf-8")):
        what = Text.assemble(setting["description"], (f"  [default: {setting['default']}]", "dim"))
        table.add_row(setting["name"], what)
    title = "Settings: environment variables, read once at start-up (docs/cli.md#settings)"
    Console().print(Panel(table, title=title, title_align="left", border_style="dim"))


def load(name: str) -> Any:
    """The command ``name`` as Typer builds it, its modules imported."""
    for module in COMMANDS[name].modules:
        importlib.import_module(f"freehours.cli.{module}")
    group: Any = typer.main.get_group(app)
    return _show_params(group.commands[name])


app = typer.Typer(
    name="freehours",
    help="Metering-to-billing for daily free-energy windows: NEM12 in, quotas settled, bills out.",
    cls=LazyCommands,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(shown: bool) -> None:
    if shown:
        from importlib.metadata import version

        print(f"freehours {version('freehours')}")
        raise typer.Exit


@app.callback()
def _freehours(
    _: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    # A callback makes Typer build a group before any command module has registered one.
    pass


err_console = Console(stderr=True)

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


def quiet_logging(settings: Settings) -> None:
    """Log lines as JSON on stderr, for a one-shot command whose stdout is its answer: at
    FREEHOURS_LOG_LEVEL when it is set, else warnings only (the jobs' canonical lines are noise
    beside a command's progress and summary)."""
    from freehours.observability.logging import configure_logging

    given = "log_level" in settings.model_fields_set
    configure_logging(settings.log_level if given else "warning")


#: The long-running commands' ``--metrics-port`` and ``--metrics-host``.
MetricsPort = Annotated[
    int | None,
    typer.Option("--metrics-port", metavar="PORT", help="serve Prometheus metrics on this port"),
]
MetricsHost = Annotated[
    str, typer.Option("--metrics-host", metavar="ADDRESS", help="address for --metrics-port")
]


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
