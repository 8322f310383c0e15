"""Any document the model accepts renders, as PDF and HTML, in the pages it is designed for:
long names, names in any script, many lines, zero and negative amounts, 1 to 92 days, every
kind. Page 1 always holds the number, the NMI and the amount."""

from __future__ import annotations

from dataclasses import replace
from datetime import date, timedelta
from decimal import ROUND_HALF_UP, Decimal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from freehours.documents import wording
from freehours.documents.html import render_html
from freehours.documents.model import (
    MAX_ADDRESS,
    MAX_DAYS,
    MAX_MESSAGE,
    MAX_MESSAGES,
    MAX_PLAN_NAME,
    AccountSummary,
    DailyUse,
    DocumentKind,
    FreeEnergy,
    InvoiceDocument,
    Line,
    PaymentMethod,
)
from freehours.documents.pdf import TWO_PAGE_LINES, charge_rows, render_pdf
from tests.documents.builders import flat, html_sections, invoice, pdf_pages

CENT = Decimal("0.01")
# Any character but surrogates and the unassigned: names come from customers and retailers.
TEXT = st.characters(blacklist_categories=("Cs", "Cn"))


def words(most: int) -> st.SearchStrategy[str]:
    return st.text(TEXT, min_size=1, max_size=most).filter(lambda text: text.strip() != "")


cents = st.integers(-200_000, 200_000).map(lambda n: Decimal(n) / 100)
kwh = st.integers(0, 80_000).map(lambda n: Decimal(n) / 1000)
change = st.integers(-30_000, 30_000).map(lambda n: Decimal(n) / 1000)


@st.composite
def documents(draw: st.DrawFn) -> InvoiceDocument:
    kind = draw(st.sampled_from(list(DocumentKind)))
    count = draw(st.integers(1, MAX_DAYS))
    start = date(2026, 1, 1) + timedelta(days=draw(st.integers(0, 700)))
    amounts = draw(st.lists(cents, min_size=1, max_size=40))
    if kind is DocumentKind.CREDIT_NOTE:
        amounts = [-abs(amount) for amount in amounts]
    elif kind is DocumentKind.ADJUSTMENT_INVOICE:
        amounts = [abs(amount) for amount in amounts]
    lines = tuple(
        Line(
            f"L{index}",
            draw(words(60)),
            draw(change),
            draw(st.sampled_from(["kWh", "day"])),
            Decimal(draw(st.integers(-10_000, 10_000))) / 10_000,
            amount,
        )
        for index, amount in enumerate(amounts)
    )
    subtotal = sum((line.amount for line in lines), Decimal(0))
    gst = (subtotal * Decimal("0.1")).quantize(CENT, ROUND_HALF_UP)
    total = subtotal + gst
    account = None
    if kind is DocumentKind.INVOICE and draw(st.booleans()):
        account = AccountSummary(draw(cents), abs(draw(cents)))
    due = total if account is None else account.previous_balance - account.payments + total
    days = []
    for offset in sorted(draw(st.sets(st.integers(0, count - 1), max_size=count))):
        if kind is DocumentKind.INVOICE:
            used = draw(kwh)
            days.append(DailyUse(start + timedelta(days=offset), used, min(used, draw(kwh))))
        else:
            days.append(DailyUse(start + timedelta(days=offset), draw(change), draw(change)))
    free = None
    if draw(st.booleans()):
        free = FreeEnergy(draw(kwh), abs(draw(cents)), "11:00", "14:00", Decimal(24))
    issued = start + timedelta(days=count + 2)
    return replace(
        invoice(),
        kind=kind,
        number=draw(st.from_regex(r"[A-Z]{2,4}-[0-9]{1,12}", fullmatch=True)),
        corrects=None if kind is DocumentKind.INVOICE else "INV-000001",
        reason=draw(st.none() | words(200)),
        issue_date=issued,
        due_date=issued + timedelta(days=14) if due > 0 else None,
        period_start=start,
        period_end=start + timedelta(days=count - 1),
        plan_name=draw(words(MAX_PLAN_NAME)),
        customer_name=draw(st.none() | words(80)),
        supply_address=tuple(draw(st.lists(words(MAX_ADDRESS // 3 - 2), max_size=3))),
        lines=lines,
        subtotal=subtotal,
        gst=gst,
        total=total,
        amount_due=due,
        account=account,
        days=tuple(days),
        free_energy=free,
        payment_methods=tuple(
            PaymentMethod(draw(words(20)), draw(words(90))) for _ in range(draw(st.integers(0, 6)))
        ),
        final_bill=draw(st.booleans()),
        messages=tuple(draw(st.lists(words(MAX_MESSAGE), max_size=MAX_MESSAGES))),
        billing_address=tuple(draw(st.lists(words(MAX_ADDRESS // 3 - 2), max_size=3))),
    )


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents())
def test_any_document_renders_in_its_pages_with_page_1_first(document: InvoiceDocument) -> None:
    pages = pdf_pages(render_pdf(document))
    rows = charge_rows(document)
    if rows <= TWO_PAGE_LINES:
        assert len(pages) == 2, rows
    else:
        # 40 lines of three rows each at most: the charges continue, a page at most each
        assert 2 <= len(pages) <= 4, rows
    first = flat(pages[0])
    headline = wording.headline(document)
    for item in (document.number, f"NMI {document.nmi}", headline.amount, headline.due):
        assert item in first, item
    assert f"Page 1 of {len(pages)}" in first
    sections, _ = html_sections(render_html(document))
    for item in (document.number, headline.amount, headline.due):
        assert item in sections["page-1"], item
