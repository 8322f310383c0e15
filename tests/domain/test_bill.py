"""Bills: a line per band, supply, feed-in and free energy; cents half up; the JSON contract."""

from __future__ import annotations

import json
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

import pytest

from freehours.domain.bill import kwh_text, make_bill, money_text, to_cent
from freehours.domain.plan import Plan
from freehours.domain.rating import rate
from freehours.plans import load_plan
from tests.domain.rating_cases import NMI, PEAK_AND_OFF_PEAK, flat, nem_day, plan_for

D = Decimal


def two_day_bill() -> dict[str, object]:
    # plan_for("NSW"): PEAK 15:00-21:00 at 0.50, OFF_PEAK 0.20, window 11:00-14:00, supply
    # 1.0000 a day, feed-in 0.05, GST 10%. July: Sydney's clock is NEM time.
    # E1: 1.000 kWh every interval on 15 and 16 Jul. Each day: 6 free, PEAK 12, OFF_PEAK 30.
    # B1: one interval of 2.500 kWh on 15 Jul; no B1 row for 16 Jul (48 intervals missing).
    plan = plan_for("NSW")
    export = [D(0)] * 48
    export[10] = D("2.500")
    days = [
        nem_day(date(2026, 7, 15), flat("1.000")),
        nem_day(date(2026, 7, 16), flat("1.000")),
        nem_day(date(2026, 7, 15), export, suffix="B1"),
    ]
    return make_bill(plan, NMI, rate(plan, days).values()).as_json()


def test_a_bill_prices_each_band_supply_feed_in_and_shows_free_energy() -> None:
    bill = two_day_bill()
    assert bill["lines"] == [
        # 2 x 12 kWh x 0.50
        {"code": "PEAK", "description": "Peak energy", "quantity": "24", "unit": "kWh",
         "unit_price": "0.50", "amount": "12.00"},
        # 2 x 30 kWh x 0.20
        {"code": "OFF_PEAK", "description": "Off peak energy", "quantity": "60", "unit": "kWh",
         "unit_price": "0.20", "amount": "12.00"},
        # 2 days x 1.0000
        {"code": "SUPPLY", "description": "Daily supply charge", "quantity": "2", "unit": "day",
         "unit_price": "1.0000", "amount": "2.00"},
        # 2.5 kWh x 0.05 = 0.125, half up to 0.13, credited
        {"code": "FEED_IN", "description": "Solar feed-in credit", "quantity": "2.5",
         "unit": "kWh", "unit_price": "0.05", "amount": "-0.13"},
        {"code": "FREE_ENERGY", "description": "Free energy 11:00-14:00, up to 24 kWh a day",
         "quantity": "12", "unit": "kWh", "unit_price": "0", "amount": "0.00"},
    ]  # fmt: skip
    # 12.00 + 12.00 + 2.00 - 0.13 = 25.87; GST 2.587 -> 2.59; total 28.46
    assert (bill["subtotal"], bill["gst"], bill["total"]) == ("25.87", "2.59", "28.46")
    # 12 free kWh, all at OFF_PEAK moments: 12 x 0.20
    assert bill["free_energy_value"] == "2.40"


def test_the_bill_json_has_exactly_the_contract_fields() -> None:
    bill = two_day_bill()
    assert list(bill) == [
        "nmi", "plan", "time_zone", "from", "to", "days", "totals", "lines",
        "subtotal", "gst", "total", "free_energy_value",
    ]  # fmt: skip
    assert (bill["nmi"], bill["plan"], bill["time_zone"]) == (NMI, "test", "Australia/Sydney")
    assert (bill["from"], bill["to"]) == ("2026-07-15", "2026-07-16")
    assert bill["days"] == [
        {"date": "2026-07-15", "consumption_kwh": "48", "free_kwh": "6", "over_cap_kwh": "0",
         "export_kwh": "2.5", "missing_intervals": 0},
        {"date": "2026-07-16", "consumption_kwh": "48", "free_kwh": "6", "over_cap_kwh": "0",
         "export_kwh": "0", "missing_intervals": 48},
    ]  # fmt: skip
    assert bill["totals"] == {
        "consumption_kwh": "96",
        "free_kwh": "12",
        "over_cap_kwh": "0",
        "export_kwh": "2.5",
    }


