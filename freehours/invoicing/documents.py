"""A stored document drawn again: the retailer it names and the plan it was billed on, as the
renderers take it (``document_of``)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from freehours.documents.examples import (
    EXAMPLE_DISTRIBUTOR,
    INTERPRETER,
    OMBUDSMEN,
    example_payment_methods,
)
from freehours.documents.model import (
    BetterOffer,
    DailyUse,
    DocumentKind,
    FreeEnergy,
    InvoiceDocument,
    Line,
    Retailer,
)
from freehours.domain.better_offer import BetterOfferCheck, Outcome, UsageSummary
from freehours.domain.contacts import Contact
from freehours.domain.plan import Plan, clock_text
from freehours.plans.document import parse_plan
from freehours.store.invoices import (
    StoredDocument,
)


def _retailer_json(retailer: Retailer) -> dict[str, Any]:
    values = asdict(retailer)
    values["postal_address"] = list(retailer.postal_address)
    return values


def retailer_of(values: dict[str, Any]) -> Retailer:
    """The retailer's details as a document kept them."""
    return Retailer(**{**values, "postal_address": tuple(values["postal_address"])})


def printed_customer(contact: Contact | None) -> dict[str, Any] | None:
    """What a document keeps of the customer's contact: the name and addresses it prints (never
    the email address or the delivery preference), or None."""
    if contact is None:
        return None
    return {
        "name": contact.name,
        "supply_address": list(contact.supply_address),
        "billing_address": list(contact.billing_address),
    }


def document_of(stored: StoredDocument) -> InvoiceDocument:
    """The document a household reads, from a finalised document as stored: its own figures,
    plan and retailer details, so that it renders the same whenever it is asked for."""
    return _document(stored, parse_plan(stored.plan_document, source=f"document {stored.number}"))


def _document(
    stored: StoredDocument,
    plan: Plan,
    checked: tuple[BetterOfferCheck | None, tuple[UsageSummary, ...]] | None = None,
) -> InvoiceDocument:
    """``document_of``, its plan parsed already; ``checked`` its better offer check and usage
    compared where the caller has them as they are (a draft's), rather than as stored."""
    if checked is None:
        check = (
            None if stored.better_offer is None else BetterOfferCheck.from_json(stored.better_offer)
        )
        usage = tuple(UsageSummary.from_json(row) for row in stored.usage or ())
    else:
        check, usage = checked
    figures = stored.figures
    window = plan.free_window
    free = None
    if window is not None:
        free = FreeEnergy(
            kwh=figures.free_kwh,
            value=figures.free_value,
            window_start=clock_text(window.start),
            window_end=clock_text(window.end),
            cap_kwh_per_day=window.cap_kwh,
            over_cap_kwh=figures.over_cap_kwh,
        )
    retailer = retailer_of(stored.retailer)
    example = retailer.example
    customer = stored.customer or {}
    return InvoiceDocument(
        kind=DocumentKind(stored.document_type.value),
        number=stored.number,
        issue_date=stored.issue_date,
        due_date=stored.due_date,
        retailer=retailer,
        nmi=stored.nmi,
        region=stored.region,
        plan_id=stored.plan_id,
        plan_name=plan.name,
        period_start=stored.period_start,
        period_end=stored.period_end,
        lines=tuple(
            Line(
                line.code, line.description, line.quantity, line.unit, line.unit_price, line.amount
            )
            for line in figures.lines
        ),
        subtotal=figures.subtotal,
        gst=figures.gst,
        total=figures.total,
        amount_due=figures.total,
        ombudsman=OMBUDSMEN[stored.region],
        interpreter=INTERPRETER,
        corrects=stored.corrects,
        reason=stored.reason,
        account_number=stored.nmi,
        customer_name=customer.get("name"),
        supply_address=tuple(customer.get("supply_address", ())),
        billing_address=tuple(customer.get("billing_address", ())),
        time_zone=stored.time_zone,
        free_energy=free,
        days=tuple(DailyUse(d.day, d.consumption_kwh, d.free_kwh, d.metered) for d in figures.days),
        payment_methods=example_payment_methods(stored.number) if example else (),
        distributor=EXAMPLE_DISTRIBUTOR if example else None,
        gst_rate=plan.gst_rate,
        better_offer=printed_offer(check),
        usage=usage,
    )


def better_offer_of(values: dict[str, Any] | None) -> BetterOffer | None:
    """What a document prints of its stored better offer check: the offer and its saving, or
    that the customer is on the best offer for them; None without a check or data (the box
    then only points to the comparator)."""
    return None if values is None else printed_offer(BetterOfferCheck.from_json(values))


def printed_offer(check: BetterOfferCheck | None) -> BetterOffer | None:
    """``better_offer_of``, from the check itself."""
    if check is None:
        return None
    since = check.data_from if check.estimated else None
    if check.outcome is Outcome.BETTER_OFFER:
        assert check.offer is not None
        assert check.saving_per_year is not None
        return BetterOffer(
            check.offer.name, check.saving_per_year, check.offer.gst_inclusive, since
        )
    if check.outcome in (Outcome.BEST_OFFER, Outcome.NO_OFFERS):
        return BetterOffer(None, None, since=since)
    return None
