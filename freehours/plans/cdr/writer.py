"""A plan out as a CDR energy plan document: ``cdr_from_plan`` (``freehours.plans.cdr`` says
the mapping)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any, NamedTuple

from freehours.domain.plan import (
    WEEKDAY_NAMES,
    Band,
    DayName,
    Plan,
    band_timeline,
    clock_text,
    day_names,
    in_dates,
)
from freehours.domain.reads import DAY_MINUTES
from freehours.errors import PlanError
from freehours.plans.cdr.common import (
    _FREE_WINDOW_NAME,
    CDR_TOU_TYPES,
    REGION_DISTRIBUTORS,
    SINGLE_RATE_TYPE,
    _plain,
)
from freehours.plans.document import season_starts

# --- out -------------------------------------------------------------------------------------


def cdr_from_plan(
    plan: Plan,
    *,
    last_updated: datetime,
    brand: str = "freehours",
    brand_name: str = "freehours",
    information: Sequence[str] = (),
) -> dict[str, Any]:
    """``plan`` as a CDR ``EnergyPlanDetailV3`` document. Raises ``PlanError`` (keyed by the
    plan's field) for what the CDR cannot say: a GST rate other than 10%, a band type that is
    not one of the CDR's, a public holiday whose bands depend on its weekday."""
    source = f"plan {plan.id}"
    if plan.gst_rate != Decimal("0.10"):
        raise PlanError(
            f"{plan.gst_rate}: CDR prices exclude a GST of 10%, and no other rate can be said",
            source=source,
            key="gst_rate",
        )
    zone = str(plan.time_zone)
    periods = _seasons(plan, source)
    single = all(len(season.rates) == 1 and season.rates[0][0] == "single" for season in periods)
    model = "SINGLE_RATE" if single else "TIME_OF_USE"
    if plan.controlled_load is not None:
        model += "_CONT_LOAD"
    contract: dict[str, Any] = {
        "pricingModel": model,
        "timeZone": zone,
        "isFixed": False,
        "variation": "Prices may change with notice, as the retailer's terms say.",
        "paymentOption": ["OTHER"],
        "termType": "ONGOING",
        "coolingOffDays": 10,
        "billFrequency": ["P1M"],
        "tariffPeriod": [_tariff_period(plan, season, zone) for season in periods],
    }
    if plan.feed_in is not None:
        contract["solarFeedInTariff"] = [
            {
                "displayName": "Solar feed-in tariff",
                "scheme": "CURRENT",
                "payerType": "RETAILER",
                "tariffUType": "singleTariff",
                "singleTariff": {"rates": [{"unitPrice": _plain(plan.feed_in.unit_price)}]},
            }
        ]
    if plan.controlled_load is not None:
        load = plan.controlled_load
        rate: dict[str, Any] = {
            "displayName": "Controlled load",
            "rates": [{"unitPrice": _plain(load.unit_price)}],
        }
        if load.daily_supply_charge is not None:
            rate["dailySupplyCharge"] = _plain(load.daily_supply_charge)
        contract["controlledLoad"] = [
            {"displayName": "Controlled load", "rateBlockUType": "singleRate", "singleRate": rate}
        ]
    if information:
        contract["additionalFeeInformation"] = "\n".join(information)
    return {
        "planId": plan.id,
        "lastUpdated": last_updated.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "displayName": plan.name,
        "description": plan.name,
        "type": "MARKET",
        "fuelType": "ELECTRICITY",
        "brand": brand,
        "brandName": brand_name,
        "customerType": "RESIDENTIAL",
        "geography": {"distributors": list(REGION_DISTRIBUTORS[plan.region])},
        "electricityContract": contract,
    }


#: One rate of an exported tariff period: ("single", band, None) or ("tou", band, in_window)
#: with its time windows as (CDR days, start, end).
_Rate = tuple[str, int, bool, tuple[tuple[tuple[str, ...], int, int], ...]]


class _Season(NamedTuple):
    """One tariff period of an exported plan: its first and last ``MMDD``, its daily supply
    charge and its rates."""

    first: int
    last: int
    supply: Decimal
    rates: tuple[_Rate, ...]


def _seasons(plan: Plan, source: str) -> list[_Season]:
    """The plan's year as tariff periods, stretches with the same supply charge and rates merged
    (over the new year too)."""
    starts = season_starts(plan.bands, plan.supply_charges)
    seasons = []
    for index, first in enumerate(starts):
        last = _day_before(starts[index + 1]) if index + 1 < len(starts) else 1231
        rates = _season_rates(plan, first, source)
        seasons.append(_Season(first, last, _supply_on(plan, first), rates))
    merged = [seasons[0]]
    for season in seasons[1:]:
        if season[2:] == merged[-1][2:]:
            merged[-1] = merged[-1]._replace(last=season.last)
        else:
            merged.append(season)
    if len(merged) > 1 and merged[0][2:] == merged[-1][2:]:
        merged[0] = merged[0]._replace(first=merged.pop().first)  # one season over the new year
    return merged


def _supply_on(plan: Plan, on: int) -> Decimal:
    """The daily supply charge on ``MMDD`` ``on``."""
    for charge in plan.supply_charges:
        if in_dates(charge.dates, on):
            return charge.unit_price
    return plan.daily_supply_charge


def _day_before(month_day: int) -> int:
    month, day = divmod(month_day, 100)
    if day > 1:
        return month_day - 1
    if month == 1:
        return 1231
    previous = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)[month - 2]
    return (month - 1) * 100 + previous


