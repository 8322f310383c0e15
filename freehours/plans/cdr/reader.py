"""A CDR energy plan document in: ``plan_document_from_cdr`` and ``read_json``
(``freehours.plans.cdr`` says the mapping)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from decimal import Decimal
from typing import Any

from freehours.domain.fields import MAX_PLAN_NAME
from freehours.domain.plan import (
    clock_text,
)
from freehours.domain.reads import DAY_MINUTES
from freehours.domain.time import Region
from freehours.errors import PlanError
from freehours.plans.cdr.common import (
    _DISTRIBUTORS,
    _DURATION_DAY,
    _FEES_ONE_OFF_TERMS,
    _MONTH_DAY,
    _POSTCODE_REGIONS,
    _STEP_PERIOD,
    _TIME,
    CDR_DAYS,
    CDR_TOU_TYPES,
    CDS_RELEASE,
    SINGLE_RATE_TYPE,
    Json,
    _amount,
    _field,
    _first_words,
    _kept,
    _list,
    _object,
    _one_of,
    _Path,
    _plain,
    _shortened,
    _text,
)
from freehours.plans.document import parse_plan
from freehours.plans.limits import MAX_NUMBER_LENGTH, check_json

# --- in --------------------------------------------------------------------------------------


def plan_document_from_cdr(
    document: object,
    *,
    source: str,
    plan_id: str | None = None,
    region: Region | None = None,
    controlled_load_suffixes: Sequence[str] = ("E2",),
) -> dict[str, Any]:
    """The freehours plan document of a CDR ``EnergyPlanDetailV3`` (bare, or in its response's
    ``data``). ``plan_id`` replaces the CDR ``planId``; ``region`` the one its geography gives.

    The document returned has been checked by ``parse_plan``. Raises ``PlanError`` naming
    ``source`` and the JSON path of the first problem.
    """
    root = _Path(source)
    body = _object(document, root)
    if "planId" not in body and isinstance(body.get("data"), Mapping):
        root, body = root / "data", body["data"]
    reader = _Reader(root, body, plan_id, region, tuple(controlled_load_suffixes))
    converted = reader.document()
    try:
        parse_plan(converted, source=source)
    except PlanError as exc:
        raise (root / "electricityContract").error(
            f"as a freehours plan: {exc.key + ': ' if exc.key else ''}{exc.reason}"
        ) from None
    return converted


class _Reader:
    """One CDR document read into a plan document (see ``plan_document_from_cdr``)."""

    def __init__(
        self,
        root: _Path,
        body: Json,
        plan_id: str | None,
        region: Region | None,
        controlled_load_suffixes: tuple[str, ...],
    ) -> None:
        self.root = root
        self.body = body
        self.plan_id = plan_id
        self.region = region
        self.controlled_load_suffixes = controlled_load_suffixes
        self.information: list[str] = []
        # A CDR type with a second pricing becomes TYPE_2, and so on.
        self.types: dict[tuple[str, str], str] = {}  # (CDR type, its pricing) -> band type
        self.holiday_bands: list[dict[str, Any]] = []
        self.bands: list[dict[str, Any]] = []

    def document(self) -> dict[str, Any]:
        body, root = self.body, self.root
        cdr_id = _text(body, "planId", root)
        fuel = _one_of(body, "fuelType", root, ("ELECTRICITY", "GAS", "DUAL"), "ELECTRICITY")
        if fuel == "GAS":
            raise (root / "fuelType").error("a gas plan: freehours rates electricity only")
        if fuel == "DUAL":
            self.information.append("gasContract: the plan's gas contract is not rated")
        name = _text(body, "displayName", root, default="")
        about = _text(body, "description", root, default="")
        brand = _text(body, "brandName", root, default="")
        self.information.insert(
            0, f"CDR plan {cdr_id}" + (f" of {brand}" if brand else "") + f" (CDS {CDS_RELEASE})"
        )
        for index, charge in enumerate(_list(body, "meteringCharges", root)):
            at = root / "meteringCharges" / index
            _object(charge, at)
            raise at.error(
                "a metering charge is billed, and freehours does not bill metering charges"
            )
        if len(name) + len(about) + 3 > MAX_PLAN_NAME and about:
            self.information.append(f"description: {about}")
        contract_at = root / "electricityContract"
        contract = _object(_field(body, "electricityContract", root), contract_at)
        converted: dict[str, Any] = {
            "id": self.plan_id or cdr_id,
            # The plan's name on its invoices, as long as they hold; the whole text kept.
            "description": _shortened(
                " - ".join(dict.fromkeys(p for p in (name, about) if p)), MAX_PLAN_NAME
            ),
            "region": str(self._region()),
        }
        converted.update(self._contract(contract, contract_at))
        if self.information:
            converted["information"] = _kept(self.information)
        return converted

    def _region(self) -> Region:
        if self.region is not None:
            return self.region
        at = self.root / "geography"
        geography = self.body.get("geography")
        if isinstance(geography, Mapping):
            for index, distributor in enumerate(_list(geography, "distributors", at)):
                known = _DISTRIBUTORS.get(_first_words(distributor))
                if known is not None:
                    self.information.append(
                        f"geography.distributors[{index}]: region {known} from {distributor}"
                    )
                    return known
            for index, postcode in enumerate(_list(geography, "includedPostcodes", at)):
                if isinstance(postcode, str) and postcode[:1] in _POSTCODE_REGIONS:
                    region = _POSTCODE_REGIONS[postcode[:1]]
                    self.information.append(
                        f"geography.includedPostcodes[{index}]: region {region} from {postcode}"
                    )
                    return region
        raise at.error(
            "the plan's region is not given and its geography names no distributor or postcode "
            "of NSW, SEQ, SA or VIC: give the region (--region, or ?region= on the API)"
        )

    def _contract(self, contract: Json, at: _Path) -> dict[str, Any]:
        model = _one_of(
            contract,
            "pricingModel",
            at,
            (
                "SINGLE_RATE",
                "SINGLE_RATE_CONT_LOAD",
                "TIME_OF_USE",
                "TIME_OF_USE_CONT_LOAD",
                "FLEXIBLE",
                "FLEXIBLE_CONT_LOAD",
                "QUOTA",
            ),
            "",
        )
        if model.startswith("FLEXIBLE") or model == "QUOTA":
            raise (at / "pricingModel").error(
                f"{model} pricing is not rated: freehours rates single-rate and time-of-use plans"
            )
        zone = _one_of(contract, "timeZone", at, ("LOCAL", "AEST"), "AEST")
        for index, discount in enumerate(_list(contract, "discounts", at)):
            _object(discount, at / "discounts" / index)
            raise (at / "discounts" / index).error(
                "discounts change the bill and freehours does not rate them"
            )
        self._informational(contract, at)
        periods = _list(contract, "tariffPeriod", at, required=True)
        supply: Decimal | None = None
        seasonal: list[dict[str, Any]] = []
        window: _Window | None = None
        for index, period in enumerate(periods):
            period_at = at / "tariffPeriod" / index
            tariff = _object(period, period_at)
            zone = self._period_zone(tariff, period_at, zone, first=index == 0)
            charge = self._supply(tariff, period_at)
            if supply is None:
                supply = charge  # the plan's; another period's own is a seasonal charge
            elif charge != supply:
                dates = _dates(tariff, period_at)
                if dates is None:
                    raise (period_at / "dailySupplyCharge").error(
                        f"{charge} differs from tariffPeriod[0]'s {supply} on the same days (this "
                        "period is the whole year): a day has one supply charge"
                    )
                seasonal.append({"dates": dates, "unit_price": _plain(charge)})
            period_window = self._tariff_period(tariff, period_at)
            if index and (period_window is None) != (window is None):
                raise period_at.error(
                    "has a free window where tariffPeriod[0] has none, or none where it has one: "
                    "a plan's free window is the same all year"
                )
            if (
                window is not None
                and period_window is not None
                and period_window.key() != window.key()
            ):
                raise period_at.error(
                    f"its free window ({period_window}) is not tariffPeriod[0]'s ({window}): "
                    "a plan's free window is the same all year"
                )
            window = period_window
        assert supply is not None
        converted: dict[str, Any] = {
            "time_zone": zone,
            "daily_supply_charge": _plain(supply),
            "gst_rate": "0.10",
            "time_of_use": self.holiday_bands + self.bands,
        }
        if seasonal:
            converted["supply_charges"] = seasonal
        converted["free_window"] = {"enabled": False} if window is None else window.document()
        feed_in = self._feed_in(contract, at)
        if feed_in is not None:
            converted["feed_in"] = {"unit_price": _plain(feed_in)}
        load = self._controlled_load(contract, at, required=model.endswith("_CONT_LOAD"))
        if load is not None:
            converted["controlled_load"] = load
        return converted

    def _informational(self, contract: Json, at: _Path) -> None:
        for index, incentive in enumerate(_list(contract, "incentives", at)):
            item_at = at / "incentives" / index
            item = _object(incentive, item_at)
            category = _text(item, "category", item_at, default="OTHER")
            if category == "ACCOUNT_CREDIT":
                raise item_at.error(
                    "an account-credit incentive changes the bill and freehours does not rate it"
                )
            self.information.append(
                f"{item_at.text.removeprefix('electricityContract.')}: "
                f"{_text(item, 'displayName', item_at, default='incentive')} ({category}), "
                "not billed"
            )
        for index, fee in enumerate(_list(contract, "fees", at)):
            item_at = at / "fees" / index
            item = _object(fee, item_at)
            kind = _text(item, "type", item_at, default="OTHER")
            term = _text(item, "term", item_at, default="FIXED")
            if term not in _FEES_ONE_OFF_TERMS:
                raise (item_at / "term").error(
                    f"a {term} {kind} fee recurs on every bill, and freehours does not bill fees"
                )
            amount = item.get("amount") or item.get("rate") or ""
            self.information.append(
                f"fees[{index}]: {kind} fee ({term}) {amount}".rstrip() + ", charged when it occurs"
            )
        for name in ("eligibility", "greenPowerCharges"):
            for index, item in enumerate(_list(contract, name, at)):
                entry = _object(item, at / name / index)
                label = entry.get("description") or entry.get("displayName") or entry.get("type")
                self.information.append(f"{name}[{index}]: {label}, not billed")
        if isinstance(contract.get("intrinsicGreenPower"), Mapping):
            share = contract["intrinsicGreenPower"].get("greenPercentage", "")
            self.information.append(f"intrinsicGreenPower: {share} green power included")

    def _period_zone(self, tariff: Json, at: _Path, zone: str, *, first: bool) -> str:
        own = tariff.get("timeZone")
        if own is None:
            return zone
        value = _one_of(tariff, "timeZone", at, ("LOCAL", "AEST"), "")
        if value != zone and not first:
            raise (at / "timeZone").error(
                f"{value} differs from the plan's {zone}: freehours keeps one clock per plan"
            )
        return value

    def _supply(self, tariff: Json, at: _Path) -> Decimal:
        kind = _one_of(tariff, "dailySupplyChargeType", at, ("SINGLE", "BAND"), "SINGLE")
        if kind == "BAND":
            raise (at / "bandedDailySupplyCharges").error(
                "banded daily supply charges are not rated: freehours bills one daily charge"
            )
        return _amount(_field(tariff, "dailySupplyCharge", at), at / "dailySupplyCharge")

    def _tariff_period(self, tariff: Json, at: _Path) -> _Window | None:
        dates = _dates(tariff, at)
        kind = _one_of(
            tariff,
            "rateBlockUType",
            at,
            ("singleRate", "timeOfUseRates", "demandCharges"),
            "",
        )
        if kind == "demandCharges" or tariff.get("demandCharges"):
            raise (at / "demandCharges").error(
                "demand charges (per kW of the highest demand) are not rated: freehours rates "
                "energy (kWh) only"
            )
        if kind == "singleRate":
            rate_at = at / "singleRate"
            single = _object(_field(tariff, "singleRate", at), rate_at)
            pricing = _stepped(single, rate_at)
            self._add_band(SINGLE_RATE_TYPE, pricing, [(["ALL"], 0, DAY_MINUTES)], dates)
            return None
        window = _Window()
        for index, rate in enumerate(_list(tariff, "timeOfUseRates", at, required=True)):
            rate_at = at / "timeOfUseRates" / index
            entry = _object(rate, rate_at)
            cdr_type = _one_of(entry, "type", rate_at, CDR_TOU_TYPES, "")
            spans = list(_spans(entry, rate_at))
            free = _free_step(entry, rate_at)
            if free is None:
                pricing = _stepped(entry, rate_at)
                if Decimal(pricing["unit_price"]) == 0 and "steps" not in pricing:
                    self.information.append(
                        f"{rate_at.text.removeprefix('electricityContract.')}: a zero price "
                        "without a daily volume is a free rate, not the free window (which "
                        'has a daily cap: "volume" with "period": "P1D")'
                    )
            else:
                cap, price = free
                window.add(cap, spans, rate_at)
                pricing = {"unit_price": _plain(price)}
            self._add_band(cdr_type, pricing, spans, dates)
        return window if window.spans else None

    def _add_band(
        self,
        cdr_type: str,
        pricing: dict[str, Any],
        spans: list[tuple[list[str], int, int]],
        dates: list[str] | None,
    ) -> None:
        price = json.dumps(pricing, sort_keys=True)
        band_type = self.types.get((cdr_type, price))
        if band_type is None:
            taken = sum(1 for kind, _ in self.types if kind == cdr_type)
            band_type = cdr_type if not taken else f"{cdr_type}_{taken + 1}"
            self.types[(cdr_type, price)] = band_type
        for days, start, end in spans:
            weekdays = [day for day in days if day != "PUBLIC_HOLIDAYS"]
            # Public holidays' times win over the weekday's: their bands are listed first.
            for listed, target in (
                (["PUBLIC_HOLIDAYS"] if len(weekdays) < len(days) else [], self.holiday_bands),
                (weekdays, self.bands),
            ):
                if not listed:
                    continue
                period: dict[str, Any] = {
                    "days": _day_names(listed),
                    "start": clock_text(start),
                    "end": clock_text(end),
                }
                if dates is not None:
                    period["dates"] = dates
                last = target[-1] if target else None
                if last is not None and last["type"] == band_type:
                    last["periods"].append(period)  # the same rate's next time window
                else:
                    target.append({"type": band_type, **pricing, "periods": [period]})

    def _feed_in(self, contract: Json, at: _Path) -> Decimal | None:
        chosen: tuple[Decimal, _Path] | None = None
        for index, tariff in enumerate(_list(contract, "solarFeedInTariff", at)):
            item_at = at / "solarFeedInTariff" / index
            item = _object(tariff, item_at)
            scheme = _one_of(
                item, "scheme", item_at, ("PREMIUM", "CURRENT", "VARIABLE", "OTHER"), ""
            )
            payer = _one_of(item, "payerType", item_at, ("GOVERNMENT", "RETAILER"), "")
            if scheme == "PREMIUM" or payer == "GOVERNMENT":
                self.information.append(
                    f"solarFeedInTariff[{index}]: {scheme} scheme paid by {payer}: for the "
                    "customers it names only, not rated"
                )
                continue
            for name in ("startDate", "endDate"):
                if item.get(name):
                    raise (item_at / name).error(
                        "a feed-in tariff for part of the year only is not rated"
                    )
            price = self._feed_in_price(item, item_at)
            if chosen is not None:
                raise item_at.error(
                    f"a second retailer feed-in tariff ({price}, after {chosen[1].text}'s "
                    f"{chosen[0]}): freehours credits export at one price"
                )
            chosen = (price, item_at)
        return None if chosen is None else chosen[0]

    def _feed_in_price(self, item: Json, at: _Path) -> Decimal:
        kind = _one_of(item, "tariffUType", at, ("singleTariff", "timeVaryingTariffs"), "")
        if kind == "singleTariff":
            return _single_price(
                _object(_field(item, "singleTariff", at), at / "singleTariff"),
                at / "singleTariff",
                what="a feed-in tariff",
            )
        prices = set()
        for index, varying in enumerate(_list(item, "timeVaryingTariffs", at, required=True)):
            varying_at = at / "timeVaryingTariffs" / index
            prices.add(
                _single_price(_object(varying, varying_at), varying_at, what="a feed-in tariff")
            )
        if len(prices) > 1:
            raise (at / "timeVaryingTariffs").error(
                f"prices {', '.join(sorted(map(str, prices)))} by time of day: a time-varying "
                "feed-in tariff is not rated (freehours credits export at one price)"
            )
        return prices.pop()

    def _controlled_load(
        self, contract: Json, at: _Path, *, required: bool
    ) -> dict[str, Any] | None:
        loads = _list(contract, "controlledLoad", at, required=required)
        if not loads:
            return None
        if len(loads) > 1:
            raise (at / "controlledLoad" / 1).error(
                "a second controlled load: freehours rates one, on the channels it is told "
                f"({', '.join(self.controlled_load_suffixes)})"
            )
        item_at = at / "controlledLoad" / 0
        item = _object(loads[0], item_at)
        for name in ("startDate", "endDate"):
            if item.get(name):
                raise (item_at / name).error(
                    "a controlled load rate for part of the year only is not rated"
                )
        kind = _one_of(item, "rateBlockUType", item_at, ("singleRate", "timeOfUseRates"), "")
        if kind == "timeOfUseRates":
            raise (item_at / "timeOfUseRates").error(
                "time-of-use controlled load rates are not rated: freehours charges a controlled "
                "load at a single rate"
            )
        rate_at = item_at / "singleRate"
        rate = _object(_field(item, "singleRate", item_at), rate_at)
        load: dict[str, Any] = {
            "suffixes": list(self.controlled_load_suffixes),
            "unit_price": _plain(_single_price(rate, rate_at, what="a controlled load rate")),
        }
        if rate.get("dailySupplyCharge") is not None:
            load["daily_supply_charge"] = _plain(
                _amount(rate["dailySupplyCharge"], rate_at / "dailySupplyCharge")
            )
        return load


class _Window:
    """The free window's rates in one tariff period: one cap, one span every day."""

    def __init__(self) -> None:
        self.cap: Decimal | None = None
        self.spans: dict[str, list[tuple[int, int]]] = {}  # CDR day -> its (start, end)
        self.at: _Path | None = None

    def add(self, cap: Decimal, spans: list[tuple[list[str], int, int]], at: _Path) -> None:
        if self.cap is not None and cap != self.cap:
            raise (at / "rates" / 0 / "volume").error(
                f"a free volume of {cap} kWh where {self.at and self.at.text} gives "
                f"{self.cap}: the free window has one daily cap"
            )
        self.cap, self.at = cap, self.at or at
        for days, start, end in spans:
            for day in days:
                self.spans.setdefault(day, []).append((start, end))

    def bounds(self) -> tuple[int, int]:
        """The window's start and end, the same on every day it is given for."""
        assert self.at is not None
        found: tuple[int, int] | None = None
        for day in CDR_DAYS:
            parts = sorted(self.spans.get(day, []))
            if not parts:
                if day == "PUBLIC_HOLIDAYS":
                    continue  # holidays take the weekday's window
                raise self.at.error(
                    f"the free window is not given for {day}: it is the same every day"
                )
            start, end = parts[0]
            for part_start, part_end in parts[1:]:
                if part_start != end:
                    raise self.at.error(
                        f"the free window on {day} is not one span ({clock_text(end)} to "
                        f"{clock_text(part_start)} is missing or given twice)"
                    )
                end = part_end
            if found is not None and found != (start, end):
                raise self.at.error(
                    f"the free window on {day} is {clock_text(start)}-{clock_text(end)}, not "
                    f"{clock_text(found[0])}-{clock_text(found[1])}: it is the same every day"
                )
            found = (start, end)
        assert found is not None
        return found

    def document(self) -> dict[str, Any]:
        start, end = self.bounds()
        assert self.cap is not None
        return {"start": clock_text(start), "end": clock_text(end), "cap_kwh": _plain(self.cap)}

    def key(self) -> tuple[Decimal | None, tuple[int, int]]:
        """What two tariff periods' windows must share: the cap and the span."""
        return self.cap, self.bounds()

    def __str__(self) -> str:
        start, end = self.bounds()
        return f"{clock_text(start)}-{clock_text(end)} up to {self.cap} kWh"


