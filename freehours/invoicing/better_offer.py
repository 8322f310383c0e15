"""The better offer check and usage compared, for a batch's invoices and on demand
(``freehours.domain.better_offer``; docs/invoices.md, "The better offer check").

Each customer's meter data of the last 12 months (and of the same period a year earlier, for
usage compared) is read once and rated, by the engine that makes their bills, under their plan
and under every offer of the retailer that applies to them on the day of the invoice: the offers
of their region, for premises with or without a controlled load as their plan prices one, in
effect that day (their distributor is not known, so an offer on any network of the region
counts).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal

from freehours.domain.better_offer import (
    BetterOfferCheck,
    Costed,
    UsageKind,
    UsageSummary,
    check_window,
    costed,
    decide,
    summarise,
    year_before,
)
from freehours.domain.bill import make_bill
from freehours.domain.invoicing import BillingCycle, Period
from freehours.domain.offers import Offer
from freehours.domain.plan import Plan
from freehours.domain.profiles import DayProfiles
from freehours.domain.rating import MeterRating
from freehours.domain.reads import IntervalDay
from freehours.domain.time import Region
from freehours.plans.cache import PlanCache
from freehours.store.database import Unit


@dataclass(frozen=True, slots=True)
class Customer:
    """What a check needs of one customer: their NMI, region, cycle and plan."""

    nmi: str
    region: Region
    cycle: BillingCycle
    plan: Plan
    profiles: DayProfiles


@dataclass(frozen=True, slots=True)
class PricedOffer:
    """An offer of the catalogue, its plan parsed."""

    offer: Offer
    plan: Plan
    profiles: DayProfiles


class OfferChecks:
    """The checks of one transaction's customers: the offers read and parsed once."""

    def __init__(self, unit: Unit, plans: PlanCache, threshold: Decimal) -> None:
        self.unit = unit
        self.plans = plans
        self.threshold = threshold
        self._offers: dict[Region, list[PricedOffer]] = {}

    def offers(self, region: Region) -> list[PricedOffer]:
        """The latest version of each offer of ``region`` whose plan parses."""
        found = self._offers.get(region)
        if found is None:
            found = []
            for offer in self.unit.catalog.current_offers(region=region):
                parsed = self.plans.parsed(
                    ("offer", offer.offer_id, offer.version),
                    offer.offer_id,
                    lambda offer=offer: offer.document,  # type: ignore[misc]
                )
                if parsed is not None:
                    found.append(PricedOffer(offer, parsed.plan, parsed.profiles))
            self._offers[region] = found
        return found

    def applying(self, customer: Customer, day: date) -> list[PricedOffer]:
        """The offers that apply to ``customer`` on ``day``."""
        controlled = customer.plan.controlled_load is not None
        return [
            priced
            for priced in self.offers(customer.region)
            if priced.offer.terms.applies(customer.region, None, controlled, day)
        ]

    def rows(self, nmis: Sequence[str], first: date, last: date) -> dict[str, list[IntervalDay]]:
        """The stored day rows of ``nmis`` on the NEM dates that cover local dates ``first`` to
        ``last`` (a NEM date either side)."""
        found = self.unit.invoices.meter_days(
            nmis, first - timedelta(days=1), last + timedelta(days=1)
        )
        return {nmi: [day for day, _ in rows] for nmi, rows in found.items()}

    def check(
        self,
        customer: Customer,
        rows: Sequence[IntervalDay],
        *,
        checked_on: date,
        offered_on: date,
        period: Period | None = None,
    ) -> tuple[BetterOfferCheck, tuple[UsageSummary, ...]]:
        """The check of ``customer``'s usage to ``checked_on`` (``rows``: their day rows from a
        year before it, and from the period a year before ``period``) against the offers that
        apply on ``offered_on``; and, for an invoice of ``period``, its usage compared. The
        usage priced starts on the first local day of ``rows`` where that is later than a year
        before."""
        offers = self.applying(customer, offered_on)
        rating = MeterRating(customer.nmi, customer.profiles)
        for day in rows:
            rating.add(day)
        if not rating.rated:
            return decide(checked_on, None, None, [], self.threshold), ()
        usage = () if period is None else _usage(customer, rating, period)
        data_first, data_last = rating.local_date_range()
        window = check_window(checked_on, data_first)
        if window is not None:
            # To the last day of data: days not read yet would cost only their supply charge.
            last = min(window[1], data_last)
            window = (window[0], last) if last >= window[0] else None
        if window is None:
            return decide(checked_on, None, None, [], self.threshold), usage
        dates = _dates(*window)
        current = costed(
            make_bill(customer.plan, customer.nmi, rating.days(dates).values()),
            customer.plan.name,
            customer.plan.gst_rate,
        )
        first_nem, last_nem = window[0] - timedelta(days=1), window[1] + timedelta(days=1)
        wanted = [day for day in rows if first_nem <= day.day <= last_nem]
        priced: list[Costed] = []
        for candidate in offers:
            offer_rating = MeterRating(customer.nmi, candidate.profiles)
            for day in wanted:
                offer_rating.add(day)
            if not offer_rating.rated:
                continue
            bill = make_bill(candidate.plan, customer.nmi, offer_rating.days(dates).values())
            priced.append(
                costed(
                    bill,
                    candidate.offer.name,
                    candidate.plan.gst_rate,
                    offer_id=candidate.offer.offer_id,
                    offer_version=candidate.offer.version,
                )
            )
        return decide(checked_on, window, current, priced, self.threshold), usage


def first_needed(cycle: BillingCycle, period: Period | None, checked_on: date) -> date:
    """The first local date a check on ``checked_on`` (and usage compared of ``period``)
    reads."""
    first = checked_on - timedelta(days=365)
    if period is not None:
        first = min(first, cycle.period_of(year_before(period.start)).start)
    return first


def _usage(customer: Customer, rating: MeterRating, period: Period) -> tuple[UsageSummary, ...]:
    """This period's use, the previous period's and the same period's a year earlier, where
    the data has them."""
    cycle = customer.cycle
    previous = cycle.period_of(period.start - timedelta(days=1))
    earlier = cycle.period_of(year_before(period.start))
    rows: list[UsageSummary] = []
    for kind, wanted in (
        (UsageKind.THIS_PERIOD, period),
        (UsageKind.PREVIOUS_PERIOD, previous),
        (UsageKind.YEAR_EARLIER, earlier),
    ):
        dates = wanted.dates()
        unread = {day for day in dates if rating.unread(day)}
        if len(unread) == len(dates):
            continue
        summary = summarise(kind, wanted.start, wanted.end, rating.days(dates).values(), unread)
        if summary is not None:
            rows.append(summary)
    return tuple(rows)


def _dates(first: date, last: date) -> list[date]:
    return [first + timedelta(days=n) for n in range((last - first).days + 1)]
