"""The top-level command line: every command listed without importing it, and run with what
its own module registers."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from freehours.cli import COMMANDS, load
from freehours.domain.reads import IntervalDay
from freehours.domain.time import NEM_TIME
from freehours.meterdata.writer import write_nem12
from tests.servers import FREEHOURS


def one_day() -> IntervalDay:
    stamp = datetime(2026, 7, 2, 6, 30, tzinfo=NEM_TIME)
    return IntervalDay(
        "4103035611", "E1", date(2026, 7, 1), 30, (Decimal("0.100"),) * 48, "A" * 48, stamp
    )


@pytest.mark.parametrize("name", list(COMMANDS))
def test_each_listed_help_is_the_commands_own(name: str) -> None:
    command = load(name)
    own = " ".join((command.help or "").split())
    assert own.startswith(COMMANDS[name].help), (name, own)


def imported_after(args: list[str], modules: list[str]) -> list[str]:
    """Which of ``modules`` a fresh interpreter has imported after running ``freehours ARGS``
    (through Typer's test runner, so that the command's exit does not end the check)."""
    code = (
        "import json, sys\n"
        "from typer.testing import CliRunner\n"
        "from freehours.cli import app\n"
        f"result = CliRunner().invoke(app, {args!r})\n"
        "assert result.exit_code == 0, result.output\n"
        f"print(json.dumps(sorted(name for name in {modules!r} if name in sys.modules)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    imported: list[str] = json.loads(result.stdout)
    return imported


def test_the_listing_imports_no_command() -> None:
    """``freehours --help`` (the package and its listing) loads none of the commands' modules,
    nor the libraries they need."""
    heavy = ["sqlalchemy", "fastapi", "httpx", "redis", "pydantic", "freehours.cli.agent"]
    heavy += ["freehours.cli.serve", "freehours.api", "freehours.store"]
    heavy += ["freehours.documents", "reportlab"]
    assert imported_after(["--help"], heavy) == []


def test_the_document_model_and_html_do_not_load_the_pdf_library() -> None:
    """A command that builds documents or HTML pays nothing for ReportLab, which only
    ``freehours.documents.pdf`` imports."""
    code = (
        "import json, sys\n"
        "import freehours.documents.model, freehours.documents.html\n"
        "import freehours.documents.from_bill, freehours.documents.examples\n"
        "print(json.dumps(sorted(n for n in sys.modules if n.split('.')[0] == 'reportlab')))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert json.loads(result.stdout) == []


def test_nem12_inspect_imports_no_database_nor_service(tmp_path: Path) -> None:
    """``nem12 inspect`` reads a file: the ``nem12`` group's other command (``import``) is
    loaded with it, but not the database, the runtime or the services behind that one, nor
    pydantic (``tests/cli/test_coercion.py``)."""
    path = tmp_path / "one.csv"
    write_nem12([one_day()], path)
    heavy = ["sqlalchemy", "fastapi", "redis", "pydantic_settings", "structlog", "opentelemetry"]
    heavy += ["rich.progress", "freehours.operations.runtime", "freehours.store", "pydantic"]
    heavy += ["rich"]  # its table and totals are printed without Rich into a pipe
    assert imported_after(["nem12", "inspect", str(path)], heavy) == []


def test_version_imports_nothing_of_freehours_but_the_command_line() -> None:
    heavy = ["sqlalchemy", "freehours.store", "freehours.settings", "rich.progress", "pydantic"]
    assert imported_after(["--version"], heavy) == []


def test_plans_validate_imports_no_database() -> None:
    """``plans validate`` checks a plan: ``plans put``, beside it, opens the database only
    when it runs."""
    heavy = ["sqlalchemy", "freehours.store", "freehours.settings"]
    assert imported_after(["plans", "validate", "sso-nsw"], heavy) == []


def test_the_invoices_help_imports_no_database_nor_renderer() -> None:
    """``invoices`` lists its commands without the database, the runtime or the PDF library
    that ``run`` and ``show --pdf`` load when they run."""
    heavy = ["sqlalchemy", "freehours.store", "freehours.operations.runtime", "freehours.settings"]
    heavy += ["freehours.documents", "reportlab", "rich.progress"]
    assert imported_after(["invoices", "--help"], heavy) == []
    assert imported_after(["customers", "put", "--help"], heavy) == []


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


@pytest.mark.parametrize(
    ("command", "given", "why"),
    [
        (
            ["bill", "any.csv", "--plan", "sso-nsw", "--from"],
            "2004-13-01",
            "month must be in 1..12",
        ),
        (["invoices", "list", "--to"], "2026-02-30", "day is out of range for month"),
        (["settlements", "schedule", "--to", "2026-07-01", "--from"], "1/7/2026", None),
    ],
)
def test_a_day_that_is_not_one_is_refused_plainly_naming_the_option(
    command: list[str], given: str, why: str | None
) -> None:
    """Every day option reads ``YYYY-MM-DD`` and says what is wrong with anything else, before
    any file or database is opened: exit 2."""
    result = subprocess.run(
        [FREEHOURS, *command, given], capture_output=True, text=True, check=False
    )
    said = " ".join(result.stderr.replace("│", " ").split())
    assert result.returncode == 2, result.stderr
    option = command[-1]
    reason = f" ({why})" if why else ""
    assert (
        f"Invalid value for '{option}': '{given}' is not a day{reason}; write it YYYY-MM-DD,"
        " e.g. 2026-07-01" in said
    )
    assert "Value error" not in said
