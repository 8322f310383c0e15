"""docs/bill.md and docs/bill.schema.json: real bills, from the NEM12 examples under every
built-in plan, through ``freehours bill`` and the API, are valid to the schema and keep the
page's sums; the page's example is what ``freehours bill`` prints."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest

from freehours.plans import BUILTIN_IDS
from freehours.settings import Settings
from freehours.store.database import Store
from tests.api.conftest import serving
from tests.support import run_command

DOCS = Path(__file__).resolve().parent.parent / "docs"
SCHEMA = json.loads((DOCS / "bill.schema.json").read_text(encoding="utf-8"))
VALIDATOR = jsonschema_rs.validator_for(SCHEMA)
EXAMPLE_FILE = "unzipped/Example_NEM12_actual_interval.csv"
PAGE = (DOCS / "bill.md").read_text(encoding="utf-8")
#: Codes of a line of their own kind; any other is a band type's, or one of its steps.
FIXED_CODES = {"SUPPLY", "CONTROLLED_LOAD", "CONTROLLED_LOAD_SUPPLY", "FEED_IN", "FREE_ENERGY"}
#: The kinds of line that charge the consumption's energy.
ENERGY = {"TYPE", "STEP"}


def kind_of(code: str) -> str:
    """A bill line's row of the page's table: TYPE, STEP, SUPPLY_n or a fixed code."""
    if code in FIXED_CODES:
        return code
    if re.fullmatch(r"SUPPLY_\d+", code):
        return "SUPPLY_n"
    return "STEP" if re.search(r"_STEP\d+$", code) else "TYPE"


def table_kinds() -> list[str]:
    """The kinds of line the page's table lists, in its order ("In this order")."""
    table = PAGE.split("In this order:", 1)[1].split("\n\n", 2)[1]
    kinds = []
    for row in table.splitlines()[2:]:
        first = row.split("|")[1].strip()
        code = re.search(r"`([A-Z0-9_]+)`", first)
        assert code is not None, row
        named = code.group(1)
        kinds.append("TYPE" if first.startswith("a band type") else kind_of(named))
        if named.startswith("TYPE_STEP"):
            assert kinds[-1] == "STEP"
    return kinds


def order_holds(bill: dict[str, Any]) -> None:
    """The lines are in the page's order: the table's rows in turn, where the row of steps, right
    after the band types' row, means each type's steps right after its line."""
    rows = {kind: index for index, kind in enumerate(table_kinds())}
    assert rows["STEP"] == rows["TYPE"] + 1
    previous = None
    for line in bill["lines"]:
        code, kind = line["code"], kind_of(line["code"])
        if kind == "STEP":
            # right after its type's line, or its step before
            assert previous is not None, code
            assert previous.partition("_STEP")[0] == code.partition("_STEP")[0], (previous, code)
        elif previous is not None:
            rank = rows["TYPE"] if kind in ENERGY else rows[kind]
            before = kind_of(previous)
            assert (rows["TYPE"] if before in ENERGY else rows[before]) <= rank, (previous, code)
        previous = code


def bill_json(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, Any]:
    """``freehours bill ARGS --format json``: its exit status and its JSON (None on an error)."""
    code = run_command(monkeypatch, "bill", *args, "--format", "json")
    out = capsys.readouterr().out
    return code, json.loads(out) if code == 0 else None


def sums_hold(bill: dict[str, Any]) -> None:
    """The sums docs/bill.md states."""
    days = bill["days"]
    for field in ("consumption_kwh", "free_kwh", "over_cap_kwh", "export_kwh"):
        assert Decimal(bill["totals"][field]) == sum(Decimal(day[field]) for day in days), field
    lines = {line["code"]: line for line in bill["lines"]}
    charged = sum(
        Decimal(line["quantity"]) for line in bill["lines"] if kind_of(line["code"]) in ENERGY
    )
    free = Decimal(lines["FREE_ENERGY"]["quantity"]) if "FREE_ENERGY" in lines else Decimal(0)
    assert Decimal(bill["totals"]["consumption_kwh"]) == charged + free
    assert free == Decimal(bill["totals"]["free_kwh"])
    # The supply lines' days are the days billed, each line with some (SUPPLY too).
    supply = [line for line in bill["lines"] if kind_of(line["code"]) in {"SUPPLY", "SUPPLY_n"}]
    assert sum(int(line["quantity"]) for line in supply) == len(days)
    assert all(int(line["quantity"]) > 0 for line in supply)
    # Never a 0 kWh step line.
    assert all(
        Decimal(line["quantity"]) > 0 for line in bill["lines"] if kind_of(line["code"]) == "STEP"
    )
    order_holds(bill)
    subtotal = sum(Decimal(line["amount"]) for line in bill["lines"])
    assert Decimal(bill["subtotal"]) == subtotal
    assert Decimal(bill["total"]) == subtotal + Decimal(bill["gst"])
    assert [day["date"] for day in days] == sorted(day["date"] for day in days)
    assert (days[0]["date"], days[-1]["date"]) == (bill["from"], bill["to"])


def test_the_schema_is_a_json_schema() -> None:
    assert jsonschema_rs.meta.is_valid(SCHEMA)


