"""``freehours invoices run|list|show`` and ``freehours customers put`` on SQLite and PostgreSQL:
a run invoices each ended period once, a revision makes a credit note, the documents are listed,
shown and written as PDF and HTML, and bad input is refused naming its option."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from freehours.domain.invoicing import BillingCycle, Frequency
from freehours.settings import Settings, get_settings
from tests.api.conftest import serving
from tests.invoicing.support import JULY, STAMP, System, consumption
from tests.support import run_flat

#: After July's data deadline: the run invoices July, and no month after it.
AS_OF = "2026-08-05T00:00+10:00"


output = run_flat

#: The bill's notation (docs/bill.md#numbers): kWh exact without trailing zeros, money to the cent.
KWH = re.compile(r"-?(0|[1-9]\d*)(\.\d*[1-9])?")
MONEY = re.compile(r"-?\d+\.\d\d")


def test_a_run_invoices_each_ended_period_once_and_a_revision_is_credited(
    system: System,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    code, out, _ = output(monkeypatch, capsys, "invoices", "run", "--as-of", AS_OF)
    assert code == 0
    assert "COMPLETED, 1 of 1 batches" in out
    assert "accounts 2, invoices 2, credit notes 0, adjustment invoices 0, waiting 0" in out
    code, out, _ = output(monkeypatch, capsys, "invoices", "run", "--as-of", AS_OF)
    assert (code, "accounts 2, invoices 0, credit notes 0" in out) == (0, True)

    code, out, _ = output(monkeypatch, capsys, "invoices", "list", "--format", "json")
    listed = json.loads(out)
    assert [(d["number"], d["type"], d["period_start"], d["period_end"]) for d in listed] == [
        ("INV-00000001", "invoice", "2026-07-01", "2026-07-31"),
        ("INV-00000002", "invoice", "2026-07-01", "2026-07-31"),
    ]
    assert {d["free_kwh"] for d in listed} == {"93"}  # the bill's notation, not "93.000"
    assert listed[0]["issue_date"] == "2026-08-05"
    assert listed[0]["due_date"] == "2026-08-26"

    # Half of one day's consumption, revised after it was invoiced: version 2, then a credit.
    first = listed[0]["nmi"]
    system.clock.set(datetime.now(UTC))
    later = STAMP + timedelta(days=30)
    system.ingestion.file([consumption(first, JULY[9], scale=Decimal("0.5"), stamp=later)])
    system.settle()
    code, out, _ = output(monkeypatch, capsys, "invoices", "run", "--as-of", "2026-08-06T00:00Z")
    assert code == 0
    assert "invoices 0, credit notes 1, adjustment invoices 0" in out

    code, out, _ = output(
        monkeypatch, capsys, "invoices", "list", "--credit-notes", "--format", "table"
    )
    assert code == 0
    (row,) = [line for line in out.splitlines() if "CN-00000001" in line]
    assert "credit note" in row
    assert first in row
    assert "INV-00000001" in row
    assert "2 documents" not in out
    assert "1 document" in out

    code, out, _ = output(
        monkeypatch, capsys, "invoices", "show", "CN-00000001", "--format", "json"
    )
    shown = json.loads(out)
    invoice = json.loads(
        output(monkeypatch, capsys, "invoices", "show", "INV-00000001", "--format", "json")[1]
    )
    assert shown["corrects"] == "INV-00000001"
    assert invoice["corrected_by"] == ["CN-00000001"]
    assert [(d["date"], d["quota_version"]) for d in shown["days"]] == [("2026-07-10", 2)]
    assert Decimal(shown["total"]) < 0
    assert Decimal(shown["free_kwh"]) == Decimal("-1.5")
    assert sum(Decimal(line["amount"]) for line in shown["lines"]) == Decimal(shown["subtotal"])
    assert all(day["quota_version"] == 1 for day in invoice["days"])
    assert len(invoice["days"]) == 31

    pdf, page = tmp_path / "cn.pdf", tmp_path / "cn.html"
    code, out, err = output(
        monkeypatch,
        capsys,
        "invoices",
        "show",
        "CN-00000001",
        "--pdf",
        str(pdf),
        "--html",
        str(page),
    )
    assert code == 0
    assert f"wrote {pdf}" in err
    assert pdf.read_bytes().startswith(b"%PDF-")
    assert "CN-00000001" in page.read_text("utf-8")
    assert "INV-00000001" in page.read_text("utf-8")
    assert "corrects INV-00000001: Revised meter data for 1 day (2026-07-10)" in out
    assert "2026-07-10 │             2 │" in out

    code, out, _ = output(
        monkeypatch, capsys, "invoices", "list", "--nmi", first, "--to", "2026-06-30"
    )
    assert (code, json.loads(out)) == (0, [])  # piped: JSON
    code, out, _ = output(
        monkeypatch,
        capsys,
        "invoices",
        "list",
        "--nmi",
        first,
        "--to",
        "2026-06-30",
        "--format",
        "table",
    )
    assert (code, "0 documents" in out) == (0, True)


def test_an_unknown_number_and_bad_options_are_named(
    system: System, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = output(monkeypatch, capsys, "invoices", "show", "INV-99")
    assert (code, out, err) == (1, "", "error: no invoice or credit note numbered 'INV-99'")
    code, _, err = output(monkeypatch, capsys, "invoices", "run", "--as-of", "2026-08-05T00:00")
    assert (code, err) == (
        2,
        "error: --as-of: '2026-08-05T00:00' has no UTC offset, e.g. 2026-08-05T00:00+10:00",
    )
    code, _, err = output(monkeypatch, capsys, "invoices", "run", "--as-of", "soon")
    assert code == 2
    assert err.startswith("error: --as-of: 'soon' is not an ISO 8601 date and time")
    code, _, err = output(monkeypatch, capsys, "invoices", "list", "--nmi", "short")
    assert (code, err) == (
        2,
        "error: --nmi: 'short' is not an NMI: 10 upper-case letters and digits (A-Z, 0-9)",
    )
    code, _, err = output(
        monkeypatch, capsys, "invoices", "list", "--from", "2026-08-01", "--to", "2026-07-01"
    )
    assert (code, err) == (2, "error: --from: 2026-08-01 is after --to 2026-07-01")
    with system.store.read() as unit:
        assert unit.invoices.list_runs() == []


def test_no_wait_prints_the_run_id_and_a_worker_finishes_it(
    system: System, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = output(monkeypatch, capsys, "invoices", "run", "--as-of", AS_OF, "--no-wait")
    run_id = out.strip()
    assert code == 0
    assert len(run_id) == 32
    with system.store.read() as unit:
        run = unit.invoices.get_run(run_id)
        assert run is not None
        assert (run.state, run.batches) == ("RUNNING", None)
    system.clock.set(datetime.now(UTC) + timedelta(minutes=1))
    system.settle()  # a worker elsewhere
    with system.store.read() as unit:
        run = unit.invoices.get_run(run_id)
    assert run is not None
    assert (run.state, run.counts.invoices) == ("COMPLETED", 2)


def test_customers_put_stores_the_customer_and_its_cycle(
    system: System, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    nmi = "QB00000042"
    put = ("customers", "put", nmi, "--plan", "sso-seq", "--region", "SEQ")
    cycle = ("--cycle", "quarterly", "--anchor-day", "5", "--payment-term-days", "30")
    code, out, _ = output(monkeypatch, capsys, *put, *cycle)
    assert code == 0
    assert out.strip() == (
        f"customer {nmi}: plan 'sso-seq', SEQ, billed quarterly from day 5, due 30 days after issue"
    )
    with system.store.read() as unit:
        (account,) = unit.invoices.accounts([nmi])
        assert unit.catalog.get_plan("sso-seq") is not None  # the built-in plan, stored
    assert account.cycle == BillingCycle(Frequency.QUARTERLY, 5, 30)
    assert (account.plan_id, account.region.value) == ("sso-seq", "SEQ")
    # Options not given keep what is stored.
    code, _, _ = output(monkeypatch, capsys, *put, "--anchor-day", "7")
    with system.store.read() as unit:
        (account,) = unit.invoices.accounts([nmi])
    assert (code, account.cycle) == (0, BillingCycle(Frequency.QUARTERLY, 7, 30))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--anchor-day", "29"], "error: --anchor-day: 29 is not 1 to 28"),
        (
            ["--payment-term-days", "5"],
            "error: --payment-term-days: 5 is not 13 to 90 (the Retail Rules give at least 13"
            " business days)",
        ),
        (
            ["--plan", "sso-mars"],
            "error: --plan: no plan 'sso-mars' (stored, or built in: sso-nsw, sso-seq, sso-sa,"
            " mps-vic)",
        ),
        (
            ["--plan", "sso-sa"],
            "error: --region: plan 'sso-sa' is for region SA, the customer's region is NSW",
        ),
    ],
)
def test_customers_put_refuses_what_cannot_be_naming_the_option(
    system: System,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    base = ["customers", "put", "QB00000042", "--plan", "sso-nsw", "--region", "NSW"]
    code, out, err = output(monkeypatch, capsys, *base, *args)
    assert (code, out, err) == (2, "", message)
    with system.store.read() as unit:
        assert unit.catalog.get_customer("QB00000042") is None


def test_customers_put_refuses_a_bad_nmi(
    system: System, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = output(
        monkeypatch, capsys, "customers", "put", "qb1", "--plan", "sso-nsw", "--region", "NSW"
    )
    assert (code, err) == (
        2,
        "error: NMI: 'qb1' is not an NMI: 10 upper-case letters and digits (A-Z, 0-9)",
    )


def test_an_unreachable_database_is_one_line_and_exit_1(
    clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clean_env.setenv("FREEHOURS_DATABASE_URL", "postgresql://127.0.0.1:1/freehours")
    get_settings.cache_clear()
    try:
        code, out, err = output(clean_env, capsys, "invoices", "run")
    finally:
        get_settings.cache_clear()
    assert (code, out) == (1, "")
    assert err.startswith("error: database at postgresql+psycopg://127.0.0.1:1/freehours:")
    assert "Connection refused" in err


def notation_holds(document: dict[str, Any]) -> None:
    """Every figure of a document's JSON in the bill's notation."""
    for field in ("subtotal", "gst", "total", "free_value"):
        assert MONEY.fullmatch(document[field]), (field, document[field])
    figures = [document["free_kwh"]]
    if "lines" in document:
        figures += [document[f] for f in ("consumption_kwh", "over_cap_kwh", "export_kwh")]
        figures += [day[f] for day in document["days"] for f in ("consumption_kwh", "free_kwh")]
        figures += [line["quantity"] for line in document["lines"] if line["unit"] == "kWh"]
        assert all(MONEY.fullmatch(line["amount"]) for line in document["lines"])
    assert all(KWH.fullmatch(kwh) for kwh in figures), figures


def test_the_commands_json_of_a_document_is_the_apis(
    system: System,
    store_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # An invoice, and a credit note of a revision: both series, and corrects / corrected_by.
    assert output(monkeypatch, capsys, "invoices", "run", "--as-of", AS_OF)[0] == 0
    nmi = json.loads(output(monkeypatch, capsys, "invoices", "list", "--format", "json")[1])[0][
        "nmi"
    ]
    system.clock.set(datetime.now(UTC))
    later = STAMP + timedelta(days=30)
    system.ingestion.file([consumption(nmi, JULY[9], scale=Decimal("0.5"), stamp=later)])
    system.settle()
    assert output(monkeypatch, capsys, "invoices", "run", "--as-of", "2026-08-06T00:00Z")[0] == 0

    listed = json.loads(output(monkeypatch, capsys, "invoices", "list", "--format", "json")[1])
    shown = {
        number: json.loads(
            output(monkeypatch, capsys, "invoices", "show", number, "--format", "json")[1]
        )
        for number in ("INV-00000001", "INV-00000002", "CN-00000001")
    }
    with serving(system.store, Settings(database_url=store_url)) as api:
        read = api.auth("read")
        items = [
            item
            for path in ("/v1/invoices", "/v1/credit-notes")
            for item in api.client.get(path, headers=read).json()["items"]
        ]
        served = {
            number: api.client.get(f"/v1/{path}/{number}", headers=read).json()
            for number, path in (
                ("INV-00000001", "invoices"),
                ("INV-00000002", "invoices"),
                ("CN-00000001", "credit-notes"),
            )
        }
    # The same keys, in the same order, and the same values written the same way.
    assert len(listed) == 3
    by_number = {item["number"]: item for item in items}
    for item in listed:
        assert list(item) == list(by_number[item["number"]])
        assert item == by_number[item["number"]]
        notation_holds(item)
    for number, document in shown.items():
        assert list(document) == list(served[number])
        assert document == served[number]
        notation_holds(document)
    assert shown["CN-00000001"]["corrects"] == "INV-00000001"
    assert by_number["INV-00000001"]["corrected_by"] == ["CN-00000001"]