_SHORT_DAYS = (
    (("MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN"), "ALL"),
    (("MON", "TUE", "WED", "THU", "FRI"), "WEEKDAYS"),
    (("SAT", "SUN"), "WEEKENDS"),
)


def _day_names(days: list[str]) -> list[str]:
    """CDR days as a plan writes them: ALL, WEEKDAYS and WEEKENDS where they fit."""
    for listed, short in _SHORT_DAYS:
        if set(listed) <= set(days):
            rest = [day for day in days if day not in listed]
            return [short, *_day_names(rest)] if rest else [short]
    return days


def _dates(tariff: Json, at: _Path) -> list[str] | None:
    """A tariff period's first and last day (``MM-DD``), or None for the whole year. A season
    that ends on 28 February includes the 29th of a leap year."""
    days = []
    for name in ("startDate", "endDate"):
        text = _text(tariff, name, at, default="01-01" if name == "startDate" else "12-31")
        match = _MONTH_DAY.fullmatch(text)
        if match is None:
            raise (at / name).error(f"{text!r} is not a day of the year as MM-DD")
        days.append(f"{match.group(1)}-{match.group(2)}")
    if days == ["01-01", "12-31"]:
        return None
    if days[1] == "02-28":
        days[1] = "02-29"
    return days


def _rates(entry: Json, at: _Path) -> list[tuple[Decimal, Decimal | None, _Path]]:
    """Each rate of an entry: (price, volume or None, where)."""
    found = []
    for index, rate in enumerate(_list(entry, "rates", at, required=True)):
        rate_at = at / "rates" / index
        item = _object(rate, rate_at)
        unit = _text(item, "measureUnit", rate_at, default="KWH")
        if unit != "KWH":
            raise (rate_at / "measureUnit").error(f"a price per {unit}: freehours rates per KWH")
        price = _amount(_field(item, "unitPrice", rate_at), rate_at / "unitPrice")
        if price < 0:
            raise (rate_at / "unitPrice").error(f"{price} is negative: prices cannot be")
        volume = None
        if item.get("volume") is not None:
            volume = _amount(item["volume"], rate_at / "volume")
            if volume <= 0:
                raise (rate_at / "volume").error(f"{volume} is not a positive volume")
        found.append((price, volume, rate_at))
    return found


