"""Documents with literal figures, and the documents' text read back: the PDF's page by page
(pypdf) and the HTML's section by section (the standard library's html.parser)."""

from __future__ import annotations

import io
from dataclasses import replace
from datetime import date, timedelta
from decimal import Decimal
from html.parser import HTMLParser
from typing import Any

import pypdf

from freehours.documents.examples import (
    EXAMPLE_DISTRIBUTOR,
    EXAMPLE_RETAILER,
    INTERPRETER,
    OMBUDSMEN,
    example_payment_methods,
)
from freehours.documents.model import (
    AccountSummary,
    DailyUse,
    DocumentKind,
    FreeEnergy,
    InvoiceDocument,
    Line,
)
from freehours.domain.time import Region

D = Decimal

#: An invoice for July 2026 whose every figure is written here: 0.23 x 100 = 23.00,
#: 0.52 x 50.5 = 26.26, 1.10 x 31 = 34.10, feed-in 0.04 x 80 = 3.20 credit; subtotal 80.16,
#: GST 8.02, total 88.18; previous balance 50.00, paid 50.00: 88.18 due.
LINES = (
    Line("OFF_PEAK", "Off peak energy", D("100.000"), "kWh", D("0.2300"), D("23.00")),
    Line("PEAK", "Peak energy", D("50.500"), "kWh", D("0.5200"), D("26.26")),
    Line("SUPPLY", "Daily supply charge", D(31), "day", D("1.1000"), D("34.10")),
    Line("FEED_IN", "Solar feed-in credit", D("80.000"), "kWh", D("0.0400"), D("-3.20")),
    Line("FREE_ENERGY", "Free energy 11:00-14:00", D("93.250"), "kWh", D(0), D("0.00")),
)
JULY = date(2026, 7, 1)


def days(count: int = 31, start: date = JULY) -> tuple[DailyUse, ...]:
    return tuple(
        DailyUse(start + timedelta(days=n), D("10.5") + n % 7, D("3.008") + (n % 3))
        for n in range(count)
    )


def invoice(**changes: Any) -> InvoiceDocument:
    document = InvoiceDocument(
        kind=DocumentKind.INVOICE,
        number="INV-004217",
        issue_date=date(2026, 8, 3),
        due_date=date(2026, 8, 17),
        retailer=EXAMPLE_RETAILER,
        nmi="4103035611",
        region=Region.NSW,
        plan_id="sso-nsw",
        plan_name="Solar Sharer Offer, New South Wales",
        period_start=JULY,
        period_end=date(2026, 7, 31),
        lines=LINES,
        subtotal=D("80.16"),
        gst=D("8.02"),
        total=D("88.18"),
        amount_due=D("88.18"),
        ombudsman=OMBUDSMEN[Region.NSW],
        interpreter=INTERPRETER,
        account_number="1000 2345 6789",
        customer_name="Alex Example",
        supply_address=("12 Example Street", "Newtown NSW 2042"),
        time_zone="Australia/Sydney",
        free_energy=FreeEnergy(D("93.250"), D("27.98"), "11:00", "14:00", D(24)),
        days=days(),
        account=AccountSummary(D("50.00"), D("50.00")),
        payment_methods=example_payment_methods("1000234567"),
        distributor=EXAMPLE_DISTRIBUTOR,
    )
    return replace(document, **changes) if changes else document


def with_unread_days() -> InvoiceDocument:
    """The invoice with no meter data on 1 to 3 July, and 4 July read as zero all day."""
    unread = tuple(DailyUse(JULY + timedelta(days=n), D(0), D(0), metered=False) for n in range(3))
    zero = DailyUse(JULY + timedelta(days=3), D(0), D(0))
    return invoice(days=(*unread, zero, *days()[4:]))


#: A credit note for three revised days of INV-004217: 4.5 kWh less peak (2.34 credit) and
#: 1.25 kWh less free; GST 0.23 credit, total 2.57 credit.
def credit_note(**changes: Any) -> InvoiceDocument:
    base = invoice()
    lines = (
        Line("PEAK", "Peak energy", D("-4.500"), "kWh", D("0.5200"), D("-2.34")),
        Line("FREE_ENERGY", "Free energy 11:00-14:00", D("-1.250"), "kWh", D(0), D("0.00")),
    )
    document = replace(
        base,
        kind=DocumentKind.CREDIT_NOTE,
        number="CN-000031",
        corrects="INV-004217",
        reason="Your meter data for 14 to 16 July 2026 was revised.",
        issue_date=date(2026, 8, 24),
        due_date=None,
        lines=lines,
        subtotal=D("-2.34"),
        gst=D("-0.23"),
        total=D("-2.57"),
        amount_due=D("-2.57"),
        account=None,
        free_energy=FreeEnergy(D("-1.250"), D("-0.41"), "11:00", "14:00", D(24)),
        days=tuple(DailyUse(date(2026, 7, day), D("-1.500"), D("-0.417")) for day in (14, 15, 16)),
    )
    return replace(document, **changes) if changes else document


#: An adjustment invoice for the same days revised upwards: 3 kWh more peak, 1.56 + 0.16 GST.
def adjustment_invoice(**changes: Any) -> InvoiceDocument:
    document = replace(
        credit_note(),
        kind=DocumentKind.ADJUSTMENT_INVOICE,
        number="INV-004388",
        due_date=date(2026, 9, 7),
        lines=(Line("PEAK", "Peak energy", D("3.000"), "kWh", D("0.5200"), D("1.56")),),
        subtotal=D("1.56"),
        gst=D("0.16"),
        total=D("1.72"),
        amount_due=D("1.72"),
        free_energy=FreeEnergy(D("0.000"), D("0.00"), "11:00", "14:00", D(24)),
        days=tuple(DailyUse(date(2026, 7, day), D("1.000"), D(0)) for day in (14, 15, 16)),
    )
    return replace(document, **changes) if changes else document


def pdf_pages(data: bytes) -> list[str]:
    """Each page's text, as pypdf extracts it."""
    reader = pypdf.PdfReader(io.BytesIO(data))
    return [page.extract_text() for page in reader.pages]


def flat(text: str) -> str:
    """Text with its line breaks and runs of spaces as single spaces: a wrapped phrase is found
    whole."""
    return " ".join(text.split())


class _Sections(HTMLParser):
    """The text inside each element that has an id, and the page's whole text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[tuple[str, str | None]] = []
        self.text: dict[str, list[str]] = {"": []}
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag in _VOID:
            return
        ident = dict(attrs).get("id")
        self.open.append((tag, ident))
        if ident:
            self.text.setdefault(ident, [])

    def handle_endtag(self, tag: str) -> None:
        while self.open:
            name, _ = self.open.pop()
            if name == tag:
                break

    def handle_data(self, data: str) -> None:
        self.text[""].append(data)
        for _, ident in self.open:
            if ident:
                self.text[ident].append(data)


_VOID = {"meta", "link", "br", "img", "input", "hr", "col", "area", "base", "source", "wbr"}


def html_sections(page: str) -> tuple[dict[str, str], list[tuple[str, dict[str, str | None]]]]:
    """The text of each element with an id (``""``: the whole page), and every start tag."""
    parser = _Sections()
    parser.feed(page)
    parser.close()
    return {key: flat(" ".join(parts)) for key, parts in parser.text.items()}, parser.tags
