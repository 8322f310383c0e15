"""CDR energy plans in and out: every rate shape rated on hand-worked days, rated as its plan
file on the reference NEM12 files, every document freehours writes valid against the published
schema, and what cannot be rated refused by its JSON path."""

from __future__ import annotations

import copy
import json
import tomllib
from collections.abc import Callable
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pytest

from freehours.domain.bill import make_bill
from freehours.domain.plan import Plan
from freehours.domain.rating import rate
from freehours.domain.time import Region
from freehours.errors import PlanError
from freehours.plans import BUILTIN_IDS, builtin_plan
from freehours.plans.cdr import cdr_from_plan, plan_document_from_cdr, read_json
from freehours.plans.document import parse_plan
from freehours.plans.writer import plan_toml
from tests.cdr.support import (
    CDR,
    DOCUMENTS,
    bills,
    cdr_document,
    hand_written,
    imported,
    schema_problems,
)
from tests.domain.rating_cases import NMI, flat, nem_day

D = Decimal
UPDATED = datetime(2026, 7, 1, tzinfo=UTC)


def lines(plan: Plan, *days: Any) -> dict[str, tuple[str, str, str]]:
    """A bill's lines by code: (quantity, unit price, amount)."""
    bill = make_bill(plan, NMI, rate(plan, list(days)).values()).as_json()
    return {
        line["code"]: (line["quantity"], line["unit_price"], line["amount"])
        for line in bill["lines"]
    }


# --- the test documents ------------------------------------------------------------------------


@pytest.mark.parametrize("name", DOCUMENTS)
def test_each_test_document_is_a_valid_cdr_plan(name: str) -> None:
    assert schema_problems(json.loads((CDR / "plans" / f"{name}.json").read_text())) == []


def test_the_validator_refuses_what_the_schema_refuses() -> None:
    broken = cdr_document("single-rate")
    broken["fuelType"] = "PETROL"
    del broken["electricityContract"]["tariffPeriod"][0]["startDate"]
    assert len(schema_problems(json.loads(json.dumps(broken)))) == 2


@pytest.mark.parametrize("name", DOCUMENTS)
def test_each_test_document_rates_as_its_hand_written_plan_file(name: str) -> None:
    through_cdr, by_hand = bills(imported(name)), bills(hand_written(name))
    assert len(through_cdr) == 4  # every billable NMI of the reference files
    assert through_cdr == by_hand


def test_single_rate_every_kwh_at_one_price_and_the_retailer_feed_in() -> None:
    plan = imported("single-rate")
    assert (plan.region, plan.zone_name, plan.free_window) == (Region.SEQ, "AEST", None)
    export = [D(0)] * 48
    export[24] = D("3")
    got = lines(
        plan, nem_day(date(2026, 7, 6), flat("0.5")), nem_day(date(2026, 7, 6), export, suffix="B1")
    )
    # 48 x 0.5 = 24 kWh x 0.30 = 7.20; supply 1.05; 3 kWh x 0.05 credited (not the 0.44 premium)
    assert got == {
        "SINGLE_RATE": ("24", "0.3000", "7.20"),
        "SUPPLY": ("1", "1.0500", "1.05"),
        "FEED_IN": ("3", "0.0500", "-0.15"),
    }


def test_single_rate_keeps_what_is_informational() -> None:
    document = plan_document_from_cdr(cdr_document("single-rate"), source="t")
    information = "\n".join(document["information"])
    assert "solarFeedInTariff[1]: PREMIUM scheme paid by GOVERNMENT" in information
    assert "fees[0]: LATE_PAYMENT fee (FIXED) 12.00, charged when it occurs" in information
    assert "eligibility[0]: Residential customers only, not billed" in information


