"""The better offer check on every invoice, and usage compared: each invoice run prices the
customer's settled usage on their plan and on every offer that applies to them, by the engine that
bills them, keeps what it found with the invoice and prints the guideline's message on page 1."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from freehours.documents.html import render_html
from freehours.domain.better_offer import (
    BetterOfferCheck,
    Outcome,
    UsageKind,
    UsageSummary,
    UsageTotals,
    per_year,
    totals_of,
)
from freehours.domain.bill import make_bill
from freehours.domain.invoicing import BillingCycle
from freehours.domain.many_plans import ManyPlans
from freehours.domain.offers import OfferSource, OfferTerms
from freehours.domain.profiles import DayProfiles
from freehours.domain.rating import MeterRating
from freehours.domain.time import Region
from freehours.invoicing.better_offer import Priced, rate_period, rating_shape
from freehours.invoicing.documents import _document, document_of, printed_offer
from freehours.plans import builtin_document
from freehours.plans.document import parse_plan
from freehours.store.catalog import NewOffer
from freehours.store.database import Store
from freehours.store.tables import billing_periods
from tests.invoicing.support import (
    AFTER_JULY,
    JULY,
    REVISION_STAMP,
    System,
    consumption,
    export,
    halved,
)

JUNE = [date(2026, 6, 1) + timedelta(days=n) for n in range(30)]


def offer_document(offer_id: str, supply: str, shoulder: str = "0.3300") -> dict[str, Any]:
    """The built-in NSW plan with another supply charge and shoulder price."""
    document = builtin_document("sso-nsw")
    document["id"] = offer_id
    document["description"] = f"Offer {offer_id}"
    document["daily_supply_charge"] = supply
    for band in document["time_of_use"]:
        if band["type"] == "SHOULDER":
            band["unit_price"] = shoulder
    return document


def put_offers(system: System, *offers: tuple[str, str, dict[str, Any]]) -> None:
    with system.store.write() as unit:
        unit.catalog.put_offers(
            [
                NewOffer(offer_id, name, OfferSource.PLAN, OfferTerms(Region.NSW), document)
                for offer_id, name, document in offers
            ],
            at=system.clock.now(),
        )


def cost(document: dict[str, Any], meter: str, days: list[date]) -> Decimal:
    """What ``freehours bill`` charges ``meter``'s data of ``days`` under ``document``."""
    plan = parse_plan(document, source="test")
    rating = MeterRating(meter, DayProfiles(plan))
    for day in days:
        rating.add(consumption(meter, day))
        rating.add(export(meter, day))
    return make_bill(plan, meter, rating.days(days).values()).total


def check_of(system: System, meter: str) -> BetterOfferCheck:
    (invoice,) = [d for d in system.documents() if d.nmi == meter]
    assert invoice.better_offer is not None
    return BetterOfferCheck.from_json(invoice.better_offer)


def test_an_invoice_names_the_cheapest_offer_and_its_saving(store: Store) -> None:
    system = System.on(store)
    (meter,) = system.customers(1)
    cheap = offer_document("cheap-nsw", "0.9000", "0.3000")
    dear = offer_document("dear-nsw", "1.5000")
    put_offers(system, ("cheap-nsw", "Cheap Saver", cheap), ("dear-nsw", "Dear Flex", dear))
    system.month([meter])
    system.run()

    check = check_of(system, meter)
    assert check.outcome is Outcome.BETTER_OFFER
    assert (check.data_from, check.data_to, check.days) == (JULY[0], JULY[-1], 31)
    assert check.estimated  # 31 days, not a year
    assert check.offers_checked == 2
    current = cost(builtin_document("sso-nsw"), meter, JULY)
    offered = cost(cheap, meter, JULY)
    assert check.current is not None
    assert check.offer is not None
    assert check.current.total == current
    assert check.offer.total == offered
    assert (check.offer.offer_id, check.offer.offer_version) == ("cheap-nsw", 1)
    assert check.saving_per_year == per_year(current - offered, 31)
    assert check.saving_per_year > 0

    (invoice,) = system.documents()
    page = render_html(document_of(invoice))
    assert "Could you save money on another plan?" in page
    saving = f"${check.saving_per_year:,.2f}"
    assert f"You could save {saving} a year (including GST) on our Cheap Saver plan" in page
    assert "estimated from your use since 1 July 2026" in page
    # Before it is numbered, a draft's document is drawn from its check as it is (not as JSON):
    # the same document.
    usage = tuple(UsageSummary.from_json(row) for row in invoice.usage or ())
    bare = replace(invoice, better_offer=None, usage=None)
    plan = parse_plan(invoice.plan_document, source="test")
    assert _document(bare, plan, (check, usage)) == document_of(invoice)
    assert printed_offer(None) is None


