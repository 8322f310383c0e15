"""An example invoice and credit note, made end to end by the domain's own rules, and rendered:

    python -m freehours.documents.sample --pdf out.pdf --html out.html

writes the invoice to ``out.pdf`` and ``out.html`` and the credit note beside them
(``out-credit-note.pdf``, ``out-credit-note.html``). The meter data is simulated (a household
in New South Wales that moves its washing, dishwasher and car charging into the free window),
rated and billed by ``freehours.domain`` under a plan with the Solar Sharer window and the
prices of the built-in ``sso-nsw`` plan (example prices); the credit note is what a revision of
three of its days makes, for exactly the difference. The retailer details are
``EXAMPLE_RETAILER``'s, and the documents say so.
"""

from __future__ import annotations

import argparse
import random
import sys
from dataclasses import replace
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path

from freehours.documents.examples import (
    EXAMPLE_DISTRIBUTOR,
    EXAMPLE_RETAILER,
    example_payment_methods,
)
from freehours.documents.from_bill import invoice_from_bill
from freehours.documents.html import render_html
from freehours.documents.model import (
    ZERO,
    AccountSummary,
    BetterOffer,
    DailyUse,
    DocumentKind,
    FreeEnergy,
    InvoiceDocument,
    Line,
)
from freehours.documents.pdf import render_pdf
from freehours.domain.better_offer import UsageKind, UsageSummary, summarise
from freehours.domain.bill import Bill, make_bill
from freehours.domain.plan import Band, DayName, FeedIn, FreeWindow, Period, Plan, TimeZoneMode
from freehours.domain.rating import rate
from freehours.domain.reads import IntervalDay
from freehours.domain.time import NEM_TIME, Region

NMI = "4103035611"
START = date(2026, 7, 1)
DAYS = 31
ISSUED = date(2026, 8, 3)

#: The prices of the built-in ``sso-nsw`` plan (freehours/plans/builtin/sso-nsw.toml), which
#: are example prices, not a retailer's offer.
PLAN = Plan(
    id="sso-nsw",
    region=Region.NSW,
    time_zone=TimeZoneMode.LOCAL,
    daily_supply_charge=Decimal("1.1000"),
    gst_rate=Decimal("0.10"),
    consumption_suffixes=None,
    free_window=FreeWindow(11 * 60, 14 * 60, Decimal(24)),
    bands=(
        Band("PEAK", Decimal("0.5200"), (Period(frozenset({DayName.WEEKDAYS}), 15 * 60, 21 * 60),)),
        Band(
            "SHOULDER",
            Decimal("0.3300"),
            (
                Period(frozenset({DayName.ALL}), 7 * 60, 15 * 60),
                Period(frozenset({DayName.ALL}), 21 * 60, 22 * 60),
            ),
        ),
        Band("OFF_PEAK", Decimal("0.2300"), (Period(frozenset({DayName.ALL}), 0, 24 * 60),)),
    ),
    feed_in=FeedIn(Decimal("0.0400")),
    description="Solar Sharer Offer, New South Wales",
)


def household(days: int = DAYS, *, start: date = START, seed: int = 16) -> list[IntervalDay]:
    """Simulated 30-minute consumption (E1) and export (B1) of one household, ``days`` days."""
    chance = random.Random(seed)
    stamp = datetime.combine(start + timedelta(days=days), time(6), NEM_TIME)
    rows: list[IntervalDay] = []
    for offset in range(days):
        day = start + timedelta(days=offset)
        use, export = [], []
        for interval in range(48):
            hour = interval / 2
            kwh = 0.12 + chance.random() * 0.08
            if 6.5 <= hour < 9:
                kwh += 0.35
            if 11 <= hour < 14:
                kwh += 0.45 + chance.random() * 0.55  # shifted loads in the free window
            if 17 <= hour < 21.5:
                kwh += 0.5 + chance.random() * 0.3
            sun = max(0.0, 1 - abs(hour - 12.5) / 4)
            use.append(Decimal(f"{kwh:.3f}"))
            export.append(Decimal(f"{max(0.0, sun * 1.1 - kwh):.3f}"))
        for suffix, values in (("E1", use), ("B1", export)):
            rows.append(IntervalDay(NMI, suffix, day, 30, tuple(values), "A" * 48, stamp))
    return rows


def bill_of(rows: list[IntervalDay]) -> Bill:
    return make_bill(PLAN, NMI, rate(PLAN, rows).values())


def sample_invoice(days: int = DAYS) -> InvoiceDocument:
    """The example household's invoice for ``days`` days from 1 July 2026."""
    return _invoice(bill_of(household(days)))


def _invoice(bill: Bill) -> InvoiceDocument:
    return invoice_from_bill(
        bill,
        PLAN,
        number="INV-000123",
        issue_date=ISSUED,
        due_date=ISSUED + timedelta(days=14),
        retailer=EXAMPLE_RETAILER,
        plan_name="Solar Sharer Offer, New South Wales",
        account_number="1000 2345 6789",
        customer_name="Alex Example",
        supply_address=("12 Example Street", "Newtown NSW 2042"),
        account=AccountSummary(previous_balance=Decimal("142.18"), payments=Decimal("142.18")),
        payment_methods=example_payment_methods("1000234567"),
        distributor=EXAMPLE_DISTRIBUTOR,
        better_offer=BetterOffer(plan_name="Solar Saver Plus", saving=Decimal("86.40")),
        usage=_usage(bill),
    )


