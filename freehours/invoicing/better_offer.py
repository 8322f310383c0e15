"""The better offer check and usage compared, for a batch's invoices and on demand
(``freehours.domain.better_offer``; docs/invoices.md, "The better offer check").

The usage a check prices is the customer's last 12 months of billing periods, to the period
invoiced (from their first day of data where that is later). Each period is priced from its
usage totals under the customer's plan and each offer: the period invoiced is rated now, by the
engine that bills it, under every one of them, and what its invoice keeps of them
(``PeriodUsage``, with its billing period) serves the next 11 checks; a period that kept none,
or none for a plan (an offer new since), is rated from its stored meter data. Either way the
totals are the engine's, and a year is priced from them exactly as a bill of all its days.

The offers that apply to a customer on the day of the invoice are those of their region, for
premises with a controlled load exactly when their plan prices one, in effect that day (their
distributor is not known, so an offer on any network of the region counts).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta
from decimal import Decimal
from functools import reduce
from operator import attrgetter
from typing import Any

import structlog

from freehours.domain.better_offer import (
    BetterOfferCheck,
    Costed,
    PeriodUsage,
    UsageKind,
    UsageSummary,
    UsageTotals,
    cost_of,
    decide,
    joined,
    per_year,
    totals_of,
    without_head,
    year_before,
)
from freehours.domain.invoicing import BillingCycle, DocumentType, Period
from freehours.domain.many_plans import ManyPlans
from freehours.domain.offers import Offer
from freehours.domain.plan import Plan
from freehours.domain.profiles import DayProfiles
from freehours.domain.rating import ZERO, DayRating, MeterRating
from freehours.domain.reads import IntervalDay
from freehours.domain.time import Region
from freehours.invoicing.model import Draft
from freehours.plans.cache import PlanCache
from freehours.store.catalog import StoredPlan
from freehours.store.database import Unit
from freehours.store.invoices import Account

log = structlog.get_logger("freehours.invoicing")

#: Sets of offers rated together that a process keeps (a set for each region and meter
#: configuration of the offers of the day).
MANY_KEPT = 32


@dataclass(frozen=True, slots=True)
class Priced:
    """A plan a check prices: the customer's own (``offer`` None) or an offer's."""

    key: str
    name: str
    plan: Plan
    profiles: DayProfiles
    offer: Offer | None = None
    #: Its document without what only prices energy (``rating_shape``): plans of one shape
    #: rate every day alike. Empty: not known, shared with none.
    shape: str = ""


#: The fields of a plan document that price energy, name the plan or say more about it, and
#: never where a meter's energy falls (its band, the window, which channel): two plans that
#: differ only in them rate every meter's days alike, to the last kWh of each band.
_PRICE_FIELDS = frozenset(
    {
        "id",
        "description",
        "information",
        "unit_price",
        "daily_supply_charge",
        "gst_rate",
        "supply_charges",
        "feed_in",
        "steps",
        "step_period",
    }
)


def rating_shape(document: Mapping[str, Any]) -> str:
    """``document`` without its ``_PRICE_FIELDS``, as canonical JSON."""

    def placing(value: object) -> object:
        if isinstance(value, Mapping):
            return {k: placing(v) for k, v in value.items() if k not in _PRICE_FIELDS}
        if isinstance(value, list):
            return [placing(item) for item in value]
        return value

    return json.dumps(placing(document), sort_keys=True, default=str)


def plan_key(stored: StoredPlan) -> str:
    """The key of a customer's plan's totals: a new one whenever the plan is put again."""
    return f"plan:{stored.plan_id}:{stored.updated_at.isoformat()}"


@dataclass(frozen=True, slots=True)
class Rated:
    """A period as the invoice's bill rated it under the customer's plan: its days, and those
    without a meter value."""

    days: tuple[DayRating, ...]
    unread: frozenset[date]


@dataclass(frozen=True, slots=True)
class Request:
    """One check: a customer, on their plan, for the billing period ``period`` (the invoice's,
    or on demand the last one ended), against the offers of ``offered_on``; ``rows`` the
    period's day rows where the caller has them (an invoice run has read them), ``first_data``
    the customer's first day of data."""

    nmi: str
    region: Region
    cycle: BillingCycle
    plan: Priced
    period: Period
    offered_on: date
    first_data: date | None
    rows: Sequence[IntervalDay] | None = None
    rated: Rated | None = None


