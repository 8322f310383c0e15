"""Rating on the hard days, with the arithmetic worked by hand.

Unless a test says otherwise, NEM day values are a ramp: interval i (1-based, 30 minutes, named by
its end: interval 1 is [00:00, 00:30) AEST) holds i Wh. A sum of intervals a..b is then
(a + b) x (b - a + 1) / 2 Wh, which names exactly which intervals were counted. The test plan has
PEAK 15:00-21:00 every day at 0.50, OFF_PEAK otherwise at 0.20, and the region's free window.
"""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal

import pytest

from freehours.domain.profiles import DayProfiles
from freehours.domain.rating import MeterRating, rate, rate_meters
from freehours.plans import load_plan
from tests.domain.rating_cases import NMI, flat, nem_day, plan_for, ramp, summary

D = Decimal


@pytest.mark.parametrize("region", ["NSW", "VIC"])
def test_first_day_of_daylight_saving_is_23_hours(region: str) -> None:
    # 4 Oct 2026: 02:00 AEST becomes 03:00 AEDT (Sydney and Melbourne alike).
    # Local 4 Oct = [00:00 AEST, 24:00 AEDT) = NEM 4 Oct 00:00-23:00 = intervals 1..46.
    plan = plan_for(region)
    ratings = rate(plan, [nem_day(date(2026, 10, 4), ramp())])
    assert summary(plan, ratings[date(2026, 10, 4)]) == {
        # 1..46 = 46 x 47 / 2 = 1081 Wh
        "consumption": D("1.081"),
        # window 11:00-14:00 AEDT = NEM 10:00-13:00 = intervals 21..26 = 47 x 6 / 2 = 141 Wh
        "free": D("0.141"),
        "over_cap": D(0),
        # PEAK 15:00-21:00 AEDT = NEM 14:00-20:00 = intervals 29..40 = 69 x 12 / 2 = 414 Wh;
        # OFF_PEAK: 1081 - 141 - 414 = 526 Wh
        "charged": {"PEAK": D("0.414"), "OFF_PEAK": D("0.526")},
        "export": D(0),
        "missing": 0,
    }
    # NEM intervals 47 and 48 (23:00-24:00 AEST) are local 5 Oct 00:00-01:00 AEDT: 95 Wh.
    # The rest of local 5 Oct is NEM 5 Oct 00:00-23:00, not given: 46 intervals missing.
    next_day = rate(plan, [nem_day(date(2026, 10, 4), ramp())], local_dates=[date(2026, 10, 5)])
    assert next_day[date(2026, 10, 5)].consumption_kwh == D("0.095")
    assert next_day[date(2026, 10, 5)].missing_intervals == 46


@pytest.mark.parametrize("region", ["NSW", "VIC"])
def test_last_day_of_daylight_saving_is_25_hours(region: str) -> None:
    # 5 Apr 2026: 03:00 AEDT becomes 02:00 AEST. Local 5 Apr = [00:00 AEDT, 24:00 AEST)
    # = NEM 4 Apr 23:00 to NEM 6 Apr 00:00 = 4 Apr intervals 47, 48 and all 48 of 5 Apr: 50.
    plan = plan_for(region)
    days = [nem_day(date(2026, 4, 4), flat("1.000")), nem_day(date(2026, 4, 5), ramp())]
    ratings = rate(plan, days)
    assert summary(plan, ratings[date(2026, 4, 5)]) == {
        # 2 x 1.000 + (1..48 = 49 x 48 / 2 = 1176 Wh) = 3.176
        "consumption": D("3.176"),
        # window 11:00-14:00 AEST = intervals 23..28 = 51 x 6 / 2 = 153 Wh
        "free": D("0.153"),
        "over_cap": D(0),
        # PEAK 15:00-21:00 AEST = intervals 31..42 = 73 x 12 / 2 = 438 Wh;
        # OFF_PEAK: 3.176 - 0.153 - 0.438 = 2.585, the repeated hour 02:00-03:00 counted twice
        "charged": {"PEAK": D("0.438"), "OFF_PEAK": D("2.585")},
        "export": D(0),
        "missing": 0,
    }
    # Local 4 Apr (AEDT all day) = NEM 3 Apr 23:00 to 4 Apr 23:00: 46 intervals of 1.000 kWh
    # from 4 Apr; the two from 3 Apr were not given.
    assert ratings[date(2026, 4, 4)].consumption_kwh == D("46.000")
    assert ratings[date(2026, 4, 4)].missing_intervals == 2