def test_no_cheaper_offer_says_the_customer_is_on_the_best_plan(store: Store) -> None:
    system = System.on(store)
    (meter,) = system.customers(1)
    put_offers(system, ("dear-nsw", "Dear Flex", offer_document("dear-nsw", "1.5000")))
    system.month([meter])
    system.run()

    check = check_of(system, meter)
    assert check.outcome is Outcome.BEST_OFFER
    assert check.saving_per_year is not None
    assert check.saving_per_year < 0
    (invoice,) = system.documents()
    assert "You are on our best plan for you" in render_html(document_of(invoice))


def test_a_saving_at_or_under_the_threshold_is_no_better_offer(store: Store) -> None:
    system = System.on(store)
    (meter,) = system.customers(1)
    put_offers(system, ("cheap-nsw", "Cheap Saver", offer_document("cheap-nsw", "1.0900")))
    system.month([meter])
    # 1 cent a day cheaper: 31 days, $0.31, $0.34 with GST, $4.00 a year.
    system.invoicing.policy = type(system.invoicing.policy)(
        data_deadline=system.invoicing.policy.data_deadline,
        better_offer_threshold=Decimal("4.00"),
    )
    system.run()
    check = check_of(system, meter)
    assert check.saving_per_year == Decimal("4.00")
    assert check.outcome is Outcome.BEST_OFFER


def test_offers_of_another_region_or_not_in_effect_do_not_count(store: Store) -> None:
    system = System.on(store)
    (meter,) = system.customers(1)
    cheap = offer_document("cheap-nsw", "0.5000")
    with store.write() as unit:
        unit.catalog.put_offers(
            [
                NewOffer(
                    "ended",
                    "Ended",
                    OfferSource.PLAN,
                    OfferTerms(Region.NSW, effective_to=date(2026, 7, 31)),
                    cheap,
                ),
                NewOffer(
                    "load",
                    "Controlled load",
                    OfferSource.PLAN,
                    OfferTerms(Region.NSW, controlled_load=True),
                    cheap,
                ),
            ],
            at=system.clock.now(),
        )
    system.month([meter])
    system.run()  # issued 5 August 2026
    check = check_of(system, meter)
    assert check.outcome is Outcome.NO_OFFERS
    assert check.offers_checked == 0
    (invoice,) = system.documents()
    assert "You are on our best plan for you" in render_html(document_of(invoice))


def test_usage_compared_and_a_year_of_data(store: Store) -> None:
    system = System.on(store)
    (meter,) = system.customers(1)
    put_offers(system, ("cheap-nsw", "Cheap Saver", offer_document("cheap-nsw", "0.9000")))
    year = [date(2025, 7, 1) + timedelta(days=n) for n in range(396)]  # to 31 July 2026
    system.month([meter], days=year)
    system.run()

    invoices = sorted(system.documents(), key=lambda d: d.period_start)
    july = invoices[-1]
    assert july.period_start == JULY[0]
    check = BetterOfferCheck.from_json(july.better_offer or {})
    assert (check.data_from, check.data_to) == (date(2025, 8, 1), JULY[-1])
    assert not check.estimated
    assert check.current is not None
    assert check.current.total == check.current.per_year  # a whole year: no scaling
    last_year = [date(2025, 8, 1) + timedelta(days=n) for n in range(365)]
    assert check.current.total == cost(builtin_document("sso-nsw"), meter, last_year)

    usage = {row["kind"]: row for row in july.usage or []}
    assert set(usage) == {kind.value for kind in UsageKind}
    assert usage["previous_period"]["start"] == "2026-06-01"
    assert usage["year_earlier"]["start"] == "2025-07-01"
    # 0.25 kWh x 42 intervals + 0.5 x 6 = 13.5 kWh a day, 3 of them free.
    assert usage["this_period"]["average_daily_kwh"] == "13.5"
    assert usage["this_period"]["free_share_percent"] == "22"
    page = render_html(document_of(july))
    assert "Your use compared" in page
    assert "Same time last year" in page
    assert "based on your use over the last 12 months" in page


