"""What is generated from the code (``python -m freehours.cli.docs``) is current: the settings
``freehours --help`` lists, ``docs/cli.md``, ``docs/plan.schema.json`` and the generated blocks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from freehours.agent.settings import AgentSettings
from freehours.cli import app, docs
from freehours.cli.docs import every_command
from freehours.settings import Settings


def test_every_generated_file_is_current() -> None:
    assert docs.stale() == [], f"stale: run {docs.REGENERATE}"


def test_the_check_names_a_stale_file_and_the_command_that_makes_it_anew(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for relative in docs.generated():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(docs.ROOT / relative, tmp_path / relative)
    monkeypatch.setattr(docs, "ROOT", tmp_path)
    assert docs.main(["--check"]) == 0
    cli_md = tmp_path / docs.CLI_MD
    cli_md.write_text(cli_md.read_text().replace("--meters N", "--meters COUNT"))
    assert docs.main(["--check"]) == 1
    assert capsys.readouterr().err == "docs/cli.md is stale: run python -m freehours.cli.docs\n"
    assert docs.main([]) == 0
    assert docs.stale() == []


def test_freehours_settings_lists_every_setting_with_its_default() -> None:
    result = CliRunner().invoke(
        app, ["settings", "--format", "json"], env={"FREEHOURS_REDIS_URL": "redis://x"}
    )
    assert result.exit_code == 0, result.output
    listed = {setting["name"]: setting for setting in json.loads(result.output)}
    for prefix, model in (("FREEHOURS_", Settings), ("FREEHOURS_AGENT_", AgentSettings)):
        for name, field in model.model_fields.items():
            setting = listed.get(f"{prefix}{name.upper()}")
            assert setting is not None, f"{prefix}{name.upper()} is not in freehours settings"
            assert setting["default"] == docs.default_text(field.default), setting
            assert " ".join((field.description or "").split()[:4]) in setting["description"]
    assert "FREEHOURS_API_KEY" in listed  # freehours agent --api-key
    assert {name for name, setting in listed.items() if setting["set"]} == {"FREEHOURS_REDIS_URL"}
    assert "redis://x" not in result.output  # whether it is set, never its value
    table = CliRunner().invoke(app, ["settings", "--format", "table"], env={"COLUMNS": "80"})
    assert "FREEHOURS_DATABASE_URL\n    SQLAlchemy URL of the database" in table.output
    assert "    default: sqlite:///./freehours.db" in table.output


def test_the_root_help_is_the_commands_and_where_the_settings_are() -> None:
    result = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0
    assert "FREEHOURS_REDIS_URL" not in result.output
    assert "'freehours settings' lists them" in " ".join(result.output.split())
    assert len(result.output.splitlines()) < 60


def test_the_page_has_every_command_and_every_option() -> None:
    page = (docs.ROOT / docs.CLI_MD).read_text(encoding="utf-8")
    for path, command in every_command():
        assert f"\n### freehours {' '.join(path)}\n" in page
        for param in command.params:
            assert f"| `{param.opts[0] if param.opts[0].startswith('-') else param.metavar}" in page
    assert docs.default_text(5.0) == "5"
    assert docs.default_text(None) == "unset"
    assert docs.default_text(0.05) == "0.05"