def test_south_australia_first_day_of_daylight_saving() -> None:
    # 4 Oct 2026: 02:00 ACST (UTC+9:30) = NEM 02:30 becomes 03:00 ACDT (UTC+10:30).
    # Local 4 Oct = [00:00 ACST, 24:00 ACDT) = NEM 00:30-23:30 = intervals 2..47: 46 intervals.
    plan = plan_for("SA")
    ratings = rate(plan, [nem_day(date(2026, 10, 4), ramp())])
    assert summary(plan, ratings[date(2026, 10, 4)]) == {
        # 2..47 = 49 x 46 / 2 = 1127 Wh
        "consumption": D("1.127"),
        # window 12:00-15:00 ACDT = NEM 11:30-14:30 = intervals 24..29 = 53 x 6 / 2 = 159 Wh
        "free": D("0.159"),
        "over_cap": D(0),
        # PEAK 15:00-21:00 ACDT = NEM 14:30-20:30 = intervals 30..41 = 71 x 12 / 2 = 426 Wh;
        # OFF_PEAK: 1127 - 159 - 426 = 542 Wh
        "charged": {"PEAK": D("0.426"), "OFF_PEAK": D("0.542")},
        "export": D(0),
        "missing": 0,
    }
    # Interval 1 (NEM 00:00-00:30) is local 3 Oct 23:30-24:00 ACST; 48 (23:30-24:00) is 5 Oct.
    assert ratings[date(2026, 10, 3)].consumption_kwh == D("0.001")
    assert ratings[date(2026, 10, 5)].consumption_kwh == D("0.048")


def test_south_australia_last_day_of_daylight_saving() -> None:
    # 5 Apr 2026: 03:00 ACDT = NEM 02:30 becomes 02:00 ACST. Local 5 Apr = [00:00 ACDT,
    # 24:00 ACST) = NEM 4 Apr 23:30 to 6 Apr 00:30: 4 Apr interval 48, all of 5 Apr, 6 Apr 1.
    plan = plan_for("SA")
    days = [
        nem_day(date(2026, 4, 4), flat("1.000")),
        nem_day(date(2026, 4, 5), ramp()),
        nem_day(date(2026, 4, 6), flat("2.000")),
    ]
    rating = rate(plan, days)[date(2026, 4, 5)]
    assert summary(plan, rating) == {
        # 1.000 + 1.176 + 2.000
        "consumption": D("4.176"),
        # window 12:00-15:00 ACST = NEM 12:30-15:30 = intervals 26..31 = 57 x 6 / 2 = 171 Wh
        "free": D("0.171"),
        "over_cap": D(0),
        # PEAK 15:00-21:00 ACST = NEM 15:30-21:30 = intervals 32..43 = 75 x 12 / 2 = 450 Wh;
        # OFF_PEAK: 4.176 - 0.171 - 0.450 = 3.555
        "charged": {"PEAK": D("0.450"), "OFF_PEAK": D("3.555")},
        "export": D(0),
        "missing": 0,
    }