@dataclass(slots=True)
class Answer:
    """A check's finding, the usage compared, and what the period keeps of its usage."""

    check: BetterOfferCheck
    usage: tuple[UsageSummary, ...] = ()
    kept: PeriodUsage | None = None


@dataclass(slots=True)
class _Work:
    """A request, its plans and the periods of its year, as the check is worked out."""

    request: Request
    priced: list[Priced]
    year: list[Period]  # the 12 months of periods to ``period``, from the first with data
    earlier: Period  # the same period a year before, for usage compared
    previous: Period  # the period before, for usage compared and its year's totals
    #: Whether the year is carried from the one the previous period kept (then only the
    #: previous period and the one a year earlier are read).
    carried: bool = False
    stored: dict[date, PeriodUsage] = field(default_factory=dict)
    totals: dict[tuple[date, str], UsageTotals] = field(default_factory=dict)
    #: Years carried, by the ids of the previous year's text, this period's totals and the
    #: leaving period's.
    carried_years: dict[tuple[int, int, int], UsageTotals] = field(default_factory=dict)
    usages: dict[date, PeriodUsage] = field(default_factory=dict)


class OfferChecks:
    """The checks of one transaction: the offers read and parsed once."""

    def __init__(
        self,
        unit: Unit,
        plans: PlanCache,
        threshold: Decimal,
        many: dict[tuple[str, ...], ManyPlans] | None = None,
    ) -> None:
        self.unit = unit
        self.plans = plans
        self.threshold = threshold
        self._offers: dict[Region, list[Priced]] = {}
        self._applying: dict[tuple[Region, bool, date], list[Priced]] = {}
        #: The offers' plans rated together (``ManyPlans``), by the keys of a set of them:
        #: the invoicing service's, kept from batch to batch (a NEM date's shape is worked out
        #: once a process).
        self._many = {} if many is None else many

    def offers(self, region: Region) -> list[Priced]:
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
                    found.append(
                        Priced(
                            f"offer:{offer.offer_id}:{offer.version}",
                            offer.name,
                            parsed.plan,
                            parsed.profiles,
                            offer,
                            rating_shape(offer.document),
                        )
                    )
            self._offers[region] = found
        return found

    def applying(self, region: Region, plan: Plan, day: date) -> list[Priced]:
        """The offers that apply on ``day`` to a customer of ``region`` on ``plan``."""
        controlled = plan.controlled_load is not None
        return [
            priced
            for priced in self.offers(region)
            if priced.offer is not None
            and priced.offer.terms.applies(region, None, controlled, day)
        ]

    def check_all(self, requests: Sequence[Request]) -> list[Answer]:
        """Each request's check, its usage compared and what its period keeps: the stored
        usage of the periods read in one statement, the meter data of those without in one
        more."""
        work = [self._work(request) for request in requests]
        if not work:
            return []
        # First what the period before each request's kept, and the one a year earlier: all
        # a check needs where the period before carried its year.
        starts = {p.start for item in work for p in (item.previous, item.earlier)}
        starts |= {item.request.period.start for item in work if item.request.rows is None}
        nmis = sorted({item.request.nmi for item in work})
        stored = self.unit.invoices.period_usages_on(nmis, sorted(starts))
        for item in work:
            item.stored = stored.get(item.request.nmi, {})
            item.carried = self._carries(item)
        # Then every period of the year of a request whose year is not carried.
        rest = [item for item in work if not item.carried]
        if rest:
            first = min(min(item.year[0].start, item.earlier.start) for item in rest)
            last = max(item.request.period.start for item in rest)
            more = self.unit.invoices.period_usages(
                sorted({item.request.nmi for item in rest}), first, last
            )
            for item in rest:
                item.stored = more.get(item.request.nmi, {})
        self._rate_unkept(work)
        return [self._answer(item) for item in work]

    # --- the parts ---------------------------------------------------------------------------

    def _work(self, request: Request) -> _Work:
        controlled = request.plan.plan.controlled_load is not None
        key = (request.region, controlled, request.offered_on)
        offers = self._applying.get(key)
        if offers is None:
            offers = self._applying[key] = self.applying(
                request.region, request.plan.plan, request.offered_on
            )
        year, earlier, previous = _year_of(request.cycle, request.period)
        if request.first_data is not None and year[0].end < request.first_data:
            year = [p for p in year if p.end >= request.first_data] or [request.period]
        return _Work(request, [request.plan, *offers], year, earlier, previous)

    def _carries(self, item: _Work) -> bool:
        """Whether ``item``'s year can be carried from what the period before kept: its year's
        totals under every plan, the period it began with being the one a year earlier (whose
        totals under every plan were kept too) or still in this year."""
        year = item.year
        if len(year) < 2 or year[-2] != item.previous:
            return False
        kept = item.stored.get(item.previous.start)
        if kept is None or any(priced.key not in kept.year for priced in item.priced):
            return False
        began = date.fromisoformat(kept.year[item.priced[0].key].split("|", 1)[0])
        first = max(year[0].start, item.request.first_data or year[0].start)
        if began == first:
            return True
        earlier = item.stored.get(item.earlier.start)
        return (
            began == item.earlier.start
            and item.earlier.end + timedelta(days=1) == first
            and earlier is not None
            and all(priced.key in earlier.totals for priced in item.priced)
        )

    def _rate_unkept(self, work: list[_Work]) -> None:
        """Rate what no period kept: the period of a request that brought its rows, and each
        period (of the year, the one before and the one a year earlier) whose usage, or whose
        totals under one of the plans, were not kept; from the meter data, read once."""
        unkept = [[p for p in _periods(item) if _unkept(item, p)] for item in work]
        spans: dict[str, tuple[date, date]] = {}
        for item, periods in zip(work, unkept, strict=True):
            for period in periods:
                first, last = spans.get(item.request.nmi, (period.start, period.end))
                spans[item.request.nmi] = (min(first, period.start), max(last, period.end))
        rows: dict[str, list[IntervalDay]] = {}
        if spans:
            found = self.unit.invoices.meter_days(
                sorted(spans),
                min(first for first, _ in spans.values()) - timedelta(days=1),
                max(last for _, last in spans.values()) + timedelta(days=1),
            )
            rows = {nmi: [day for day, _ in days] for nmi, days in found.items()}
        for item, periods in zip(work, unkept, strict=True):
            request = item.request
            if request.rows is not None:
                self._rate_period(item, request.period, request.rows)
            for period in periods:
                self._rate_period(item, period, rows.get(request.nmi, []))

    def _rate_period(self, item: _Work, period: Period, rows: Sequence[IntervalDay]) -> None:
        """``period`` rated under each of the request's plans, from ``rows``."""
        request = item.request
        own = request.plan
        rest = [p for p in item.priced[1:] if not own.shape or p.shape != own.shape]
        offers = tuple(priced.key for priced in rest)
        many = self._many.get(offers)
        if many is None:
            if len(self._many) >= MANY_KEPT:  # offers changed: start again
                self._many.clear()
            many = self._many[offers] = ManyPlans([p.profiles for p in rest])
        kept, totals = rate_period(
            request.nmi,
            request.plan,
            item.priced,
            period,
            first_data=request.first_data,
            rows=rows,
            many=many,
            rated=request.rated if period == request.period else None,
        )
        item.usages[period.start] = kept
        for key, part in totals.items():
            item.totals[(period.start, key)] = part

    def _totals(self, item: _Work, period: Period, key: str) -> UsageTotals:
        found = item.totals.get((period.start, key))
        if found is None:
            found = UsageTotals.parse(item.stored[period.start].totals[key])
        return found

    def _usage_of(self, item: _Work, period: Period) -> PeriodUsage | None:
        return item.usages.get(period.start) or item.stored.get(period.start)

    def _answer(self, item: _Work) -> Answer:
        request = item.request
        period = request.period
        usage = self._usage(item)
        own = self._usage_of(item, period)
        if request.first_data is None or own is None:
            kept = own if request.rows is not None else None
            return Answer(decide(period.end, None, None, [], self.threshold), usage, kept)
        year = item.year
        if not item.carried:  # the periods with data, each rated or kept
            year = [p for p in item.year if self._usage_of(item, p) is not None]
        years: dict[str, UsageTotals] = {}
        costs: list[Costed] = []
        customers = request.plan
        for priced in item.priced:
            if priced is not customers and customers.shape and priced.shape == customers.shape:
                # Only its prices differ: every period's totals are the customer's plan's.
                whole = years[priced.key] = years[customers.key]
            else:
                whole = years[priced.key] = self._year(item, year, priced.key)
            total = cost_of(priced.plan, [whole])
            offer = priced.offer
            costs.append(
                Costed(
                    plan_id=priced.plan.id,
                    name=priced.name,
                    total=total,
                    per_year=per_year(total, whole.days),
                    gst_inclusive=priced.plan.gst_rate > 0,
                    offer_id=None if offer is None else offer.offer_id,
                    offer_version=None if offer is None else offer.version,
                )
            )
        window = (years[request.plan.key].first, period.end)
        check = decide(period.end, window, costs[0], costs[1:], self.threshold)
        kept = None
        if request.rows is not None:  # an invoice's: it keeps its year for the next check
            kept = replace(own, year=texts_of(years))
        return Answer(check, usage, kept)

    def _year(self, item: _Work, year: list[Period], key: str) -> UsageTotals:
        """The totals under plan ``key`` of the periods of ``year``: the previous period's
        year, where it kept one, less the periods that have left it and with this period;
        else each period's totals added up."""
        current = self._totals(item, year[-1], key)
        previous = item.stored.get(year[-2].start) if len(year) > 1 else None
        text = None if previous is None else previous.year.get(key)
        if text is not None:
            # Plans placing energy alike kept one text (``PeriodUsage.text``): one object, so
            # their years are worked out once.
            earlier = item.earlier.start
            kept = item.stored.get(earlier)
            leaving = item.totals.get((earlier, key)) or (kept and kept.totals.get(key))
            memo = (id(text), id(current), id(leaving))
            carried = item.carried_years.get(memo)
            if carried is None:
                carried = item.carried_years[memo] = self._carry(item, year, key, text, current)
            if carried is not _NOT_CARRIED:
                return carried
        return reduce(joined, [self._totals(item, p, key) for p in year])

    def _carry(
        self, item: _Work, year: list[Period], key: str, text: str, current: UsageTotals
    ) -> UsageTotals:
        """The previous period's year (``text``), less the periods that have left it, with
        this period's ``current``; ``_NOT_CARRIED`` where a period that left kept nothing."""
        first = max(year[0].start, item.request.first_data or year[0].start)
        whole: UsageTotals | None = UsageTotals.parse(text)
        cycle = item.request.cycle
        while whole is not None and whole.first < first:
            leaving = cycle.period_of(whole.first)
            found = self._found(item, leaving, key)
            whole = None if found is None else without_head(whole, found)
        if whole is not None and whole.first == first and whole.last == year[-2].end:
            return joined(whole, current)
        return _NOT_CARRIED

    def _found(self, item: _Work, period: Period, key: str) -> UsageTotals | None:
        """``period``'s totals under ``key`` where rated or kept, else None."""
        found = item.totals.get((period.start, key))
        if found is None:
            kept = item.stored.get(period.start)
            text = None if kept is None else kept.totals.get(key)
            found = None if text is None else UsageTotals.parse(text)
        return found

    def _usage(self, item: _Work) -> tuple[UsageSummary, ...]:
        request = item.request
        previous = request.cycle.period_of(request.period.start - timedelta(days=1))
        rows = []
        for kind, period in (
            (UsageKind.THIS_PERIOD, request.period),
            (UsageKind.PREVIOUS_PERIOD, previous),
            (UsageKind.YEAR_EARLIER, item.earlier),
        ):
            kept = self._usage_of(item, period)
            summary = None if kept is None else kept.summary(kind)
            if summary is not None:
                rows.append(summary)
        return tuple(rows)


