"""Builders shared by the rating tests: plans, NEM days of interval values, and summaries."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from decimal import Decimal
from typing import Any

from freehours.domain.plan import Plan
from freehours.domain.rating import DayRating
from freehours.domain.reads import IntervalDay
from freehours.plans.document import parse_plan

NMI = "NMI0000001"

PEAK_AND_OFF_PEAK: list[dict[str, Any]] = [
    {
        "type": "PEAK",
        "unit_price": "0.50",
        "periods": [{"days": ["ALL"], "start": "15:00", "end": "21:00"}],
    },
    {
        "type": "OFF_PEAK",
        "unit_price": "0.20",
        "periods": [{"days": ["ALL"], "start": "00:00", "end": "24:00"}],
    },
]


def plan_for(region: str = "NSW", **fields: Any) -> Plan:
    """A test plan: PEAK 15:00-21:00 every day at 0.50, OFF_PEAK otherwise at 0.20, the region's
    default window and cap, supply 1.0000 a day, feed-in 0.05; ``fields`` override."""
    return parse_plan(document_for(region, **fields), source="test")


def document_for(region: str = "NSW", **fields: Any) -> dict[str, Any]:
    """``plan_for``'s plan as its document (a plan file's fields)."""
    document: dict[str, Any] = {
        "id": "test",
        "region": region,
        "daily_supply_charge": "1.0000",
        "time_of_use": PEAK_AND_OFF_PEAK,
        "feed_in": {"unit_price": "0.05"},
    }
    document.update(fields)
    return document


def ramp(intervals: int = 48) -> list[Decimal]:
    """Interval i (1-based) holds i Wh: 0.001, 0.002, ... kWh, so a sum names its intervals."""
    return [Decimal(i).scaleb(-3) for i in range(1, intervals + 1)]


def flat(kwh: str, intervals: int = 48) -> list[Decimal]:
    return [Decimal(kwh)] * intervals


def nem_day(
    day: date,
    values: Sequence[Decimal | None],
    *,
    suffix: str = "E1",
    nmi: str = NMI,
    uom: str = "KWH",
) -> IntervalDay:
    """One channel's NEM day; the interval length follows from the number of values."""
    return IntervalDay(
        nmi=nmi,
        suffix=suffix,
        day=day,
        interval_minutes=24 * 60 // len(values),
        values=tuple(values),
        qualities="".join("N" if value is None else "A" for value in values),
        update_datetime=None,
        uom=uom,
    )


def charged_by_type(plan: Plan, rating: DayRating) -> dict[str, Decimal]:
    """Charged kWh per band type (bands of one type added together)."""
    charged: dict[str, Decimal] = {}
    for band, kwh in zip(plan.bands, rating.charged_kwh, strict=True):
        charged[band.type] = charged.get(band.type, Decimal(0)) + kwh
    return charged


def summary(plan: Plan, rating: DayRating) -> dict[str, object]:
    """A day's figures in one comparable dict."""
    return {
        "consumption": rating.consumption_kwh,
        "free": rating.free_kwh,
        "over_cap": rating.over_cap_kwh,
        "charged": charged_by_type(plan, rating),
        "export": rating.export_kwh,
        "missing": rating.missing_intervals,
    }
