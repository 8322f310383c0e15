"""``freehours bill``: a NEM12 file and a plan in, the contract's JSON out; errors exit 2."""

from __future__ import annotations

import json
import tempfile
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from freehours.cli import app
from freehours.domain.reads import IntervalDay
from freehours.domain.time import NEM_TIME
from freehours.meterdata.writer import write_nem12
from tests.domain.rating_cases import flat, nem_day
from tests.support import run_captured

D = Decimal

# The plan of tests/domain/rating_cases.plan_for("NSW"), as a file.
PLAN = """
id = "test"
region = "NSW"
daily_supply_charge = "1.0000"

[[time_of_use]]
type = "PEAK"
unit_price = "0.50"
periods = [{ days = ["ALL"], start = "15:00", end = "21:00" }]

[[time_of_use]]
type = "OFF_PEAK"
unit_price = "0.20"
periods = [{ days = ["ALL"], start = "00:00", end = "24:00" }]

[feed_in]
unit_price = "0.05"
"""


run = run_captured


def stamp(day: int) -> datetime:
    return datetime(2026, 7, day, 12, 0, tzinfo=NEM_TIME)


def with_stamp(day: IntervalDay, update: datetime) -> IntervalDay:
    return IntervalDay(
        day.nmi, day.suffix, day.day, day.interval_minutes, day.values, day.qualities, update
    )


@pytest.fixture
def plan_file(tmp_path: Path) -> Path:
    path = tmp_path / "plan.toml"
    path.write_text(PLAN, encoding="utf-8")
    return path


@pytest.fixture
def two_meters(tmp_path: Path) -> Path:
    # NMI NMIA000001: E1 1.000 kWh every interval on 15 and 16 Jul 2026, B1 one interval of 2.500 on
    # 15 Jul. NMI NMIB000002: E1 2.000 every interval on 15 Jul.
    export = [D(0)] * 48
    export[10] = D("2.500")
    path = tmp_path / "meters.csv"
    write_nem12(
        [
            nem_day(date(2026, 7, 15), flat("1.000"), nmi="NMIA000001"),
            nem_day(date(2026, 7, 16), flat("1.000"), nmi="NMIA000001"),
            nem_day(date(2026, 7, 15), export, nmi="NMIA000001", suffix="B1"),
            nem_day(date(2026, 7, 15), flat("2.000"), nmi="NMIB000002"),
        ],
        path,
    )
    return path


def test_bill_writes_the_contract_json_for_one_nmi(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    plan_file: Path,
    two_meters: Path,
) -> None:
    code, out, err = run(
        monkeypatch, capsys, "bill", "--plan", str(plan_file), "--nem12", str(two_meters),
        "--nmi", "NMIA000001", "--format", "json",
    )  # fmt: skip
    assert (code, err) == (0, "")
    bill = json.loads(out)
    assert (bill["nmi"], bill["plan"], bill["time_zone"]) == (
        "NMIA000001",
        "test",
        "Australia/Sydney",
    )
    assert (bill["from"], bill["to"]) == ("2026-07-15", "2026-07-16")
    # Each day: 6 free (11:00-14:00), PEAK 12, OFF_PEAK 30. 16 Jul has no B1 row: 48 missing.
    assert [(d["date"], d["free_kwh"], d["missing_intervals"]) for d in bill["days"]] == [
        ("2026-07-15", "6", 0),
        ("2026-07-16", "6", 48),
    ]
    assert [(line["code"], line["quantity"], line["amount"]) for line in bill["lines"]] == [
        ("PEAK", "24", "12.00"),  # 24 x 0.50
        ("OFF_PEAK", "60", "12.00"),  # 60 x 0.20
        ("SUPPLY", "2", "2.00"),  # 2 days x 1.0000
        ("FEED_IN", "2.5", "-0.13"),  # 2.5 x 0.05 = 0.125, half up
        ("FREE_ENERGY", "12", "0.00"),
    ]
    # 25.87 + GST 2.587 -> 2.59 = 28.46; the free 12 kWh were OFF_PEAK: 12 x 0.20
    assert (bill["subtotal"], bill["gst"], bill["total"]) == ("25.87", "2.59", "28.46")
    assert bill["free_energy_value"] == "2.40"