class BetterOffers:
    """The better offer check as the invoicing service makes it: for a batch's drafted
    invoices, and on demand; with what it keeps from batch to batch (the sets of offers rated
    together, the shapes of customers' plans)."""

    def __init__(self, plans: PlanCache) -> None:
        self.plans = plans
        self._many: dict[tuple[str, ...], ManyPlans] = {}
        self._shapes: dict[str, str] = {}

    def priced(self, stored: StoredPlan, plan: Plan, profiles: DayProfiles) -> Priced:
        """A customer's plan as the check prices it (its shape worked out once a version)."""
        key = plan_key(stored)
        shape = self._shapes.get(key)
        if shape is None:
            if len(self._shapes) >= MANY_KEPT * 32:
                self._shapes.clear()
            shape = self._shapes[key] = rating_shape(stored.document)
        return Priced(key, plan.name, plan, profiles, shape=shape)

    def check_drafts(
        self,
        unit: Unit,
        as_of: datetime,
        drafts: list[Draft],
        *,
        threshold: Decimal,
        first_days: dict[str, date],
        meter: dict[str, list[tuple[IntervalDay, str]]],
        parsed: Callable[[StoredPlan], tuple[Plan, DayProfiles]],
    ) -> list[Draft]:
        """``drafts`` with each invoice's check, usage compared and what its period keeps (a
        correction has none of them: it bills a difference, not a period's use); ``meter``
        the batch's day rows, ``parsed`` a draft's plan as it was parsed."""
        invoices = [
            (index, draft)
            for index, draft in enumerate(drafts)
            if draft.document_type is DocumentType.INVOICE
        ]
        if not invoices:
            return drafts
        requests = []
        for _, draft in invoices:
            plan, profiles = parsed(draft.plan)
            account = draft.account
            requests.append(
                Request(
                    account.nmi,
                    account.region,
                    account.cycle,
                    self.priced(draft.plan, plan, profiles),
                    draft.period,
                    as_of.astimezone(plan.zone).date(),
                    first_days.get(account.nmi),
                    [day for day, _ in meter.get(account.nmi, [])],
                    Rated(draft.rated_days, draft.unread),
                )
            )
        checks = OfferChecks(unit, self.plans, threshold, self._many)
        try:
            answers = checks.check_all(requests)
        except (ArithmeticError, ValueError) as exc:
            # The invoices go out without a check (their box points to the comparator) rather
            # than not at all; the reason is logged, never a customer's data.
            log.warning("better_offer_check_failed", error=type(exc).__name__, reason=str(exc))
            return drafts
        checked = list(drafts)
        for (index, draft), answer in zip(invoices, answers, strict=True):
            kept = None if answer.kept is None else answer.kept.text()
            checked[index] = replace(
                draft, better_offer=answer.check, usage=answer.usage, kept_usage=kept
            )
        return checked

    def on_demand(
        self,
        unit: Unit,
        account: Account,
        stored: StoredPlan,
        parsed: tuple[Plan, DayProfiles],
        *,
        day: date,
        threshold: Decimal,
    ) -> BetterOfferCheck:
        """The check an invoice of ``account`` issued on ``day`` would make: for the last
        billing period that ended before it."""
        period = account.cycle.period_of(day - timedelta(days=1))
        if period.end >= day:  # not over by then: the one before
            period = account.cycle.period_of(period.start - timedelta(days=1))
        request = Request(
            account.nmi,
            account.region,
            account.cycle,
            self.priced(stored, *parsed),
            period,
            day,
            unit.invoices.first_days([account.nmi]).get(account.nmi),
        )
        (answer,) = OfferChecks(unit, self.plans, threshold, self._many).check_all([request])
        return answer.check


