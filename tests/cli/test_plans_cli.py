"""``freehours plans list`` and ``freehours plans validate``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from freehours.cli import main


def run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "argv", ["freehours", *args])
    with pytest.raises(SystemExit) as exited:
        main()
    captured = capsys.readouterr()
    code = exited.value.code
    return (code if isinstance(code, int) else 1), captured.out, captured.err


def test_list_shows_the_four_builtin_plans(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(monkeypatch, capsys, "plans", "list")
    assert code == 0
    for plan_id in ("sso-nsw", "sso-seq", "sso-sa", "mps-vic"):
        assert plan_id in out
    assert "12:00-15:00" in out  # South Australia's window


def test_validate_accepts_a_builtin_id(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(monkeypatch, capsys, "plans", "validate", "mps-vic")
    assert code == 0
    assert out.startswith("mps-vic: valid plan 'mps-vic': VIC on Australia/Melbourne;")


def test_validate_names_the_file_and_key_of_a_problem(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "plan.toml"
    path.write_text(
        'id = "x"\nregion = "NSW"\ndaily_supply_charge = "1"\n'
        '[[time_of_use]]\ntype = "FLAT"\nunit_price = "0.3"\n'
        'periods = [{ days = ["ALL"], start = "00:00", end = "25:00" }]\n',
        encoding="utf-8",
    )
    code, out, err = run(monkeypatch, capsys, "plans", "validate", str(path))
    assert (code, out) == (2, "")
    assert f"{path}: time_of_use[0].periods[0].end: '25:00' is not a time of day" in err