def test_south_australia_half_hour_offset_in_winter() -> None:
    # 15 Jul 2026, ACST = UTC+9:30 = NEM - 30 min. Local 15 Jul = NEM 15 Jul 00:30 to
    # 16 Jul 00:30: intervals 2..48 of 15 Jul and interval 1 of 16 Jul.
    plan = plan_for("SA")
    days = [nem_day(date(2026, 7, 15), ramp()), nem_day(date(2026, 7, 16), flat("1.000"))]
    ratings = rate(plan, days)
    assert summary(plan, ratings[date(2026, 7, 15)]) == {
        # 2..48 = 1176 - 1 = 1175 Wh, + 1.000
        "consumption": D("2.175"),
        # window 12:00-15:00 ACST = NEM 12:30-15:30 = intervals 26..31 = 171 Wh
        "free": D("0.171"),
        "over_cap": D(0),
        # PEAK 15:00-21:00 ACST = intervals 32..43 = 450 Wh; OFF_PEAK 2.175 - 0.171 - 0.450
        "charged": {"PEAK": D("0.450"), "OFF_PEAK": D("1.554")},
        "export": D(0),
        "missing": 0,
    }
    # Local 14 Jul holds only 15 Jul interval 1; the 47 intervals from NEM 14 Jul are missing.
    assert ratings[date(2026, 7, 14)].consumption_kwh == D("0.001")
    assert ratings[date(2026, 7, 14)].missing_intervals == 47


def test_queensland_summer_day_keeps_nem_time() -> None:
    # 15 Jan 2027: Brisbane has no daylight saving, so its clock is NEM time, while Sydney's
    # is an hour ahead. The same data puts different intervals in the 11:00-14:00 window.
    days = [nem_day(date(2027, 1, 15), ramp())]
    seq = plan_for("SEQ")
    rating = rate(seq, days)[date(2027, 1, 15)]
    assert summary(seq, rating) == {
        "consumption": D("1.176"),  # 1..48
        "free": D("0.153"),  # intervals 23..28 = 153 Wh
        "over_cap": D(0),
        # PEAK intervals 31..42 = 438 Wh; OFF_PEAK 1176 - 153 - 438 = 585 Wh
        "charged": {"PEAK": D("0.438"), "OFF_PEAK": D("0.585")},
        "export": D(0),
        "missing": 0,
    }
    # Sydney (AEDT): window = NEM 10:00-13:00 = intervals 21..26 = 141 Wh.
    assert rate(plan_for("NSW"), days)[date(2027, 1, 15)].free_kwh == D("0.141")


def test_an_aest_plan_ignores_daylight_saving() -> None:
    # An NSW plan on AEST: in January the window is 11:00-14:00 NEM time = intervals 23..28,
    # and the bill day is the NEM day (no 23:00 split).
    plan = plan_for("NSW", time_zone="AEST")
    ratings = rate(plan, [nem_day(date(2027, 1, 15), ramp())])
    assert list(ratings) == [date(2027, 1, 15)]
    assert summary(plan, ratings[date(2027, 1, 15)]) == {
        "consumption": D("1.176"),
        "free": D("0.153"),
        "over_cap": D(0),
        "charged": {"PEAK": D("0.438"), "OFF_PEAK": D("0.585")},
        "export": D(0),
        "missing": 0,
    }


@pytest.mark.parametrize(
    ("intervals", "kwh", "free"),
    [
        # 30 min: [11:00, 11:30) has 18 of 30 minutes after 11:12: 0.6 x 1.000; then 11:30-14:00
        # is 5 whole intervals: 0.6 + 5 = 5.6
        (48, "1.000", D("5.6")),
        # 15 min: [11:00, 11:15) has 3 of 15 minutes inside: 0.2 x 1.000; 11:15-14:00 is 11
        # intervals: 0.2 + 11 = 11.2
        (96, "1.000", D("11.2")),
        # 5 min: [11:10, 11:15) has 3 of 5 minutes inside: 0.6 x 0.100; 11:15-14:00 is 33
        # intervals: 0.06 + 3.3 = 3.36
        (288, "0.100", D("3.36")),
    ],
)
def test_a_window_edge_inside_an_interval_counts_pro_rata(
    intervals: int, kwh: str, free: Decimal
) -> None:
    # 15 Jul 2026: Sydney winter, local time = NEM time. Window 11:12-14:00.
    plan = plan_for("NSW", free_window={"start": "11:12"})
    rating = rate(plan, [nem_day(date(2026, 7, 15), flat(kwh, intervals))])[date(2026, 7, 15)]
    total = Decimal(kwh) * intervals
    assert rating.free_kwh == free
    assert rating.consumption_kwh == total
    assert rating.free_kwh + rating.outside_window_kwh == total