def _stepped(entry: Json, at: _Path) -> dict[str, Any]:
    """A rate's pricing as a band's fields: ``unit_price``, and ``steps`` with ``step_period``
    where its rates are stepped (each rate's ``volume`` is the usage it applies to, in order;
    the last has none)."""
    rates = _rates(entry, at)
    pricing: dict[str, Any] = {"unit_price": _plain(rates[0][0])}
    if len(rates) == 1:
        if rates[0][1] is not None:
            raise (at / "rates" / 0 / "volume").error(
                "the only rate has a volume: what is the price past it? (the last rate of "
                "stepped rates has no volume)"
            )
        return pricing
    after = Decimal(0)
    steps = []
    for index, (price, volume, rate_at) in enumerate(rates):
        last = index == len(rates) - 1
        if (volume is None) != last:
            raise (rate_at / "volume").error(
                "stepped rates give every rate but the last the volume it applies to"
                if not last
                else "the last of stepped rates applies to the rest: it has no volume"
            )
        if index:
            steps.append({"after_kwh": _plain(after), "unit_price": _plain(price)})
        after += volume or 0
    period = _text(entry, "period", at, default="P1Y")
    match = _STEP_PERIOD.fullmatch(period)
    if match is None:
        raise (at / "period").error(
            f"{period!r}: a step period freehours rates is one unit of days, weeks, months or "
            "years (P1D, P1W, P1M, P3M, P1Y)"
        )
    pricing["steps"] = steps
    pricing["step_period"] = period
    return pricing


