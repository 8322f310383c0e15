"""Simulated smart meters: household load and rooftop solar, as NEM12 interval days.

A household draws an always-on base load, a morning bump and an evening peak, with noise; its
rooftop system makes a sine-shaped day between sunrise and sunset, longer and stronger in the
southern summer, dimmed by each day's cloud. The meter is a net meter: each interval's import
is channel E1, its export channel B1, in kWh to the watt-hour (three decimals), as a real one
reads. Everything is drawn from one ``random.Random(seed)``, so a seed gives the same data on
every machine.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal

from freehours.domain.reads import IntervalDay
from freehours.domain.time import NEM_TIME

#: The first day of the Solar Sharer Offer: the default first day of simulated data.
SOLAR_SHARER_START = date(2026, 7, 1)


@dataclass(frozen=True, slots=True)
class Household:
    """One customer's consumption habits and rooftop system."""

    nmi: str
    base_kw: float  # always-on load: fridge, standby
    peak_kw: float  # evening peak above the base
    solar_kw: float  # rooftop system size; 0 without one


def households(count: int, rng: random.Random) -> list[Household]:
    """``count`` households; about three in four have rooftop solar, as in many suburbs."""
    return [
        Household(
            nmi=f"41{index:08d}",
            base_kw=rng.uniform(0.15, 0.45),
            peak_kw=rng.uniform(1.0, 3.0),
            solar_kw=rng.choice((0.0, 5.0, 6.6, 6.6, 8.0, 10.0)) if rng.random() < 0.75 else 0.0,
        )
        for index in range(1, count + 1)
    ]


def meter_days(
    household: Household,
    first_day: date,
    days: int,
    rng: random.Random,
    *,
    interval_minutes: int = 30,
) -> list[IntervalDay]:
    """The household's E1 days, then its B1 days, each read (quality A) early the next morning."""
    imports: list[IntervalDay] = []
    exports: list[IntervalDay] = []
    for offset in range(days):
        day = first_day + timedelta(days=offset)
        stamp = datetime.combine(day + timedelta(days=1), time(2), NEM_TIME) + timedelta(
            seconds=rng.randrange(3 * 3600)
        )
        e1, b1 = _net_kwh(household, day, interval_minutes, rng)
        qualities = "A" * len(e1)
        imports.append(
            IntervalDay(household.nmi, "E1", day, interval_minutes, e1, qualities, stamp)
        )
        exports.append(
            IntervalDay(household.nmi, "B1", day, interval_minutes, b1, qualities, stamp)
        )
    return imports + exports


def _net_kwh(
    household: Household, day: date, interval_minutes: int, rng: random.Random
) -> tuple[tuple[Decimal, ...], tuple[Decimal, ...]]:
    """One day's imports and exports, interval by interval, in kWh to three decimals."""
    hours = interval_minutes / 60
    # Southern hemisphere: the longest day is about 21 December (day 355 of the year).
    season = math.cos(2 * math.pi * (day.timetuple().tm_yday - 355) / 365.25)
    sunrise, sunset = 6.0 - 1.0 * season, 18.0 + 1.5 * season
    clear = rng.uniform(0.35, 1.0)
    peak_sun = household.solar_kw * (0.75 + 0.15 * season) * clear
    imports: list[Decimal] = []
    exports: list[Decimal] = []
    for index in range(24 * 60 // interval_minutes):
        hour = (index + 0.5) * hours
        load = (
            household.base_kw
            + 0.5 * household.peak_kw * math.exp(-(((hour - 7.5) / 1.0) ** 2))
            + household.peak_kw * math.exp(-(((hour - 19.0) / 1.6) ** 2))
        ) * rng.lognormvariate(0.0, 0.25)
        sun = 0.0
        if sunrise < hour < sunset:
            sun = peak_sun * math.sin(math.pi * (hour - sunrise) / (sunset - sunrise)) ** 1.3
            sun *= rng.uniform(0.85, 1.0)
        net_wh = round((load - sun) * hours * 1000)
        imports.append(_kwh(max(net_wh, 0)))
        exports.append(_kwh(max(-net_wh, 0)))
    return tuple(imports), tuple(exports)


_KWH: dict[int, Decimal] = {}


def _kwh(wh: int) -> Decimal:
    """``wh`` watt-hours as kWh with three decimals, one shared Decimal per value."""
    value = _KWH.get(wh)
    if value is None:
        value = _KWH[wh] = Decimal(wh).scaleb(-3)
    return value
