"""A document made from the domain's bill carries its figures unchanged, and the sample
command writes the example invoice and credit note."""

from __future__ import annotations

import subprocess
import sys
from decimal import Decimal
from pathlib import Path

from freehours.documents import wording
from freehours.documents.from_bill import invoice_from_bill
from freehours.documents.model import DocumentKind
from freehours.documents.pdf import render_pdf
from freehours.documents.sample import PLAN, bill_of, household, sample_credit_note, sample_invoice
from tests.documents.builders import EXAMPLE_RETAILER, flat, html_sections, pdf_pages


def test_a_document_from_a_bill_has_the_bills_every_figure() -> None:
    bill = bill_of(household(31))
    document = invoice_from_bill(
        bill,
        PLAN,
        number="INV-1",
        issue_date=bill.end,
        due_date=bill.end,
        retailer=EXAMPLE_RETAILER,
    )
    assert [(line.code, line.quantity, line.amount) for line in document.lines] == [
        (line.code, line.quantity, line.amount) for line in bill.lines
    ]
    assert (document.subtotal, document.gst, document.total) == (
        bill.subtotal,
        bill.gst,
        bill.total,
    )
    assert document.amount_due == bill.total
    assert document.free_energy is not None
    assert (document.free_energy.kwh, document.free_energy.value) == (
        bill.free_kwh,
        bill.free_energy_value,
    )
    assert [(day.day, day.consumption_kwh, day.free_kwh) for day in document.days] == [
        (day.local_date, day.consumption_kwh, day.free_kwh) for day in bill.days
    ]
    assert (document.period_start, document.period_end) == (bill.start, bill.end)
    assert document.ombudsman.name.startswith("Energy & Water Ombudsman NSW")


def test_the_free_energy_on_page_1_is_the_bills_to_the_watt_hour() -> None:
    invoice = sample_invoice()
    page = flat(pdf_pages(render_pdf(invoice))[0])
    assert invoice.free_energy is not None
    free = invoice.free_energy.kwh.quantize(Decimal("0.001"))
    assert f"Free energy used: {free:,} kWh" in page
    assert f"Worth {wording.money(invoice.free_energy.value)}" in page


def test_the_samples_credit_note_is_the_difference_of_the_revised_bill() -> None:
    invoice, credit = sample_invoice(), sample_credit_note()
    assert credit.kind is DocumentKind.CREDIT_NOTE
    assert credit.corrects == invoice.number
    revised_total = invoice.total + credit.total
    assert credit.total < 0
    assert revised_total > 0
    assert [day.day.day for day in credit.days] == [14, 15, 16]


def test_the_sample_command_writes_both_documents(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "freehours.documents.sample",
            "--pdf",
            str(tmp_path / "out.pdf"),
            "--html",
            str(tmp_path / "out.html"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    written = sorted(path.name for path in tmp_path.iterdir())
    assert written == ["out-credit-note.html", "out-credit-note.pdf", "out.html", "out.pdf"]
    assert "Credit note number CN-000007" in flat(
        pdf_pages((tmp_path / "out-credit-note.pdf").read_bytes())[0]
    )
    sections, _ = html_sections((tmp_path / "out.html").read_text(encoding="utf-8"))
    assert "Invoice number INV-000123" in sections["page-1"]


def test_the_sample_command_wants_somewhere_to_write() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "freehours.documents.sample"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert "give --pdf FILE, --html FILE or both" in result.stderr
