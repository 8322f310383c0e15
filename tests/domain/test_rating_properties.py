"""Properties of rating that hold for any plan and any meter data (hypothesis).

The data lands around the hard days (daylight saving on and off, midsummer, midwinter) in every
region, on either clock, at 5, 15 or 30 minutes, with missing values, windows and bands whose
edges fall anywhere, and several consumption channels.
"""

from __future__ import annotations

import random
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from freehours.domain.plan import Plan, clock_text
from freehours.domain.profiles import DayProfiles
from freehours.domain.rating import DAY_MINUTES, ZERO, MeterRating, rate
from freehours.domain.reads import IntervalDay
from freehours.domain.time import NEM_TIME
from freehours.plans.document import parse_plan
from tests.domain.rating_cases import document_for, nem_day

# Days either side of which the clocks change, and two ordinary ones.
ANCHORS = [date(2026, 4, 4), date(2026, 10, 3), date(2026, 7, 14), date(2027, 1, 14)]

kwh = st.decimals(min_value=0, max_value=3, places=3, allow_nan=False, allow_infinity=False)
reading = st.one_of(st.none(), kwh, kwh, kwh, kwh)


def plans() -> st.SearchStrategy[Plan]:
    return plan_documents().map(lambda document: parse_plan(document, source="test"))


@st.composite
def plan_documents(draw: st.DrawFn) -> dict[str, Any]:
    start = draw(st.integers(0, 23 * 60))
    end = draw(st.integers(start + 1, 24 * 60))
    peak_start = draw(st.integers(0, 23 * 60))
    peak_end = draw(st.integers(peak_start + 1, 24 * 60))
    bands: list[dict[str, Any]] = [
        {
            "type": "PEAK",
            "unit_price": "0.50",
            "periods": [
                {
                    "days": [draw(st.sampled_from(["WEEKDAYS", "WEEKENDS", "ALL", "MON"]))],
                    "start": clock_text(peak_start),
                    "end": clock_text(peak_end),
                }
            ],
        },
        {
            "type": "OFF_PEAK",
            "unit_price": "0.20",
            "periods": [{"days": ["ALL"], "start": "00:00", "end": "24:00"}],
        },
    ]
    return document_for(
        draw(st.sampled_from(["NSW", "SEQ", "SA", "VIC"])),
        time_zone=draw(st.sampled_from(["LOCAL", "AEST"])),
        free_window={
            "start": clock_text(start),
            "end": clock_text(end),
            "cap_kwh": str(draw(st.decimals(min_value="0.5", max_value=30, places=1))),
        },
        time_of_use=bands,
    )


@st.composite
def meter_days(draw: st.DrawFn) -> list[IntervalDay]:
    anchor = draw(st.sampled_from(ANCHORS))
    days = []
    for suffix in draw(st.sets(st.sampled_from(["E1", "E2", "B1"]), min_size=1)):
        minutes = draw(st.sampled_from([5, 15, 30]))
        count = 24 * 60 // minutes
        for offset in draw(st.sets(st.integers(0, 2), min_size=1)):
            values = draw(st.lists(reading, min_size=count, max_size=count))
            days.append(nem_day(anchor + timedelta(days=offset), values, suffix=suffix))
    return days


def read_total(plan: Plan, days: list[IntervalDay], *, export: bool) -> Decimal:
    return sum(
        (
            value
            for day in days
            if plan.is_export(day.suffix) == export
            for value in day.values
            if value is not None
        ),
        ZERO,
    )


@settings(max_examples=40, deadline=None)
@given(plan=plans(), days=meter_days())
def test_free_plus_over_cap_plus_outside_is_consumption_and_free_stays_under_the_cap(
    plan: Plan, days: list[IntervalDay]
) -> None:
    assert plan.free_window is not None
    for rating in rate(plan, days).values():
        assert (
            rating.free_kwh + rating.over_cap_kwh + rating.outside_window_kwh
            == rating.consumption_kwh
        )
        assert ZERO <= rating.free_kwh <= plan.free_window.cap_kwh
        assert rating.over_cap_kwh >= 0
        assert rating.outside_window_kwh >= 0
        if rating.over_cap_kwh:
            assert rating.free_kwh == plan.free_window.cap_kwh


@settings(max_examples=40, deadline=None)
@given(plan=plans(), days=meter_days())
def test_every_kwh_read_lands_on_exactly_one_local_day(plan: Plan, days: list[IntervalDay]) -> None:
    ratings = rate(plan, days).values()
    assert sum((r.consumption_kwh for r in ratings), ZERO) == read_total(plan, days, export=False)
    assert sum((r.export_kwh for r in ratings), ZERO) == read_total(plan, days, export=True)


@settings(max_examples=40, deadline=None)
@given(plan=plans(), days=meter_days(), seed=st.integers(0, 2**32))
def test_the_rating_does_not_depend_on_the_order_of_the_reads(
    plan: Plan, days: list[IntervalDay], seed: int
) -> None:
    shuffled = list(days)
    random.Random(seed).shuffle(shuffled)
    assert rate(plan, shuffled) == rate(plan, days)


