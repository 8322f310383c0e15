"""Plan documents: the file format of DESIGN.md section 4, validation errors that name the key."""

from __future__ import annotations

import copy
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from freehours.domain.plan import (
    DayName,
    FreeWindow,
    TimeZoneMode,
    band_timeline,
    day_names,
)
from freehours.domain.time import NEM_TIME, Region
from freehours.errors import PlanError
from freehours.plans import BUILTIN_IDS, builtin_plans, load_plan, parse_plan_text
from freehours.plans.document import PlanDocument, parse_plan

DESIGN_EXAMPLE = """
id = "sso-sa-example"
region = "SA"                     # sets the zone and the default free window
time_zone = "LOCAL"               # LOCAL (default) or AEST
daily_supply_charge = "1.2000"    # AUD per day, excluding GST
gst_rate = "0.10"
consumption_suffixes = ["E1"]     # optional; default: every suffix starting with E

[free_window]                     # optional; defaults from the region; enabled = false turns it off
start = "12:00"
end = "15:00"
cap_kwh = "24"

[[time_of_use]]
type = "PEAK"                     # PEAK, SHOULDER, OFF_PEAK, ... as in CDR
unit_price = "0.4800"             # AUD per kWh, excluding GST
periods = [{ days = ["MON", "TUE", "WED", "THU", "FRI"], start = "15:00", end = "21:00" }]

[[time_of_use]]
type = "OFF_PEAK"
unit_price = "0.2500"
periods = [{ days = ["ALL"], start = "00:00", end = "24:00" }]   # the fallback band

[feed_in]
unit_price = "0.0400"
"""

MINIMAL: dict[str, Any] = {
    "id": "minimal",
    "region": "NSW",
    "daily_supply_charge": "1",
    "time_of_use": [
        {
            "type": "PEAK",
            "unit_price": "0.50",
            "periods": [{"days": ["WEEKDAYS"], "start": "15:00", "end": "21:00"}],
        },
        {
            "type": "OFF_PEAK",
            "unit_price": "0.20",
            "periods": [{"days": ["ALL"], "start": "00:00", "end": "24:00"}],
        },
    ],
}


def plan_error(change: dict[str, Any] | None = None, **top: Any) -> PlanError:
    """The PlanError that MINIMAL raises once ``change`` (dotted paths) and ``top`` are applied."""
    document = copy.deepcopy(MINIMAL)
    document.update(top)
    for path, value in (change or {}).items():
        target: Any = document
        *parents, last = path.split(".")
        for part in parents:
            target = target[int(part)] if part.isdigit() else target[part]
        target[int(last) if last.isdigit() else last] = value
    with pytest.raises(PlanError) as caught:
        parse_plan(document, source="plan.toml")
    return caught.value


def test_the_design_example_parses_into_the_plan_it_describes() -> None:
    plan = parse_plan_text(DESIGN_EXAMPLE, source="example.toml")
    assert plan.id == "sso-sa-example"
    assert plan.region is Region.SA
    assert plan.time_zone is TimeZoneMode.LOCAL
    assert plan.zone_name == "Australia/Adelaide"
    assert plan.daily_supply_charge == Decimal("1.2000")
    assert plan.gst_rate == Decimal("0.10")
    assert plan.consumption_suffixes == ("E1",)
    assert plan.free_window == FreeWindow(start=12 * 60, end=15 * 60, cap_kwh=Decimal(24))
    assert [(band.type, band.unit_price) for band in plan.bands] == [
        ("PEAK", Decimal("0.4800")),
        ("OFF_PEAK", Decimal("0.2500")),
    ]
    assert plan.bands[0].periods[0].start == 15 * 60
    assert plan.bands[1].periods[0].end == 24 * 60
    assert plan.feed_in is not None
    assert plan.feed_in.unit_price == Decimal("0.0400")


def test_the_free_window_defaults_from_the_region_with_a_24_kwh_cap() -> None:
    windows = {
        region: parse_plan({**MINIMAL, "region": region}, source="p").free_window
        for region in ("NSW", "SEQ", "SA", "VIC")
    }
    assert windows == {
        "NSW": FreeWindow(660, 840, Decimal(24)),
        "SEQ": FreeWindow(660, 840, Decimal(24)),
        "SA": FreeWindow(720, 900, Decimal(24)),
        "VIC": FreeWindow(660, 840, Decimal(24)),
    }


