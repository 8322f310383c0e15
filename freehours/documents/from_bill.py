"""A document's figures taken from the domain's bill: its lines, totals, days and free energy.

The invoicing core numbers, dates and stores its documents; what they charge is the bill's
(``freehours.domain.bill.make_bill``), and these functions carry it into the document model
unchanged: the same lines, the same cents, every day's kWh.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import date

from freehours.documents.examples import INTERPRETER, OMBUDSMEN
from freehours.documents.model import (
    AccountSummary,
    BetterOffer,
    Contact,
    DailyUse,
    DocumentKind,
    FreeEnergy,
    InvoiceDocument,
    Line,
    PaymentMethod,
    Retailer,
)
from freehours.domain.better_offer import UsageSummary
from freehours.domain.bill import Bill
from freehours.domain.plan import Plan, clock_text


def lines_of(bill: Bill) -> tuple[Line, ...]:
    return tuple(
        Line(
            code=line.code,
            description=line.description,
            quantity=line.quantity,
            unit=line.unit,
            unit_price=line.unit_price,
            amount=line.amount,
        )
        for line in bill.lines
    )


def days_of(bill: Bill, unread: Collection[date] = ()) -> tuple[DailyUse, ...]:
    """The bill's days; those in ``unread`` (``MeterRating.unread``) had no meter value."""
    return tuple(
        DailyUse(day.local_date, day.consumption_kwh, day.free_kwh, day.local_date not in unread)
        for day in bill.days
    )


def free_energy_of(bill: Bill, plan: Plan) -> FreeEnergy | None:
    """The free window's figures, or None for a plan without a window."""
    window = plan.free_window
    if window is None:
        return None
    return FreeEnergy(
        kwh=bill.free_kwh,
        value=bill.free_energy_value,
        window_start=clock_text(window.start),
        window_end=clock_text(window.end),
        cap_kwh_per_day=window.cap_kwh,
        over_cap_kwh=bill.over_cap_kwh,
    )


def invoice_from_bill(
    bill: Bill,
    plan: Plan,
    *,
    number: str,
    issue_date: date,
    due_date: date | None,
    retailer: Retailer,
    kind: DocumentKind = DocumentKind.INVOICE,
    corrects: str | None = None,
    reason: str | None = None,
    plan_name: str | None = None,
    account_number: str | None = None,
    customer_name: str | None = None,
    supply_address: tuple[str, ...] = (),
    account: AccountSummary | None = None,
    payment_methods: tuple[PaymentMethod, ...] = (),
    distributor: Contact | None = None,
    better_offer: BetterOffer | None = None,
    final_bill: bool = False,
    unread: Collection[date] = (),
    usage: tuple[UsageSummary, ...] = (),
) -> InvoiceDocument:
    """The document of one bill: its amount due is the bill's total, after ``account``; the
    days in ``unread`` had no meter value."""
    due = bill.total
    if account is not None:
        due += account.previous_balance - account.payments
    return InvoiceDocument(
        kind=kind,
        number=number,
        issue_date=issue_date,
        due_date=due_date,
        retailer=retailer,
        nmi=bill.nmi,
        region=plan.region,
        plan_id=plan.id,
        plan_name=plan_name or plan.name,
        period_start=bill.start,
        period_end=bill.end,
        lines=lines_of(bill),
        subtotal=bill.subtotal,
        gst=bill.gst,
        total=bill.total,
        amount_due=due,
        ombudsman=OMBUDSMEN[plan.region],
        interpreter=INTERPRETER,
        corrects=corrects,
        reason=reason,
        account_number=account_number,
        customer_name=customer_name,
        supply_address=supply_address,
        time_zone=bill.time_zone,
        free_energy=free_energy_of(bill, plan),
        days=days_of(bill, unread),
        account=account,
        payment_methods=payment_methods,
        distributor=distributor,
        better_offer=better_offer,
        usage=usage,
        final_bill=final_bill,
        gst_rate=plan.gst_rate,
    )