def test_time_of_use_with_the_free_window_on_a_weekday_under_and_over_the_cap() -> None:
    plan = imported("time-of-use-free-window")
    monday = date(2026, 7, 6)
    # 1 kWh a half hour: window 11-14 six free; PEAK 15-21 twelve; SHOULDER 07-11, 14-15,
    # 21-22: 8 + 2 + 2; OFF_PEAK 22-07 (across midnight): 18.
    assert lines(plan, nem_day(monday, flat("1"))) == {
        "PEAK": ("12", "0.5000", "6.00"),
        "SHOULDER": ("12", "0.3000", "3.60"),
        "OFF_PEAK": ("18", "0.2000", "3.60"),
        "SUPPLY": ("1", "1.1000", "1.10"),
        "FEED_IN": ("0", "0.0600", "0.00"),
        "FREE_ENERGY": ("6", "0", "0.00"),
    }
    # 5 kWh a half hour: the window holds 30, 24 free, 6 over the cap at SHOULDER.
    got = lines(plan, nem_day(monday, flat("5")))
    assert got["FREE_ENERGY"] == ("24", "0", "0.00")
    assert got["SHOULDER"] == ("66", "0.3000", "19.80")  # 60 + 6 over the cap


def test_time_of_use_on_a_weekend_its_evening_is_shoulder() -> None:
    plan = imported("time-of-use-free-window")
    got = lines(plan, nem_day(date(2026, 7, 11), flat("1")))  # a Saturday
    assert "PEAK" not in got or got["PEAK"][0] == "0"
    assert got["SHOULDER"] == ("24", "0.3000", "7.20")  # 8 + 2 + 12 + 2


@pytest.mark.parametrize(
    ("day", "peak", "price"),
    [
        (date(2026, 7, 6), "PEAK_2", "0.4500"),  # winter
        (date(2026, 12, 7), "PEAK", "0.5500"),  # summer
        (date(2028, 2, 29), "PEAK", "0.5500"),  # a leap day is summer's, ending "02-28"
        (date(2027, 3, 1), "PEAK_2", "0.4500"),  # the first day of winter
    ],
)
def test_seasons_price_the_peak_by_the_date(day: date, peak: str, price: str) -> None:
    plan = imported("seasonal")
    got = lines(plan, nem_day(day, flat("1")))
    assert got[peak] == ("8", price, str((8 * D(price)).quantize(D("0.01"))))
    assert got["FREE_ENERGY"] == ("6", "0", "0.00")


def test_a_controlled_load_is_charged_apart_and_never_free() -> None:
    plan = imported("controlled-load")
    monday = date(2026, 7, 6)
    got = lines(plan, nem_day(monday, flat("1")), nem_day(monday, flat("0.5"), suffix="E2"))
    assert got["CONTROLLED_LOAD"] == ("24", "0.1800", "4.32")
    assert got["CONTROLLED_LOAD_SUPPLY"] == ("1", "0.1000", "0.10")
    assert got["FREE_ENERGY"] == ("6", "0", "0.00")  # E1's window only
    assert got["OFF_PEAK"] == ("30", "0.2200", "6.60")
    rating = rate(plan, [nem_day(monday, flat("1")), nem_day(monday, flat("0.5"), suffix="E2")])
    assert rating[monday].consumption_kwh == 48  # E2 is not consumption


def test_the_reference_files_e2_is_billed_as_controlled_load() -> None:
    found = bills(imported("controlled-load"))
    controlled = [
        line
        for bill in found.values()
        for line in bill["lines"]
        if line["code"] == "CONTROLLED_LOAD"
    ]
    assert any(D(line["quantity"]) > 0 for line in controlled)


def test_the_free_window_written_other_ways_reads_the_same() -> None:
    plan = imported("plausible-window")
    assert plan.free_window is not None
    assert (plan.free_window.label, plan.free_window.cap_kwh, plan.zone_name) == (
        "11:00-14:00",
        D("18.5"),
        "AEST",
    )
    # 5 kWh a half hour: 30 in the window, 18.5 free in time order (11:00-12:30 holds 15 at
    # OFF_PEAK, then 3.5 of 12:30-13:00's 5); 11.5 over the cap, at SHOULDER, whose 14:00-24:00
    # holds 100 more. OFF_PEAK: 00:00-11:00, 110.
    got = lines(plan, nem_day(date(2026, 7, 6), flat("5")))
    assert got["FREE_ENERGY"] == ("18.5", "0", "0.00")
    assert got["SHOULDER"] == ("111.5", "0.31", "34.57")
    assert got["OFF_PEAK"] == ("110", "0.21", "23.10")


# --- out, and back in --------------------------------------------------------------------------


