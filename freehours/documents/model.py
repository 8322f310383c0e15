"""The document model: what an invoice, a credit note or an adjustment invoice says, as plain
frozen values that the HTML and PDF renderers draw and nothing else.

Money and energy are exact ``Decimal``. Every amount is signed from the customer's side:
positive is owed to the retailer, negative is a credit to the customer (a credit note's lines
and total are negative, and the documents show them as credits, never with a minus sign).
Prices exclude GST; ``gst`` is added once, on the subtotal.

The model checks what a reader would otherwise be the first to notice: figures that do not add
up (lines to subtotal, subtotal and GST to total, total and account to amount due), a credit note
that charges, a correction that names no document, days outside the billing period. Each
refusal is a ``DocumentError`` naming the field and the values.

This module imports the standard library and the domain only: the invoicing core builds
documents from its own records (``freehours.documents.from_bill`` builds one from a bill),
and a renderer never reaches back into a store.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal, InvalidOperation
from enum import StrEnum

from freehours.domain.better_offer import UsageSummary
from freehours.domain.fields import (
    MAX_ADDRESS,
    MAX_CUSTOMER_NAME,
    MAX_LINE_CODE,
    MAX_MESSAGE,
    MAX_NUMBER,
    MAX_PLAN_ID,
    MAX_PLAN_NAME,
)
from freehours.domain.time import Region

ZERO = Decimal(0)
CENT = Decimal("0.01")

#: The longest billing period a document lays out (a quarter of 92 days): the daily table and
#: the chart are designed for it.
MAX_DAYS = 92
MAX_PAYMENT_METHODS = 6
#: Messages the AER has approved as Tier 1 information (Better Bills Guideline, section 37):
#: at most two on a first page, each of at most ``MAX_MESSAGE`` characters.
MAX_MESSAGES = 2


class DocumentError(ValueError):
    """A document model that cannot be rendered as it stands: the message names the field."""


class DocumentKind(StrEnum):
    """What a document is. A credit note and an adjustment invoice correct an earlier document
    (``InvoiceDocument.corrects``), for exactly the difference."""

    INVOICE = "invoice"
    CREDIT_NOTE = "credit_note"
    ADJUSTMENT_INVOICE = "adjustment_invoice"

    @property
    def label(self) -> str:
        """The document's name as its first page shows it."""
        return _LABELS[self]

    @property
    def corrects_another(self) -> bool:
        return self is not DocumentKind.INVOICE


_LABELS = {
    DocumentKind.INVOICE: "Tax invoice",
    DocumentKind.CREDIT_NOTE: "Credit note",
    DocumentKind.ADJUSTMENT_INVOICE: "Adjustment invoice",
}


@dataclass(frozen=True, slots=True)
class Contact:
    """Someone a customer can call: the distributor (faults and emergencies), the energy
    ombudsman, an interpreter service."""

    name: str
    phone: str
    website: str | None = None

    def __post_init__(self) -> None:
        _text("contact name", self.name)
        _text(f"{self.name}: phone", self.phone)


@dataclass(frozen=True, slots=True)
class Retailer:
    """Who issues the document, and how a customer reaches them.

    ``phone`` is the line for account enquiries and complaints; ``hardship_phone`` the line for
    customers having trouble paying (the same line when None). ``example`` marks details that
    are not a real retailer's (``freehours.documents.examples.EXAMPLE_RETAILER``): a document
    made with them says so on its first page, so that a sample is never taken for a bill.
    """

    name: str
    abn: str
    phone: str
    website: str
    postal_address: tuple[str, ...]
    email: str | None = None
    hardship_phone: str | None = None
    example: bool = False

    def __post_init__(self) -> None:
        _text("retailer name", self.name)
        _text("retailer phone", self.phone)
        _text("retailer website", self.website)
        if not self.postal_address:
            raise DocumentError("retailer postal_address: at least one line")
        check_abn(self.abn)