def test_several_nmis_without_nmi_give_an_array_in_file_order(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    plan_file: Path,
    two_meters: Path,
) -> None:
    code, out, _ = run(
        monkeypatch, capsys, "bill", "--plan", str(plan_file), "--nem12", str(two_meters)
    )
    assert code == 0
    bills = json.loads(out)
    assert [bill["nmi"] for bill in bills] == ["NMIA000001", "NMIB000002"]
    assert bills[1]["totals"]["consumption_kwh"] == "96"


def test_from_and_to_choose_the_local_days(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    plan_file: Path,
    two_meters: Path,
) -> None:
    code, out, _ = run(
        monkeypatch, capsys, "bill", "--plan", str(plan_file), "--nem12", str(two_meters),
        "--nmi", "NMIB000002", "--from", "2026-07-15", "--to", "2026-07-17",
    )  # fmt: skip
    assert code == 0
    bill = json.loads(out)
    # B has only 15 Jul: 16 and 17 Jul are billed (supply) with all 48 intervals missing.
    assert [(d["date"], d["missing_intervals"]) for d in bill["days"]] == [
        ("2026-07-15", 0),
        ("2026-07-16", 48),
        ("2026-07-17", 48),
    ]
    assert next(line for line in bill["lines"] if line["code"] == "SUPPLY")["quantity"] == "3"


def test_only_the_winning_revision_is_billed(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    plan_file: Path,
    tmp_path: Path,
) -> None:
    # Three revisions of A E1 15 Jul: the one stamped 17 Jul wins, wherever it sits in the file.
    day = date(2026, 7, 15)
    path = tmp_path / "revisions.csv"
    write_nem12(
        [
            with_stamp(nem_day(day, flat("9.000"), nmi="NMIA000001"), stamp(16)),
            with_stamp(nem_day(day, flat("1.000"), nmi="NMIA000001"), stamp(17)),
            with_stamp(nem_day(day, flat("7.000"), nmi="NMIA000001"), stamp(15)),
        ],
        path,
    )
    code, out, _ = run(monkeypatch, capsys, "bill", "--plan", str(plan_file), "--nem12", str(path))
    assert code == 0
    assert json.loads(out)["totals"]["consumption_kwh"] == "48"


revision_values = st.lists(
    st.decimals(min_value=0, max_value=5, places=3), min_size=48, max_size=48
)


@settings(max_examples=25, deadline=None)
@given(
    winner=revision_values,
    losers=st.lists(st.tuples(revision_values, st.integers(1, 15)), min_size=1, max_size=3),
    winner_position=st.integers(0, 3),
)
def test_superseded_revisions_never_count(
    winner: list[Decimal], losers: list[tuple[list[Decimal], int]], winner_position: int
) -> None:
    # The winner is stamped 20 Jul; every loser earlier. Billing the file must equal billing
    # a file holding the winner alone.
    day = date(2026, 7, 15)
    rows = [with_stamp(nem_day(day, values), stamp(hour)) for values, hour in losers]
    best = with_stamp(nem_day(day, winner), stamp(20))
    rows.insert(min(winner_position, len(rows)), best)
    assert bill_json(rows) == bill_json([best])


