"""``freehours plans list``, ``plans validate`` and ``plans put``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from freehours.plans import builtin_document
from freehours.store.database import Store
from tests.support import run_captured

run = run_captured


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


def stored_plan(url: str, plan_id: str) -> dict[str, Any] | None:
    with Store.open(url) as store, store.read() as unit:
        stored = unit.catalog.get_plan(plan_id)
    return None if stored is None else stored.document


def test_put_stores_a_builtin_plan_under_its_id(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], database_url: str
) -> None:
    code, out, _ = run(monkeypatch, capsys, "plans", "put", "sso-seq")
    assert (code, out) == (0, "sso-seq: stored plan 'sso-seq'\n")
    assert stored_plan(database_url, "sso-seq") == builtin_document("sso-seq")


def test_put_stores_a_plan_file_and_replaces_the_plan_of_its_id(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    database_url: str,
    tmp_path: Path,
) -> None:
    path = tmp_path / "own.toml"
    path.write_text(
        'id = "sso-nsw"\nregion = "NSW"\ndaily_supply_charge = "1.23"\n'
        '[[time_of_use]]\ntype = "FLAT"\nunit_price = "0.3"\n'
        'periods = [{ days = ["ALL"], start = "00:00", end = "24:00" }]\n',
        encoding="utf-8",
    )
    assert run(monkeypatch, capsys, "plans", "put", "sso-nsw")[0] == 0
    code, out, _ = run(monkeypatch, capsys, "plans", "put", str(path))
    assert (code, out) == (0, f"{path}: stored plan 'sso-nsw'\n")
    stored = stored_plan(database_url, "sso-nsw")
    assert stored is not None
    assert stored["daily_supply_charge"] == "1.23"


def test_put_of_a_plan_with_problems_stores_nothing(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    database_url: str,
    tmp_path: Path,
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('id = "bad"\nregion = "NSW"\n', encoding="utf-8")
    code, out, err = run(monkeypatch, capsys, "plans", "put", str(path))
    assert (code, out) == (2, "")
    assert f"{path}: daily_supply_charge: is required" in err
    assert stored_plan(database_url, "bad") is None


def test_put_of_a_cdr_plan_points_to_import_cdr(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    database_url: str,
) -> None:
    """A CDR plan (JSON) given to ``plans put`` is refused, saying where it goes instead."""
    path = Path(__file__).parents[1] / "data" / "cdr" / "plans" / "controlled-load.json"
    code, out, err = run(monkeypatch, capsys, "plans", "put", str(path))
    said = " ".join(err.split())
    assert (code, out) == (2, "")
    assert f"{path}: not valid TOML:" in said
    assert (
        "it looks like JSON: a CDR energy plan is read by `freehours plans import-cdr FILE`" in said
    )