def test_a_share_with_no_exact_decimal_keeps_the_total_exact() -> None:
    # Window 11:10-14:00 on 30-minute data: [11:00, 11:30) has 20 of 30 minutes inside.
    # 2/3 of 1.000 kWh has no exact decimal; the first part, 10/30 = 0.333333333 (rounded half
    # up at 10^-9 kWh), is charged, and the window gets the rest: 0.666666667.
    plan = plan_for("NSW", free_window={"start": "11:10"})
    rating = rate(plan, [nem_day(date(2026, 7, 15), flat("1.000"))])[date(2026, 7, 15)]
    assert rating.free_kwh == D("5.666666667")  # 0.666666667 + 5 whole intervals
    # OFF_PEAK: 48 - 12 (PEAK) - 5.666666667 = 30.333333333
    assert summary(plan, rating)["charged"] == {"PEAK": D(12), "OFF_PEAK": D("30.333333333")}
    assert rating.consumption_kwh == D(48)


def test_a_band_edge_inside_an_interval_splits_it_by_minutes() -> None:
    # PEAK from 15:10: [15:00, 15:30) has 10 minutes OFF_PEAK (1/3, 0.333333333) and 20
    # minutes PEAK (the rest, 0.666666667); 15:30-21:00 is 11 whole PEAK intervals.
    bands = [
        {
            "type": "PEAK",
            "unit_price": "0.50",
            "periods": [{"days": ["ALL"], "start": "15:10", "end": "21:00"}],
        },
        {
            "type": "OFF_PEAK",
            "unit_price": "0.20",
            "periods": [{"days": ["ALL"], "start": "00:00", "end": "24:00"}],
        },
    ]
    plan = plan_for("NSW", time_of_use=bands)
    rating = rate(plan, [nem_day(date(2026, 7, 15), flat("1.000"))])[date(2026, 7, 15)]
    # OFF_PEAK: 48 - 6 (free window) - 11.666666667 = 30.333333333
    assert summary(plan, rating)["charged"] == {
        "PEAK": D("11.666666667"),
        "OFF_PEAK": D("30.333333333"),
    }
    assert rating.free_kwh == D(6)


def test_a_day_over_the_cap_accrues_in_time_order_across_channels() -> None:
    # 15 Jul 2026 (Sydney winter = NEM time), window 11:00-14:00, cap 24 kWh, PEAK from 13:30.
    # E1 3.000 and E2 2.000 in each window interval (23..28), nothing elsewhere.
    # In time order: 11:00 5 (5), 11:30 (10), 12:00 (15), 12:30 (20), 13:00 E1 3 (23), E2 2:
    # 1 free (24) and 1 over cap at OFF_PEAK; 13:30 E1 3 and E2 2 over cap at PEAK.
    bands = [
        {
            "type": "PEAK",
            "unit_price": "0.50",
            "periods": [{"days": ["ALL"], "start": "13:30", "end": "21:00"}],
        },
        {
            "type": "OFF_PEAK",
            "unit_price": "0.20",
            "periods": [{"days": ["ALL"], "start": "00:00", "end": "24:00"}],
        },
    ]
    plan = plan_for("NSW", time_of_use=bands)
    e1 = [D("3.000") if 22 <= i < 28 else D(0) for i in range(48)]
    e2 = [D("2.000") if 22 <= i < 28 else D(0) for i in range(48)]
    days = [
        nem_day(date(2026, 7, 15), e2, suffix="E2"),
        nem_day(date(2026, 7, 15), e1, suffix="E1"),
    ]
    rating = rate(plan, days)[date(2026, 7, 15)]
    assert summary(plan, rating) == {
        "consumption": D(30),
        "free": D(24),
        "over_cap": D(6),
        "charged": {"PEAK": D(5), "OFF_PEAK": D(1)},
        "export": D(0),
        "missing": 0,
    }
    # The free 24 kWh were all at OFF_PEAK moments: they would have cost 24 x 0.20.
    assert rating.free_kwh_by_band == (D(0), D(24))
    assert rating.outside_window_kwh == D(0)


