"""The words of a document, made once for both renderers: the HTML and the PDF say the same
things in the same way, and a test that reads one reads the other.

Amounts are dollars and cents with thousands separators; a negative amount is a credit and
says so ("$12.34 credit"), never with a minus sign. Energy is kWh to the watt-hour (three
decimals, rounded half up), dates are written out ("5 August 2026").
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from decimal import ROUND_HALF_UP, Decimal

from freehours.documents.examples import COMPARATORS
from freehours.documents.model import ZERO, DocumentKind, InvoiceDocument

WATT_HOUR = Decimal("0.001")
#: What page 1 says when its messages leave no room for the chart, which then opens page 2.
CHART_ON_PAGE_2 = "The chart of your daily use is at the top of page 2."
CENT = Decimal("0.01")

_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)


def dollars(amount: Decimal) -> str:
    """``$1,234.56`` for the size of an amount, whatever its sign."""
    return f"${abs(amount).quantize(CENT, ROUND_HALF_UP):,.2f}"


def money(amount: Decimal) -> str:
    """An amount as a customer reads it: ``$1,234.56``, or ``$1,234.56 credit`` below zero."""
    return f"{dollars(amount)} credit" if amount < 0 else dollars(amount)


def kwh(value: Decimal) -> str:
    """``1,234.567 kWh``: energy to the watt-hour (a change below zero reads ``-0.500 kWh``)."""
    rounded = value.quantize(WATT_HOUR, ROUND_HALF_UP)
    return f"{rounded + 0:,.3f} kWh"  # + 0: never "-0.000"


def kwh_exact(value: Decimal) -> str:
    """A plan's figure as the plan gives it: ``24 kWh``, ``7.5 kWh``."""
    return f"{value.normalize() + 0:,f} kWh"


def long_date(day: date) -> str:
    return f"{day.day} {_MONTHS[day.month - 1]} {day.year}"


def short_date(day: date) -> str:
    return f"{day.day} {_MONTHS[day.month - 1][:3]}"


def span_text(first: date, last: date) -> str:
    """Two dates as a span: ``1 Jul to 31 Jul 2026``, ``1 Dec 2025 to 28 Feb 2026``."""
    if first.year == last.year:
        return f"{short_date(first)} to {short_date(last)} {last.year}"
    return f"{short_date(first)} {first.year} to {short_date(last)} {last.year}"


def rate(price: Decimal, unit: str) -> str:
    """A unit price as the charges table shows it: ``$0.2300/kWh`` (at least two decimals, as
    exact as the plan gives it); a price below zero is a credit per unit."""
    text = format(abs(price), "f")
    whole, _, cents = text.partition(".")
    text = f"{int(whole):,}.{cents.ljust(2, '0')}"
    credit = " credit" if price < 0 else ""
    return f"${text}/{unit}{credit}"


def quantity(value: Decimal, unit: str) -> str:
    if unit == "kWh":
        return kwh(value)
    count = value.normalize()
    text = f"{count:,f}" if count == count.to_integral_value() else f"{value:,f}"
    plural = "" if abs(value) == 1 else "s"
    return f"{text} {unit}{plural}" if unit == "day" else f"{text} {unit}"


def period(document: InvoiceDocument) -> str:
    days = document.period_days
    return (
        f"{long_date(document.period_start)} to {long_date(document.period_end)} "
        f"({days} day{'' if days == 1 else 's'})"
    )


def number_label(document: InvoiceDocument) -> str:
    """What the number is called: an invoice number or a credit note number."""
    return "Credit note number" if document.kind is DocumentKind.CREDIT_NOTE else "Invoice number"


@dataclass(frozen=True, slots=True)
class Headline:
    """The amount box of the first page."""

    label: str
    amount: str
    due: str


def headline(document: InvoiceDocument) -> Headline:
    due = document.amount_due
    if due > 0:
        assert document.due_date is not None  # the model requires one
        return Headline("Amount due", dollars(due), f"Due by {long_date(document.due_date)}")
    if due < 0:
        label = (
            "Credit to your account"
            if document.kind is DocumentKind.CREDIT_NOTE
            else "Your account is in credit"
        )
        if document.kind is DocumentKind.CREDIT_NOTE:
            return Headline(label, dollars(due), "We will take it off your next bill.")
        return Headline(label, dollars(due), "Nothing to pay: we take it off your next bill")
    return Headline("Amount due", dollars(ZERO), "Nothing to pay")


def correction(document: InvoiceDocument) -> str | None:
    """What a credit note or an adjustment invoice corrects, and why."""
    if document.corrects is None:
        return None
    what = (
        f"This {document.kind.label.lower()} corrects invoice {document.corrects}"
        f" for {period(document)}"
    )
    if document.kind is DocumentKind.CREDIT_NOTE:
        what += f": it credits {dollars(document.total)} including GST"
    else:
        what += f": it charges {dollars(document.total)} more including GST"
    return f"{what}. {document.reason}" if document.reason else f"{what}."