@pytest.mark.parametrize("plan_id", BUILTIN_IDS)
def test_every_builtin_plan_exported_validates_and_imports_back_to_the_same_bills(
    plan_id: str,
) -> None:
    plan = builtin_plan(plan_id)
    document = json.loads(json.dumps(cdr_from_plan(plan, last_updated=UPDATED)))
    assert schema_problems(document) == []
    back = parse_plan(plan_document_from_cdr(document, source=plan_id), source=plan_id)
    assert bills(back) == bills(plan)


@pytest.mark.parametrize("name", DOCUMENTS)
def test_every_test_document_goes_out_and_back_to_the_same_bills(name: str) -> None:
    plan = imported(name)
    document = json.loads(json.dumps(cdr_from_plan(plan, last_updated=UPDATED)))
    assert schema_problems(document) == []
    again = parse_plan(plan_document_from_cdr(document, source=name), source=name)
    assert bills(again) == bills(plan)
    assert again.controlled_load == plan.controlled_load


@pytest.mark.parametrize("name", DOCUMENTS)
def test_the_plan_file_printed_reads_back_as_the_same_plan(name: str) -> None:
    document = plan_document_from_cdr(cdr_document(name), source=name)
    assert tomllib.loads(plan_toml(document)) == document


def test_a_season_over_the_new_year_is_one_tariff_period() -> None:
    periods = cdr_from_plan(imported("seasonal"), last_updated=UPDATED)["electricityContract"][
        "tariffPeriod"
    ]
    assert [(p["startDate"], p["endDate"]) for p in periods] == [
        ("12-01", "02-29"),
        ("03-01", "11-30"),
    ]


def test_what_the_cdr_cannot_say_is_refused_on_export() -> None:
    plan = builtin_plan("sso-nsw")
    document = {
        "id": "x",
        "region": "NSW",
        "daily_supply_charge": "1",
        "gst_rate": "0.15",
        "time_of_use": [
            {
                "type": "ANYTIME",
                "unit_price": "0.3",
                "periods": [{"days": ["ALL"], "start": "00:00", "end": "24:00"}],
            }
        ],
    }
    with pytest.raises(PlanError, match=r"gst_rate.*10%"):
        cdr_from_plan(parse_plan(document, source="x"), last_updated=UPDATED)
    document["gst_rate"] = "0.10"
    with pytest.raises(PlanError, match=r"time_of_use\[0\]\.type.*'ANYTIME' is not a CDR"):
        cdr_from_plan(parse_plan(document, source="x"), last_updated=UPDATED)
    assert cdr_from_plan(plan, last_updated=UPDATED)["planId"] == "sso-nsw"


# --- refused, by path --------------------------------------------------------------------------

CONTRACT = "electricityContract"
PERIOD = f"{CONTRACT}.tariffPeriod[0]"
RATES = f"{PERIOD}.timeOfUseRates"