def test_a_public_holiday_takes_the_holiday_band() -> None:
    # sso-nsw: OFF_PEAK on public holidays (listed first), PEAK weekdays 15:00-21:00, SHOULDER
    # 07:00-15:00 and 21:00-22:00, OFF_PEAK otherwise; window 11:00-14:00 (inside SHOULDER).
    # Monday 8 Jun 2026 is the King's Birthday in NSW; Tuesday 9 Jun is not a holiday.
    # Every interval 1.000 kWh; June is AEST, so local time = NEM time.
    plan = load_plan("sso-nsw")
    days = [nem_day(date(2026, 6, 8), flat("1.000")), nem_day(date(2026, 6, 9), flat("1.000"))]
    ratings = rate(plan, days)
    holiday, tuesday = ratings[date(2026, 6, 8)], ratings[date(2026, 6, 9)]
    # Holiday: all 48 intervals OFF_PEAK; 6 free, 42 charged.
    assert summary(plan, holiday)["charged"] == {
        "OFF_PEAK": D(42),
        "PEAK": D(0),
        "SHOULDER": D(0),
    }
    # Tuesday: PEAK 12 intervals; SHOULDER 16 + 2 = 18 less 6 free = 12; OFF_PEAK 48 - 12 - 18.
    assert summary(plan, tuesday)["charged"] == {
        "OFF_PEAK": D(18),
        "PEAK": D(12),
        "SHOULDER": D(12),
    }
    # The free kWh are valued at the band in force: OFF_PEAK on the holiday, SHOULDER on Tuesday.
    types = [band.type for band in plan.bands]
    assert {types[i] for i, kwh in enumerate(holiday.free_kwh_by_band) if kwh} == {"OFF_PEAK"}
    assert {types[i] for i, kwh in enumerate(tuesday.free_kwh_by_band) if kwh} == {"SHOULDER"}


def test_missing_values_are_neither_free_nor_charged_and_are_counted() -> None:
    # Sydney winter; intervals 23 (window) and 40 (PEAK) have no value.
    values: list[Decimal | None] = list(flat("1.000"))
    values[22] = None
    values[39] = None
    plan = plan_for("NSW")
    rating = rate(plan, [nem_day(date(2026, 7, 15), values)])[date(2026, 7, 15)]
    assert summary(plan, rating) == {
        "consumption": D(46),
        "free": D(5),
        "over_cap": D(0),
        "charged": {"PEAK": D(11), "OFF_PEAK": D(30)},
        "export": D(0),
        "missing": 2,
    }


def test_a_missing_value_in_a_split_interval_counts_once() -> None:
    plan = plan_for("NSW", free_window={"start": "11:10"})
    values: list[Decimal | None] = list(flat("1.000"))
    values[22] = None  # [11:00, 11:30), cut by the window edge
    rating = rate(plan, [nem_day(date(2026, 7, 15), values)])[date(2026, 7, 15)]
    assert rating.missing_intervals == 1
    assert rating.free_kwh == D(5)
    assert rating.consumption_kwh == D(47)


def test_export_earns_no_free_energy_and_follows_the_local_day() -> None:
    # Sydney summer: NEM 15 Jan 23:00-24:00 (intervals 47, 48) is local 16 Jan.
    plan = plan_for("NSW")
    ratings = rate(plan, [nem_day(date(2027, 1, 15), ramp(), suffix="B1")])
    assert ratings[date(2027, 1, 15)].export_kwh == D("1.081")  # 1..46
    assert ratings[date(2027, 1, 16)].export_kwh == D("0.095")  # 47 + 48
    assert ratings[date(2027, 1, 15)].free_kwh == D(0)
    assert ratings[date(2027, 1, 15)].consumption_kwh == D(0)


def test_only_the_plans_consumption_suffixes_count() -> None:
    plan = plan_for("NSW", consumption_suffixes=["E1"])
    days = [
        nem_day(date(2026, 7, 15), flat("1.000"), suffix="E1"),
        nem_day(date(2026, 7, 15), flat("5.000"), suffix="E2"),
        nem_day(date(2026, 7, 15), flat("7.000"), suffix="Q1"),
        nem_day(date(2026, 7, 15), flat("9.000"), suffix="B1", uom="KVARH"),
    ]
    rating = rate(plan, days)[date(2026, 7, 15)]
    assert rating.consumption_kwh == D(48)
    assert rating.export_kwh == D(0)
    assert rating.missing_intervals == 0


