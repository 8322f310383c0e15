"""Invoicing's rules: billing periods on the customer's calendar, and corrections by difference."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from freehours.domain.bill import BillLine
from freehours.domain.invoicing import (
    BillingCycle,
    CycleError,
    DayFigures,
    DocumentType,
    Figures,
    Frequency,
    Period,
    billed_so_far,
    correction_type,
    difference,
)

MONTHLY = BillingCycle()
QUARTERLY = BillingCycle(Frequency.QUARTERLY, anchor_day=15)


@pytest.mark.parametrize(
    ("cycle", "day", "period"),
    [
        (MONTHLY, date(2026, 7, 1), Period(date(2026, 7, 1), date(2026, 7, 31))),
        (MONTHLY, date(2026, 2, 28), Period(date(2026, 2, 1), date(2026, 2, 28))),
        (MONTHLY, date(2028, 2, 29), Period(date(2028, 2, 1), date(2028, 2, 29))),
        (
            BillingCycle(anchor_day=10),
            date(2026, 7, 9),
            Period(date(2026, 6, 10), date(2026, 7, 9)),
        ),
        (
            BillingCycle(anchor_day=10),
            date(2026, 12, 10),
            Period(date(2026, 12, 10), date(2027, 1, 9)),
        ),
        (QUARTERLY, date(2026, 7, 14), Period(date(2026, 4, 15), date(2026, 7, 14))),
        (QUARTERLY, date(2026, 7, 15), Period(date(2026, 7, 15), date(2026, 10, 14))),
        (QUARTERLY, date(2027, 1, 1), Period(date(2026, 10, 15), date(2027, 1, 14))),
    ],
)
def test_the_period_that_holds_a_day(cycle: BillingCycle, day: date, period: Period) -> None:
    assert cycle.period_of(day) == period


@given(
    st.sampled_from(list(Frequency)),
    st.integers(1, 28),
    st.dates(date(2020, 1, 1), date(2040, 12, 31)),
)
def test_periods_tile_the_calendar(frequency: Frequency, anchor: int, day: date) -> None:
    cycle = BillingCycle(frequency, anchor)
    period = cycle.period_of(day)
    assert day in period
    assert period.start.day == anchor
    assert cycle.period_of(period.end + timedelta(days=1)).start == period.end + timedelta(days=1)
    assert cycle.period_of(period.start - timedelta(days=1)).end == period.start - timedelta(days=1)
    assert 28 <= period.days <= 31 if frequency is Frequency.MONTHLY else 89 <= period.days <= 92


def test_periods_ended_before_a_day() -> None:
    periods = MONTHLY.periods(date(2026, 7, 20), date(2026, 9, 30))
    assert periods == [
        Period(date(2026, 7, 1), date(2026, 7, 31)),
        Period(date(2026, 8, 1), date(2026, 8, 31)),
    ]
    assert MONTHLY.periods(date(2026, 7, 20), date(2026, 7, 31)) == []
    assert MONTHLY.due_date(date(2026, 8, 5)) == date(2026, 8, 26)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"anchor_day": 29}, "anchor_day"),
        ({"anchor_day": 0}, "anchor_day"),
        ({"payment_term_days": 12}, "payment_term_days"),
        ({"payment_term_days": 91}, "payment_term_days"),
    ],
)
def test_a_cycle_that_cannot_be_names_its_field(kwargs: dict[str, int], field: str) -> None:
    with pytest.raises(CycleError, match=field):
        BillingCycle(**kwargs)  # type: ignore[arg-type]


CODES = ("PEAK", "OFF_PEAK", "SUPPLY", "FEED_IN", "FREE_ENERGY")
cents = st.decimals(min_value=-500, max_value=500, places=2)
kwh = st.decimals(min_value=0, max_value=900, places=3)


@st.composite
def figures(draw: st.DrawFn) -> Figures:
    codes = draw(st.lists(st.sampled_from(CODES), min_size=1, unique=True))
    lines = tuple(
        BillLine(code, code.lower(), draw(kwh), "kWh", Decimal("0.3"), draw(cents))
        for code in codes
    )
    subtotal = sum((line.amount for line in lines), Decimal(0))
    gst = draw(cents)
    days = tuple(
        DayFigures(date(2026, 7, n), draw(st.integers(1, 3)), draw(kwh), draw(kwh), draw(kwh))
        for n in draw(st.lists(st.integers(1, 31), unique=True, max_size=5))
    )
    return Figures(
        lines,
        subtotal,
        gst,
        subtotal + gst,
        draw(kwh),
        draw(kwh),
        draw(cents),
        draw(kwh),
        draw(kwh),
        days,
    )


def _by_code(f: Figures) -> dict[str, tuple[Decimal, Decimal]]:
    return {
        line.code: (line.quantity, line.amount) for line in f.lines if line.quantity or line.amount
    }


@given(figures(), figures())
def test_billed_and_its_difference_add_up_to_the_new_rating(old: Figures, new: Figures) -> None:
    change = difference(old, new)
    if change is None:
        assert _by_code(old) == _by_code(new)
        return
    total = billed_so_far([old, change])
    for code, (quantity, amount) in _by_code(new).items():
        assert _by_code(total).get(code, (Decimal(0), Decimal(0))) == (quantity, amount)
    assert (total.subtotal, total.gst, total.total) == (new.subtotal, new.gst, new.total)
    assert total.free_kwh == new.free_kwh
    assert sum((line.amount for line in change.lines), Decimal(0)) == change.subtotal
    assert change.subtotal + change.gst == change.total
    expected = DocumentType.ADJUSTMENT_INVOICE if change.total > 0 else DocumentType.CREDIT_NOTE
    assert correction_type(change) is expected


@given(figures())
def test_the_same_rating_again_is_no_difference(f: Figures) -> None:
    assert difference(f, f) is None