def _single_price(entry: Json, at: _Path, *, what: str) -> Decimal:
    rates = _rates(entry, at)
    if len(rates) > 1 or rates[0][1] is not None:
        raise (at / "rates").error(
            f"{what} with stepped rates (a price per volume of usage): freehours rates {what} "
            "at one price"
        )
    return rates[0][0]


def _free_step(entry: Json, at: _Path) -> tuple[Decimal, Decimal] | None:
    """(cap, price over the cap) of a free-window rate: a first step free for a daily volume,
    then a price. None for any other rate."""
    rates = _rates(entry, at)
    price, volume, _ = rates[0]
    if price != 0 or volume is None:
        return None
    period = _text(entry, "period", at, default="P1Y")
    if _DURATION_DAY.fullmatch(period) is None:
        raise (at / "period").error(
            f"a free first step for {period}: the free window's volume is a daily cap (P1D)"
        )
    if len(rates) != 2 or rates[1][1] is not None:
        raise (at / "rates").error(
            "a free window needs two rates: free up to its daily volume, then the price over "
            "the cap (with no volume)"
        )
    return volume, rates[1][0]


def _spans(entry: Json, at: _Path) -> Iterator[tuple[list[str], int, int]]:
    """An entry's time windows as (CDR days, start, end) on the plan's clock, minutes of the
    day; a window across midnight is two."""
    for index, window in enumerate(_list(entry, "timeOfUse", at, required=True)):
        window_at = at / "timeOfUse" / index
        item = _object(window, window_at)
        days = _list(item, "days", window_at, required=True)
        for day_index, day in enumerate(days):
            if day not in CDR_DAYS:
                raise (window_at / "days" / day_index).error(
                    f"unknown day {day!r}: expected one of {', '.join(CDR_DAYS)}"
                )
        start = _clock(_text(item, "startTime", window_at), window_at / "startTime", end=False)
        end = _clock(_text(item, "endTime", window_at), window_at / "endTime", end=True)
        listed = [day for day in CDR_DAYS if day in days]
        if end == 0 or end == start == 0:
            end = DAY_MINUTES
        if start < end:
            yield listed, start, end
        elif start > end:
            yield listed, start, DAY_MINUTES
            yield listed, 0, end
        else:
            raise (window_at / "endTime").error(
                f"{clock_text(end)} is the start time: an empty time window"
            )


