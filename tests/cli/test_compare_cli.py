"""``freehours compare``: plans ranked cheapest first, each with the figures its own bill has,
to the cent (a property test over random files and plans against ``freehours bill``), and its
cost per year and unused window."""

from __future__ import annotations

import json
import tempfile
from datetime import date
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from freehours.cli import app
from freehours.domain.reads import IntervalDay
from freehours.meterdata.writer import write_nem12
from freehours.plans.writer import plan_toml
from tests.domain.rating_cases import flat, nem_day
from tests.domain.test_rating_properties import meter_days, plan_documents
from tests.support import run_flat

runner = CliRunner()


def invoked(*args: str) -> tuple[int, Any]:
    result = runner.invoke(app, list(args))
    return result.exit_code, json.loads(result.stdout) if result.exit_code == 0 else None


@settings(max_examples=25, deadline=None)
@given(documents=st.lists(plan_documents(), min_size=1, max_size=3), days=meter_days())
def test_every_figure_is_the_plans_own_bill_to_the_cent(
    documents: list[dict[str, Any]], days: list[IntervalDay]
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        folder = Path(directory)
        nem12 = folder / "meter.csv"
        write_nem12(days, nem12)
        files = []
        for n, document in enumerate(documents):
            path = folder / f"plan{n}.toml"
            path.write_text(plan_toml({**document, "id": f"plan-{n}"}))
            files.append(str(path))
        code, compared = invoked(
            "compare", "--nem12", str(nem12), *(f"--plan={f}" for f in files), "--format", "json"
        )
        bills = [
            invoked("bill", "--nem12", str(nem12), "--plan", f, "--format", "json") for f in files
        ]
    if code != 0:  # nothing billable in the file: bill refuses it as compare does
        assert {bill_code for bill_code, _ in bills} == {code}
        return
    (meter,) = compared
    rows = {row["plan_id"]: row for row in meter["plans"]}
    for n, (bill_code, bill) in enumerate(bills):
        assert bill_code == 0
        row = rows[f"plan-{n}"]
        assert (row["total"], row["free_kwh"], row["free_value"]) == (
            bill["total"],
            bill["totals"]["free_kwh"],
            bill["free_energy_value"],
        )
        assert (row["from"], row["to"], row["days"]) == (
            bill["from"],
            bill["to"],
            len(bill["days"]),
        )
    totals = [Decimal(row["total"]) for row in meter["plans"]]
    assert totals == sorted(totals)
    assert [row["rank"] for row in meter["plans"]] == list(range(1, len(documents) + 1))


def test_the_year_and_the_room_left_in_the_window(tmp_path: Path) -> None:
    # Two days of 1 kWh every half hour: 48 kWh a day, 3 h of window (6 kWh) free of a 24 kWh
    # cap, so 18 kWh of each day's 42 outside the window could have moved in.
    days = [nem_day(date(2026, 7, d), flat("1")) for d in (1, 2)]
    nem12 = tmp_path / "meter.csv"
    write_nem12(days, nem12)
    code, compared = invoked("compare", "--nem12", str(nem12), "--format", "json")
    assert code == 0
    rows = {row["plan_id"]: row for row in compared[0]["plans"]}
    assert set(rows) == {"sso-nsw", "sso-seq", "sso-sa", "mps-vic"}
    nsw = rows["sso-nsw"]
    assert nsw["free_kwh"] == "12"
    assert nsw["room_kwh"] == "36"
    year = Decimal(nsw["total"]) * 365 / 2
    assert Decimal(nsw["per_year"]) == year.quantize(Decimal("0.01"), ROUND_HALF_UP)
    out = runner.invoke(app, ["compare", "--nem12", str(nem12), "--format", "csv"]).stdout
    header, *lines = out.splitlines()
    assert header.startswith("nmi,rank,plan_id,plan_name,region,from,to,days,total,per_year")
    assert len(lines) == 4
    table = runner.invoke(
        app, ["compare", "--nem12", str(nem12), "--format", "table"], env={"COLUMNS": "80"}
    ).stdout
    assert max(len(line) for line in table.splitlines()) <= 80
    assert "cheapest first" in table


def test_a_bad_plan_is_named_and_too_many_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    nem12 = tmp_path / "meter.csv"
    write_nem12([nem_day(date(2026, 7, 1), flat("1"))], nem12)
    code, _, err = run_flat(monkeypatch, capsys, "compare", "--nem12", str(nem12), "--plan=sso-nws")
    assert (code, "error: sso-nws: no such plan file" in err) == (2, True)
    cdr = tmp_path / "offer.json"
    cdr.write_text('{"planId": "x"}')
    code, _, err = run_flat(monkeypatch, capsys, "compare", "--nem12", str(nem12), f"--plan={cdr}")
    assert (code, f"error: {cdr}" in err) == (2, True)
    many = [f"--plan=p{n}.toml" for n in range(51)]
    code, _, err = run_flat(monkeypatch, capsys, "compare", "--nem12", str(nem12), *many)
    assert (code, err) == (2, "error: --plan: 51 plans, at most 50 in one comparison")