@dataclass(frozen=True, slots=True)
class PaymentMethod:
    """One way to pay: its name ("BPAY") and what the customer needs for it ("Biller code
    123456, reference 4103035611")."""

    name: str
    detail: str

    def __post_init__(self) -> None:
        _text("payment method name", self.name)


@dataclass(frozen=True, slots=True)
class Line:
    """One charge or credit: ``quantity`` ``unit`` at ``unit_price`` (excl. GST) is ``amount``."""

    code: str
    description: str
    quantity: Decimal
    unit: str
    unit_price: Decimal
    amount: Decimal

    def __post_init__(self) -> None:
        _text("line code", self.code)
        _longest("line code", self.code, MAX_LINE_CODE)
        _text("line description", self.description)
        _money(f"line {self.code} amount", self.amount)


@dataclass(frozen=True, slots=True)
class DailyUse:
    """One local day's energy: all consumption, and the part of it that was free in the window.
    On a correction, the change the revision made to that day (either may be negative).
    ``metered`` False: the day had no meter value at all, and is billed as zero without being
    a reading of zero (the documents say "No meter data")."""

    day: date
    consumption_kwh: Decimal
    free_kwh: Decimal
    metered: bool = True


@dataclass(frozen=True, slots=True)
class FreeEnergy:
    """The free window's part of the document: ``kwh`` used inside the window up to the daily
    cap, what it would have cost at the plan's prices (``value``, excl. GST, to the cent), the
    window on the customer's local clock ("11:00"-"14:00") and the cap."""

    kwh: Decimal
    value: Decimal
    window_start: str
    window_end: str
    cap_kwh_per_day: Decimal
    over_cap_kwh: Decimal = ZERO

    def __post_init__(self) -> None:
        _money("free energy value", self.value)
        for name, clock in (("window_start", self.window_start), ("window_end", self.window_end)):
            if len(clock) != 5 or clock[2] != ":" or not (clock[:2] + clock[3:]).isdigit():
                raise DocumentError(f"free energy {name}: {clock!r} is not HH:MM")
        if self.cap_kwh_per_day <= 0:
            raise DocumentError(f"free energy cap_kwh_per_day: {self.cap_kwh_per_day} is not > 0")


@dataclass(frozen=True, slots=True)
class AccountSummary:
    """The account before this document: what was owed, and what has been paid since (a
    positive amount). ``amount_due`` is then ``previous_balance - payments + total``."""

    previous_balance: Decimal
    payments: Decimal

    def __post_init__(self) -> None:
        _money("account previous_balance", self.previous_balance)
        _money("account payments", self.payments)


@dataclass(frozen=True, slots=True)
class BetterOffer:
    """What the better offer check found (``freehours.domain.better_offer``): ``plan_name`` and
    the yearly ``saving`` the customer could make on it, or ``saving`` None when the customer
    is on the retailer's best offer for them. ``gst_inclusive`` says which the saving is."""

    plan_name: str | None
    saving: Decimal | None
    gst_inclusive: bool = True
    #: The first day of the usage the check priced, where that is less than a year (the
    #: saving then an estimate for a year); None: the last 12 months.
    since: date | None = None

    def __post_init__(self) -> None:
        _longest("better offer plan_name", self.plan_name or "", MAX_PLAN_NAME)
        if self.saving is not None:
            _money("better offer saving", self.saving)
            if self.saving <= 0 or not self.plan_name:
                raise DocumentError(
                    "better offer: a saving is positive and names its plan "
                    f"(saving {self.saving}, plan {self.plan_name!r})"
                )