def test_no_export_is_a_zero_credit_not_minus_zero() -> None:
    plan = plan_for("NSW")
    bill = make_bill(plan, NMI, rate(plan, [nem_day(date(2026, 7, 15), flat("1"))]).values())
    feed_in = next(line for line in bill.lines if line.code == "FEED_IN")
    assert feed_in.as_json()["amount"] == "0.00"


def test_a_plan_without_feed_in_or_window_has_neither_line() -> None:
    plan = plan_for("NSW", feed_in=None, free_window={"enabled": False})
    bill = make_bill(plan, NMI, rate(plan, [nem_day(date(2026, 7, 15), flat("1"))]).values())
    assert [line.code for line in bill.lines] == ["PEAK", "OFF_PEAK", "SUPPLY"]


def test_bands_of_one_type_make_one_line() -> None:
    plan = load_plan("sso-nsw")  # OFF_PEAK is listed twice: for holidays, and as the fallback
    bill = make_bill(plan, NMI, rate(plan, [nem_day(date(2026, 6, 8), flat("1"))]).values())
    assert [line.code for line in bill.lines] == [
        "OFF_PEAK", "PEAK", "SHOULDER", "SUPPLY", "FEED_IN", "FREE_ENERGY",
    ]  # fmt: skip
    # King's Birthday: 42 kWh OFF_PEAK at 0.23 = 9.66; free 6 x 0.23 = 1.38
    assert bill.lines[0].amount == D("9.66")
    assert bill.free_energy_value == D("1.38")


@pytest.mark.parametrize(
    ("amount", "cents"),
    [("0.125", "0.13"), ("0.135", "0.14"), ("-0.125", "-0.13"), ("2.5749", "2.57")],
)
def test_money_rounds_half_up_to_the_cent(amount: str, cents: str) -> None:
    assert to_cent(D(amount)) == D(cents)


def test_kwh_are_written_exactly_without_trailing_zeros_or_exponents() -> None:
    assert [kwh_text(D(text)) for text in ("12.300", "0.000", "1E+1", "0.000000001")] == [
        "12.3", "0", "10", "0.000000001",
    ]  # fmt: skip


def test_money_is_written_to_the_cent_and_never_minus_zero() -> None:
    assert [money_text(D(text)) for text in ("12.6", "-0.40", "-0.00", "0", "1E+1")] == [
        "12.60", "-0.40", "0.00", "0.00", "10.00",
    ]  # fmt: skip


def test_a_bill_needs_a_day() -> None:
    with pytest.raises(ValueError, match="at least one day"):
        make_bill(plan_for(), NMI, [])


def test_json_text_is_json_dumps_of_as_json() -> None:
    # freehours bill writes json_text(), made faster; the API serves as_json(): one text.
    plan = plan_for("SA", free_window={"cap_kwh": "2"})
    values: list[Decimal | None] = [D(index).scaleb(-2) for index in range(48)]
    values[3] = None
    days = [
        nem_day(date(2026, 10, 3), values),
        nem_day(date(2026, 10, 4), flat("1.250")),
        nem_day(date(2026, 10, 4), flat("0.100"), suffix="B1"),
    ]
    bill = make_bill(plan, NMI, rate(plan, days).values())
    assert any(day.over_cap_kwh for day in bill.days)
    assert bill.json_text() == json.dumps(bill.as_json())


def one_rate(**fields: Any) -> Plan:
    """ANYTIME at 0.30 all day, no window, no feed-in; ``fields`` override."""
    band = {
        "type": "ANYTIME",
        "unit_price": "0.30",
        "periods": [{"days": ["ALL"], "start": "00:00", "end": "24:00"}],
    }
    return plan_for(
        time_of_use=[{**band, **fields.pop("band", {})}],
        feed_in=None,
        free_window={"enabled": False},
        **fields,
    )


def one_value(kwh: str) -> list[Decimal]:
    values = [D(0)] * 48
    values[20] = D(kwh)
    return values


