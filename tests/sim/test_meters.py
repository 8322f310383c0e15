"""Simulated smart meters: household load and rooftop solar as NEM12 days."""

from __future__ import annotations

import random
from collections import Counter
from datetime import date

from freehours.sim.meters import Household, households, meter_days

SUNNY = Household(nmi="4100000001", base_kw=0.3, peak_kw=2.0, solar_kw=6.6)


def test_the_same_seed_gives_the_same_meters() -> None:
    first = meter_days(SUNNY, date(2026, 7, 1), 3, random.Random(7))
    again = meter_days(SUNNY, date(2026, 7, 1), 3, random.Random(7))
    other = meter_days(SUNNY, date(2026, 7, 1), 3, random.Random(8))
    assert first == again
    assert first != other


def test_a_net_meter_imports_or_exports_never_both() -> None:
    days = meter_days(SUNNY, date(2026, 12, 1), 5, random.Random(1))
    imports, exports = days[:5], days[5:]
    assert {d.suffix for d in imports} == {"E1"}
    assert {d.suffix for d in exports} == {"B1"}
    for e1, b1 in zip(imports, exports, strict=True):
        assert e1.day == b1.day
        for bought, sold in zip(e1.values, b1.values, strict=True):
            assert bought is not None
            assert sold is not None
            assert min(bought, sold) == 0
            assert bought.as_tuple().exponent == -3


def test_solar_exports_only_in_daylight_and_most_at_midday() -> None:
    exports = meter_days(SUNNY, date(2026, 12, 1), 7, random.Random(2))[7:]
    by_hour: Counter[int] = Counter()
    for day in exports:
        for index, value in enumerate(day.values):
            by_hour[index // 2] += value or 0
    assert all(by_hour[hour] == 0 for hour in (*range(4), 22, 23))
    assert max(by_hour, key=lambda hour: by_hour[hour]) in range(10, 15)


def test_a_household_without_solar_exports_nothing() -> None:
    shady = Household(nmi="4100000002", base_kw=0.3, peak_kw=2.0, solar_kw=0.0)
    exports = meter_days(shady, date(2026, 12, 1), 2, random.Random(3))[2:]
    assert all(day.total() == 0 for day in exports)


def test_households_get_distinct_nmis() -> None:
    nmis = [household.nmi for household in households(50, random.Random(4))]
    assert len(set(nmis)) == 50
    assert all(len(nmi) == 10 for nmi in nmis)