def rate_period(
    nmi: str,
    own: Priced,
    priced: Sequence[Priced],
    period: Period,
    *,
    first_data: date | None,
    rows: Sequence[IntervalDay],
    many: ManyPlans | None = None,
    rated: Rated | None = None,
) -> tuple[PeriodUsage, dict[str, UsageTotals]]:
    """``period`` of ``nmi`` (from ``first_data`` where that is later than its start) rated
    from ``rows`` under each of ``priced`` (``own``, the customer's plan, first): what it keeps
    of its usage, and its totals by plan key. The customer's plan is rated by the engine (its
    days give the usage kept), and a plan of its shape (``rating_shape``: only its prices
    differ) has its totals; the others are rated by ``many`` (of their profiles, in order)
    where given, each it leaves to the engine by the engine."""
    first = max(period.start, first_data or period.start)
    dates = [first + timedelta(days=n) for n in range((period.end - first).days + 1)]
    before, after = period.start - timedelta(days=1), period.end + timedelta(days=1)
    wanted = [day for day in rows if before <= day.day <= after]
    if rated is not None:  # the invoice's bill: the period's days, every one
        days = [day for day in rated.days if day.local_date >= first]
        unread = rated.unread
    else:
        rating = MeterRating(nmi, own.profiles)
        for day in wanted:
            rating.add(day)
        days = list(rating.days(dates).values())
        unread = frozenset(day.local_date for day in days if rating.unread(day.local_date))
    totals = {own.key: totals_of(days)}
    read = [day for day in days if day.local_date not in unread]
    others = []
    for plan in priced:
        if plan is own:
            continue
        if own.shape and plan.shape == own.shape:
            totals[plan.key] = totals[own.key]
        else:
            others.append(plan)
    answers: Sequence[UsageTotals | None] = [None] * len(others)
    if many is not None and others:
        answers = many.totals(nmi, wanted, first, period.end)
    for plan, answer in zip(others, answers, strict=True):
        if answer is not None:
            totals[plan.key] = answer
            continue
        engine = MeterRating(nmi, plan.profiles)
        for day in wanted:
            engine.add(day)
        totals[plan.key] = totals_of(list(engine.days(dates).values()))
    kept = PeriodUsage(
        period.start,
        period.end,
        len(read),
        sum((day.consumption_kwh for day in read), ZERO),
        sum((day.free_kwh for day in read), ZERO),
        texts_of(totals),
    )
    return kept, totals