def free_energy(document: InvoiceDocument) -> tuple[str, str, str] | None:
    """The free window's figures: the energy, its value, and how the window works. On a
    correction, how much the revision changed them."""
    free = document.free_energy
    if free is None:
        return None
    window = f"{free.window_start} to {free.window_end}"
    how = (
        f"Energy you use from {window} each day is free, up to {kwh_exact(free.cap_kwh_per_day)}"
        " a day (Solar Sharer)."
    )
    if free.over_cap_kwh > 0:
        how += f" {kwh(free.over_cap_kwh)} in the window was over the cap and is charged."
    if not document.kind.corrects_another and free.kwh == 0:
        how += " " + _why_no_free_energy(document)
    if not document.kind.corrects_another:
        return (
            f"Free energy used: {kwh(free.kwh)}",
            f"Worth {money(free.value)} at your plan's prices (excl. GST)",
            how,
        )
    if free.kwh == 0:
        return ("Free energy: unchanged", "Worth the same as invoiced", how)
    return (
        f"Free energy: {kwh(abs(free.kwh))} {'more' if free.kwh > 0 else 'less'} than invoiced",
        f"Worth {dollars(free.value)} {'less' if free.value < 0 else 'more'} at your plan's"
        " prices (excl. GST)",
        how,
    )


def _why_no_free_energy(document: InvoiceDocument) -> str:
    """Why an invoice's free energy is none: no meter data, or no energy from the grid in the
    window on any day read."""
    if not any(day.metered for day in document.days):
        return "We have no meter data for this bill yet, so there is no free energy to show."
    return (
        "Your meter shows you took no energy from the grid in those hours on any day of this"
        " bill, so none was free. Your solar panels may have covered your use then."
    )


def no_free_window(document: InvoiceDocument) -> str:
    """What the free energy panel says for a plan without a free window."""
    return "Your plan has no free energy window, so all the energy you use is charged."


#: The heading of the better offer message: Energy Made Easy's words for it
#: (docs/invoices.md, The better offer check).
BETTER_OFFER_HEADING = "Could you save money on another plan?"


def better_offer(document: InvoiceDocument) -> str:
    """The better offer message, or where to compare offers when there is no check (a credit
    note, a final bill, a customer without data)."""
    offer = document.better_offer
    compare = f"Compare offers from all retailers at {COMPARATORS[document.region]}."
    if document.final_bill or offer is None:
        return compare
    based = (
        "based on your use over the last 12 months"
        if offer.since is None
        else f"estimated from your use since {long_date(offer.since)}"
    )
    if offer.saving is None:
        return f"You are on our best plan for you, {based}. {compare}"
    gst = "including" if offer.gst_inclusive else "excluding"
    return (
        f"Yes. You could save {dollars(offer.saving)} a year ({gst} GST) on our"
        f" {offer.plan_name} plan, {based}. Call us on {document.retailer.phone} to switch."
        f" {compare}"
    )


#: Usage compared: each row's name.
USAGE_LABELS = {
    "this_period": "This bill",
    "previous_period": "Your last bill",
    "year_earlier": "Same time last year",
}


def usage_rows(document: InvoiceDocument) -> list[tuple[str, str, str, str]]:
    """Usage compared, a row per period with data: its name, its dates, the average a day and
    the free window's share of the energy used."""
    rows = []
    for summary in document.usage:
        share = summary.free_share
        rows.append(
            (
                USAGE_LABELS[summary.kind.value],
                span_text(summary.start, summary.end),
                f"{summary.average_daily_kwh} kWh",
                "none used" if share is None else f"{share}%",
            )
        )
    return rows


def help_items(document: InvoiceDocument) -> list[tuple[str, str]]:
    """Who to call, for what: the retailer, payment help, faults, an interpreter, the
    ombudsman."""
    retailer = document.retailer
    items = [
        ("Account enquiries and complaints", f"{retailer.name}: {retailer.phone}"),
        (
            "Trouble paying?",
            f"Call {retailer.hardship_phone or retailer.phone} to ask about payment plans and"
            " our hardship program",
        ),
    ]
    if document.distributor is not None:
        items.append(
            (
                "Power failures and emergencies (24 hours)",
                f"{document.distributor.name}: {document.distributor.phone}",
            )
        )
    items.append(
        (
            "Need an interpreter?",
            f"{document.interpreter.name}: {document.interpreter.phone}",
        )
    )
    ombudsman = document.ombudsman
    website = f", {ombudsman.website}" if ombudsman.website else ""
    items.append(
        (
            "Complaint not resolved?",
            f"{ombudsman.name}: {ombudsman.phone}{website} (free and independent)",
        )
    )
    return items


def facts(document: InvoiceDocument) -> list[tuple[str, str]]:
    """The first page's account facts, in order."""
    rows: list[tuple[str, str]] = []
    if document.customer_name:
        rows.append(("Customer", document.customer_name))
    if document.account_number:
        rows.append(("Account number", document.account_number))
    rows.append(("NMI", document.nmi))
    if document.supply_address:
        rows.append(("Supply address", ", ".join(document.supply_address)))
    if document.billing_address and document.billing_address != document.supply_address:
        rows.append(("Billing address", ", ".join(document.billing_address)))
    rows.append(("Billing period", period(document)))
    rows.append(("Issue date", long_date(document.issue_date)))
    return rows


