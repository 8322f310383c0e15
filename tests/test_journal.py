"""The accounting export: every document's journal balances to the cent, credit notes reverse
their invoice, and the file is the CSV Xero's manual journal import reads."""

from __future__ import annotations

import csv
import io
from datetime import UTC, date, datetime
from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from freehours.domain.bill import BillLine
from freehours.domain.invoicing import DocumentType, Figures
from freehours.domain.time import Region
from freehours.invoicing.journal import DEFAULT_CHART, HEADER, Chart, journal, journal_csv
from freehours.store.invoices import StoredDocument

CODES = ["PEAK", "SHOULDER", "OFF_PEAK", "SUPPLY", "FEED_IN", "FREE_ENERGY", "ANYTIME"]

#: Amounts as documents have them (cents) and as they might not (sub-cent, from a future rule).
AMOUNTS = st.decimals(
    min_value=Decimal("-100000"), max_value=Decimal("100000"), places=4, allow_nan=False
)


def document(
    lines: list[tuple[str, Decimal]],
    gst: Decimal,
    *,
    kind: DocumentType = DocumentType.INVOICE,
    total: Decimal | None = None,
    number: str = "INV-00000001",
) -> StoredDocument:
    bill_lines = tuple(
        BillLine(code, f"{code} line", Decimal(1), "kWh", Decimal(0), amount)
        for code, amount in lines
    )
    subtotal = sum((amount for _, amount in lines), Decimal(0))
    figures = Figures(
        lines=bill_lines,
        subtotal=subtotal,
        gst=gst,
        total=subtotal + gst if total is None else total,
        consumption_kwh=Decimal(0),
        free_kwh=Decimal(0),
        free_value=Decimal(0),
        over_cap_kwh=Decimal(0),
        export_kwh=Decimal(0),
        days=(),
    )
    return StoredDocument(
        number=number,
        series=kind.series,
        serial=1,
        document_type=kind,
        nmi="4103000001",
        period_start=date(2026, 7, 1),
        period_end=date(2026, 7, 31),
        sequence=0 if kind is DocumentType.INVOICE else 1,
        corrects=None if kind is DocumentType.INVOICE else "INV-00000001",
        run_id="run",
        issue_date=date(2026, 8, 5),
        due_date=date(2026, 8, 26),
        finalised_at=datetime(2026, 8, 5, tzinfo=UTC),
        plan_id="sso-nsw",
        region=Region.NSW,
        time_zone="Australia/Sydney",
        figures=figures,
        reason=None,
        plan_document={},
        retailer={},
    )


@given(
    lines=st.lists(st.tuples(st.sampled_from(CODES), AMOUNTS), max_size=8),
    gst=AMOUNTS,
    total=st.none() | AMOUNTS,
    kind=st.sampled_from(list(DocumentType)),
)
def test_every_journal_balances_to_the_cent(
    lines: list[tuple[str, Decimal]], gst: Decimal, total: Decimal | None, kind: DocumentType
) -> None:
    entries = journal(document(lines, gst, kind=kind, total=total))
    assert sum(entry.amount for entry in entries) == 0
    for entry in entries:
        assert entry.amount == entry.amount.quantize(Decimal("0.01"))
        assert entry.amount != 0 or entry.account == "610"
        assert entry.narration == "INV-00000001 NMI 4103000001"
        assert entry.date == "05/08/2026"
    assert entries[0].account == "610"


def test_an_invoice_debits_receivable_and_credits_revenue_and_gst() -> None:
    invoice = document(
        [("PEAK", Decimal("30.00")), ("SUPPLY", Decimal("31.00")), ("FEED_IN", Decimal("-6.00"))],
        Decimal("5.50"),
    )
    posted = [(entry.account, entry.amount) for entry in journal(invoice)]
    assert posted == [
        ("610", Decimal("60.50")),
        ("200", Decimal("-30.00")),
        ("201", Decimal("-31.00")),
        ("310", Decimal("6.00")),
        ("820", Decimal("-5.50")),
    ]


def test_a_credit_note_reverses_what_its_invoice_posted() -> None:
    invoice = document([("PEAK", Decimal("30.00"))], Decimal("3.00"))
    credit = document(
        [("PEAK", Decimal("-30.00"))],
        Decimal("-3.00"),
        kind=DocumentType.CREDIT_NOTE,
        number="CN-00000001",
    )
    assert [(e.account, -e.amount) for e in journal(invoice)] == [
        (e.account, e.amount) for e in journal(credit)
    ]
    assert journal(credit)[0].description.startswith("Credit note CN-00000001")


def test_cents_the_lines_do_not_meet_go_to_rounding() -> None:
    odd = document([("PEAK", Decimal("10.004")), ("SUPPLY", Decimal("10.004"))], Decimal("2.00"))
    posted = {entry.account: entry.amount for entry in journal(odd)}
    assert posted["860"] == Decimal("-0.01")  # 22.01 due, 22.00 credited
    assert sum(posted.values()) == 0


def test_the_chart_is_the_organisations() -> None:
    chart = Chart(energy_sales="4000", tax_rate="GST Free Income", by_code={"PEAK": "4001"})
    entries = journal(document([("PEAK", Decimal(1)), ("SHOULDER", Decimal(2))], Decimal(0)), chart)
    assert [(e.account, e.tax_rate) for e in entries[1:]] == [
        ("4001", "GST Free Income"),
        ("4000", "GST Free Income"),
    ]


def test_the_file_is_csv_with_xeros_header() -> None:
    documents = [
        document([("PEAK", Decimal("30.00")), ("FREE_ENERGY", Decimal(0))], Decimal("3.00")),
        document(
            [("PEAK", Decimal("-1.00"))],
            Decimal("-0.10"),
            kind=DocumentType.CREDIT_NOTE,
            number='CN-1, "quoted"',
        ),
    ]
    rows = list(csv.reader(io.StringIO(journal_csv(documents), newline="")))
    assert tuple(rows[0]) == HEADER
    assert rows[0][3:6] == ["*AccountCode", "*TaxRate", "*Amount"]
    body = rows[1:]
    assert len(body) == 3 + 3  # receivable, energy, GST each; no line for free energy
    by_journal: dict[str, Decimal] = {}
    for row in body:
        assert len(row) == len(HEADER)
        by_journal[row[0]] = by_journal.get(row[0], Decimal(0)) + Decimal(row[5])
    assert by_journal == {
        "INV-00000001 NMI 4103000001": 0,
        'CN-1, "quoted" NMI 4103000001': 0,
    }
    assert body[0][6:] == ["Region", "NSW"]


def test_every_supply_charge_goes_to_supply_and_every_energy_line_to_energy() -> None:
    chart = DEFAULT_CHART
    assert chart.revenue_account("SUPPLY") == chart.supply_sales
    assert chart.revenue_account("CONTROLLED_LOAD_SUPPLY") == chart.supply_sales
    assert chart.revenue_account("SUPPLY_2") == chart.supply_sales
    for code in ("PEAK", "PEAK_STEP2", "CONTROLLED_LOAD", "SINGLE_RATE"):
        assert chart.revenue_account(code) == chart.energy_sales
    assert chart.revenue_account("FEED_IN") == chart.feed_in_expense
