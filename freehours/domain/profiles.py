"""Day profiles: where each interval of a NEM day falls on a plan's clock (its local day, its
band, inside the free window or not), worked out once per plan, interval length and shape of
day, and shared by every meter that plan rates (``freehours.domain.rating``).

A profile names local days by their place (0 for the NEM day's first local date, 1 for the next)
and intervals by their index, so that the days of one shape (a weekday of a season on one UTC
offset) share one profile, moved to each date.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from operator import itemgetter
from typing import NamedTuple

from freehours.domain.plan import Plan, band_timeline, day_names, month_day
from freehours.domain.reads import DAY_MINUTES
from freehours.domain.time import NEM_TIME


class Run(NamedTuple):
    """Intervals ``[first, stop)`` (0-based) of a NEM day with one place on the local clock."""

    first: int
    stop: int
    local_day: int  # index into DayProfile.local_dates
    band: int  # index into Plan.bands
    in_window: bool


#: Takes some intervals' values out of a day's values (an ``operator.itemgetter``).
Take = Callable[[Sequence[Decimal | None]], tuple[Decimal | None, ...]]


class Pick(NamedTuple):
    """Whole intervals of a NEM day that rating adds up together, and where their sum goes: one
    local day's tally, at the slot of their band inside or outside the window, or of export."""

    local_day: int  # index into DayProfile.local_dates
    slot: int  # index into that local day's tally (see ``Tally``)
    band: int  # index into Plan.bands (-1 for export)
    first: int  # the first interval, 0-based; a pick inside the window is contiguous
    take: Take


class Segment(NamedTuple):
    """The part of a split interval that has one place on the local clock."""

    local_day: int
    band: int
    in_window: bool
    offset: int  # minutes from the interval's start
    minutes: int


@dataclass(frozen=True, slots=True)
class DayProfile:
    """Where each interval of one NEM date falls on a plan's clock, for one interval length.

    ``local_dates`` (one or two) depend on the NEM date only, not on the interval length.
    """

    nem_date: date
    interval_minutes: int
    local_dates: tuple[date, ...]
    consumption: tuple[Pick, ...]  # by local day and band; inside the window, by run
    window: tuple[Pick, ...]  # the picks of ``consumption`` inside the window
    touches_window: bool  # whether any of its intervals, or part of one, is inside the window
    export: tuple[Pick, ...]  # by local day
    splits: tuple[tuple[int, tuple[Segment, ...]], ...]  # (interval index, its parts)
    interval_counts: tuple[int, ...]  # intervals starting on each of local_dates
    origin: int  # the NEM day's start in minutes on one absolute scale, to order reads in time
    # ``consumption`` and ``export`` as plain (local day, slot, take) tuples, for the loop of
    # ``MeterRating.add``: unpacking a named tuple takes three times as long.
    consumption_takes: tuple[tuple[int, int, Take], ...]
    export_takes: tuple[tuple[int, int, Take], ...]
    controlled_takes: tuple[tuple[int, int, Take], ...]  # the export picks, one slot on
    #: The runs of whole intervals with one place (``splits`` are the rest), in order: one
    #: object for every NEM date of a shape (``freehours.domain.many_plans`` keys on it).
    runs: tuple[Run, ...] = ()

    def intervals_on(self, local_date: date) -> int:
        """How many intervals of this NEM date start on ``local_date``."""
        if local_date in self.local_dates:
            return self.interval_counts[self.local_dates.index(local_date)]
        return 0