def _clock(text: str, at: _Path, *, end: bool) -> int:
    """An ISO 8601 time of day as minutes; 23:59 and 23:59:59 end the day (24:00)."""
    match = _TIME.fullmatch(text)
    if match is None:
        raise at.error(f"{text!r} is not a time of day (ISO 8601, such as 07:00 or 07:00:00)")
    hours, minutes, seconds, offset = match.groups()
    if offset is not None:
        raise at.error(
            f"{text!r} has a UTC offset: give times on the plan's clock (timeZone LOCAL or AEST)"
        )
    hour, minute, second = int(hours), int(minutes), int(seconds or 0)
    if end and (hour, minute) == (23, 59) and second in (0, 59):
        return DAY_MINUTES
    if end and (hour, minute, second) == (24, 0, 0):
        return DAY_MINUTES
    if hour > 23 or minute > 59 or second:
        raise at.error(f"{text!r} is not a time of day on a whole minute")
    return hour * 60 + minute


def read_json(data: bytes, *, source: str, limit: int) -> object:
    """A JSON document of at most ``limit`` bytes, numbers read exactly (``Decimal``), checked
    against ``freehours.plans.limits`` before ``json`` reads it."""

    if len(data) > limit:
        raise PlanError(f"{len(data)} bytes: a CDR plan is read up to {limit}", source=source)
    check_json(data, source=source)

    def bounded(parse: Callable[[str], object]) -> Callable[[str], object]:
        # The scan bounds every bare run; the parser's own numbers are bounded once more here,
        # as it reads them, so that no number it reads can reach int()'s 4,300 digits.
        def number(text: str) -> object:
            if len(text) > MAX_NUMBER_LENGTH:
                raise PlanError(
                    f"a number of {len(text)} characters, over the limit of "
                    f"{MAX_NUMBER_LENGTH} characters in a number: not read",
                    source=source,
                )
            return parse(text)

        return number

    try:
        return json.loads(data, parse_float=bounded(Decimal), parse_int=bounded(int))
    except UnicodeDecodeError as exc:
        raise PlanError(f"not UTF-8 text: {exc}", source=source) from None
    except json.JSONDecodeError as exc:
        raise PlanError(
            f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", source=source
        ) from None