#: Yearly steps at 1,000 and 1,000.1 kWh: on a bill of one day both are at 2.740 kWh
#: (2.73972... and 2.73999..., to the watt-hour), so step 2 has no width.
NARROW_STEPS = {
    "steps": [
        {"after_kwh": "1000", "unit_price": "0.40"},
        {"after_kwh": "1000.1", "unit_price": "0.50"},
    ],
    "step_period": "P1Y",
}


def test_a_step_of_no_width_has_no_line_and_the_next_step_takes_the_energy() -> None:
    plan = one_rate(band=NARROW_STEPS)
    bill = make_bill(plan, NMI, rate(plan, [nem_day(date(2026, 7, 15), one_value("3"))]).values())
    assert [(line.code, line.quantity, line.amount) for line in bill.lines] == [
        ("ANYTIME", D("2.740"), D("0.82")),  # 2.74 x 0.30 = 0.822
        ("ANYTIME_STEP3", D("0.260"), D("0.13")),  # 0.26 x 0.50
        ("SUPPLY", D(1), D("1.00")),
    ]


@pytest.mark.parametrize("kwh", ["2.74", "1", "0"])
def test_energy_up_to_a_threshold_makes_no_step_line(kwh: str) -> None:
    plan = one_rate(band=NARROW_STEPS)
    bill = make_bill(plan, NMI, rate(plan, [nem_day(date(2026, 7, 15), one_value(kwh))]).values())
    # The type's own line is there even at 0 kWh, as a band's always is; a step never at 0.
    assert [(line.code, line.quantity) for line in bill.lines] == [
        ("ANYTIME", D(kwh)),
        ("SUPPLY", D(1)),
    ]


def test_each_types_steps_come_right_after_its_line() -> None:
    steps = {"steps": [{"after_kwh": "1", "unit_price": "0.90"}], "step_period": "P1D"}
    plan = plan_for(
        time_of_use=[{**band, **steps} for band in PEAK_AND_OFF_PEAK],
        controlled_load={"unit_price": "0.10", "daily_supply_charge": "0.05"},
    )
    july = date(2026, 7, 15)
    days = [nem_day(july, flat("1")), nem_day(july, flat("1"), suffix="E2")]
    bill = make_bill(plan, NMI, rate(plan, days).values())
    assert [line.code for line in bill.lines] == [
        "PEAK", "PEAK_STEP2", "OFF_PEAK", "OFF_PEAK_STEP2", "SUPPLY",
        "CONTROLLED_LOAD", "CONTROLLED_LOAD_SUPPLY", "FEED_IN", "FREE_ENERGY",
    ]  # fmt: skip


#: A winter supply charge (June to August) in place of the plan's 1.0000.
WINTER = {"supply_charges": [{"dates": ["06-01", "08-31"], "unit_price": "1.5000"}]}


def supply_lines(plan: Plan, first: date, days: int) -> list[tuple[str, str, str]]:
    rated = rate(plan, [nem_day(first + timedelta(days=n), flat("1")) for n in range(days)])
    bill = make_bill(plan, NMI, rated.values())
    assert len(bill.days) == days
    return [
        (line.code, line.as_json()["quantity"], line.as_json()["amount"])
        for line in bill.lines
        if line.unit == "day"
    ]


def test_supply_counts_the_days_outside_the_seasons_and_each_season_its_own() -> None:
    # 29 to 31 August in winter, 1 and 2 September at the plan's charge.
    assert supply_lines(plan_for(**WINTER), date(2026, 8, 29), 5) == [
        ("SUPPLY", "2", "2.00"),
        ("SUPPLY_2", "3", "4.50"),
    ]


def test_a_bill_of_season_days_only_has_no_supply_line() -> None:
    assert supply_lines(plan_for(**WINTER), date(2026, 7, 1), 3) == [("SUPPLY_2", "3", "4.50")]
    # and one of no season days has no seasonal line
    assert supply_lines(plan_for(**WINTER), date(2026, 9, 1), 2) == [("SUPPLY", "2", "2.00")]
