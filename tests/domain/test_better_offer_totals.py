"""A year's cost priced from its billing periods' totals is the cost of the bill of all its days,
to the cent, for any plan (bands, steps, seasonal supply, controlled load, feed-in, a free
window) and any split of the days into periods (hypothesis): so the better offer check may keep
each period's totals and price a year from them."""

from __future__ import annotations

import random
from datetime import date, timedelta
from decimal import Decimal
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from freehours.domain.better_offer import PeriodUsage, UsageTotals, cost_of, totals_of
from freehours.domain.bill import make_bill
from freehours.domain.rating import rate
from freehours.plans.document import parse_plan
from tests.domain.rating_cases import NMI, document_for, nem_day
from tests.domain.test_rating_properties import plan_documents


@st.composite
def priced_documents(draw: st.DrawFn) -> dict[str, Any]:
    """A plan with any of steps, a seasonal supply charge and a controlled load."""
    document = draw(plan_documents())
    if draw(st.booleans()):
        step_period = draw(st.sampled_from(["P1D", "P1M", "P1Y"]))
        for band in document["time_of_use"]:
            band["steps"] = [{"after_kwh": str(draw(st.integers(1, 400))), "unit_price": "0.61"}]
            band["step_period"] = step_period
    if draw(st.booleans()):
        document["supply_charges"] = [{"dates": ["06-01", "08-31"], "unit_price": "1.4700"}]
    if draw(st.booleans()):
        document["controlled_load"] = {"unit_price": "0.1300", "daily_supply_charge": "0.0500"}
    return document


@settings(max_examples=60, deadline=None)
@given(
    document=priced_documents(),
    first=st.sampled_from([date(2025, 8, 1), date(2026, 2, 20), date(2026, 5, 28)]),
    days=st.integers(1, 70),
    cuts=st.sets(st.integers(1, 69), max_size=5),
    seed=st.integers(0, 2**32),
)
def test_a_year_priced_from_its_periods_totals_is_its_bill(
    document: dict[str, Any], first: date, days: int, cuts: set[int], seed: int
) -> None:
    plan = parse_plan(document, source="test")
    chance = random.Random(seed)
    rows = []
    for n in range(days):
        day = first + timedelta(days=n)
        for suffix in ("E1", "E2", "B1"):
            values = [Decimal(chance.randrange(0, 2000)) / 1000 for _ in range(48)]
            rows.append(nem_day(day, values, suffix=suffix))
    dates = [first + timedelta(days=n) for n in range(days)]
    rated = rate(plan, rows, local_dates=dates)
    bill = make_bill(plan, NMI, rated.values())
    ordered = list(rated.values())
    bounds = [0, *sorted(cut for cut in cuts if cut < days), days]
    parts = [totals_of(ordered[a:b]) for a, b in pairwise(bounds) if a < b]
    assert cost_of(plan, parts) == bill.total
    # Kept as text and read back, the totals price the same.
    assert cost_of(plan, [UsageTotals.parse(part.text()) for part in parts]) == bill.total


def test_totals_of_a_plan_priced_under_another_are_refused() -> None:
    one_band = parse_plan(document_for(), source="test")
    day = date(2026, 7, 1)
    totals = UsageTotals(day, day, (Decimal(1),) * 9, Decimal(0), Decimal(0))
    with pytest.raises(ValueError, match="bands"):
        cost_of(one_band, [totals])


def test_what_a_period_keeps_reads_back_as_it_was_equal_totals_written_once() -> None:
    day = date(2026, 7, 1)
    one = UsageTotals(day, day, (Decimal("1.5"), Decimal(0)), Decimal("0.25"), Decimal(0))
    other = one._replace(export=Decimal(3))
    kept = PeriodUsage(
        day,
        date(2026, 7, 31),
        31,
        Decimal("418.5"),
        Decimal(93),
        {"plan:a": one.text(), "offer:b:1": one.text(), "offer:c:2": other.text()},
        {"plan:a": other.text(), "offer:b:1": other.text()},
    )
    text = kept.text()
    assert text.count(one.text()) == 1  # the second plan's line names the first's
    assert PeriodUsage.parse(kept.start, kept.end, text) == kept
