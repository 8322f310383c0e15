"""Properties of rating that hold for any plan and any meter data (hypothesis).

The data lands around the hard days (daylight saving on and off, midsummer, midwinter) in every
region, on either clock, at 5, 15 or 30 minutes, with missing values, windows and bands whose
edges fall anywhere, and several consumption channels.
"""

from __future__ import annotations

import random
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from freehours.domain.plan import Plan, clock_text
from freehours.domain.rating import ZERO, rate
from freehours.domain.reads import IntervalDay
from tests.domain.rating_cases import nem_day, plan_for

# Days either side of which the clocks change, and two ordinary ones.
ANCHORS = [date(2026, 4, 4), date(2026, 10, 3), date(2026, 7, 14), date(2027, 1, 14)]

kwh = st.decimals(min_value=0, max_value=3, places=3, allow_nan=False, allow_infinity=False)
reading = st.one_of(st.none(), kwh, kwh, kwh, kwh)


@st.composite
def plans(draw: st.DrawFn) -> Plan:
    start = draw(st.integers(0, 23 * 60))
    end = draw(st.integers(start + 1, 24 * 60))
    peak_start = draw(st.integers(0, 23 * 60))
    peak_end = draw(st.integers(peak_start + 1, 24 * 60))
    bands: list[dict[str, Any]] = [
        {
            "type": "PEAK",
            "unit_price": "0.50",
            "periods": [
                {
                    "days": [draw(st.sampled_from(["WEEKDAYS", "WEEKENDS", "ALL", "MON"]))],
                    "start": clock_text(peak_start),
                    "end": clock_text(peak_end),
                }
            ],
        },
        {
            "type": "OFF_PEAK",
            "unit_price": "0.20",
            "periods": [{"days": ["ALL"], "start": "00:00", "end": "24:00"}],
        },
    ]
    return plan_for(
        draw(st.sampled_from(["NSW", "SEQ", "SA", "VIC"])),
        time_zone=draw(st.sampled_from(["LOCAL", "AEST"])),
        free_window={
            "start": clock_text(start),
            "end": clock_text(end),
            "cap_kwh": str(draw(st.decimals(min_value="0.5", max_value=30, places=1))),
        },
        time_of_use=bands,
    )


@st.composite
def meter_days(draw: st.DrawFn) -> list[IntervalDay]:
    anchor = draw(st.sampled_from(ANCHORS))
    days = []
    for suffix in draw(st.sets(st.sampled_from(["E1", "E2", "B1"]), min_size=1)):
        minutes = draw(st.sampled_from([5, 15, 30]))
        count = 24 * 60 // minutes
        for offset in draw(st.sets(st.integers(0, 2), min_size=1)):
            values = draw(st.lists(reading, min_size=count, max_size=count))
            days.append(nem_day(anchor + timedelta(days=offset), values, suffix=suffix))
    return days


def read_total(plan: Plan, days: list[IntervalDay], *, export: bool) -> Decimal:
    return sum(
        (
            value
            for day in days
            if plan.is_export(day.suffix) == export
            for value in day.values
            if value is not None
        ),
        ZERO,
    )


@settings(max_examples=40, deadline=None)
@given(plan=plans(), days=meter_days())
def test_free_plus_over_cap_plus_outside_is_consumption_and_free_stays_under_the_cap(
    plan: Plan, days: list[IntervalDay]
) -> None:
    assert plan.free_window is not None
    for rating in rate(plan, days).values():
        assert (
            rating.free_kwh + rating.over_cap_kwh + rating.outside_window_kwh
            == rating.consumption_kwh
        )
        assert ZERO <= rating.free_kwh <= plan.free_window.cap_kwh
        assert rating.over_cap_kwh >= 0
        assert rating.outside_window_kwh >= 0
        if rating.over_cap_kwh:
            assert rating.free_kwh == plan.free_window.cap_kwh


@settings(max_examples=40, deadline=None)
@given(plan=plans(), days=meter_days())
def test_every_kwh_read_lands_on_exactly_one_local_day(plan: Plan, days: list[IntervalDay]) -> None:
    ratings = rate(plan, days).values()
    assert sum((r.consumption_kwh for r in ratings), ZERO) == read_total(plan, days, export=False)
    assert sum((r.export_kwh for r in ratings), ZERO) == read_total(plan, days, export=True)


@settings(max_examples=40, deadline=None)
@given(plan=plans(), days=meter_days(), seed=st.integers(0, 2**32))
def test_the_rating_does_not_depend_on_the_order_of_the_reads(
    plan: Plan, days: list[IntervalDay], seed: int
) -> None:
    shuffled = list(days)
    random.Random(seed).shuffle(shuffled)
    assert rate(plan, shuffled) == rate(plan, days)