def test_a_plan_without_a_window_charges_everything() -> None:
    plan = plan_for("NSW", free_window={"enabled": False})
    rating = rate(plan, [nem_day(date(2026, 7, 15), flat("1.000"))])[date(2026, 7, 15)]
    assert rating.free_kwh == D(0)
    assert summary(plan, rating)["charged"] == {"PEAK": D(12), "OFF_PEAK": D(36)}


def test_a_day_with_no_data_is_rated_empty_with_every_interval_missing() -> None:
    # Two channels known (E1, B1); 20 Jul has neither: its 48 intervals are missing (channels
    # are not added up).
    plan = plan_for("NSW")
    days = [
        nem_day(date(2026, 7, 15), flat("1.000")),
        nem_day(date(2026, 7, 15), flat("1.000"), suffix="B1"),
    ]
    rating = rate(plan, days, local_dates=[date(2026, 7, 20)])[date(2026, 7, 20)]
    assert rating.consumption_kwh == D(0)
    assert rating.missing_intervals == 48


def test_missing_intervals_count_intervals_not_channels() -> None:
    # E1 and B1 both missing at 12:00 is one interval; E1 at 13:00 and B1 at 14:00 are two more.
    plan = plan_for("NSW")
    e1: list[Decimal | None] = list(flat("1.000"))
    b1: list[Decimal | None] = list(flat("0.100"))
    e1[24] = b1[24] = None
    e1[26] = None
    b1[28] = None
    days = [
        nem_day(date(2026, 7, 15), e1),
        nem_day(date(2026, 7, 15), b1, suffix="B1"),
    ]
    assert rate(plan, days)[date(2026, 7, 15)].missing_intervals == 3


def test_a_longer_interval_missing_counts_on_the_days_shortest_grid() -> None:
    # E1 at 5 minutes, B1 at 30: the day's grid is 5 minutes, so B1's missing 12:00-12:30 is six
    # of its 288 intervals, and E1's missing 12:05-12:10 one of those six.
    plan = plan_for("NSW")
    e1: list[Decimal | None] = list(flat("0.100", 288))
    e1[145] = None
    b1: list[Decimal | None] = list(flat("0.100"))
    b1[24] = None
    days = [nem_day(date(2026, 7, 15), e1), nem_day(date(2026, 7, 15), b1, suffix="B1")]
    rating = MeterRating(NMI, DayProfiles(plan))
    for day in days:
        rating.add(day)
    day = date(2026, 7, 15)
    assert (rating.grid(day), rating.intervals(day)) == (5, 288)
    assert rating.days([day])[day].missing_intervals == 6
    zone = plan.zone
    assert rating.missing_runs(day) == [
        (datetime(2026, 7, 15, 12, 0, tzinfo=zone), datetime(2026, 7, 15, 12, 30, tzinfo=zone))
    ]


def test_a_day_without_rows_after_a_meter_exchange_counts_at_the_length_the_meter_had() -> None:
    # 30-minute data on 15 Jul, 5-minute data from 17 Jul; 16 Jul has no row. Whatever came
    # first, 16 Jul counts at the 30 minutes of the day before it (48 missing), 14 Jul (before
    # all the data) at those of the first day after it, 19 Jul at the 5 minutes of 18 Jul.
    plan = plan_for("NSW")
    days = [
        nem_day(date(2026, 7, 15), flat("1.000")),
        nem_day(date(2026, 7, 17), flat("0.100", 288)),
        nem_day(date(2026, 7, 18), flat("0.100", 288)),
    ]
    wanted = [date(2026, 7, d) for d in (14, 16, 19)]
    for order in (days, days[::-1]):
        ratings = rate(plan, order, local_dates=wanted)
        assert [ratings[d].missing_intervals for d in wanted] == [48, 48, 288]