def bill_json(days: list[IntervalDay]) -> object:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "meter.csv"
        write_nem12(days, path)
        result = CliRunner().invoke(
            app, ["bill", "--plan", "sso-nsw", "--nem12", str(path), "--format", "json"]
        )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_csv_lists_the_lines_then_the_totals(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    plan_file: Path,
    two_meters: Path,
) -> None:
    code, out, _ = run(
        monkeypatch, capsys, "bill", "--plan", str(plan_file), "--nem12", str(two_meters),
        "--nmi", "NMIA000001", "--format", "csv",
    )  # fmt: skip
    assert code == 0
    rows = out.splitlines()
    assert rows[0] == "nmi,from,to,code,description,quantity,unit,unit_price,amount"
    assert rows[1] == "NMIA000001,2026-07-15,2026-07-16,PEAK,Peak energy,24,kWh,0.50,12.00"
    assert rows[-4:] == [
        "NMIA000001,2026-07-15,2026-07-16,SUBTOTAL,,,,,25.87",
        "NMIA000001,2026-07-15,2026-07-16,GST,,,,,2.59",
        "NMIA000001,2026-07-15,2026-07-16,TOTAL,,,,,28.46",
        "NMIA000001,2026-07-15,2026-07-16,FREE_ENERGY_VALUE,,,,,2.40",
    ]


def test_the_table_shows_each_nmi_and_its_total(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    plan_file: Path,
    two_meters: Path,
) -> None:
    code, out, _ = run(
        monkeypatch, capsys, "bill", "--plan", str(plan_file), "--nem12", str(two_meters),
        "--format", "table",
    )  # fmt: skip
    assert code == 0
    assert "NMI NMIA000001, plan test: 2026-07-15 to 2026-07-16 (Australia/Sydney)" in out
    assert "NMI NMIB000002, plan test" in out
    assert "28.46" in out