class DayProfiles:
    """The day profiles of one plan, each computed once and shared by every meter rated with it."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self._profiles: dict[tuple[date, int], DayProfile] = {}
        self._nem_dates: dict[date, tuple[date, ...]] = {}
        self._timelines: dict[date, tuple[int, ...]] = {}
        # Equal timelines as one object, so that a day's shape is keyed by their ids; and the
        # profiles already built by shape (``_shape``): most NEM dates of a year share a shape
        # with one of a few others (a weekday of a season, on one UTC offset).
        self._interned: dict[tuple[int, ...], tuple[int, ...]] = {}
        self._shapes: dict[tuple[object, ...], DayProfile] = {}
        self._holidays: Container[date] | None = None
        if plan.uses_public_holidays:
            self._holidays = plan.holiday_calendar(plan.region)

    def get(self, nem_date: date, interval_minutes: int) -> DayProfile:
        """The profile of ``nem_date`` for data at ``interval_minutes``."""
        key = (nem_date, interval_minutes)
        profile = self._profiles.get(key)
        if profile is None:
            profile = self._profiles[key] = self._build(nem_date, interval_minutes)
        return profile

    def nem_dates(self, local_date: date) -> tuple[date, ...]:
        """The NEM dates that cover ``local_date`` (``Plan.nem_dates``, remembered)."""
        dates = self._nem_dates.get(local_date)
        if dates is None:
            dates = self._nem_dates[local_date] = self.plan.nem_dates(local_date)
        return dates

    def is_public_holiday(self, local_date: date) -> bool:
        return self._holidays is not None and local_date in self._holidays

    def timeline(self, local_date: date) -> tuple[int, ...]:
        """The band in force at each wall-clock minute of ``local_date``."""
        timeline = self._timelines.get(local_date)
        if timeline is None:
            names = day_names(
                local_date.weekday(), public_holiday=self.is_public_holiday(local_date)
            )
            made = band_timeline(self.plan.bands, names, month_day(local_date))
            timeline = self._timelines[local_date] = self._interned.setdefault(made, made)
        return timeline

    def _wall_clock(self, nem_date: date) -> tuple[date, list[tuple[int, int]], object]:
        """Each minute of a NEM day on the plan's wall clock: the first local date, per minute
        (days after that date, minute of the local day), and what tells this clock from others
        (the first minute where one offset holds all day, else every minute)."""
        zone = self.plan.zone
        start = datetime.combine(nem_date, time(0), NEM_TIME)
        first = start.astimezone(zone)
        base = first.date()
        last = (start + timedelta(minutes=DAY_MINUTES - 1)).astimezone(zone)
        if first.utcoffset() == last.utcoffset():
            # One offset all day (every day but the two daylight-saving changes): count on.
            origin = first.hour * 60 + first.minute
            return base, _one_offset_walls(origin), origin
        walls = []
        for minute in range(DAY_MINUTES):
            local = (start + timedelta(minutes=minute)).astimezone(zone)
            walls.append(((local.date() - base).days, local.hour * 60 + local.minute))
        return base, walls, tuple(walls)

    def _build(self, nem_date: date, interval_minutes: int) -> DayProfile:
        """The profile of ``nem_date``: one built already for a NEM date of the same shape (the
        same wall clock through the day, the same band timeline on each local date it touches),
        moved to this date, or a new one. Its picks name local dates by their place (0, 1), and
        only ``nem_date``, ``local_dates`` and ``origin`` are the date's own."""
        if interval_minutes <= 0 or DAY_MINUTES % interval_minutes:
            raise ValueError(f"an interval of {interval_minutes} minutes does not divide a day")
        base, walls, clock = self._wall_clock(nem_date)
        local_dates = tuple(base + timedelta(days=n) for n in range(walls[-1][0] + 1))
        timelines = [self.timeline(local_date) for local_date in local_dates]
        # The timelines by identity: they are interned, so equal ones are one object.
        shape = (interval_minutes, clock, *(id(timeline) for timeline in timelines))
        built = self._shapes.get(shape)
        if built is not None:
            return replace(
                built,
                nem_date=nem_date,
                local_dates=local_dates,
                origin=nem_date.toordinal() * DAY_MINUTES,
            )
        profile = self._profile(nem_date, interval_minutes, local_dates, walls, timelines)
        self._shapes[shape] = profile
        return profile

    def _profile(
        self,
        nem_date: date,
        interval_minutes: int,
        local_dates: tuple[date, ...],
        walls: list[tuple[int, int]],
        timelines: list[tuple[int, ...]],
    ) -> DayProfile:
        window = self.plan.free_window
        # The place of every minute of the NEM day: (local date index, band, inside the window).
        # (FreeWindow.contains written out: a bill of many NEM dates builds a profile for each.)
        start, end = (0, 0) if window is None else (window.start, window.end)
        places = [(day, timelines[day][wall], start <= wall < end) for day, wall in walls]
        runs: list[Run] = []
        splits: list[tuple[int, tuple[Segment, ...]]] = []
        counts = [0] * len(local_dates)
        for index in range(DAY_MINUTES // interval_minutes):
            first = index * interval_minutes
            place = places[first]
            counts[place[0]] += 1
            if places[first : first + interval_minutes].count(place) != interval_minutes:
                segments = tuple(
                    Segment(*place, offset, minutes)
                    for place, offset, minutes in _parts(places[first : first + interval_minutes])
                )
                splits.append((index, segments))
                continue
            local_day, band, inside = place
            if runs and runs[-1].stop == index and runs[-1][2:] == (local_day, band, inside):
                runs[-1] = runs[-1]._replace(stop=index + 1)
            else:
                runs.append(Run(index, index + 1, local_day, band, inside))
        # Outside the window only the sum per (local day, band) matters, so runs of one band
        # are taken together; inside it, runs stay apart to keep their place in time.
        bands = len(self.plan.bands)
        charged: dict[tuple[int, int], list[int]] = {}
        by_day: dict[int, list[int]] = {}
        for run in runs:
            if not run.in_window:
                charged.setdefault((run.local_day, run.band), []).extend(range(run.first, run.stop))
            by_day.setdefault(run.local_day, []).extend(range(run.first, run.stop))
        window_picks = tuple(
            Pick(
                run.local_day,
                bands + run.band,
                run.band,
                run.first,
                _take(range(run.first, run.stop)),
            )
            for run in runs
            if run.in_window
        )
        charged_picks = tuple(
            Pick(local_day, band, band, indices[0], _take(indices))
            for (local_day, band), indices in charged.items()
        )
        export_picks = tuple(
            Pick(local_day, 2 * bands, -1, indices[0], _take(indices))
            for local_day, indices in by_day.items()
        )
        return DayProfile(
            nem_date=nem_date,
            interval_minutes=interval_minutes,
            local_dates=local_dates,
            consumption=charged_picks + window_picks,
            window=window_picks,
            touches_window=bool(window_picks)
            or any(segment.in_window for _, segments in splits for segment in segments),
            export=export_picks,
            splits=tuple(splits),
            interval_counts=tuple(counts),
            origin=nem_date.toordinal() * DAY_MINUTES,
            consumption_takes=tuple(
                (pick.local_day, pick.slot, pick.take) for pick in charged_picks + window_picks
            ),
            export_takes=tuple((pick.local_day, pick.slot, pick.take) for pick in export_picks),
            controlled_takes=tuple(
                (pick.local_day, pick.slot + 1, pick.take) for pick in export_picks
            ),
            runs=tuple(runs),
        )


@functools.cache
def _one_offset_walls(origin: int) -> list[tuple[int, int]]:
    """The wall clock of a NEM day whose first minute is ``origin`` on it and whose offset holds
    all day: per minute, (days after the first local date, minute of the local day). Shared:
    read, never changed."""
    return [divmod(origin + minute, DAY_MINUTES) for minute in range(DAY_MINUTES)]


def _parts(
    places: list[tuple[int, int, bool]],
) -> list[tuple[tuple[int, int, bool], int, int]]:
    """The runs of one place in the minutes of an interval: (place, offset, minutes)."""
    parts: list[tuple[tuple[int, int, bool], int, int]] = []
    for offset, place in enumerate(places):
        if parts and parts[-1][0] == place:
            parts[-1] = (place, parts[-1][1], parts[-1][2] + 1)
        else:
            parts.append((place, offset, 1))
    return parts


def _take(indices: Sequence[int]) -> Take:
    """What takes these intervals' values: one slice when they are contiguous."""
    if indices[-1] - indices[0] + 1 == len(indices):
        return itemgetter(slice(indices[0], indices[-1] + 1))
    return itemgetter(*indices)  # at least two: a gap needs intervals on both sides