def test_a_correction_has_no_check(store: Store) -> None:
    system = System.on(store)
    (meter,) = system.customers(1)
    system.month([meter])
    system.run()
    system.revise(halved(meter))
    correction = next(d for d in system.documents() if d.sequence == 1)
    assert correction.better_offer is None
    assert correction.usage is None


@pytest.mark.parametrize("as_of", [date(2026, 8, 1), None])
def test_the_check_on_demand_is_the_invoices(store: Store, as_of: date | None) -> None:
    system = System.on(store)
    (meter,) = system.customers(1)
    put_offers(system, ("cheap-nsw", "Cheap Saver", offer_document("cheap-nsw", "0.9000")))
    system.month([meter])
    system.run()
    on_demand = system.invoicing.better_offer(meter, as_of)
    assert on_demand is not None
    invoiced = check_of(system, meter)
    # As of 1 August, or today (5 August): an invoice issued then bills July, the last
    # period ended.
    assert on_demand == invoiced
    assert system.invoicing.better_offer("4103099999", as_of) is None


def test_a_retailer_may_turn_the_check_off(store: Store) -> None:
    system = System.on(store)
    (meter,) = system.customers(1)
    put_offers(system, ("cheap-nsw", "Cheap Saver", offer_document("cheap-nsw", "0.9000")))
    system.month([meter])
    system.invoicing.policy = type(system.invoicing.policy)(
        data_deadline=system.invoicing.policy.data_deadline, better_offer_check=False
    )
    system.run()
    (invoice,) = system.documents()
    assert invoice.better_offer is None
    assert invoice.usage is None
    page = render_html(document_of(invoice))
    assert "Compare offers from all retailers" in page
    assert "You could save" not in page


def test_a_period_priced_from_what_its_invoice_kept_is_priced_as_its_meter_data(
    store: Store,
) -> None:
    system = System.on(store, at=datetime(2026, 7, 5, tzinfo=UTC))
    (meter,) = system.customers(1)
    put_offers(system, ("cheap-nsw", "Cheap Saver", offer_document("cheap-nsw", "0.9000")))
    system.month([meter], days=JUNE)
    system.run()  # June's invoice, which keeps June's usage
    with store.read() as unit:
        kept = unit.invoices.period_usages([meter], JUNE[0], JUNE[0])[meter][JUNE[0]]
    assert kept.read_days == 30
    assert set(kept.totals) == {"plan:sso-nsw:2026-07-05T00:00:00+00:00", "offer:cheap-nsw:1"}
    system.clock.set(AFTER_JULY)
    system.month([meter])
    system.run()  # July's: June priced from what its invoice kept
    july = check_of_period(system, meter, JULY[0])
    assert (july.data_from, july.data_to) == (JUNE[0], JULY[-1])
    june_and_july = JUNE + JULY
    assert july.current is not None
    assert july.current.total == cost(builtin_document("sso-nsw"), meter, june_and_july)

    # Made again from the meter data alone (nothing kept), the check is the same.
    with store.write() as unit:
        unit.invoices._conn.execute(billing_periods.update().values(usage=None))
    assert system.invoicing.better_offer(meter, date(2026, 8, 1)) == july
    # A new offer has nothing kept for June: June is rated for it from its meter data.
    put_offers(system, ("new-nsw", "New Saver", offer_document("new-nsw", "0.8000")))
    again = system.invoicing.better_offer(meter, date(2026, 8, 1))
    assert again is not None
    assert again.offer is not None
    assert again.offer.offer_id == "new-nsw"
    assert again.offer.total == cost(offer_document("new-nsw", "0.8000"), meter, june_and_july)


def check_of_period(system: System, meter: str, start: date) -> BetterOfferCheck:
    (invoice,) = [d for d in system.documents() if d.nmi == meter and d.period_start == start]
    assert invoice.better_offer is not None
    return BetterOfferCheck.from_json(invoice.better_offer)


