"""The root command, ``freehours``: the Typer app every command registers on, the table of
commands (``COMMANDS``), and the group that lists them without importing them and imports one
only to run it (``LazyCommands``), its help shown as freehours shows every help.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer
from typer._coercion import RuntimeParam, TypeDescriptor, build_runtime_param
from typer._param_types import coerce_cli_choice, coerce_cli_path
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption


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
    "compare": Command(
        ("compare",),
        "Rate a NEM12 file under several plans, cheapest first: each plan's total and cost per"
        " year, its free energy and value, and the energy its free window still had room for.",
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
        ("customers",),
        "Customers: the plan an NMI is on, its region, billing cycle and contact;"
        " put, import, list, forget, revoke-page.",
    ),
    "offers": Command(
        ("offers",),
        "The retailer's offers: import its published CDR plans or plan files, list them.",
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
    "settings": Command(
        ("environment",),
        "Every FREEHOURS_* setting: its default, what it is, and whether this environment sets"
        " it (never its value). Read once at start-up by each command; docs/cli.md#settings.",
    ),
}


@dataclass(frozen=True)
class _Plain(RuntimeParam):
    """A value of one of the plainest types (text, a path, a choice), coerced as Typer's own
    coercion does but without it: Typer 0.29 coerces every value through a pydantic
    ``TypeAdapter``, which costs each command pydantic's import and a schema per parameter
    (about 55 ms of every start-up) before it does any work. Anything else, and any value this
    cannot take, goes to Typer's own coercion, so a refusal reads as Typer words it."""

    descriptor: TypeDescriptor
    convert: Callable[[Any, Any, Any], Any]

    def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
        try:
            return self.convert(value, param, ctx)
        except Exception:  # noqa: BLE001 - Typer's coercion says what is wrong, in its words
            typer_s: Any = build_runtime_param(self.descriptor)
            return typer_s._coerce_value(value, param, ctx)


def _plain(descriptor: TypeDescriptor) -> RuntimeParam | None:
    """A ``_Plain`` for ``descriptor``'s parameter, or None where Typer's own coercion must do."""
    annotation, info = descriptor.annotation, descriptor.parameter_info
    if descriptor.file_annotation is not None or info.parser is not None:
        return None
    convert: Callable[[Any, Any, Any], Any]
    if annotation is str:

        def convert(value: Any, param: Any, ctx: Any) -> Any:
            if not isinstance(value, str):
                raise TypeError(value)
            return value

    elif annotation is bool:  # a flag: a bool already, or no value (None, coerced by none)

        def convert(value: Any, param: Any, ctx: Any) -> Any:
            if not isinstance(value, bool):
                raise TypeError(value)
            return value

    elif annotation is int and not descriptor.is_ranged:

        def convert(value: Any, param: Any, ctx: Any) -> Any:
            if isinstance(value, int) and not isinstance(value, bool):
                return value
            digits = value.removeprefix("-") if isinstance(value, str) else ""
            if not (digits.isascii() and digits.isdigit()):
                raise ValueError(value)  # " 7", "1_000", "+7", "7.0": as Typer takes or words it
            return int(value)

    elif isinstance(annotation, type) and issubclass(annotation, Path) and info.path_type is None:

        def convert(value: Any, param: Any, ctx: Any) -> Any:
            if not isinstance(value, str | Path):
                raise TypeError(value)
            path = value if isinstance(value, annotation) else annotation(value)
            return coerce_cli_path(path, info, path_type=annotation, param=param, ctx=ctx)

    elif isinstance(annotation, type) and issubclass(annotation, Enum):
        choices = list(annotation)

        def convert(value: Any, param: Any, ctx: Any) -> Any:
            return coerce_cli_choice(
                value, choices=choices, case_sensitive=info.case_sensitive, ctx=ctx
            )

    else:
        return None
    return _Plain(info, annotation, descriptor, convert)


def _runtime_param(param: Any) -> RuntimeParam:
    """A parameter's coercion: ``_Plain`` where it can be (see there), else Typer's own. (The
    ``get_runtime_param`` of the parameter classes below.)"""
    if param._runtime_param is None:
        descriptor = param.type_descriptor
        param._runtime_param = _plain(descriptor) or build_runtime_param(descriptor)
    coercion: RuntimeParam = param._runtime_param
    return coercion


class _Option(TyperOption):
    """An option as freehours' help shows it: its metavar after its name (``--port PORT``), and
    nothing after a flag. (Typer shows a Python type there, ``<int>`` or ``<bool>``, and still
    does for an option without a metavar: ``tests/cli/test_help.py`` refuses that.)"""

    get_runtime_param = _runtime_param

    def display_type_rich(self, ctx: Any) -> str | None:
        if self.is_flag:
            return None
        return super().display_type_rich(ctx)


class _Argument(TyperArgument):
    """An argument as freehours' help shows it: its metavar alone, ``FILE...`` where it takes
    several, the same in the usage line (required ``FILE``, optional ``[FILE]``), without a
    Python type beside it."""

    get_runtime_param = _runtime_param

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


def load(name: str) -> Any:
    """The command ``name`` as Typer builds it, its modules imported."""
    return load_every([name])[name]


def load_every(names: Iterable[str] = COMMANDS) -> dict[str, Any]:
    """The commands ``names`` (default: all), their modules imported, as Typer builds them: the
    group built once (a tenth of a second), not once a command."""
    wanted = list(names)
    for name in wanted:
        for module in COMMANDS[name].modules:
            importlib.import_module(f"freehours.cli.{module}")
    group: Any = typer.main.get_group(app)
    return {name: _show_params(group.commands[name]) for name in wanted}


app = typer.Typer(
    name="freehours",
    help="Metering-to-billing for daily free-energy windows: NEM12 in, quotas settled, bills out.",
    cls=LazyCommands,
    epilog="Settings are FREEHOURS_* environment variables: 'freehours settings' lists them."
    " Each command's --help says what it does; docs/cli.md has them all.",
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
