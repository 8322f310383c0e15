"""``freehours offers import`` (CDR plans and plan files, a folder of them, all or nothing) and
``freehours offers list``."""

from __future__ import annotations

import json
import shutil
from datetime import date
from pathlib import Path

import pytest

from freehours.meterdata.writer import write_nem12
from freehours.operations import offer_files
from freehours.store.database import Store
from tests.domain.rating_cases import flat, nem_day
from tests.support import run_flat

PLANS = Path(__file__).resolve().parent.parent / "data" / "cdr" / "plans"


def test_a_folder_of_cdr_plans_and_plan_files_is_imported_then_versioned_and_listed(
    database: Store,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    folder = tmp_path / "offers"
    folder.mkdir()
    for name in ("controlled-load.json", "seasonal.json", "single-rate.json"):
        shutil.copy(PLANS / name, folder / name)
    plan_file = tmp_path / "window.toml"
    shutil.copy(PLANS / "time-of-use-free-window.toml", plan_file)
    args = ("offers", "import", str(folder), str(plan_file), "--from", "2026-07-01")
    code, out, err = run_flat(monkeypatch, capsys, *args)
    assert code == 0, err
    assert len(out.splitlines()) == 4
    assert "EXA-VIC-CL: version 1 (new)" in out
    assert "EXA-NSW-SSO: version 1 (new)" in out
    code, out, _ = run_flat(monkeypatch, capsys, *args)
    assert out.count("(unchanged)") == 4
    offers = json.loads(run_flat(monkeypatch, capsys, "offers", "list")[1])
    assert {o["offer_id"]: (o["source"], o["region"], o["effective_from"]) for o in offers} == {
        "EXA-NSW-SSO": ("plan", "NSW", "2026-07-01"),
        "EXA-SA-SEASONS": ("cdr", "SA", None),
        "EXA-SEQ-SR": ("cdr", "SEQ", None),
        "EXA-VIC-CL": ("cdr", "VIC", None),
    }
    assert [o["controlled_load"] for o in offers if o["offer_id"] == "EXA-VIC-CL"] == [True]
    code, out, _ = run_flat(monkeypatch, capsys, "offers", "list", "--format", "table", width=80)
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "4 offers" in out
    only = json.loads(run_flat(monkeypatch, capsys, "offers", "list", "--region", "SA")[1])
    assert [o["offer_id"] for o in only] == ["EXA-SA-SEASONS"]


def test_a_bad_file_stores_nothing_and_is_named(
    database: Store,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    good = tmp_path / "good.json"
    shutil.copy(PLANS / "single-rate.json", good)
    business = json.loads((PLANS / "seasonal.json").read_text())
    business["customerType"] = "BUSINESS"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(business))
    code, out, err = run_flat(monkeypatch, capsys, "offers", "import", str(good), str(bad))
    assert (code, out) == (2, "")
    assert f"error: {bad}: customerType" in err
    twice = tmp_path / "twice.json"
    shutil.copy(PLANS / "single-rate.json", twice)
    code, _, err = run_flat(monkeypatch, capsys, "offers", "import", str(good), str(twice))
    assert code == 2
    assert f"offer 'EXA-SEQ-SR' again (first in {good})" in err
    code, _, err = run_flat(monkeypatch, capsys, "offers", "import", str(good), "--region", "MARS")
    assert (code, err) == (2, "error: --region: 'MARS' is NSW, SEQ, SA or VIC")
    with database.read() as unit:
        assert unit.catalog.current_offers() == []


def test_compare_rates_a_file_under_the_stored_offers(
    database: Store,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    nem12 = tmp_path / "meter.csv"
    write_nem12([nem_day(date(2026, 7, d), flat("0.5")) for d in (1, 2, 3)], nem12)
    code, _, err = run_flat(monkeypatch, capsys, "compare", "--nem12", str(nem12), "--offers")
    assert (code, err) == (
        2,
        "error: --offers: no offers stored; 'freehours offers import' stores them",
    )
    for name in ("single-rate.json", "seasonal.json"):
        assert run_flat(monkeypatch, capsys, "offers", "import", str(PLANS / name))[0] == 0
    code, out, err = run_flat(
        monkeypatch, capsys, "compare", "--nem12", str(nem12), "--offers", "--plan", "sso-nsw"
    )
    assert code == 0, err
    (meter,) = json.loads(out)
    assert sorted(row["plan_id"] for row in meter["plans"]) == [
        "EXA-SA-SEASONS",
        "EXA-SEQ-SR",
        "sso-nsw",
    ]


def test_an_import_past_its_bounds_is_refused(
    database: Store,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name in ("single-rate.json", "seasonal.json"):
        shutil.copy(PLANS / name, tmp_path / name)
    monkeypatch.setattr(offer_files, "MAX_IMPORT_BYTES", 2000)
    code, _, err = run_flat(monkeypatch, capsys, "offers", "import", str(tmp_path))
    assert code == 2
    assert "the files so far are over 2000 bytes, an import's most" in err
    monkeypatch.setattr(offer_files, "MAX_OFFERS", 1)
    code, _, err = run_flat(monkeypatch, capsys, "offers", "import", str(tmp_path))
    assert code == 2
    assert "2 files, at most 1 in one import" in err
    with database.read() as unit:
        assert unit.catalog.current_offers() == []
