"""A day's free energy: the kWh imported in the free window, up to the cap, from the day's reads,
and whether those reads cover the window (``window_complete``)."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal

from freehours.domain.plan import Plan
from freehours.domain.profiles import DayProfiles
from freehours.domain.rating import rate
from freehours.domain.reads import IntervalDay
from freehours.settlement.model import (
    CENT,
)


def window_complete(
    plan: Plan, days: list[IntervalDay], window_start: datetime, window_end: datetime
) -> bool:
    """Whether every consumption interval overlapping the window has a value.

    True needs at least one consumption channel covering the window; an interval with no value
    (quality N, or absent) leaves it incomplete.
    """
    covered = False
    for day in days:
        if not day.is_energy or not plan.is_consumption(day.suffix):
            continue
        # The intervals overlapping [window_start, window_end), by index: interval i covers
        # [start + i * step, start + (i + 1) * step) of the NEM day (fixed length, no DST).
        step = timedelta(minutes=day.interval_minutes)
        first = max(0, (window_start - day.start) // step)
        last = min(len(day.values), -((day.start - window_end) // step))
        if first >= last:
            continue
        if any(value is None for value in day.values[first:last]):
            return False
        covered = True
    return covered


def free_energy(
    plan: Plan, profiles: DayProfiles, days: list[IntervalDay], local_date: date
) -> tuple[Decimal, Decimal]:
    """Free kWh of ``local_date`` and its value at the bands in force, to the cent."""
    rating = rate(plan, days, local_dates=[local_date], profiles=profiles).get(local_date)
    if rating is None:
        return Decimal(0), Decimal("0.00")
    value = sum(
        (
            kwh * band.unit_price
            for kwh, band in zip(rating.free_kwh_by_band, plan.bands, strict=True)
        ),
        Decimal(0),
    )
    return rating.free_kwh, value.quantize(CENT, ROUND_HALF_UP)