@dataclass(frozen=True, slots=True)
class InvoiceDocument:
    """One document as a household reads it. See the module docstring for signs and checks."""

    kind: DocumentKind
    number: str
    issue_date: date
    #: When the amount due is to be paid; None when nothing is to be paid (a credit).
    due_date: date | None
    retailer: Retailer
    nmi: str
    region: Region
    plan_id: str
    plan_name: str
    #: The billing period: first and last local date, inclusive.
    period_start: date
    period_end: date
    lines: tuple[Line, ...]
    subtotal: Decimal
    gst: Decimal
    total: Decimal
    amount_due: Decimal
    ombudsman: Contact
    interpreter: Contact
    #: The number of the document a credit note or adjustment invoice corrects.
    corrects: str | None = None
    #: Why a correction was made ("Revised meter data for 3 days").
    reason: str | None = None
    account_number: str | None = None
    customer_name: str | None = None
    supply_address: tuple[str, ...] = ()
    #: Where the document is posted, when not the supply address.
    billing_address: tuple[str, ...] = ()
    time_zone: str = ""
    free_energy: FreeEnergy | None = None
    days: tuple[DailyUse, ...] = ()
    account: AccountSummary | None = None
    payment_methods: tuple[PaymentMethod, ...] = ()
    #: The distributor's line for faults and emergencies.
    distributor: Contact | None = None
    better_offer: BetterOffer | None = None
    #: Usage compared: this period's, the previous period's and the same period's a year
    #: earlier, where there is data (Tier 2).
    usage: tuple[UsageSummary, ...] = ()
    #: The customer's last bill from this retailer (the account is closing).
    final_bill: bool = False
    #: Statements the AER has approved as Tier 1 information (section 37 of the guideline), such
    #: as the Energy Bill Relief Fund's "Your electricity bill has been reduced by ..."; shown on
    #: page 1 as given.
    messages: tuple[str, ...] = ()
    gst_rate: Decimal = field(default=Decimal("0.10"))

    def __post_init__(self) -> None:
        _text("number", self.number)
        _longest("number", self.number, MAX_NUMBER)
        _text("nmi", self.nmi)
        _text("plan_id", self.plan_id)
        _longest("plan_id", self.plan_id, MAX_PLAN_ID)
        _text("plan_name", self.plan_name)
        _longest("plan_name", self.plan_name, MAX_PLAN_NAME)
        _longest("customer_name", self.customer_name or "", MAX_CUSTOMER_NAME)
        _longest("supply_address", ", ".join(self.supply_address), MAX_ADDRESS)
        _longest("billing_address", ", ".join(self.billing_address), MAX_ADDRESS)
        if len(self.payment_methods) > MAX_PAYMENT_METHODS:
            raise DocumentError(
                f"payment_methods: {len(self.payment_methods)}; the first page lists at most "
                f"{MAX_PAYMENT_METHODS}"
            )
        if len(self.messages) > MAX_MESSAGES:
            raise DocumentError(f"messages: {len(self.messages)}; page 1 holds {MAX_MESSAGES}")
        for message in self.messages:
            _text("messages", message)
            _longest("messages", message, MAX_MESSAGE)
        self._check_kind()
        self._check_dates()
        self._check_figures()
        self._check_days()

    @property
    def period_days(self) -> int:
        return (self.period_end - self.period_start).days + 1

    @property
    def is_credit(self) -> bool:
        """Whether the customer is owed money (or nothing) rather than owing it."""
        return self.amount_due <= 0

    def _check_kind(self) -> None:
        if self.kind.corrects_another:
            if not self.corrects:
                raise DocumentError(f"corrects: a {self.kind.label.lower()} names the document")
            if self.corrects == self.number:
                raise DocumentError(f"corrects: {self.number} cannot correct itself")
        elif self.corrects is not None:
            raise DocumentError(f"corrects: an invoice corrects nothing (got {self.corrects!r})")
        if self.kind is DocumentKind.CREDIT_NOTE and self.total > 0:
            raise DocumentError(f"total: a credit note credits (total {self.total} is > 0)")
        if self.kind is DocumentKind.ADJUSTMENT_INVOICE and self.total < 0:
            raise DocumentError(
                f"total: an adjustment invoice charges (total {self.total} is < 0); "
                "a credit is a credit note"
            )

    def _check_dates(self) -> None:
        if self.period_end < self.period_start:
            raise DocumentError(
                f"period: the last day {self.period_end} is before the first {self.period_start}"
            )
        if self.period_days > MAX_DAYS:
            raise DocumentError(
                f"period: {self.period_days} days ({self.period_start} to {self.period_end}); "
                f"a document covers at most {MAX_DAYS}"
            )
        if self.amount_due > 0 and self.due_date is None:
            raise DocumentError(f"due_date: an amount due ({self.amount_due}) needs a due date")
        if self.due_date is not None and self.due_date < self.issue_date:
            raise DocumentError(
                f"due_date: {self.due_date} is before the issue date {self.issue_date}"
            )

    def _check_figures(self) -> None:
        if not self.lines:
            raise DocumentError("lines: a document has at least one line")
        for name in ("subtotal", "gst", "total", "amount_due"):
            _money(name, getattr(self, name))
        lines = sum((line.amount for line in self.lines), ZERO)
        if lines != self.subtotal:
            raise DocumentError(f"subtotal: {self.subtotal} is not the lines' sum {lines}")
        if self.subtotal + self.gst != self.total:
            raise DocumentError(
                f"total: {self.total} is not subtotal {self.subtotal} + GST {self.gst}"
            )
        if self.account is None:
            due = self.total
            how = f"the total {self.total} (no account summary)"
        else:
            due = self.account.previous_balance - self.account.payments + self.total
            how = (
                f"previous balance {self.account.previous_balance} - payments "
                f"{self.account.payments} + total {self.total} = {due}"
            )
        if self.amount_due != due:
            raise DocumentError(f"amount_due: {self.amount_due} is not {how}")

    def _check_days(self) -> None:
        previous: date | None = None
        for day in self.days:
            if not self.period_start <= day.day <= self.period_end:
                raise DocumentError(
                    f"days: {day.day} is outside the period "
                    f"{self.period_start} to {self.period_end}"
                )
            if previous is not None and day.day <= previous:
                raise DocumentError(f"days: {day.day} after {previous}: in order, once each")
            unread = not (self.kind.corrects_another or day.metered)
            if unread and (day.consumption_kwh or day.free_kwh):
                raise DocumentError(
                    f"days: {day.day} has no meter data but {day.consumption_kwh} kWh used and"
                    f" {day.free_kwh} kWh free"
                )
            if not self.kind.corrects_another and not (ZERO <= day.free_kwh <= day.consumption_kwh):
                raise DocumentError(
                    f"days: {day.day}: free {day.free_kwh} kWh is not within "
                    f"0 and the day's consumption {day.consumption_kwh} kWh"
                )
            previous = day.day


