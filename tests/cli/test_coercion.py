"""The command line's own coercion of plain values (``freehours.cli.root._Plain``) gives what
Typer's pydantic coercion gives, value for value and refusal for refusal, without importing
pydantic: every command starts about 55 ms sooner."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Annotated, Any

import typer
from typer._coercion import build_runtime_param

from freehours.cli.root import _plain
from tests.cli.test_commands import imported_after


class Colour(enum.Enum):
    RED = "red"
    GREEN = "green"


def _command() -> Any:
    app = typer.Typer()

    @app.command()
    def run(  # the parameter kinds freehours' commands take
        file: Annotated[Path, typer.Argument(exists=True, dir_okay=False)],
        out: Annotated[Path, typer.Option()] = Path("out"),
        name: Annotated[str, typer.Option()] = "",
        count: Annotated[int, typer.Option()] = 1,
        colour: Annotated[Colour, typer.Option(case_sensitive=False)] = Colour.RED,
        flag: Annotated[bool, typer.Option()] = False,
    ) -> None:
        """A command."""

    @app.command()
    def other() -> None:
        """Another, so that ``run`` is a sub-command."""

    return typer.main.get_command(app).commands["run"]  # type: ignore[attr-defined]


def outcome(coercion: Any, value: Any, param: Any, ctx: Any) -> tuple[str, Any]:
    try:
        return "value", coercion.coerce(value, param=param, ctx=ctx)
    except typer.BadParameter as refused:
        return "refused", refused.format_message()


def test_plain_values_are_coerced_as_typer_coerces_them(tmp_path: Path) -> None:
    file = tmp_path / "a.csv"
    file.write_text("x")
    values: dict[str, list[Any]] = {
        "file": [str(file), str(tmp_path), str(tmp_path / "missing.csv"), file],
        "out": ["-", "", str(tmp_path / "new" / "x"), None],
        "name": ["", "x y", "é", None],
        "count": ["7", "-7", "0", "007", " 7", "+7", "1_000", "7.0", "x", "", "\u0667", 7, None],
        "colour": ["red", "GREEN", "Red", "blue", "", Colour.RED, None],
        "flag": [True, False, None],
    }
    command = _command()
    ctx = typer.Context(command)
    for param in command.params:
        ours = _plain(param.type_descriptor)
        assert ours is not None, param.name  # each kind is one of ours
        theirs = build_runtime_param(param.type_descriptor)
        for value in values[param.name]:
            assert outcome(ours, value, param, ctx) == outcome(theirs, value, param, ctx), (
                param.name,
                value,
            )


def test_other_kinds_are_left_to_typer() -> None:
    app = typer.Typer()

    @app.command()
    def run(
        ranged: Annotated[int, typer.Option(min=1)] = 1,
        ratio: Annotated[float, typer.Option()] = 1.0,
        many: Annotated[list[str] | None, typer.Option()] = None,
    ) -> None:
        """A command."""

    command: Any = typer.main.get_command(app)
    kinds = {param.name: _plain(param.type_descriptor) for param in command.params}
    assert [kinds["ranged"], kinds["ratio"], kinds["many"]] == [None, None, None]


def test_a_command_of_plain_options_does_not_import_pydantic() -> None:
    """(``nem12 inspect FILE`` too: ``tests/cli/test_commands.py``.)"""
    assert imported_after(["nem12", "inspect", "--help"], ["pydantic", "pydantic_core"]) == []
