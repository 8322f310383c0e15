"""The accounting export: an invoice run's documents as manual journals, in the CSV layout Xero
imports (Accounting > Manual Journals > Import).

The layout is Xero's manual journal import template (Xero Central, "Enter multiple manual
journals using an import template", help.xero.com/ManualJournalsImport): a header row of
``*Narration,*Date,Description,*AccountCode,*TaxRate,*Amount,TrackingName1,TrackingOption1``
(the asterisk marks a column Xero requires), then one row per journal line. The rows that share
a narration and a date are the lines of one journal, and each journal must balance. ``Amount``
is a debit when positive and a credit when negative; ``Date`` is ``dd/mm/yyyy`` (the template
takes that or ``dd mmm yyyy``, not ISO 8601); ``AccountCode`` is the code of an account of the
organisation's chart (``200``, not ``200 - Sales``), and ``TaxRate`` the full name of one of its
tax rates (``GST on Income``, ``BAS Excluded``).

One journal per document, its narration the document's number and NMI, dated its issue date:

- the total to accounts receivable (a debit; a credit note's negative total, a credit);
- each line's amount to its revenue account, with the opposite sign: energy of every band to
  energy sales, the daily supply charge to supply sales, the feed-in credit (a negative line)
  to a feed-in expense, which so becomes a debit; a line of no amount (the free energy, priced
  at nothing) has no journal line;
- the GST to the GST account, a credit (a credit note's, a debit);
- should the rounded lines not meet the total exactly (a stored document's lines are each to
  the cent and add up, so they do), the cents left to the rounding account.

A credit note is its figures' differences, negative where it credits: the same rule reverses
what its invoice posted, line by line. Every amount is to the cent and each journal sums to
exactly zero (``tests/test_journal.py`` holds both to random documents).

The GST is posted as a line of its own, so every line's tax rate is ``BAS Excluded`` by default:
a rate that makes Xero work the tax out of a line (``GST on Income``) would count it twice. The
account codes are those of Xero's Australian demo chart, and ``Chart`` is where an organisation
puts its own.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal

from freehours.domain.invoicing import DocumentType
from freehours.store.invoices import StoredDocument

#: Xero's manual journal import columns, in the template's order.
HEADER = (
    "*Narration",
    "*Date",
    "Description",
    "*AccountCode",
    "*TaxRate",
    "*Amount",
    "TrackingName1",
    "TrackingOption1",
)

CENT = Decimal("0.01")
ZERO = Decimal(0)

#: The line codes of the supply charge and the feed-in credit (``freehours.domain.bill``); a code
#: ``SUPPLY_n`` (a season's) or ``..._SUPPLY`` (a controlled load's) is a supply charge too;
#: every other code is energy.
SUPPLY = "SUPPLY"
FEED_IN = "FEED_IN"

_KINDS = {
    DocumentType.INVOICE: "Invoice",
    DocumentType.ADJUSTMENT_INVOICE: "Adjustment invoice",
    DocumentType.CREDIT_NOTE: "Credit note",
}


@dataclass(frozen=True, slots=True)
class Chart:
    """The accounts and tax rate a journal posts to (codes of the organisation's chart)."""

    receivable: str = "610"  # Accounts Receivable
    energy_sales: str = "200"  # Sales: energy, every band
    supply_sales: str = "201"  # Sales: daily supply charges
    feed_in_expense: str = "310"  # Cost of sales: solar feed-in credits
    gst: str = "820"  # GST
    rounding: str = "860"  # Rounding
    tax_rate: str = "BAS Excluded"
    #: The tracking category each line is tagged with (empty: none); its option is the region.
    tracking_name: str = "Region"
    #: Accounts of line codes that are not the rule's (a band of a code of its own, say).
    by_code: dict[str, str] = field(default_factory=dict)

    def revenue_account(self, code: str) -> str:
        if code in self.by_code:
            return self.by_code[code]
        if code == SUPPLY or code.startswith(SUPPLY + "_") or code.endswith("_" + SUPPLY):
            return self.supply_sales
        if code == FEED_IN:
            return self.feed_in_expense
        return self.energy_sales


DEFAULT_CHART = Chart()


@dataclass(frozen=True, slots=True)
class JournalLine:
    """One row of the import: a line of the journal named by ``narration``."""

    narration: str
    date: str
    description: str
    account: str
    tax_rate: str
    amount: Decimal
    tracking_name: str
    tracking_option: str

    def row(self) -> tuple[str, ...]:
        return (
            self.narration,
            self.date,
            self.description,
            self.account,
            self.tax_rate,
            format(self.amount, "f"),
            self.tracking_name,
            self.tracking_option,
        )


def to_cent(amount: Decimal) -> Decimal:
    """Money to the cent, half up (as the bill rounds), never ``-0.00``."""
    rounded = amount.quantize(CENT, ROUND_HALF_UP)
    return rounded if rounded else ZERO.quantize(CENT)


def journal(document: StoredDocument, chart: Chart = DEFAULT_CHART) -> list[JournalLine]:
    """The journal of one document: its lines, summing to exactly zero."""
    figures = document.figures
    narration = f"{document.number} NMI {document.nmi}"
    when = document.issue_date.strftime("%d/%m/%Y")
    kind = _KINDS[document.document_type]
    period = f"{document.period_start.isoformat()} to {document.period_end.isoformat()}"
    option = document.region.value if chart.tracking_name else ""

    def line(description: str, account: str, amount: Decimal) -> JournalLine:
        tracking = chart.tracking_name
        return JournalLine(
            narration, when, description, account, chart.tax_rate, amount, tracking, option
        )

    total = to_cent(figures.total)
    lines = [line(f"{kind} {document.number}, {period}", chart.receivable, total)]
    for bill_line in figures.lines:
        amount = to_cent(-bill_line.amount)
        if amount:
            lines.append(line(bill_line.description, chart.revenue_account(bill_line.code), amount))
    gst = to_cent(-figures.gst)
    if gst:
        lines.append(line("GST", chart.gst, gst))
    residue = -sum((entry.amount for entry in lines), ZERO)
    if residue:
        lines.append(line("Rounding", chart.rounding, to_cent(residue)))
    return lines


def journals(
    documents: Iterable[StoredDocument], chart: Chart = DEFAULT_CHART
) -> Iterator[JournalLine]:
    """The journals of ``documents``, one after another."""
    for document in documents:
        yield from journal(document, chart)


def journal_csv(documents: Iterable[StoredDocument], chart: Chart = DEFAULT_CHART) -> str:
    """The import file of ``documents``' journals: the header, then their lines (CRLF, as the
    csv module writes and spreadsheets read)."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(HEADER)
    for entry in journals(documents, chart):
        writer.writerow(entry.row())
    return out.getvalue()
