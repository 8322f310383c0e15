"""A household's days (``domain/usage.py``): what a day left of its free allowance, and what
moving that much use into the window would have saved."""

from __future__ import annotations

import random
from datetime import date, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from freehours.domain.rating import ZERO, rate
from freehours.domain.usage import UseTotals, days_of_use
from freehours.plans.document import parse_plan
from tests.domain.rating_cases import nem_day
from tests.domain.test_rating_properties import plan_documents

CENT = Decimal("0.01")


@settings(max_examples=80, deadline=None)
@given(
    document=plan_documents(),
    first=st.sampled_from([date(2026, 4, 4), date(2026, 7, 1), date(2026, 10, 3)]),
    days=st.integers(1, 5),
    seed=st.integers(0, 2**32),
    scale=st.sampled_from([10, 500, 3000]),
)
def test_what_was_left_and_what_moving_use_would_have_saved(
    document: dict[str, Any], first: date, days: int, seed: int, scale: int
) -> None:
    plan = parse_plan(document, source="test")
    window = plan.free_window
    assert window is not None
    chance = random.Random(seed)
    rows = [
        nem_day(
            first + timedelta(days=n),
            [Decimal(chance.randrange(0, scale)) / 1000 for _ in range(48)],
        )
        for n in range(days)
    ]
    dates = [first + timedelta(days=n) for n in range(days)]
    rated = rate(plan, rows, local_dates=dates)
    found = days_of_use(plan, rated.values())
    prices = [band.unit_price for band in plan.bands]
    gst = 1 + plan.gst_rate
    for use, day in zip(found, rated.values(), strict=True):
        assert (use.day, use.use_kwh, use.free_kwh) == (day.local_date, *day[1:3])
        assert use.unused_free_kwh == max(window.cap_kwh - day.free_kwh, ZERO)
        # What could move in: the unused allowance, at most what was used outside the window.
        outside = day.consumption_kwh - day.free_kwh - day.over_cap_kwh
        movable = min(use.unused_free_kwh, outside)
        assert use.could_have_saved is not None
        if movable <= 0:
            assert use.could_have_saved == 0
            continue
        # At the day's own mix of prices: between its cheapest and dearest band's.
        low = (movable * min(prices) * gst).quantize(CENT, ROUND_HALF_UP)
        high = (movable * max(prices) * gst).quantize(CENT, ROUND_HALF_UP)
        assert low <= use.could_have_saved <= high
        if len({p for p, kwh in zip(prices, day.charged_kwh, strict=True) if kwh}) == 1:
            assert use.could_have_saved in (low, high)  # one price paid: exactly that price
    totals = UseTotals.of(found)
    assert totals.use_kwh == sum((d.consumption_kwh for d in rated.values()), ZERO)
    assert totals.could_have_saved == sum((d.could_have_saved or ZERO for d in found), ZERO)


def test_a_plan_without_a_window_has_nothing_unused() -> None:
    document = {
        "id": "flat",
        "region": "NSW",
        "free_window": {"enabled": False},
        "daily_supply_charge": "1.0000",
        "time_of_use": [
            {
                "type": "PEAK",
                "unit_price": "0.30",
                "periods": [{"days": ["ALL"], "start": "00:00", "end": "24:00"}],
            }
        ],
    }
    plan = parse_plan(document, source="test")
    day = date(2026, 7, 1)
    rated = rate(plan, [nem_day(day, [Decimal("0.5")] * 48)], local_dates=[day])
    (use,) = days_of_use(plan, rated.values())
    assert (use.unused_free_kwh, use.could_have_saved, use.free_kwh) == (None, None, 0)
    totals = UseTotals.of([use])
    assert (totals.unused_free_kwh, totals.free_share) == (None, 0)
    assert UseTotals.of([]).free_share is None