def test_a_window_with_enabled_false_is_no_window() -> None:
    plan = parse_plan({**MINIMAL, "free_window": {"enabled": False}}, source="p")
    assert plan.free_window is None


def test_defaults_are_gst_ten_percent_local_time_and_every_e_suffix() -> None:
    plan = parse_plan(MINIMAL, source="p")
    assert plan.gst_rate == Decimal("0.10")
    assert plan.time_zone is TimeZoneMode.LOCAL
    assert plan.is_consumption("E1")
    assert plan.is_consumption("E2")
    assert not plan.is_consumption("B1")
    assert plan.is_export("B1")
    assert plan.feed_in is None


def test_integers_are_accepted_as_exact_decimals() -> None:
    plan = parse_plan({**MINIMAL, "free_window": {"cap_kwh": 20}}, source="p")
    assert plan.free_window is not None
    assert plan.free_window.cap_kwh == Decimal(20)


def test_a_float_price_is_refused_with_a_message_asking_for_a_string() -> None:
    error = plan_error({"time_of_use.0.unit_price": 0.48})
    assert error.source == "plan.toml"
    assert error.key == "time_of_use[0].unit_price"
    assert "binary" in error.reason
    assert 'write it as a string, "0.48"' in error.reason


def test_a_time_that_is_not_hh_mm_names_its_key() -> None:
    error = plan_error({"time_of_use.1.periods.0.start": "7am"})
    assert error.key == "time_of_use[1].periods[0].start"
    assert "HH:MM" in error.reason
    assert str(error).startswith("plan.toml: time_of_use[1].periods[0].start: ")


def test_an_hour_past_23_is_refused() -> None:
    assert plan_error({"time_of_use.0.periods.0.end": "25:00"}).key == (
        "time_of_use[0].periods[0].end"
    )


def test_24_00_may_end_a_period_but_not_start_one() -> None:
    error = plan_error({"time_of_use.0.periods.0.start": "24:00"})
    assert error.key == "time_of_use[0].periods[0].start"
    assert "24:00 can end a period but not start one" in error.reason


def test_a_period_ending_before_it_starts_is_refused_at_its_end() -> None:
    error = plan_error({"time_of_use.0.periods.0.end": "09:00"})
    assert error.key == "time_of_use[0].periods[0].end"
    assert "end 09:00 is not after start 15:00" in error.reason


def test_a_free_window_ending_before_it_starts_is_refused() -> None:
    error = plan_error(free_window={"start": "14:00", "end": "11:00"})
    assert error.key == "free_window.end"


def test_a_free_window_end_before_the_regions_default_start_is_refused() -> None:
    error = plan_error(free_window={"end": "10:00"})
    assert error.key == "free_window"
    assert "11:00 to 10:00" in error.reason


def test_an_unknown_day_name_is_refused_listing_the_names() -> None:
    error = plan_error({"time_of_use.0.periods.0.days": ["MON", "FUNDAY"]})
    assert error.key == "time_of_use[0].periods[0].days[1]"
    assert "'FUNDAY'" in error.reason
    assert "PUBLIC_HOLIDAYS" in error.reason


def test_a_negative_price_is_refused() -> None:
    error = plan_error(feed_in={"unit_price": "-0.05"})
    assert error.key == "feed_in.unit_price"
    assert "negative" in error.reason


@pytest.mark.parametrize("cap", ["0", "-1", 0])
def test_a_cap_that_is_not_positive_is_refused(cap: object) -> None:
    error = plan_error(free_window={"cap_kwh": cap})
    assert error.key == "free_window.cap_kwh"
    assert "not positive" in error.reason


def test_a_moment_of_the_week_with_no_band_is_refused_naming_it() -> None:
    error = plan_error({"time_of_use.1.periods.0.start": "07:00"})
    assert error.key == "time_of_use"
    assert "no band covers MON 00:00-07:00" in error.reason