def _usage(bill: Bill) -> tuple[UsageSummary, ...]:
    """Usage compared: this bill's days, and the example household's June and July a year
    before (other days of the same simulation)."""
    rows = []
    for kind, days, start, seed in (
        (UsageKind.THIS_PERIOD, None, bill.start, 0),
        (UsageKind.PREVIOUS_PERIOD, 30, date(2026, 6, 1), 15),
        (UsageKind.YEAR_EARLIER, 31, date(2025, 7, 1), 14),
    ):
        rated = bill if days is None else bill_of(household(days, start=start, seed=seed))
        summary = summarise(kind, rated.start, rated.end, rated.days, ())
        assert summary is not None
        rows.append(summary)
    return tuple(rows)


def sample_credit_note() -> InvoiceDocument:
    """What a revision of three days of the sample invoice makes: the meter data provider
    replaced estimates for 14 to 16 July with actual reads, lower at midday and evening."""
    original_rows = household()
    revised_rows = []
    changed = {START + timedelta(days=13 + offset) for offset in range(3)}
    for row in original_rows:
        if row.day in changed and row.suffix == "E1":
            values = tuple(
                (value * Decimal("0.8")).quantize(Decimal("0.001"))
                if value is not None and 22 <= index < 44
                else value
                for index, value in enumerate(row.values)
            )
            revised_rows.append(replace(row, values=values))
        else:
            revised_rows.append(row)
    original = _invoice(bill_of(original_rows))
    return correction(
        original,
        bill_of(revised_rows),
        number="CN-000007",
        issue_date=ISSUED + timedelta(days=20),
        reason="Your meter data for 14 to 16 July 2026 was revised by the meter data provider.",
    )


def correction(
    original: InvoiceDocument, revised: Bill, *, number: str, issue_date: date, reason: str
) -> InvoiceDocument:
    """The credit note (or adjustment invoice) of a revised bill against the document it
    revises: each line, the totals, the free energy and the changed days, by difference.

    The invoicing core makes its own corrections from the quota versions; this is the sample's.
    """
    before = {line.code: line for line in original.lines}
    lines = []
    for line in revised.lines:
        old = before[line.code]
        if line.amount != old.amount or line.quantity != old.quantity:
            lines.append(
                Line(
                    code=line.code,
                    description=line.description,
                    quantity=line.quantity - old.quantity,
                    unit=line.unit,
                    unit_price=line.unit_price,
                    amount=line.amount - old.amount,
                )
            )
    subtotal = sum((line.amount for line in lines), ZERO)
    total = revised.total - original.total
    gst = total - subtotal
    old_days = {day.day: day for day in original.days}
    days = tuple(
        DailyUse(
            day.local_date,
            day.consumption_kwh - old_days[day.local_date].consumption_kwh,
            day.free_kwh - old_days[day.local_date].free_kwh,
        )
        for day in revised.days
        if (day.consumption_kwh, day.free_kwh)
        != (old_days[day.local_date].consumption_kwh, old_days[day.local_date].free_kwh)
    )
    free = original.free_energy
    free_energy = None
    if free is not None:
        free_energy = FreeEnergy(
            kwh=revised.free_kwh - free.kwh,
            value=revised.free_energy_value - free.value,
            window_start=free.window_start,
            window_end=free.window_end,
            cap_kwh_per_day=free.cap_kwh_per_day,
        )
    kind = DocumentKind.CREDIT_NOTE if total <= 0 else DocumentKind.ADJUSTMENT_INVOICE
    return InvoiceDocument(
        kind=kind,
        number=number,
        issue_date=issue_date,
        due_date=None if total <= 0 else issue_date + timedelta(days=14),
        retailer=original.retailer,
        nmi=original.nmi,
        region=original.region,
        plan_id=original.plan_id,
        plan_name=original.plan_name,
        period_start=original.period_start,
        period_end=original.period_end,
        lines=tuple(lines),
        subtotal=subtotal,
        gst=gst,
        total=total,
        amount_due=total,
        ombudsman=original.ombudsman,
        interpreter=original.interpreter,
        corrects=original.number,
        reason=reason,
        account_number=original.account_number,
        customer_name=original.customer_name,
        supply_address=original.supply_address,
        time_zone=original.time_zone,
        free_energy=free_energy,
        days=days,
        payment_methods=original.payment_methods,
        distributor=original.distributor,
        gst_rate=original.gst_rate,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m freehours.documents.sample",
        description="Render the example invoice and credit note (example retailer details).",
    )
    parser.add_argument("--pdf", type=Path, help="write the invoice's PDF here")
    parser.add_argument("--html", type=Path, help="write the invoice's HTML here")
    arguments = parser.parse_args(argv)
    if arguments.pdf is None and arguments.html is None:
        parser.error("give --pdf FILE, --html FILE or both")
    documents = (("", sample_invoice()), ("-credit-note", sample_credit_note()))
    for suffix, document in documents:
        if arguments.pdf is not None:
            path = _beside(arguments.pdf, suffix)
            path.write_bytes(render_pdf(document))
            print(f"{document.kind.label} {document.number}: {path}")
        if arguments.html is not None:
            path = _beside(arguments.html, suffix)
            path.write_text(render_html(document), encoding="utf-8")
            print(f"{document.kind.label} {document.number}: {path}")
    return 0


def _beside(path: Path, suffix: str) -> Path:
    return path.with_name(f"{path.stem}{suffix}{path.suffix}")


if __name__ == "__main__":
    sys.exit(main())