def example_notice(document: InvoiceDocument) -> str | None:
    if document.retailer.example:
        return "Sample document: the retailer details on it are example values."
    return None


def final_bill(document: InvoiceDocument) -> str | None:
    return "This is your final bill for this account." if document.final_bill else None


def notices(document: InvoiceDocument) -> list[str]:
    """The first page's messages under the amount: a final bill's, the AER-approved ones, and
    what a correction corrects."""
    found = [final_bill(document), *document.messages, correction(document)]
    return [message for message in found if message]


def account_rows(document: InvoiceDocument) -> list[tuple[str, str, bool]]:
    """The account summary as (label, amount, whether it is the result), or none."""
    account = document.account
    if account is None:
        return []
    return [
        ("Previous balance", money(account.previous_balance), False),
        ("Payments received, thank you", money(-account.payments), False),
        (f"This {document.kind.label.lower()}", money(document.total), False),
        (headline(document).label, money(document.amount_due), True),
    ]


def totals(document: InvoiceDocument) -> list[tuple[str, str, bool]]:
    """Subtotal, GST and total as (label, amount, whether it is the result)."""
    return [
        ("Subtotal (excl. GST)", money(document.subtotal), False),
        (f"GST ({document.gst_rate * 100:.0f}%)", money(document.gst), False),
        (f"Total of this {document.kind.label.lower()} (incl. GST)", money(document.total), True),
    ]


def plan_rows(document: InvoiceDocument) -> list[tuple[str, str]]:
    rows = [
        ("Plan", f"{document.plan_name} ({document.plan_id})"),
        ("Region", document.region.value),
    ]
    if document.time_zone:
        rows.append(("Local time", document.time_zone))
    free = document.free_energy
    if free is not None:
        rows.append(("Free window", f"{free.window_start} to {free.window_end} every day"))
        rows.append(("Daily cap", f"{kwh_exact(free.cap_kwh_per_day)} free a day"))
    rows.append(("Prices", "exclude GST, which is added once on the subtotal"))
    return rows


def credit_note_note(document: InvoiceDocument) -> str | None:
    """What a credit note's detail says under its totals."""
    if document.kind is not DocumentKind.CREDIT_NOTE:
        return None
    return (
        "Amounts marked credit are taken off what you owe. This credit note is an adjustment"
        " note for GST purposes."
    )


def daily_columns(count: int) -> int:
    """How many columns the daily-use table takes for ``count`` days."""
    return 1 if count <= 8 else 2 if count <= 32 else 3 if count <= 63 else 4


def payment_heading(document: InvoiceDocument) -> str:
    """The heading of page 1's payment part; a credit note has no payment methods, and this
    part says what happens to its credit (``credit_text``)."""
    if document.kind is DocumentKind.CREDIT_NOTE:
        return "What happens to your credit"
    return "Ways to pay your bills" if document.is_credit else "How to pay"


def credit_text(document: InvoiceDocument) -> list[str] | None:
    """What a credit note's payment part says instead of ways to pay; None for any other
    document."""
    if document.kind is not DocumentKind.CREDIT_NOTE:
        return None
    phone = document.retailer.phone
    return [
        f"We will take {dollars(document.amount_due)} off your next bill."
        " You do not need to do anything.",
        f"Would you rather have the money paid to you? Call us on {phone}.",
    ]


#: How the daily-use table marks a day without any meter value, and the note that explains it.
NO_DATA_MARK = "*"
NO_DATA = f"No meter data{NO_DATA_MARK}"


def unmetered(document: InvoiceDocument) -> int:
    """How many of the document's days had no meter data."""
    return sum(not day.metered for day in document.days)


def no_data_note(document: InvoiceDocument) -> str | None:
    """The note under the daily-use table for its days marked "No meter data", or None."""
    count = unmetered(document)
    if not count:
        return None
    these = "this day" if count == 1 else f"these {count} days"
    return (
        f"{NO_DATA_MARK} No meter data: we have no readings from your meter for {these}."
        " We charged the daily supply charge only, and no energy. This is not the same as"
        " using no energy. If the readings reach us later, we will send you a correction."
    )


def legend(document: InvoiceDocument) -> list[tuple[str, str]]:
    """The chart's legend: (which bar, what it shows), the free window's first with its kWh
    (its part of a bar may be drawn taller than its share: ``chart.MIN_FREE``), and the days
    without meter data when there are any."""
    change = document.kind.corrects_another
    missing = unmetered(document)
    gap = [("none", f"No meter data ({missing} day{'' if missing == 1 else 's'})")]
    gap = gap if missing else []
    free = document.free_energy
    if free is None:
        return [("use", "Change in energy used" if change else "Energy used"), *gap]
    if change:
        return [
            ("free", "Change in energy used in the free window"),
            ("use", "Change in energy used at other times"),
            *gap,
        ]
    return [
        ("free", f"Free in the window: {kwh(free.kwh)}"),
        ("use", "Used at other times"),
        *gap,
    ]