def test_weekend_gaps_are_found_too() -> None:
    error = plan_error({"time_of_use.1.periods.0.days": ["WEEKDAYS"]})
    assert "no band covers SAT 00:00-24:00" in error.reason


def test_an_unknown_region_is_refused() -> None:
    error = plan_error(region="WA")
    assert error.key == "region"
    assert "'WA'" in error.reason


def test_an_unknown_time_zone_is_refused() -> None:
    error = plan_error(time_zone="Australia/Perth")
    assert error.key == "time_zone"
    assert "'LOCAL' or 'AEST'" in error.reason


def test_an_unknown_key_is_refused() -> None:
    error = plan_error(daily_supply="1")
    assert error.key == "daily_supply"
    assert "not a plan key" in error.reason


def test_a_missing_required_key_is_named() -> None:
    document = {key: value for key, value in MINIMAL.items() if key != "daily_supply_charge"}
    with pytest.raises(PlanError) as caught:
        parse_plan(document, source="p.toml")
    assert caught.value.key == "daily_supply_charge"
    assert caught.value.reason == "is required"


def test_one_type_cannot_have_two_prices() -> None:
    bands = [*MINIMAL["time_of_use"], {**MINIMAL["time_of_use"][0], "unit_price": "0.60"}]
    error = plan_error(time_of_use=bands)
    assert error.key == "time_of_use"
    assert "time_of_use[2] gives PEAK the price 0.60" in error.reason


def test_an_export_suffix_cannot_be_consumption() -> None:
    error = plan_error(consumption_suffixes=["E1", "B1"])
    assert error.key == "consumption_suffixes[1]"


def test_several_problems_name_each_after_the_first() -> None:
    error = plan_error(region="WA", gst_rate="x")
    assert error.key == "region"
    assert error.reason.startswith("unknown value 'WA'")
    assert "; also gst_rate: " in error.reason


def test_a_misspelt_key_is_shown_beside_the_required_key_it_left_missing() -> None:
    document = {key: value for key, value in MINIMAL.items() if key != "daily_supply_charge"}
    with pytest.raises(PlanError) as caught:
        parse_plan({**document, "dialy_supply_charge": "1.0"}, source="p.toml")
    message = str(caught.value)
    assert message.startswith("p.toml: daily_supply_charge: is required; also ")
    assert "dialy_supply_charge: is not a plan key" in message


def test_a_document_wrong_everywhere_names_ten_problems_and_counts_the_rest() -> None:
    wrong = {f"unknown_{n}": n for n in range(15)}
    with pytest.raises(PlanError) as caught:
        parse_plan({**MINIMAL, **wrong}, source="p.toml")
    assert str(caught.value).count("is not a plan key") == 10
    assert str(caught.value).endswith("(and 5 more problems)")


def test_invalid_toml_is_a_plan_error_naming_the_source() -> None:
    with pytest.raises(PlanError) as caught:
        parse_plan_text('id = "x"\nregion = \n', source="broken.toml")
    assert caught.value.source == "broken.toml"
    assert "not valid TOML" in caught.value.reason
    assert "line 2" in caught.value.reason


def test_a_plan_file_that_is_not_utf8_is_a_plan_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "latin1.toml"
    path.write_bytes('id = "caf\u00e9"\n'.encode("latin-1"))
    with pytest.raises(PlanError) as caught:
        load_plan(str(path))
    assert caught.value.source == str(path)
    assert caught.value.reason.startswith("not UTF-8 text")


def test_a_missing_file_names_the_file_and_the_builtins(tmp_path: Path) -> None:
    with pytest.raises(PlanError) as caught:
        load_plan(str(tmp_path / "nope.toml"))
    assert caught.value.source == str(tmp_path / "nope.toml")
    assert "sso-nsw" in caught.value.reason


