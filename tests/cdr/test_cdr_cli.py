"""``freehours plans import-cdr`` and ``plans export-cdr``."""

from __future__ import annotations

import io
import json
import tomllib
from pathlib import Path

import pytest

from freehours.settings import get_settings
from tests.cdr.support import CDR, schema_problems
from tests.support import run_captured

PLANS = CDR / "plans"


run = run_captured


def test_import_prints_a_plan_file_that_validates_and_bills(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = run(
        monkeypatch, capsys, "plans", "import-cdr", str(PLANS / "time-of-use-free-window.json")
    )
    assert code == 0
    assert tomllib.loads(out)["free_window"] == {"start": "11:00", "end": "14:00", "cap_kwh": "24"}
    plan_file = tmp_path / "plan.toml"
    plan_file.write_text(out)
    code, out, _ = run(monkeypatch, capsys, "plans", "validate", str(plan_file))
    assert code == 0
    assert "free window 11:00-14:00 up to 24 kWh a day" in out
    nem12 = CDR.parent / "nem12-examples" / "unzipped" / "Example_NEM12_month_solar.csv"
    code, out, _ = run(
        monkeypatch, capsys, "bill", "--plan", str(plan_file), "--nem12", str(nem12),
        "--format", "json",
    )  # fmt: skip
    assert code == 0
    bill = json.loads(out)
    assert bill["plan"] == "EXA-NSW-SSO"
    assert {line["code"] for line in bill["lines"]} >= {"PEAK", "SHOULDER", "FREE_ENERGY"}


def test_validate_shows_seasons_steps_the_controlled_load_and_what_is_kept(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    shown = []
    for name in ("seasonal", "controlled-load"):
        _, out, _ = run(monkeypatch, capsys, "plans", "import-cdr", str(PLANS / f"{name}.json"))
        plan_file = tmp_path / f"{name}.toml"
        plan_file.write_text(out)
        code, out, _ = run(monkeypatch, capsys, "plans", "validate", str(plan_file))
        assert code == 0
        shown.append(out)
    assert "PEAK 0.5500 in 12-01 to 02-29" in shown[0]
    assert "PEAK_2 0.4500 in 03-01 to 11-30" in shown[0]
    assert "controlled load on E2 at 0.1800/kWh + 0.1000/day" in shown[1]
    assert "  information: incentives[0]: Welcome pack (GIFT), not billed" in shown[1]


def test_import_reads_stdin_and_takes_the_region_and_id(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    document = json.loads((PLANS / "single-rate.json").read_text())
    del document["geography"]
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(json.dumps(document).encode())))
    code, out, err = run(
        monkeypatch, capsys, "plans", "import-cdr", "-", "--region", "SA", "--id", "mine"
    )
    assert code == 0, err
    assert (tomllib.loads(out)["region"], tomllib.loads(out)["id"]) == ("SA", "mine")


def test_import_names_the_json_path_of_what_cannot_be_rated(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    document = json.loads((PLANS / "single-rate.json").read_text())
    document["electricityContract"]["discounts"] = [{"displayName": "10% off"}]
    path = tmp_path / "discounted.json"
    path.write_text(json.dumps(document))
    code, out, err = run(monkeypatch, capsys, "plans", "import-cdr", str(path))
    assert (code, out) == (2, "")
    assert f"{path}: electricityContract.discounts[0]: discounts change the bill" in err


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"{" * 10, "not JSON"),
        (b" " * ((1 << 20) + 1), "over 1048576 bytes"),
        (b"[]", "expected an object, got an array"),
    ],
)
def test_import_refuses_what_is_not_a_plan(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    content: bytes,
    why: str,
) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    code, _, err = run(monkeypatch, capsys, "plans", "import-cdr", str(path))
    assert code == 2
    assert why in err


def test_import_refuses_a_region_it_does_not_know(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(
        monkeypatch, capsys, "plans", "import-cdr", str(PLANS / "seasonal.json"), "--region", "WA"
    )
    assert code == 2
    assert "--region 'WA': expected NSW, SEQ, SA or VIC" in err


def test_export_of_a_builtin_plan_is_a_valid_cdr_plan(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(monkeypatch, capsys, "plans", "export-cdr", "sso-sa", "--brand", "acme")
    assert code == 0
    document = json.loads(out)
    assert schema_problems(document) == []
    assert (document["planId"], document["brand"]) == ("sso-sa", "acme")


def test_export_of_a_stored_plan_and_of_one_that_is_not(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    database_url: str,
) -> None:
    code, out, _ = run(monkeypatch, capsys, "plans", "import-cdr", str(PLANS / "seasonal.json"))
    plan_file = tmp_path / "seasonal.toml"
    plan_file.write_text(out)
    assert run(monkeypatch, capsys, "plans", "put", str(plan_file))[0] == 0
    code, out, _ = run(monkeypatch, capsys, "plans", "export-cdr", "EXA-SA-SEASONS")
    assert code == 0
    document = json.loads(out)
    assert schema_problems(document) == []
    periods = document["electricityContract"]["tariffPeriod"]
    assert [period["startDate"] for period in periods] == ["12-01", "03-01"]
    code, out, err = run(monkeypatch, capsys, "plans", "export-cdr", "nothing-here")
    assert (code, out) == (2, "")
    assert "nothing-here: no such plan (not a plan file, not a built-in plan" in err
    assert "nor stored in the database)" in err
    code, _, err = run(monkeypatch, capsys, "plans", "export-cdr", "EXA-SA-SEASON")
    assert "nor stored in the database); did you mean" not in err  # no built-in id is close


def test_export_of_a_misspelt_plan_without_a_database_says_no_such_plan(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.delenv("FREEHOURS_DATABASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)  # no ./freehours.db
    get_settings.cache_clear()
    code, out, err = run(monkeypatch, capsys, "plans", "export-cdr", "sso-nws")
    get_settings.cache_clear()
    assert (code, out) == (2, "")
    assert " ".join(err.split()) == (
        "error: sso-nws: no such plan (not a plan file, not a built-in plan (sso-nsw, sso-seq,"
        " sso-sa, mps-vic), and no database to look in: FREEHOURS_DATABASE_URL is not set and"
        " ./freehours.db does not exist); did you mean sso-nsw?"
    )
    assert not (tmp_path / "freehours.db").exists()
