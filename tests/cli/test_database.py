"""Commands that work on an existing database, run without FREEHOURS_DATABASE_URL: they refuse
where the default ``./freehours.db`` is not there, and make nothing; ``db upgrade`` makes it."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import date, datetime
from decimal import Decimal
from importlib.metadata import version
from pathlib import Path

import pytest

from freehours.cli.docs import every_command
from freehours.domain.reads import IntervalDay
from freehours.domain.time import NEM_TIME
from freehours.meterdata.writer import write_nem12
from freehours.settings import get_settings
from freehours.store import schema
from tests.support import run_command

REFUSAL = (
    "error: no database at ./freehours.db (FREEHOURS_DATABASE_URL is not set); set it, or create"
    " one with 'freehours db upgrade'"
)
#: Every command that needs an existing database, with arguments it would run with.
NEEDS_DATABASE = {
    "keys create": ["--scope", "read"],
    "keys list": [],
    "keys revoke": ["k_0123"],
    "plans put": ["sso-nsw"],
    "nem12 import": ["day.csv"],
    "worker": [],
    "serve": ["--port", "1"],
    "invoices run": [],
    "invoices list": [],
    "invoices show": ["INV-00000001"],
    "invoices print-batch": ["a-run"],
    "customers put": ["4103035611", "--plan", "sso-nsw", "--region", "NSW"],
    "customers list": [],
    "customers import": ["customers.csv"],
    "customers forget": ["4103035611"],
    "customers revoke-page": ["4103035611"],
    "offers import": ["offers"],
    "offers list": [],
    "webhooks add": ["https://a.example/h", "--event", "quota.completed"],
    "webhooks list": [],
    "webhooks deliveries": ["ep_0"],
    "webhooks replay": ["1"],
    "webhooks enable": ["ep_0"],
    "webhooks disable": ["ep_0"],
    "webhooks rotate-secret": ["ep_0"],
    "settlements schedule": ["--from", "2026-07-01", "--to", "2026-07-02"],
    "db status": [],
}


@pytest.fixture
def bare_directory(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """The working directory: empty but for a NEM12 file, no FREEHOURS_* set."""
    clean_env.chdir(tmp_path)
    stamp = datetime(2026, 7, 2, 6, 30, tzinfo=NEM_TIME)
    day = IntervalDay(
        "4103035611", "E1", date(2026, 7, 1), 30, (Decimal("0.1"),) * 48, "A" * 48, stamp
    )
    write_nem12([day], tmp_path / "day.csv")
    get_settings.cache_clear()
    yield tmp_path
    get_settings.cache_clear()


def test_the_commands_marked_are_those_that_need_a_database() -> None:
    marked = {
        " ".join(path)
        for path, command in every_command()
        if getattr(command.callback, "needs_database", False)
    }
    assert marked == set(NEEDS_DATABASE)


@pytest.mark.parametrize("command", list(NEEDS_DATABASE))
def test_without_a_database_a_command_refuses_and_makes_none(
    command: str,
    bare_directory: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = run_command(monkeypatch, *command.split(), *NEEDS_DATABASE[command])
    captured = capsys.readouterr()
    assert (code, captured.out) == (1, "")
    assert " ".join(captured.err.split()) == REFUSAL
    assert sorted(path.name for path in bare_directory.iterdir()) == ["day.csv"]


def test_its_help_needs_no_database(
    bare_directory: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_command(monkeypatch, "keys", "create", "--help") == 0
    assert "Make a key" in capsys.readouterr().out


def test_db_upgrade_makes_the_default_database_and_the_commands_then_use_it(
    bare_directory: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_command(monkeypatch, "db", "upgrade") == 0
    said = " ".join(capsys.readouterr().out.split())  # as one line, however the terminal wraps
    assert "database at sqlite:///./freehours.db is at schema revision" in said
    assert (bare_directory / "freehours.db").is_file()
    assert run_command(monkeypatch, "keys", "create", "--scope", "read", "--name", "ops") == 0
    secret = capsys.readouterr().out.strip()
    assert secret
    assert run_command(monkeypatch, "keys", "list") == 0
    assert "ops" in capsys.readouterr().out


def test_a_database_url_that_is_set_is_opened_as_named_and_a_new_one_migrated(
    bare_directory: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FREEHOURS_DATABASE_URL", f"sqlite:///{bare_directory / 'named.db'}")
    get_settings.cache_clear()
    assert run_command(monkeypatch, "plans", "put", "sso-sa") == 0
    assert "stored plan 'sso-sa'" in capsys.readouterr().out
    assert (bare_directory / "named.db").is_file()
    assert not (bare_directory / "freehours.db").exists()


def test_db_upgrade_says_what_it_applied_and_db_status_what_is_pending(
    bare_directory: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The first upgrade names each migration it applied, the second that there was nothing to
    apply; ``db status`` exits 0 at the newest revision and 1, naming what is pending, behind."""
    newest = schema.migrations()[-1]
    assert run_command(monkeypatch, "db", "upgrade") == 0
    said = " ".join(capsys.readouterr().out.split())
    assert said.startswith(f"applied {', '.join(schema.migrations())}: database at")
    assert run_command(monkeypatch, "db", "upgrade") == 0
    said = " ".join(capsys.readouterr().out.split())
    assert said.endswith(f"is at schema revision {newest[:4]} already: nothing to apply")
    assert run_command(monkeypatch, "db", "status") == 0
    assert "up to date" in capsys.readouterr().out
    with sqlite3.connect(bare_directory / "freehours.db") as conn:
        conn.execute("UPDATE alembic_version SET version_num = ?", (schema.migrations()[-2][:4],))
    assert run_command(monkeypatch, "db", "status") == 1
    said = " ".join(capsys.readouterr().out.split())
    assert f"pending: {newest} (run `freehours db upgrade`)" in said


def test_version_prints_the_packages_version(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_command(monkeypatch, "--version") == 0
    assert capsys.readouterr().out == f"freehours {version('freehours')}\n"