def test_a_year_of_monthly_runs_carries_the_year_forward_as_its_meter_data_prices_it(
    store: Store,
) -> None:
    system = System.on(store)
    (meter,) = system.customers(1)
    put_offers(system, ("cheap-nsw", "Cheap Saver", offer_document("cheap-nsw", "0.9000")))
    days = [date(2025, 6, 1) + timedelta(days=n) for n in range(426)]  # to 31 July 2026
    system.month([meter], days=days)
    for month in range(14):  # a run each month, each as of the 5th: July 2025 on
        as_of = datetime(2025 + (6 + month) // 12, (6 + month) % 12 + 1, 5, tzinfo=UTC)
        system.invoicing.start_run(as_of=as_of)
        system.settle()
    with store.read() as unit:
        kept = unit.invoices.period_usages([meter], JUNE[0], JULY[0])[meter]
    key = "plan:sso-nsw:2026-08-05T00:00:00+00:00"
    june = BetterOfferCheck.from_json(
        next(d for d in system.documents() if d.period_start == JUNE[0]).better_offer or {}
    )
    # June's year is July 2025 to June 2026, carried from May's: what June kept.
    assert UsageTotals.parse(kept[JUNE[0]].year[key]).first == date(2025, 7, 1)
    july = check_of_period(system, meter, JULY[0])
    assert (july.data_from, july.data_to) == (date(2025, 8, 1), JULY[-1])
    assert not july.estimated
    assert july.current is not None
    year = [date(2025, 8, 1) + timedelta(days=n) for n in range(365)]
    assert july.current.total == cost(builtin_document("sso-nsw"), meter, year)
    assert june.data_from == date(2025, 7, 1)

    # On demand, July's check is carried from what June kept (so a changed June shows).
    assert system.invoicing.better_offer(meter, date(2026, 8, 1)) == july
    carried = UsageTotals.parse(kept[JUNE[0]].year[key])
    more_export = carried._replace(export=carried.export + 1000)
    changed = replace(kept[JUNE[0]], year={**kept[JUNE[0]].year, key: more_export.text()})
    b = billing_periods.c
    with store.write() as unit:
        unit.invoices._conn.execute(
            billing_periods.update()
            .where(b.nmi == meter, b.period_start == JUNE[0])
            .values(usage=changed.text())
        )
    moved = system.invoicing.better_offer(meter, date(2026, 8, 1))
    assert moved is not None
    assert moved.current is not None
    assert moved.current.total < july.current.total  # 1,000 kWh more feed-in credited

    # A revision of May corrects May and forgets what the periods after it carried: the next
    # check prices them from the meter data, revised.
    system.revise(consumption(meter, date(2026, 5, 12), scale=Decimal("0.5"), stamp=REVISION_STAMP))
    with store.read() as unit:
        after = unit.invoices.period_usages([meter], date(2026, 5, 1), JULY[0])[meter]
    assert set(after) == set()  # May was corrected; June and July carried May
    with store.write() as unit:
        unit.invoices._conn.execute(billing_periods.update().values(usage=None))
    raw = system.invoicing.better_offer(meter, date(2026, 8, 1))
    assert raw is not None
    assert raw.current is not None
    assert raw.current.total < july.current.total  # May's 12th revised down


def test_plans_that_differ_only_in_prices_have_one_rating_shape_and_the_engines_totals() -> None:
    own_document = builtin_document("sso-nsw")
    priced_only = offer_document("cheap-nsw", "0.9000", "0.2000")
    priced_only["gst_rate"] = "0.05"
    priced_only["feed_in"] = {"unit_price": "0.0100"}
    later_peak = offer_document("late-nsw", "0.9000")
    for band in later_peak["time_of_use"]:
        if band["type"] == "PEAK":
            band["periods"][0]["start"] = "16:00"
    smaller_cap = {**builtin_document("sso-nsw"), "id": "cap-nsw"}
    smaller_cap["free_window"] = {**smaller_cap.get("free_window", {}), "cap_kwh": "2"}
    assert rating_shape(priced_only) == rating_shape(own_document)
    assert rating_shape(later_peak) != rating_shape(own_document)
    assert rating_shape(smaller_cap) != rating_shape(own_document)

    documents = [own_document, priced_only, later_peak, smaller_cap]
    priced = []
    for document in documents:
        plan = parse_plan(document, source="test")
        priced.append(
            Priced(document["id"], plan.name, plan, DayProfiles(plan), shape=rating_shape(document))
        )
    meter = "4103000001"
    rows = [row for day in JULY for row in (consumption(meter, day), export(meter, day))]
    period = BillingCycle().period_of(JULY[0])
    _, totals = rate_period(
        meter,
        priced[0],
        priced,
        period,
        first_data=JULY[0],
        rows=rows,
        many=ManyPlans([p.profiles for p in priced[2:]]),
    )
    for each in priced:
        rating = MeterRating(meter, each.profiles)
        for row in rows:
            rating.add(row)
        assert totals[each.key] == totals_of(list(rating.days(JULY).values()))