def _season_rates(plan: Plan, on: int, source: str) -> tuple[_Rate, ...]:
    """The rates of the tariff period that contains ``on``: the plan's timeline flattened (first
    listed band wins), one rate per band in and out of the free window."""
    window = plan.free_window
    timelines: dict[str, tuple[tuple[int, bool], ...]] = {}
    for weekday, name in enumerate(WEEKDAY_NAMES):
        timelines[str(name)] = _places(
            plan.bands, window, day_names(weekday, public_holiday=False), on
        )
    if plan.uses_public_holidays:
        holidays = {
            _places(plan.bands, window, day_names(weekday, public_holiday=True), on)
            for weekday in range(7)
        }
        if len(holidays) > 1:
            raise PlanError(
                "a public holiday's bands depend on its weekday: the CDR gives public holidays "
                'one set of times (list a band with days = ["PUBLIC_HOLIDAYS"], 00:00-24:00, '
                "first)",
                source=source,
                key="time_of_use",
            )
        timelines["PUBLIC_HOLIDAYS"] = holidays.pop()
    # (band, in window) -> (start, end) -> the days it is in force then
    spans: dict[tuple[int, bool], dict[tuple[int, int], list[str]]] = {}
    for day, places in timelines.items():
        start = 0
        for minute in range(1, DAY_MINUTES + 1):
            if minute == DAY_MINUTES or places[minute] != places[start]:
                spans.setdefault(places[start], {}).setdefault((start, minute), []).append(day)
                start = minute
    if len(spans) == 1 and not window:
        ((band, _),) = spans
        return (("single", band, False, ()),)
    rates = []
    for (band, inside), times in sorted(spans.items()):
        # Days with the same times form one time window each.
        by_days: dict[tuple[str, ...], list[tuple[int, int]]] = {}
        for (start, end), days in sorted(times.items()):
            by_days.setdefault(tuple(days), []).append((start, end))
        windows = tuple(
            (days, start, end)
            for days, parts in sorted(by_days.items(), key=lambda item: item[1])
            for start, end in parts
        )
        rates.append(("tou", band, inside, windows))
    return tuple(rates)


def _places(
    bands: tuple[Band, ...], window: Any, names: frozenset[DayName], on: int
) -> tuple[tuple[int, bool], ...]:
    """(band in force, inside the window) at each minute of a day with these names."""
    timeline = band_timeline(bands, names, on)
    if window is None:
        return tuple((band, False) for band in timeline)
    return tuple(
        (band, window.start <= minute < window.end) for minute, band in enumerate(timeline)
    )