def test_the_same_channel_day_twice_is_refused() -> None:
    day = nem_day(date(2026, 7, 15), flat("1.000"))
    with pytest.raises(ValueError, match="given twice"):
        rate(plan_for(), [day, day])


def test_one_rating_takes_one_nmi() -> None:
    days = [nem_day(date(2026, 7, 15), flat("1")), nem_day(date(2026, 7, 15), flat("1"), nmi="X")]
    with pytest.raises(ValueError, match="NMI X"):
        rate(plan_for(), days)


def test_rate_meters_groups_by_nmi_and_shares_profiles() -> None:
    plan = plan_for("NSW")
    days = [
        nem_day(date(2026, 7, 15), flat("1.000"), nmi="A"),
        nem_day(date(2026, 7, 15), flat("2.000"), nmi="B"),
        nem_day(date(2026, 7, 15), flat("3.000"), nmi="C", suffix="Q1"),
    ]
    ratings = rate_meters(plan, days)
    assert list(ratings) == ["A", "B", "C"]
    assert [rating.rated for rating in ratings.values()] == [True, True, False]
    # C has no consumption or export channel, and says why.
    assert ratings["C"].unrated_suffixes() == {
        "Q1": "neither consumption nor export under the plan"
    }
    assert ratings["A"].profiles is ratings["B"].profiles
    assert ratings["B"].days()[date(2026, 7, 15)].consumption_kwh == D(96)


def test_an_aligned_day_has_no_split_intervals() -> None:
    # 30-minute data on Adelaide's half-hour offset: every edge falls on an interval edge.
    profile = DayProfiles(plan_for("SA")).get(date(2026, 7, 15), 30)
    assert profile.splits == ()
    assert profile.local_dates == (date(2026, 7, 14), date(2026, 7, 15))
    assert profile.interval_counts == (1, 47)


def test_meter_rating_reports_the_local_dates_its_data_touches() -> None:
    rating = MeterRating(NMI, DayProfiles(plan_for()))
    for day in (date(2026, 7, 17), date(2026, 7, 15)):
        rating.add(nem_day(day, flat("1.000")))
    assert rating.local_date_range() == (date(2026, 7, 15), date(2026, 7, 17))
    # In Sydney's summer the last hour of a NEM day is the next local day's first.
    summer = MeterRating(NMI, DayProfiles(plan_for()))
    summer.add(nem_day(date(2027, 1, 15), flat("1.000")))
    assert summer.local_date_range() == (date(2027, 1, 15), date(2027, 1, 16))
    assert summer.is_partial(date(2027, 1, 15))
    assert summer.is_partial(date(2027, 1, 16))


def test_a_day_without_any_value_is_unread_and_a_day_read_as_zero_is_not() -> None:
    # SA (UTC+9:30): local day D is NEM D 00:30 to NEM D+1 00:30, so a NEM day's first half
    # hour is the local day before. NEM 15 Jul is read as zeros; NEM 16 Jul's row has only
    # missing values (quality N); NEM 17 Jul has no row; NEM 18 Jul has a value only in its last
    # half hour (local 18 Jul 23:00-23:30); nothing after.
    plan = plan_for("SA")
    gaps: list[Decimal | None] = [None] * 48
    last: list[Decimal | None] = [None] * 47 + [D("0.100")]
    rating = MeterRating(NMI, DayProfiles(plan))
    for day in (
        nem_day(date(2026, 7, 15), flat("0.000")),
        nem_day(date(2026, 7, 16), gaps),
        nem_day(date(2026, 7, 18), last),
    ):
        rating.add(day)
    assert [rating.unread(date(2026, 7, d)) for d in range(14, 20)] == [
        False,  # its last half hour is NEM 15 Jul's first, read as 0
        False,  # read as zeros all day
        True,  # the values of NEM 16 Jul and 17 Jul's first half hour are missing
        True,  # no row at all, and NEM 18 Jul's first half hour is missing
        False,  # one half hour read
        True,  # nothing
    ]
    ratings = rating.days([date(2026, 7, 15), date(2026, 7, 17)])
    assert ratings[date(2026, 7, 15)].consumption_kwh == ratings[date(2026, 7, 17)].consumption_kwh