def test_a_plan_file_loads_from_its_path(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text(DESIGN_EXAMPLE, encoding="utf-8")
    assert load_plan(path).id == "sso-sa-example"


def test_the_builtin_plans_load_with_their_regions_windows_and_caps() -> None:
    plans = builtin_plans()
    assert [plan.id for plan in plans] == list(BUILTIN_IDS)
    summary = {
        plan.id: (plan.region, plan.free_window.label if plan.free_window else None)
        for plan in plans
    }
    assert summary == {
        "sso-nsw": (Region.NSW, "11:00-14:00"),
        "sso-seq": (Region.SEQ, "11:00-14:00"),
        "sso-sa": (Region.SA, "12:00-15:00"),
        "mps-vic": (Region.VIC, "11:00-14:00"),
    }
    assert all(plan.free_window and plan.free_window.cap_kwh == 24 for plan in plans)
    assert all("example" in plan.description for plan in plans)


def test_the_document_round_trips_through_json_with_decimals_as_strings() -> None:
    document = PlanDocument.model_validate(MINIMAL)
    dumped = document.model_dump(mode="json", exclude_none=True)
    assert dumped["daily_supply_charge"] == "1"
    assert dumped["time_of_use"][0]["unit_price"] == "0.50"
    assert PlanDocument.model_validate(dumped).to_plan() == document.to_plan()


def test_first_listed_band_wins_and_public_holidays_add_to_the_weekday() -> None:
    plan = load_plan("sso-nsw")
    holiday_monday = band_timeline(plan.bands, day_names(0, public_holiday=True))
    monday = band_timeline(plan.bands, day_names(0, public_holiday=False))
    types = [band.type for band in plan.bands]
    assert types[monday[16 * 60]] == "PEAK"
    assert types[monday[8 * 60]] == "SHOULDER"
    assert types[monday[23 * 60]] == "OFF_PEAK"
    assert types[holiday_monday[16 * 60]] == "OFF_PEAK"
    assert day_names(5, public_holiday=False) == {DayName.SAT, DayName.WEEKENDS, DayName.ALL}


def test_window_bounds_follow_daylight_saving_on_the_local_clock() -> None:
    plan = load_plan("sso-nsw")
    assert plan.free_window is not None
    # 4 October 2026: Sydney goes from UTC+10 to UTC+11 at 02:00; the window is 11:00-14:00 AEDT.
    start, end = plan.free_window.bounds(date(2026, 10, 4), plan.zone)
    assert start.astimezone(UTC) == datetime(2026, 10, 4, 0, 0, tzinfo=UTC)
    assert end.astimezone(UTC) == datetime(2026, 10, 4, 3, 0, tzinfo=UTC)
    # 3 October (still standard time): 11:00 AEST is 01:00 UTC.
    start, _ = plan.free_window.bounds(date(2026, 10, 3), plan.zone)
    assert start.astimezone(UTC) == datetime(2026, 10, 3, 1, 0, tzinfo=UTC)


def test_nem_dates_covering_a_local_day() -> None:
    nsw, seq, sa = load_plan("sso-nsw"), load_plan("sso-seq"), load_plan("sso-sa")
    # Sydney summer (UTC+11): local 15 Jan is NEM 14 Jan 23:00 to 15 Jan 23:00.
    assert nsw.nem_dates(date(2027, 1, 15)) == (date(2027, 1, 14), date(2027, 1, 15))
    # Sydney winter: the same clock as NEM time.
    assert nsw.nem_dates(date(2026, 7, 15)) == (date(2026, 7, 15),)
    # Brisbane: always NEM time.
    assert seq.nem_dates(date(2027, 1, 15)) == (date(2027, 1, 15),)
    # Adelaide winter (UTC+9:30): local 15 Jul is NEM 15 Jul 00:30 to 16 Jul 00:30.
    assert sa.nem_dates(date(2026, 7, 15)) == (date(2026, 7, 15), date(2026, 7, 16))
    # Adelaide summer (UTC+10:30): NEM 14 Jan 23:30 to 15 Jan 23:30.
    assert sa.nem_dates(date(2027, 1, 15)) == (date(2027, 1, 14), date(2027, 1, 15))


def test_an_aest_plan_keeps_nem_time_all_year() -> None:
    plan = parse_plan({**MINIMAL, "time_zone": "AEST"}, source="p")
    assert plan.zone is NEM_TIME
    assert plan.zone_name == "AEST"
    assert plan.nem_dates(date(2027, 1, 15)) == (date(2027, 1, 15),)