def check_abn(abn: str) -> None:
    """An Australian Business Number: 11 digits (spaces allowed) whose weighted sum, with 1
    taken from the first digit, is a multiple of 89 (the Australian Business Register's check).
    """
    digits = abn.replace(" ", "")
    if len(digits) != 11 or not digits.isdigit():
        raise DocumentError(f"retailer abn: {abn!r} is not 11 digits")
    values = [int(digit) for digit in digits]
    values[0] -= 1
    if sum(value * weight for value, weight in zip(values, _ABN_WEIGHTS, strict=True)) % 89:
        raise DocumentError(f"retailer abn: {abn!r} fails the ABN check digits")


_ABN_WEIGHTS = (10, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19)


def _longest(name: str, value: str, most: int) -> None:
    if len(value) > most:
        raise DocumentError(f"{name}: {len(value)} characters, at most {most}: {value[:40]!r}...")


def _text(name: str, value: str) -> None:
    if not value or not value.strip():
        raise DocumentError(f"{name}: empty")


def _money(name: str, value: Decimal) -> None:
    try:
        cents = value.is_finite() and value == value.quantize(CENT)
    except InvalidOperation:  # more digits than the context holds
        cents = False
    if not cents:
        raise DocumentError(f"{name}: {value} is not an amount in cents")