@functools.lru_cache(maxsize=4096)
def _year_of(cycle: BillingCycle, period: Period) -> tuple[list[Period], Period, Period]:
    """The 12 months of periods of ``cycle`` to ``period``, the period a year before it and
    the one before it (the same for every customer of one cycle: worked out once). The list
    is shared: read, never changed."""
    start = cycle.period_of(year_before(period.start)).end + timedelta(days=1)
    year = cycle.periods(start, period.end + timedelta(days=1))
    earlier = cycle.period_of(year_before(period.start))
    previous = cycle.period_of(period.start - timedelta(days=1))
    return year, earlier, previous


#: ``_carry``'s answer where the year cannot be carried.
_NOT_CARRIED = UsageTotals(date.min, date.min, (), ZERO, ZERO)


def texts_of(totals: dict[str, UsageTotals]) -> dict[str, str]:
    """Each of ``totals`` as text, once for totals that are one object (plans that differ only
    in prices share the customer's)."""
    made: dict[int, str] = {}
    texts = {}
    for key, part in totals.items():
        text = made.get(id(part))
        if text is None:
            text = made[id(part)] = part.text()
        texts[key] = text
    return texts


def _periods(item: _Work) -> list[Period]:
    """Every period a request's answer reads: its own, the one before and a year earlier, and
    where its year is not carried, every period of it."""
    wanted = {item.request.period, item.previous, item.earlier}
    if not item.carried:
        wanted.update(item.year)
    return sorted(wanted, key=attrgetter("start"))


def _unkept(item: _Work, period: Period) -> bool:
    """Whether ``period`` must be rated from its meter data: it has data, and kept no usage
    or no totals under one of the request's plans (the request's own period, when it brought
    its rows, is rated from them)."""
    request = item.request
    if request.rows is not None and period == request.period:
        return False
    if request.first_data is None or period.end < request.first_data:
        return False
    kept = item.stored.get(period.start)
    return kept is None or any(priced.key not in kept.totals for priced in item.priced)