def _tariff_period(plan: Plan, season: _Season, zone: str) -> dict[str, Any]:
    first, last, rates = season.first, season.last, season.rates
    start, end = f"{first // 100:02d}-{first % 100:02d}", f"{last // 100:02d}-{last % 100:02d}"
    period: dict[str, Any] = {
        "displayName": "All year" if (first, last) == (101, 1231) else f"{start} to {end}",
        "startDate": start,
        "endDate": end,
        "dailySupplyChargeType": "SINGLE",
        "dailySupplyCharge": _plain(season.supply),
        "timeZone": zone,
    }
    if rates[0][0] == "single":
        band = plan.bands[rates[0][1]]
        period["rateBlockUType"] = "singleRate"
        period["singleRate"] = {"displayName": _display(band.type), **_cdr_rates(band)}
        return period
    period["rateBlockUType"] = "timeOfUseRates"
    period["timeOfUseRates"] = [_time_of_use(plan, rate) for rate in rates]
    return period


def _time_of_use(plan: Plan, rate: _Rate) -> dict[str, Any]:
    _, index, inside, windows = rate
    band = plan.bands[index]
    cdr_type = _cdr_type(band.type, index, plan.id)
    entry: dict[str, Any] = {"displayName": _display(band.type), "type": cdr_type}
    if inside:
        assert plan.free_window is not None
        cap = plan.free_window.cap_kwh
        entry["displayName"] = f"{_FREE_WINDOW_NAME} ({_display(band.type).lower()} over the cap)"
        entry["rates"] = [
            {"unitPrice": "0", "volume": _number(cap)},
            {"unitPrice": _plain(band.unit_price)},
        ]
        if band.steps is not None:
            raise PlanError(
                "a band with stepped rates under the free window: the CDR's free-window rate "
                "has one price over the cap",
                source=f"plan {plan.id}",
                key=f"time_of_use[{index}].steps",
            )
        entry["period"] = "P1D"
    else:
        entry.update(_cdr_rates(band))
    entry["timeOfUse"] = [
        {"days": list(days), "startTime": clock_text(start), "endTime": _end_time(end)}
        for days, start, end in windows
    ]
    return entry


def _cdr_rates(band: Band) -> dict[str, Any]:
    """A band's ``rates`` (and ``period`` of stepped ones): each step's volume is its size."""
    if band.steps is None:
        return {"rates": [{"unitPrice": _plain(band.unit_price)}]}
    bounds = [step.after_kwh for step in band.steps.steps]
    sizes = [bounds[0], *(bounds[i] - bounds[i - 1] for i in range(1, len(bounds)))]
    prices = [band.unit_price, *(step.unit_price for step in band.steps.steps)]
    rates: list[dict[str, Any]] = [
        {"unitPrice": _plain(price), "volume": _number(size)}
        for price, size in zip(prices, sizes, strict=False)
    ]
    rates.append({"unitPrice": _plain(prices[-1])})
    return {"rates": rates, "period": band.steps.period}


def _number(value: Decimal) -> int | float:
    """kWh as a JSON number (the schema's ``volume``): whole, or the float whose shortest text
    is the decimal's (kWh have at most 6 places below 10^6, well within a float's 15 digits)."""
    return int(value) if value == value.to_integral() else float(value)


def _end_time(minutes: int) -> str:
    """An end of a time window: the end of the day is 23:59, as CDR documents write it."""
    return "23:59" if minutes == DAY_MINUTES else clock_text(minutes)


def _display(band_type: str) -> str:
    return band_type.replace("_", " ").capitalize()


def _cdr_type(band_type: str, index: int, plan_id: str) -> str:
    """The CDR time-of-use type of a band: its own, or the CDR type it begins with
    (``PEAK_2`` is a second PEAK price)."""
    if band_type in CDR_TOU_TYPES:
        return band_type
    if band_type == SINGLE_RATE_TYPE:
        return "PEAK"
    for known in sorted(CDR_TOU_TYPES, key=len, reverse=True):
        if band_type.startswith(known + "_"):
            return known
    raise PlanError(
        f"{band_type!r} is not a CDR time-of-use type ({', '.join(CDR_TOU_TYPES)}), nor one "
        "with a suffix such as PEAK_2",
        source=f"plan {plan_id}",
        key=f"time_of_use[{index}].type",
    )
