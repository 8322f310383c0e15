"""The top-level command line: every command listed without importing it, and run with what
its own module registers."""

from __future__ import annotations

import subprocess
import sys

import pytest

from freehours.cli import COMMANDS, load
from tests.servers import FREEHOURS


@pytest.mark.parametrize("name", list(COMMANDS))
def test_each_listed_help_is_the_commands_own(name: str) -> None:
    command = load(name)
    own = " ".join((command.help or "").split())
    assert own.startswith(COMMANDS[name].help), (name, own)


def test_the_listing_imports_no_command() -> None:
    """``freehours --help`` (the package and its listing) loads none of the commands' modules,
    nor the libraries they need."""
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from freehours.cli import app\n"
        "result = CliRunner().invoke(app, ['--help'])\n"
        "assert result.exit_code == 0, result.output\n"
        "assert 'simulate' in result.output\n"
        "heavy = ['sqlalchemy', 'fastapi', 'httpx', 'redis', 'pydantic', 'freehours.cli.agent',"
        " 'freehours.cli.serve', 'freehours.api', 'freehours.store']\n"
        "print(sorted(name for name in heavy if name in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def test_a_command_runs_through_the_lazy_group() -> None:
    result = subprocess.run(
        [FREEHOURS, "plans", "list"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "sso-nsw" in result.stdout


def test_an_unknown_command_is_bad_usage() -> None:
    result = subprocess.run([FREEHOURS, "settle"], capture_output=True, text=True, check=False)
    assert result.returncode == 2
    assert "No such command 'settle'" in result.stderr