def test_real_bills_of_every_builtin_plan_are_valid_and_keep_the_sums(
    nem12_examples: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    files = sorted(
        path
        for folder in ("unzipped", "aemo-scenarios")
        for path in (nem12_examples / folder).iterdir()
        if path.suffix.lower() in (".csv", ".zip")
    )
    bills = arrays = 0
    for index, path in enumerate(files):
        plan = BUILTIN_IDS[index % len(BUILTIN_IDS)]
        code, document = bill_json(monkeypatch, capsys, "--plan", plan, "--nem12", str(path))
        if code != 0:
            continue  # a file the reader refuses (NEM13), or with nothing to bill
        errors = [error.message for error in VALIDATOR.iter_errors(document)]
        assert errors == [], (path.name, plan, errors[:3])
        several = document if isinstance(document, list) else [document]
        arrays += isinstance(document, list)
        for bill in several:
            assert bill["plan"] == plan
            sums_hold(bill)
        bills += len(several)
    assert bills >= 80
    assert arrays >= 1  # Example_NEM12_multiple_meters.csv: an array of its NMIs' bills


def test_the_schema_refuses_what_is_not_a_bill(
    nem12_examples: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _, bill = bill_json(
        monkeypatch, capsys, "--plan", "sso-sa", "--nem12", str(nem12_examples / EXAMPLE_FILE)
    )
    assert VALIDATOR.is_valid(bill)
    for wrong in (
        {**bill, "total": 13.92},
        {**bill, "gst": "1.3"},
        {**bill, "extra": 1},
        {**bill, "days": [{**bill["days"][0], "free_kwh": "6.6660"}]},
        {**bill, "lines": [{**bill["lines"][0], "unit": "MWh"}]},
        [],
    ):
        assert not VALIDATOR.is_valid(wrong), wrong


def test_the_pages_example_is_what_the_command_prints(
    nem12_examples: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    page = PAGE.split("## An example", 1)[1]
    example = re.findall(r"```json\n(.*?)```", page, re.S)[0]
    command = re.search(r"`freehours bill (--plan \S+ --nem12 tests/data/.*?)`", page)
    assert command is not None
    args = command.group(1).replace("tests/data/nem12-examples", str(nem12_examples)).split()
    assert args[-2:] == ["--format", "json"]
    code, printed = bill_json(monkeypatch, capsys, *args[:-2])
    assert code == 0
    assert printed == json.loads(example)
    assert VALIDATOR.is_valid(printed)


def test_the_apis_bill_is_the_commands_and_valid(
    store: Store,
    nem12_examples: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = nem12_examples / EXAMPLE_FILE
    _, printed = bill_json(
        monkeypatch, capsys, "--plan", "sso-nsw", "--nem12", str(path), "--from", "2004-02-01"
    )
    with serving(store, Settings(database_url="sqlite://")) as api:
        headers = {**api.auth("ingest"), "Idempotency-Key": "bill-doc", "Content-Type": "text/csv"}
        uploaded = api.client.post(
            "/v1/meter-readings/nem12", content=path.read_bytes(), headers=headers
        )
        assert uploaded.status_code == 200, uploaded.text
        customer = api.client.put(
            f"/v1/customers/{printed['nmi']}",
            json={"plan_id": "sso-nsw", "region": "NSW"},
            headers=api.auth("admin"),
        )
        assert customer.status_code == 200, customer.text
        answer = api.client.get(
            f"/v1/customers/{printed['nmi']}/bill",
            params={"from": printed["from"], "to": printed["to"]},
            headers=api.auth("read"),
        )
    assert answer.status_code == 200, answer.text
    assert answer.json() == printed
    assert VALIDATOR.is_valid(answer.json())


def test_the_tables_order_puts_each_step_right_after_its_type() -> None:
    # A household reads a band's price and then its dearer steps, as retailers print them: the
    # table's row of steps follows the band type's, and the program prints them so
    # (order_holds, over every bill of this page's tests).
    kinds = table_kinds()
    assert kinds == [
        "TYPE", "STEP", "SUPPLY", "SUPPLY_n", "CONTROLLED_LOAD", "CONTROLLED_LOAD_SUPPLY",
        "FEED_IN", "FREE_ENERGY",
    ]  # fmt: skip


def test_the_pages_example_of_steps_and_seasons_is_what_the_command_prints(
    nem12_examples: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    section = PAGE.split("### Steps, seasons and a controlled load", 1)[1].split("\n## ", 1)[0]
    (plan,) = re.findall(r"```toml\n(.*?)```", section, re.S)
    (lines,) = re.findall(r"```json\n(.*?)```", section, re.S)
    command = re.search(r"`freehours bill --plan plan.toml (--nem12 tests/data/.*?)`", section)
    assert command is not None
    (tmp_path / "plan.toml").write_text(plan, encoding="utf-8")
    args = command.group(1).replace("tests/data/nem12-examples", str(nem12_examples)).split()
    assert args[-2:] == ["--format", "json"]
    plan_args = ("--plan", str(tmp_path / "plan.toml"))
    code, printed = bill_json(monkeypatch, capsys, *plan_args, *args[:-2])
    assert code == 0
    assert printed["lines"] == json.loads(lines)
    assert VALIDATOR.is_valid(printed)
    sums_hold(printed)
    # Every kind of line of the table is in it, in the table's order.
    kinds = [kind_of(line["code"]) for line in printed["lines"]]
    assert sorted(set(kinds), key=kinds.index) == table_kinds()

    # "With --from 2003-12-05 ... SUPPLY_2 for 1 day and no SUPPLY line"
    assert "With `--from 2003-12-05` the bill's one day is in summer" in section
    summer = [*args[:-6], "--from", "2003-12-05", "--to", "2003-12-05"]
    code, printed = bill_json(monkeypatch, capsys, *plan_args, *summer)
    assert code == 0
    sums_hold(printed)
    days = [(line["code"], line["quantity"]) for line in printed["lines"] if line["unit"] == "day"]
    assert days == [("SUPPLY_2", "1"), ("CONTROLLED_LOAD_SUPPLY", "1")]