@st.composite
def exchanged_meter_days(draw: st.DrawFn) -> list[IntervalDay]:
    """Like ``meter_days``, but each channel's day at a length of its own, as around a meter
    exchange (30-minute data one day, 5-minute the next), with days left out."""
    anchor = draw(st.sampled_from(ANCHORS))
    days = []
    for suffix in draw(st.sets(st.sampled_from(["E1", "E2", "B1"]), min_size=1)):
        for offset in draw(st.sets(st.integers(0, 3), min_size=1)):
            count = 24 * 60 // draw(st.sampled_from([5, 15, 30]))
            values = draw(st.lists(reading, min_size=count, max_size=count))
            days.append(nem_day(anchor + timedelta(days=offset), values, suffix=suffix))
    return days


def reference_missing(plan: Plan, days: list[IntervalDay], local_date: date) -> int:
    """``missing_intervals`` worked out minute by minute, from the module docstring's rule: the
    intervals of the day's grid, starting on it, for which some rated channel has no value."""
    rows = {(day.suffix, day.day): day for day in days}
    suffixes = {day.suffix for day in days}

    def local_day_of(nem_date: date, minute: int) -> date:
        moment = datetime.combine(nem_date, time(0), NEM_TIME) + timedelta(minutes=minute)
        return moment.astimezone(plan.zone).date()

    covering = [
        nem_date
        for nem_date in (local_date + timedelta(days=n) for n in (-1, 0, 1))
        if any(local_day_of(nem_date, minute) == local_date for minute in range(0, 1440, 5))
    ]
    lengths = {day.day: min(d.interval_minutes for d in days if d.day == day.day) for day in days}
    on_day = [lengths[nem_date] for nem_date in covering if nem_date in lengths]
    if on_day:
        grid = min(on_day)
    else:
        earlier = [nem_date for nem_date in lengths if nem_date < covering[0]]
        grid = lengths[max(earlier)] if earlier else lengths[min(lengths)]

    def has_value(suffix: str, nem_date: date, minute: int) -> bool:
        row = rows.get((suffix, nem_date))
        return row is not None and row.values[minute // row.interval_minutes] is not None

    missing = 0
    for nem_date in covering:
        for start in range(0, 1440, grid):
            if local_day_of(nem_date, start) != local_date:
                continue
            minutes = range(start, start + grid)
            if any(not has_value(s, nem_date, m) for s in suffixes for m in minutes):
                missing += 1
    return missing


@settings(max_examples=60, deadline=None)
@given(plan=plans(), days=exchanged_meter_days(), seed=st.integers(0, 2**32))
def test_missing_intervals_count_the_days_intervals_without_a_value_on_any_channel(
    plan: Plan, days: list[IntervalDay], seed: int
) -> None:
    """Whatever the channels, lengths, gaps and order: each day's ``missing_intervals`` is the
    rule's (every rated channel at once, on the day's grid), never more than the day's intervals,
    and the same whichever row came first."""
    first = min(day.day for day in days)
    local_dates = [first + timedelta(days=n) for n in range(-1, 6)]
    shuffled = list(days)
    random.Random(seed).shuffle(shuffled)
    profiles = DayProfiles(plan)
    rating = MeterRating(days[0].nmi, profiles)
    for day in shuffled:
        rating.add(day)
    rated = rating.days(local_dates)
    assert rated == rate(plan, days, local_dates=local_dates)
    for local_date, day_rating in rated.items():
        assert day_rating.missing_intervals == reference_missing(plan, days, local_date)
        assert day_rating.missing_intervals <= rating.intervals(local_date)
        runs = rating.missing_runs(local_date)
        grid = timedelta(minutes=rating.grid(local_date))
        # (Moments of one zone subtract as wall clocks: across a clock change, compare in UTC.)
        lengths = (end.astimezone(UTC) - start.astimezone(UTC) for start, end in runs)
        assert sum(length // grid for length in lengths) == day_rating.missing_intervals


def _picks(picks: tuple[Any, ...], count: int) -> list[tuple[object, ...]]:
    """Picks as values: each take applied to the interval indices (an itemgetter compares by
    identity)."""
    indices = tuple(range(count))
    return [(*pick[:4], pick.take(indices)) for pick in picks]


def _profile(profile: Any) -> tuple[object, ...]:
    count = DAY_MINUTES // profile.interval_minutes
    return (
        profile.nem_date,
        profile.local_dates,
        _picks(profile.consumption, count),
        _picks(profile.window, count),
        profile.touches_window,
        _picks(profile.export, count),
        profile.splits,
        profile.interval_counts,
        profile.origin,
    )


@settings(max_examples=15, deadline=None)
@given(document=plan_documents(), minutes=st.sampled_from([5, 15, 30]))
def test_a_profile_moved_from_a_day_of_its_shape_is_the_one_built_for_its_own_date(
    document: dict[str, Any], minutes: int
) -> None:
    plan = parse_plan(document, source="test")
    shared = DayProfiles(plan)  # builds each shape once, moves it to the other dates
    day = date(2026, 3, 20)  # through both daylight-saving changes and a new year
    while day < date(2027, 1, 10):
        fresh = DayProfiles(plan).get(day, minutes)  # built for this date alone
        assert _profile(shared.get(day, minutes)) == _profile(fresh), day
        day += timedelta(days=1)
