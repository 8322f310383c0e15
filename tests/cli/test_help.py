"""``--help`` of every command and sub-command: each value an option or argument takes is shown
by a metavar that says what to write (``FILE...``, ``DIR``, ``N``, ``URL``), a flag by nothing,
never by a Python type (``<list[Path]>``, ``<bool>``, ``<int>``)."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from freehours.cli import COMMANDS, app
from freehours.cli.docs import every_command

#: What Typer writes where a parameter has no metavar: its type in angle brackets.
TYPE_PLACEHOLDER = re.compile(r"<[A-Za-z][^<>\n]*>")
#: What Rich's markup takes for a style tag, and so does not print.
RICH_TAG = re.compile(r"\[[a-z#/@]")


def test_no_help_shows_a_type_placeholder() -> None:
    runner = CliRunner()
    shown = {}
    for path, _ in [([], None), *every_command()]:
        result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "200"})
        assert result.exit_code == 0, (path, result.output)
        shown[" ".join(["freehours", *path])] = TYPE_PLACEHOLDER.findall(result.output)
    assert {command: found for command, found in shown.items() if found} == {}
    assert len(shown) == 1 + len(list(every_command())) > len(COMMANDS)


def test_every_value_has_a_metavar_and_no_flag_has_one() -> None:
    """The same, said per parameter: the metavar is written at the parameter, none is derived;
    and no help holds what Rich would read as markup and drop (``[default: ...]``)."""
    wrong = []
    for path, command in every_command():
        for param in command.params:
            where = f"freehours {' '.join(path)} {param.opts[0]}"
            flag = getattr(param, "is_flag", False)
            if not flag and not param.metavar:
                wrong.append(f"{where}: no metavar")
            if flag and param.metavar:
                wrong.append(f"{where}: a flag with a metavar")
            if RICH_TAG.search(param.help or ""):
                wrong.append(f"{where}: a [tag] in its help")
    assert wrong == []


def test_the_help_shows_the_metavars_and_none_after_a_flag() -> None:
    result = CliRunner().invoke(app, ["nem12", "import", "--help"], env={"COLUMNS": "200"})
    assert "Usage: freehours nem12 import [OPTIONS] FILE..." in result.output
    assert re.search(r"\*\s+FILE\.\.\.\s+NEM12 files", result.output), result.output
    result = CliRunner().invoke(app, ["simulate", "incident", "--help"], env={"COLUMNS": "200"})
    assert re.search(r"--meters\s+N \[x>=3\]\s+Smart meters", result.output), result.output
    assert re.search(r"--json\s+Print one JSON object", result.output), result.output
    assert re.search(r"--out\s+DIR\s+Also write", result.output), result.output