def _set(path: list[Any], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(document: dict[str, Any]) -> None:
        node = document
        for part in path[:-1]:
            node = node[part]
        if value is _DELETE:
            del node[path[-1]]
        else:
            node[path[-1]] = value

    return change


_DELETE = object()
#: time-of-use-free-window.json's PEAK, stepped: 0.50 for 100 kWh a quarter, then 0.60.
_STEPPED = {
    "displayName": "Peak",
    "type": "PEAK",
    "rates": [{"unitPrice": "0.5000", "volume": 100}, {"unitPrice": "0.6000"}],
    "period": "P3M",
    "timeOfUse": [
        {"days": ["MON", "TUE", "WED", "THU", "FRI"], "startTime": "15:00", "endTime": "21:00"}
    ],
}


def _split_window(document: dict[str, Any]) -> None:
    """The free window as two rates with two volumes: 11:00-12:30 and 12:30-14:00."""
    rates = document["electricityContract"]["tariffPeriod"][0]["timeOfUseRates"]
    later = copy.deepcopy(rates[2])
    rates[2]["timeOfUse"][0]["endTime"] = later["timeOfUse"][0]["startTime"] = "12:30"
    later["rates"][0]["volume"] = 30
    rates.insert(3, later)


_TOU = [CONTRACT, "tariffPeriod", 0, "timeOfUseRates"]

REFUSED = [
    (
        _set(
            [CONTRACT, "tariffPeriod", 0],
            {
                "displayName": "d",
                "startDate": "01-01",
                "endDate": "12-31",
                "dailySupplyCharge": "1",
                "rateBlockUType": "demandCharges",
                "demandCharges": [{}],
            },
        ),
        f"{PERIOD}.demandCharges",
        "demand charges",
    ),
    (
        _set(
            [*_TOU, 0, "rates"],
            [{"unitPrice": "0.5", "volume": 10}, {"unitPrice": "0.6"}, {"unitPrice": "0.7"}],
        ),
        f"{RATES}[0].rates[1].volume",
        "every rate but the last",
    ),
    (
        _set([*_TOU, 0, "rates"], [{"unitPrice": "0.5", "volume": 10}]),
        f"{RATES}[0].rates[0].volume",
        "the price past it",
    ),
    (
        _set([*_TOU, 0], {**_STEPPED, "period": "P2Q"}),
        f"{RATES}[0].period",
        "step period",
    ),
    (
        _set([CONTRACT, "discounts"], [{"displayName": "Pay on time", "type": "CONDITIONAL"}]),
        f"{CONTRACT}.discounts[0]",
        "discounts",
    ),
    (
        _set(
            [CONTRACT, "incentives"],
            [{"displayName": "$50", "description": "c", "category": "ACCOUNT_CREDIT"}],
        ),
        f"{CONTRACT}.incentives[0]",
        "account-credit",
    ),
    (
        _set([CONTRACT, "fees"], [{"type": "MEMBERSHIP", "term": "MONTHLY", "amount": "5"}]),
        f"{CONTRACT}.fees[0].term",
        "recurs",
    ),
    (
        _set(["meteringCharges"], [{"displayName": "Meter", "minimumValue": "0.2"}]),
        "meteringCharges[0]",
        "metering charge",
    ),
    (_set([CONTRACT, "pricingModel"], "FLEXIBLE"), f"{CONTRACT}.pricingModel", "FLEXIBLE pricing"),
    (
        _set([CONTRACT, "tariffPeriod", 0, "dailySupplyChargeType"], "BAND"),
        f"{PERIOD}.bandedDailySupplyCharges",
        "banded",
    ),
    (_split_window, f"{RATES}[3].rates[0].volume", "one daily cap"),
    (_set([*_TOU, 2, "period"], "P1M"), f"{RATES}[2].period", "daily cap (P1D)"),
    (
        _set([*_TOU, 2, "rates"], [{"unitPrice": "0", "volume": 24}]),
        f"{RATES}[2].rates",
        "two rates",
    ),
    (_set([*_TOU, 2, "timeOfUse", 0, "days"], ["MON"]), f"{RATES}[2]", "not given for TUE"),
    (
        _set([*_TOU, 1, "timeOfUse", 0, "startTime"], "7am"),
        f"{RATES}[1].timeOfUse[0].startTime",
        "not a time of day",
    ),
    (
        _set([*_TOU, 1, "timeOfUse", 0, "startTime"], "07:00+10:00"),
        f"{RATES}[1].timeOfUse[0].startTime",
        "UTC offset",
    ),
    (
        _set([*_TOU, 1, "timeOfUse", 0, "days"], ["MONDAY"]),
        f"{RATES}[1].timeOfUse[0].days[0]",
        "unknown day",
    ),
    (
        _set([*_TOU, 1, "rates", 0, "measureUnit"], "KVA"),
        f"{RATES}[1].rates[0].measureUnit",
        "per KVA",
    ),
    (
        _set([*_TOU, 1, "rates", 0, "unitPrice"], "-0.3"),
        f"{RATES}[1].rates[0].unitPrice",
        "negative",
    ),
    (
        _set([*_TOU, 1, "rates", 0, "unitPrice"], "cheap"),
        f"{RATES}[1].rates[0].unitPrice",
        "not a decimal",
    ),
    (_set([*_TOU, 3], _DELETE), CONTRACT, "no band covers"),
    (
        _set([CONTRACT, "solarFeedInTariff", 0, "tariffUType"], "timeVaryingTariffs"),
        f"{CONTRACT}.solarFeedInTariff[0].timeVaryingTariffs",
        "is required",
    ),
    (_set(["fuelType"], "GAS"), "fuelType", "gas plan"),
    (_set(["geography"], {"distributors": ["Western Power"]}), "geography", "region"),
    (_set([CONTRACT], _DELETE), CONTRACT, "is required"),
    (_set([CONTRACT, "tariffPeriod", 0, "startDate"], "1 July"), f"{PERIOD}.startDate", "MM-DD"),
    (_set([CONTRACT, "timeZone"], "UTC"), f"{CONTRACT}.timeZone", "LOCAL, AEST"),
]


@pytest.mark.parametrize(("change", "key", "why"), REFUSED)
def test_what_cannot_be_rated_is_refused_naming_its_json_path(
    change: Callable[[dict[str, Any]], None], key: str, why: str
) -> None:
    document = cdr_document("time-of-use-free-window")
    plan_document_from_cdr(copy.deepcopy(document), source="ok.json")  # the unchanged one reads
    change(document)
    with pytest.raises(PlanError) as refused:
        plan_document_from_cdr(document, source="plan.json")
    assert refused.value.key == key, str(refused.value)
    assert why in str(refused.value)
    assert str(refused.value).startswith(f"plan.json: {key}: ")


def test_a_second_feed_in_and_a_second_controlled_load_are_refused() -> None:
    document = cdr_document("controlled-load")
    contract = document["electricityContract"]
    contract["controlledLoad"].append(copy.deepcopy(contract["controlledLoad"][0]))
    with pytest.raises(PlanError, match=r"controlledLoad\[1\]: a second controlled load"):
        plan_document_from_cdr(document, source="t")
    document = cdr_document("time-of-use-free-window")
    tariffs = document["electricityContract"]["solarFeedInTariff"]
    tariffs.append(copy.deepcopy(tariffs[0]))
    with pytest.raises(PlanError, match=r"solarFeedInTariff\[1\]: a second retailer feed-in"):
        plan_document_from_cdr(document, source="t")


def test_a_region_given_wins_and_the_response_envelope_is_read() -> None:
    document = {"data": cdr_document("time-of-use-free-window"), "links": {}, "meta": {}}
    converted = plan_document_from_cdr(document, source="t", region=Region.VIC, plan_id="renamed")
    assert (converted["region"], converted["id"]) == ("VIC", "renamed")


def test_read_json_bounds_bytes_and_depth_and_keeps_numbers_exact() -> None:
    assert read_json(b'{"v": 0.1}', source="s", limit=100) == {"v": D("0.1")}
    with pytest.raises(PlanError, match="up to 10"):
        read_json(b"{}" + b" " * 20, source="s", limit=10)
    with pytest.raises(PlanError, match="nested 33 deep, over the limit of 32 levels of nesting"):
        read_json(b"[" * 100_000 + b"]" * 100_000, source="s", limit=1 << 20)
    with pytest.raises(PlanError, match=r"not JSON: .* line 1"):
        read_json(b"{", source="s", limit=10)
    with pytest.raises(PlanError, match="not UTF-8"):
        read_json(b'"\xff"', source="s", limit=10)


def test_stepped_rates_are_rated_with_thresholds_pro_rata_to_the_days_billed() -> None:
    document = cdr_document("time-of-use-free-window")
    document["electricityContract"]["tariffPeriod"][0]["timeOfUseRates"][0] = _STEPPED
    converted = plan_document_from_cdr(document, source="t")
    assert converted["time_of_use"][0]["steps"] == [{"after_kwh": "100", "unit_price": "0.6000"}]
    plan = parse_plan(converted, source="t")
    # Ten weekdays from Monday 6 July, 1 kWh a half hour: 12 kWh of PEAK a day, 120 in all (the
    # weekend between has none). 14 days billed: 100 kWh x 14 / (3 x 365/12) = 15.342 kWh at
    # 0.50, the other 104.658 at 0.60.
    days = [nem_day(date(2026, 7, 6 + n), flat("1")) for n in range(14)]
    got = lines(plan, *days)
    assert got["PEAK"] == ("15.342", "0.5000", "7.67")
    assert got["PEAK_STEP2"] == ("104.658", "0.6000", "62.79")
    # One day: its threshold is 100 / 91.25 = 1.096 kWh at 0.50, the other 10.904 at 0.60.
    one = lines(plan, days[0])
    assert one["PEAK"] == ("1.096", "0.5000", "0.55")
    assert one["PEAK_STEP2"] == ("10.904", "0.6000", "6.54")
    # And back out: the CDR document has the step's volume and period.
    out = cdr_from_plan(plan, last_updated=UPDATED)
    assert schema_problems(json.loads(json.dumps(out))) == []
    peak = next(
        rate
        for rate in out["electricityContract"]["tariffPeriod"][0]["timeOfUseRates"]
        if rate["type"] == "PEAK"
    )
    assert (peak["rates"], peak["period"]) == (_STEPPED["rates"], "P3M")
    again = parse_plan(plan_document_from_cdr(out, source="t"), source="t")
    assert bills(again) == bills(plan)


def test_a_step_below_its_threshold_is_one_line() -> None:
    document = cdr_document("time-of-use-free-window")
    document["electricityContract"]["tariffPeriod"][0]["timeOfUseRates"][0] = {
        **_STEPPED,
        "rates": [{"unitPrice": "0.5000", "volume": 10000}, {"unitPrice": "0.6000"}],
    }
    plan = parse_plan(plan_document_from_cdr(document, source="t"), source="t")
    got = lines(plan, nem_day(date(2026, 7, 6), flat("1")))
    assert got["PEAK"] == ("12", "0.5000", "6.00")
    assert "PEAK_STEP2" not in got


def one_band_plan(band: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    """A plan document of one band, ANYTIME all week at 0.50; ``band`` and ``fields`` added."""
    return {
        "id": "one-band",
        "region": "NSW",
        "daily_supply_charge": "1",
        "time_of_use": [
            {
                "type": "ANYTIME",
                "unit_price": "0.5",
                "periods": [{"days": ["ALL"], "start": "00:00", "end": "24:00"}],
                **(band or {}),
            }
        ],
        **fields,
    }


@pytest.mark.parametrize(
    ("band", "key", "why"),
    [
        ({"steps": [{"after_kwh": "10", "unit_price": "0.6"}]}, "step_period", "go together"),
        ({"step_period": "P1M"}, "step_period", "go together"),
        (
            {
                "steps": [
                    {"after_kwh": "10", "unit_price": "0.6"},
                    {"after_kwh": "10", "unit_price": "0.7"},
                ],
                "step_period": "P1M",
            },
            "steps",
            "steps go up in usage",
        ),
        (
            {"steps": [{"after_kwh": "10", "unit_price": "0.6"}], "step_period": "1 month"},
            "step_period",
            "ISO 8601 duration",
        ),
    ],
)
def test_a_plan_files_steps_are_checked(band: dict[str, Any], key: str, why: str) -> None:
    document = one_band_plan(band)
    with pytest.raises(PlanError) as refused:
        parse_plan(document, source="steps.toml")
    assert refused.value.key == f"time_of_use[0].{key}"
    assert why in refused.value.reason


def test_a_free_window_that_differs_between_seasons_is_refused() -> None:
    document = cdr_document("seasonal")
    winter = document["electricityContract"]["tariffPeriod"][1]
    winter["timeOfUseRates"][1]["rates"][0]["volume"] = 24
    with pytest.raises(
        PlanError, match=r"tariffPeriod\[1\]: its free window \(12:00-15:00 up to 24"
    ):
        plan_document_from_cdr(document, source="t")
    document = cdr_document("seasonal")
    winter = document["electricityContract"]["tariffPeriod"][1]
    winter["timeOfUseRates"][1]["rates"] = [{"unitPrice": "0.2500"}]
    with pytest.raises(PlanError, match=r"tariffPeriod\[1\]: has a free window where"):
        plan_document_from_cdr(document, source="t")


def test_a_plan_of_too_many_periods_is_refused_before_its_seasons_are_checked() -> None:
    periods = [
        {"days": ["ALL"], "start": "00:00", "end": "24:00", "dates": [day, day]}
        for day in (f"{1 + n % 12:02d}-{1 + n % 28:02d}" for n in range(201))
    ]
    document = {
        "id": "many",
        "region": "NSW",
        "daily_supply_charge": "1",
        "time_of_use": [
            {"type": "A", "unit_price": "0.1", "periods": periods[:100]},
            {"type": "B", "unit_price": "0.1", "periods": periods[100:]},
        ],
    }
    with pytest.raises(PlanError, match="201 periods in all: a plan has at most 200"):
        parse_plan(document, source="many")


@pytest.mark.parametrize(
    ("distributor", "region"),
    [
        ("Ausgrid", "NSW"),
        ("Endeavour", "NSW"),
        ("essential  energy", "NSW"),
        ("Energex Limited", "SEQ"),
        ("SA Power Networks", "SA"),
        ("AusNet Services", "VIC"),
        ("United Energy", "VIC"),
        ("Jemena Electricity Networks", "VIC"),
    ],
)
def test_the_region_comes_from_a_distributor_named_any_usual_way(
    distributor: str, region: str
) -> None:
    document = cdr_document("single-rate")
    document["geography"] = {"distributors": ["Nobody Networks", distributor]}
    assert plan_document_from_cdr(document, source="t")["region"] == region


@pytest.mark.parametrize("distributor", ["Sample Energy", "United", "Western Power", 7])
def test_a_distributor_of_no_region_here_is_not_guessed(distributor: object) -> None:
    document = cdr_document("single-rate")
    document["geography"] = {"distributors": [distributor]}
    with pytest.raises(PlanError, match="give the region"):
        plan_document_from_cdr(document, source="t")


def test_information_past_its_bound_is_counted_not_dropped_unsaid() -> None:
    document = cdr_document("single-rate")
    document["electricityContract"]["fees"] = [
        {"type": "EXIT", "term": "FIXED", "amount": "1" * 600}
    ] + [{"type": "OTHER", "term": "FIXED", "amount": str(n)} for n in range(63)]
    document["electricityContract"]["incentives"] = [
        {"displayName": f"gift {n}", "description": "d", "category": "GIFT"} for n in range(40)
    ]
    kept = plan_document_from_cdr(document, source="t")["information"]
    assert len(kept) == 100
    assert kept[-1].endswith("more informational items, not kept")
    assert all(len(line) <= 500 for line in kept)
    assert any(line.endswith("…") for line in kept)


def test_a_supply_charge_by_season_bills_each_seasons_days_at_its_own() -> None:
    plan = imported("seasonal")
    # NEM dates 26 February to 3 March 2028 on Adelaide's summer clock (UTC+10:30) touch the
    # local dates 26 February to 4 March: 26, 27, 28, 29 Feb at summer's 1.30; 1 to 4 Mar at
    # 1.20.
    days = [nem_day(date(2028, 2, 26 + n), flat("1")) for n in range(4)]
    days += [nem_day(date(2028, 3, 1 + n), flat("1")) for n in range(3)]
    got = lines(plan, *days)
    assert got["SUPPLY"] == ("4", "1.3000", "5.20")
    assert got["SUPPLY_2"] == ("4", "1.2000", "4.80")
    out = cdr_from_plan(plan, last_updated=UPDATED)["electricityContract"]["tariffPeriod"]
    assert [(p["startDate"], p["endDate"], p["dailySupplyCharge"]) for p in out] == [
        ("12-01", "02-29", "1.3000"),
        ("03-01", "11-30", "1.2000"),
    ]


def test_supply_charges_that_share_a_day_are_refused() -> None:
    document = one_band_plan(
        supply_charges=[
            {"dates": ["12-01", "02-29"], "unit_price": "1.3"},
            {"dates": ["02-01", "03-31"], "unit_price": "1.1"},
        ]
    )
    with pytest.raises(PlanError) as refused:
        parse_plan(document, source="s.toml")
    assert refused.value.key == "supply_charges"
    assert "supply_charges[1] and supply_charges[0] both hold 02-01" in refused.value.reason


def test_a_whole_year_period_with_another_supply_charge_is_refused() -> None:
    document = cdr_document("single-rate")
    periods = document["electricityContract"]["tariffPeriod"]
    periods.append({**copy.deepcopy(periods[0]), "dailySupplyCharge": "2.00"})
    with pytest.raises(PlanError, match=r"tariffPeriod\[1\]\.dailySupplyCharge: 2\.00 differs"):
        plan_document_from_cdr(document, source="t")