def test_a_bad_plan_exits_2_naming_file_and_key_with_nothing_on_stdout(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    two_meters: Path,
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(PLAN.replace('"0.50"', "0.50"), encoding="utf-8")
    code, out, err = run(
        monkeypatch, capsys, "bill", "--plan", str(bad), "--nem12", str(two_meters)
    )
    assert (code, out) == (2, "")
    assert f"{bad}: time_of_use[0].unit_price: got the number 0.5" in err


def test_a_bad_nem12_file_exits_2_naming_file_and_line_with_nothing_on_stdout(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    plan_file: Path,
    two_meters: Path,
) -> None:
    lines = two_meters.read_text(encoding="ascii").splitlines()
    lines[-2] = lines[-2].replace("2.000", "2.0x0", 1)  # B's 300 row, the file's last but one line
    two_meters.write_text("\r\n".join(lines) + "\r\n", encoding="ascii")
    code, out, err = run(
        monkeypatch, capsys, "bill", "--plan", str(plan_file), "--nem12", str(two_meters)
    )
    assert (code, out) == (2, "")
    assert f"{two_meters}:{len(lines) - 1}" in err


def test_an_nmi_not_in_the_file_exits_2(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    plan_file: Path,
    two_meters: Path,
) -> None:
    code, out, err = run(
        monkeypatch, capsys, "bill", "--plan", str(plan_file), "--nem12", str(two_meters),
        "--nmi", "NMIZ000026",
    )  # fmt: skip
    assert (code, out) == (2, "")
    assert "no consumption or export data for NMI NMIZ000026" in err


def test_from_after_to_is_bad_usage(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    plan_file: Path,
    two_meters: Path,
) -> None:
    code, out, err = run(
        monkeypatch, capsys, "bill", "--plan", str(plan_file), "--nem12", str(two_meters),
        "--from", "2026-07-16", "--to", "2026-07-15",
    )  # fmt: skip
    assert (code, out) == (2, "")
    assert "--from 2026-07-16 is after --to 2026-07-15" in err


@pytest.mark.parametrize(
    ("option", "first", "last"),
    [("--from", "0001-01-01", "0001-01-02"), ("--to", "2099-12-31", "9999-12-31")],
)
def test_a_date_out_of_range_is_bad_usage_naming_the_option(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    plan_file: Path,
    two_meters: Path,
    option: str,
    first: str,
    last: str,
) -> None:
    code, out, err = run(
        monkeypatch, capsys, "bill", "--plan", str(plan_file), "--nem12", str(two_meters),
        "--from", first, "--to", last,
    )  # fmt: skip
    assert (code, out) == (2, "")
    assert f"{option}: " in err
    assert "is outside 2000-01-01 to 2099-12-31" in err


def test_a_day_after_the_data_is_nothing_to_bill(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    plan_file: Path,
    two_meters: Path,
) -> None:
    later = (date(2026, 7, 16) + timedelta(days=10)).isoformat()
    code, out, err = run(
        monkeypatch, capsys, "bill", "--plan", str(plan_file), "--nem12", str(two_meters),
        "--nmi", "NMIA000001", "--from", later,
    )  # fmt: skip
    assert (code, out) == (2, "")
    assert "nothing to bill from 2026-07-26 to 2026-07-16" in err


def test_by_default_every_local_day_the_data_touches_is_billed_and_a_partial_one_named(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    plan_file: Path,
    tmp_path: Path,
) -> None:
    """One NEM day in Sydney's summer: its last hour (23:00-24:00 AEST) is 16 Jan 00:00-01:00
    local. Both local days are billed, all 48 intervals with them, and each partial day is a line
    on stderr naming what it lacks; stdout is the contract's JSON alone."""
    path = tmp_path / "summer.csv"
    write_nem12([nem_day(date(2026, 1, 15), flat("1.000"))], path)
    code, out, err = run(
        monkeypatch, capsys, "bill", "--plan", str(plan_file), "--nem12", str(path),
        "--format", "json",
    )  # fmt: skip
    assert code == 0
    bill = json.loads(out)
    assert (bill["from"], bill["to"]) == ("2026-01-15", "2026-01-16")
    assert bill["totals"]["consumption_kwh"] == "48"
    assert [(d["date"], d["consumption_kwh"], d["missing_intervals"]) for d in bill["days"]] == [
        ("2026-01-15", "46", 2),
        ("2026-01-16", "2", 46),
    ]
    assert err.splitlines() == [
        "note: NMI NMI0000001: 2026-01-15 is only partly in the data: 2 of its 48 intervals have"
        " no value (00:00-01:00, Australia/Sydney)",
        "note: NMI NMI0000001: 2026-01-16 is only partly in the data: 46 of its 48 intervals have"
        " no value (01:00-24:00, Australia/Sydney)",
    ]


@pytest.fixture
def one_unbillable(tmp_path: Path) -> Path:
    """NMIA000001 with E1; NMIQ000002 with a Q1 channel in kWh and a B1 one in kVArh only."""
    path = tmp_path / "mixed.csv"
    write_nem12(
        [
            nem_day(date(2026, 7, 15), flat("1.000"), nmi="NMIA000001"),
            nem_day(date(2026, 7, 15), flat("2.000"), nmi="NMIQ000002", suffix="Q1"),
            nem_day(date(2026, 7, 15), flat("0.500"), nmi="NMIQ000002", suffix="B1", uom="KVARH"),
        ],
        path,
    )
    return path


def test_an_nmi_that_cannot_be_billed_is_named_and_the_output_stays_an_array(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    plan_file: Path,
    one_unbillable: Path,
) -> None:
    code, out, err = run(
        monkeypatch, capsys, "bill", "--plan", str(plan_file), "--nem12", str(one_unbillable),
        "--format", "json",
    )  # fmt: skip
    assert code == 0  # one bill made
    bills = json.loads(out)
    assert isinstance(bills, list)  # the file has two NMIs
    assert [bill["nmi"] for bill in bills] == ["NMIA000001"]
    assert err.splitlines() == [
        "note: NMI NMIQ000002 is not billed: no consumption or export channel in kWh (its"
        " suffixes: B1 not in kWh, Q1 neither consumption nor export under the plan; the plan's"
        " consumption suffixes: every suffix starting with E; export: every suffix starting"
        " with B)"
    ]


def test_when_no_nmi_can_be_billed_it_exits_2_saying_why(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    plan_file: Path,
    one_unbillable: Path,
) -> None:
    code, out, err = run(
        monkeypatch, capsys, "bill", "--plan", str(plan_file), "--nem12", str(one_unbillable),
        "--nmi", "NMIQ000002",
    )  # fmt: skip
    assert (code, out) == (2, "")
    assert err.startswith(f"error: {one_unbillable}: NMI NMIQ000002 is not billed: no consumption")
