"""Rating: a meter's interval energy placed on the customer's clock, free inside the window up to
the cap, and the rest priced at the band in force.

**Placing intervals.** NEM12 intervals are in NEM time (AEST). For each NEM date and interval
length a plan has one ``DayProfile``: where every interval falls on the customer's wall clock
(local date, band in force, inside or outside the free window), worked out minute by minute with
``zoneinfo``, so daylight saving, South Australia's half-hour offset and an edge inside an
interval need no special case. Consecutive intervals that sit wholly on one local date, in one
band and wholly inside or outside the window form a ``Run``; rating adds a run's values with one
``sum``. An interval cut by a local midnight, a band edge or a window edge is a *split*, shared
pro rata by minutes (with 5, 15 and 30 minute data, local midnights and daylight-saving changes
always fall on interval edges in every Australian zone; window and band edges fall inside an
interval only when they are off the data's grid, such as a window from 11:10 on 30-minute data).

**Pro rata.** Each part of a split interval but the last gets value x minutes / interval length,
rounded half up to ``SHARE_QUANTUM`` (10^-9 kWh, far below any meter's resolution; a third of a
kWh has no exact decimal); the last part gets the rest, so the parts add up to the value exactly.
A band edge inside an interval is shared the same way: each band is charged for its minutes.

**Free energy.** Within one local day, consumption inside the window accrues in time order up to
the cap, across every consumption channel of the NMI (channels at the same moment in suffix
order). What the window holds past the cap is over cap and charged at the band in force at its
moment. A day whose window consumption is within the cap has all of it free, so only a day over
the cap needs its window reads in time order.

**Missing intervals.** An interval whose value is None (quality N, or empty) is neither free nor
charged. A day's ``missing_intervals`` counts those, plus the intervals of a rated channel of the
NMI for which no 300 row was given at all (a NEM date absent from the data); an interval counts on
the local date it starts on.

Everything is exact ``Decimal`` arithmetic: sums of meter values are exact, and the only rounding
is the pro rata share above.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, NamedTuple, cast

import holidays

from freehours.domain.plan import DAY_MINUTES, Plan, band_timeline, day_names
from freehours.domain.time import NEM_TIME
from freehours.meterdata.records import IntervalDay

ZERO = Decimal(0)
#: Resolution of a pro rata share: 10^-9 kWh, a microwatt-hour, far below any meter's resolution.
SHARE_QUANTUM = Decimal("1E-9")


class Run(NamedTuple):
    """Intervals ``[first, stop)`` (0-based) of a NEM day with one place on the local clock."""

    first: int
    stop: int
    local_day: int  # index into DayProfile.local_dates
    band: int  # index into Plan.bands
    in_window: bool


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
    runs: tuple[Run, ...]
    spans: tuple[slice, ...]  # each run's intervals, ready to cut the values with
    splits: tuple[tuple[int, tuple[Segment, ...]], ...]  # (interval index, its parts)
    interval_counts: tuple[int, ...]  # intervals starting on each of local_dates

    @property
    def first_minute(self) -> int:
        """The NEM day's start as minutes on one absolute scale, to order reads across days."""
        return self.nem_date.toordinal() * DAY_MINUTES

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
        self._holidays: Any = None
        if plan.uses_public_holidays:
            self._holidays = holidays.country_holidays("AU", subdiv=plan.region.holiday_subdivision)

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
            timeline = self._timelines[local_date] = band_timeline(self.plan.bands, names)
        return timeline

    def _wall_clock(self, nem_date: date) -> tuple[date, list[tuple[int, int]]]:
        """Each minute of a NEM day on the plan's wall clock: the first local date, and per minute
        (days after that date, minute of the local day)."""
        zone = self.plan.zone
        start = datetime.combine(nem_date, time(0), NEM_TIME)
        first = start.astimezone(zone)
        base = first.date()
        last = (start + timedelta(minutes=DAY_MINUTES - 1)).astimezone(zone)
        if first.utcoffset() == last.utcoffset():
            # One offset all day (every day but the two daylight-saving changes): count on.
            origin = first.hour * 60 + first.minute
            return base, [divmod(origin + minute, DAY_MINUTES) for minute in range(DAY_MINUTES)]
        walls = []
        for minute in range(DAY_MINUTES):
            local = (start + timedelta(minutes=minute)).astimezone(zone)
            walls.append(((local.date() - base).days, local.hour * 60 + local.minute))
        return base, walls

    def _build(self, nem_date: date, interval_minutes: int) -> DayProfile:
        if interval_minutes <= 0 or DAY_MINUTES % interval_minutes:
            raise ValueError(f"an interval of {interval_minutes} minutes does not divide a day")
        window = self.plan.free_window
        base, walls = self._wall_clock(nem_date)
        local_dates = tuple(base + timedelta(days=n) for n in range(walls[-1][0] + 1))
        timelines = [self.timeline(local_date) for local_date in local_dates]
        # The place of every minute of the NEM day: (local date index, band, inside the window).
        places = [
            (day, timelines[day][wall], window is not None and window.contains(wall))
            for day, wall in walls
        ]
        runs: list[Run] = []
        splits: list[tuple[int, tuple[Segment, ...]]] = []
        counts = [0] * len(local_dates)
        for index in range(DAY_MINUTES // interval_minutes):
            first = index * interval_minutes
            parts: list[tuple[tuple[int, int, bool], int, int]] = []  # (place, offset, minutes)
            for offset in range(interval_minutes):
                place = places[first + offset]
                if parts and parts[-1][0] == place:
                    parts[-1] = (place, parts[-1][1], parts[-1][2] + 1)
                else:
                    parts.append((place, offset, 1))
            counts[places[first][0]] += 1
            if len(parts) > 1:
                segments = tuple(
                    Segment(local_day, band, inside, offset, minutes)
                    for (local_day, band, inside), offset, minutes in parts
                )
                splits.append((index, segments))
                continue
            local_day, band, inside = parts[0][0]
            if runs and runs[-1].stop == index and runs[-1][2:] == (local_day, band, inside):
                runs[-1] = runs[-1]._replace(stop=index + 1)
            else:
                runs.append(Run(index, index + 1, local_day, band, inside))
        return DayProfile(
            nem_date=nem_date,
            interval_minutes=interval_minutes,
            local_dates=local_dates,
            runs=tuple(runs),
            spans=tuple(slice(run.first, run.stop) for run in runs),
            splits=tuple(splits),
            interval_counts=tuple(counts),
        )


@dataclass(frozen=True, slots=True)
class DayRating:
    """One local day of one NMI, rated (kWh throughout).

    - ``consumption_kwh``: all consumption read that day, on every consumption channel;
    - ``free_kwh``: consumption inside the free window, up to the cap;
    - ``over_cap_kwh``: consumption inside the window past the cap (charged at its band);
    - ``export_kwh``: export on every export channel;
    - ``missing_intervals``: intervals with no value (see the module docstring);
    - ``charged_kwh[b]``: consumption charged at band ``b`` of the plan: outside the window, and
      over cap;
    - ``free_kwh_by_band[b]``: free energy at moments when band ``b`` was in force, which prices
      what the free energy would have cost.

    free_kwh + over_cap_kwh + outside_window_kwh == consumption_kwh, exactly.
    """

    local_date: date
    consumption_kwh: Decimal
    free_kwh: Decimal
    over_cap_kwh: Decimal
    export_kwh: Decimal
    missing_intervals: int
    charged_kwh: tuple[Decimal, ...]
    free_kwh_by_band: tuple[Decimal, ...]

    @property
    def outside_window_kwh(self) -> Decimal:
        return sum(self.charged_kwh, ZERO) - self.over_cap_kwh


# A read inside the window, kept for the time-ordered accrual of a day over the cap:
# (minute of its first value on one absolute scale, suffix, band, values, minutes between values).
_WindowReads = tuple[int, str, int, tuple[Decimal | None, ...], int]


class _LocalDay:
    """What one local day has gathered so far, over every channel and NEM date."""

    __slots__ = ("charged", "export", "missing", "window", "window_reads")

    def __init__(self, bands: int) -> None:
        self.charged = [ZERO] * bands
        self.window = [ZERO] * bands
        self.export = ZERO
        self.missing = 0
        self.window_reads: list[_WindowReads] = []


def pro_rata(value: Decimal, segments: tuple[Segment, ...], interval_minutes: int) -> list[Decimal]:
    """``value`` shared over ``segments`` by their minutes; the shares add up to it exactly."""
    shares = [
        (value * segment.minutes / interval_minutes).quantize(SHARE_QUANTUM, ROUND_HALF_UP)
        for segment in segments[:-1]
    ]
    shares.append(value - sum(shares, ZERO))
    return shares


class MeterRating:
    """Rates one NMI's interval days under one plan: ``add`` the days in any order, then ``days``.

    Only energy (kWh) on consumption and export channels is rated; other channels are ignored.
    Each (suffix, NEM date) may be added once: pass the winning revision only (the NEM12 reader
    and the store give nothing else).
    """

    def __init__(self, nmi: str, profiles: DayProfiles) -> None:
        self.nmi = nmi
        self.profiles = profiles
        self.plan = profiles.plan
        self._bands = len(self.plan.bands)
        self._local: dict[date, _LocalDay] = {}
        # NEM date -> the local days its intervals fall on (DayProfile.local_dates order).
        self._targets: dict[date, tuple[_LocalDay, ...]] = {}
        self._rows: set[tuple[str, date]] = set()
        self._rows_per_date: dict[date, int] = {}
        self._channels: dict[str, int] = {}  # rated suffix -> its interval length
        self._consumption: dict[str, bool] = {}  # suffix -> consumption (True), export (False)

    @property
    def rated(self) -> bool:
        """Whether any consumption or export day has been added."""
        return bool(self._rows)

    def nem_date_range(self) -> tuple[date, date]:
        """The first and last NEM dates added (the default span of a bill)."""
        if not self._targets:
            raise ValueError(f"NMI {self.nmi}: no consumption or export days were added")
        return min(self._targets), max(self._targets)

    def add(self, day: IntervalDay) -> None:
        """Rate one channel's NEM day."""
        suffix = day.suffix
        consumption = self._consumption.get(suffix)
        if consumption is None:
            if self.plan.is_consumption(suffix):
                consumption = True
            elif self.plan.is_export(suffix):
                consumption = False
            else:
                return
            self._consumption[suffix] = consumption
        if day.nmi != self.nmi:
            raise ValueError(f"an interval day of NMI {day.nmi} given to the rating of {self.nmi}")
        if not day.is_energy:
            return
        key = (suffix, day.day)
        if key in self._rows:
            raise ValueError(
                f"NMI {self.nmi} {suffix} {day.day} given twice: rate the winning revision only"
            )
        profile = self.profiles.get(day.day, day.interval_minutes)
        if len(day.values) * day.interval_minutes != DAY_MINUTES:
            raise ValueError(
                f"NMI {self.nmi} {suffix} {day.day}: {len(day.values)} values for "
                f"{day.interval_minutes}-minute intervals"
            )
        self._rows.add(key)
        self._rows_per_date[day.day] = self._rows_per_date.get(day.day, 0) + 1
        self._channels[suffix] = day.interval_minutes
        targets = self._targets.get(day.day)
        if targets is None:
            targets = self._targets[day.day] = tuple(
                self._local_day(local_date) for local_date in profile.local_dates
            )
        try:
            # Most days have no missing value; where one has, ``sum`` meets a None and raises.
            values = cast("tuple[Decimal, ...]", day.values)
            sums = [sum(values[span], ZERO) for span in profile.spans]
        except TypeError:
            sums = _sums_counting_missing(day.values, profile, targets)
        if consumption:
            _add_consumption(day, profile, sums, targets)
        else:
            _add_export(day, profile, sums, targets)

    def _local_day(self, local_date: date) -> _LocalDay:
        local_day = self._local.get(local_date)
        if local_day is None:
            local_day = self._local[local_date] = _LocalDay(self._bands)
        return local_day

    def days(self, local_dates: Iterable[date] | None = None) -> dict[date, DayRating]:
        """The rating of each local date asked for (default: every local date the data touches),
        in date order. A date with no data at all is rated empty, its intervals counted missing."""
        wanted = sorted(self._local if local_dates is None else set(local_dates))
        return {local_date: self._rate_day(local_date) for local_date in wanted}

    def _rate_day(self, local_date: date) -> DayRating:
        gathered = self._local.get(local_date) or _LocalDay(self._bands)
        window = self.plan.free_window
        charged = gathered.charged.copy()
        free_by_band = gathered.window
        over_cap = ZERO
        if window is not None and sum(gathered.window, ZERO) > window.cap_kwh:
            free_by_band = [ZERO] * self._bands
            room = window.cap_kwh
            for _, _, band, value in sorted(_window_values(gathered.window_reads)):
                free = min(value, room)
                room -= free
                free_by_band[band] += free
                charged[band] += value - free
                over_cap += value - free
        free = sum(free_by_band, ZERO)
        return DayRating(
            local_date=local_date,
            consumption_kwh=sum(charged, ZERO) + free,
            free_kwh=free,
            over_cap_kwh=over_cap,
            export_kwh=gathered.export,
            missing_intervals=gathered.missing + self._absent_intervals(local_date),
            charged_kwh=tuple(charged),
            free_kwh_by_band=tuple(free_by_band),
        )

    def _absent_intervals(self, local_date: date) -> int:
        """Intervals of ``local_date`` on rated channels whose NEM date was never added."""
        absent = 0
        for nem_date in self.profiles.nem_dates(local_date):
            if self._rows_per_date.get(nem_date, 0) == len(self._channels):
                continue
            for suffix, interval_minutes in self._channels.items():
                if (suffix, nem_date) not in self._rows:
                    absent += self.profiles.get(nem_date, interval_minutes).intervals_on(local_date)
        return absent


def _add_consumption(
    day: IntervalDay, profile: DayProfile, sums: list[Decimal], targets: tuple[_LocalDay, ...]
) -> None:
    values = day.values
    suffix = day.suffix
    step = day.interval_minutes
    origin = profile.first_minute
    for (first, stop, local_day, band, in_window), total in zip(profile.runs, sums, strict=True):
        target = targets[local_day]
        if in_window:
            target.window[band] += total
            read = (origin + first * step, suffix, band, values[first:stop], step)
            target.window_reads.append(read)
        else:
            target.charged[band] += total
    for index, segments in profile.splits:
        value = values[index]
        if value is None:
            targets[segments[0].local_day].missing += 1
            continue
        for segment, share in zip(segments, pro_rata(value, segments, step), strict=True):
            target = targets[segment.local_day]
            if segment.in_window:
                target.window[segment.band] += share
                moment = origin + index * step + segment.offset
                target.window_reads.append((moment, suffix, segment.band, (share,), step))
            else:
                target.charged[segment.band] += share


def _add_export(
    day: IntervalDay, profile: DayProfile, sums: list[Decimal], targets: tuple[_LocalDay, ...]
) -> None:
    for run, total in zip(profile.runs, sums, strict=True):
        targets[run.local_day].export += total
    for index, segments in profile.splits:
        value = day.values[index]
        if value is None:
            targets[segments[0].local_day].missing += 1
            continue
        shares = pro_rata(value, segments, day.interval_minutes)
        for segment, share in zip(segments, shares, strict=True):
            targets[segment.local_day].export += share


def _sums_counting_missing(
    values: tuple[Decimal | None, ...], profile: DayProfile, targets: tuple[_LocalDay, ...]
) -> list[Decimal]:
    sums = []
    for run, span in zip(profile.runs, profile.spans, strict=True):
        present = [value for value in values[span] if value is not None]
        targets[run.local_day].missing += run.stop - run.first - len(present)
        sums.append(sum(present, ZERO))
    return sums


def _window_values(reads: list[_WindowReads]) -> Iterator[tuple[int, str, int, Decimal]]:
    """Every present value inside the window as (minute, suffix, band, kWh), for time ordering."""
    for moment, suffix, band, values, step in reads:
        for position, value in enumerate(values):
            if value is not None:
                yield moment + position * step, suffix, band, value


def rate(
    plan: Plan,
    days: Iterable[IntervalDay],
    *,
    local_dates: Iterable[date] | None = None,
    profiles: DayProfiles | None = None,
) -> dict[date, DayRating]:
    """Rate one NMI's interval days (winning revisions, any order) under ``plan``.

    Returns a ``DayRating`` per local date asked for (default: every local date the data touches).
    To rate one local date completely, pass the days of ``plan.nem_dates(local_date)``. Pass
    ``profiles`` to share day profiles across calls with the same plan.
    """
    profiles = DayProfiles(plan) if profiles is None else profiles
    if profiles.plan != plan:
        raise ValueError("the day profiles given belong to another plan")
    rating: MeterRating | None = None
    for day in days:
        if rating is None:
            rating = MeterRating(day.nmi, profiles)
        rating.add(day)
    if rating is None:
        return {}
    return rating.days(local_dates)


def rate_meters(plan: Plan, days: Iterable[IntervalDay]) -> dict[str, MeterRating]:
    """Rate the interval days of any number of NMIs under one plan, sharing its day profiles.

    Returns the rating of each NMI that has consumption or export data, in order of appearance.
    """
    profiles = DayProfiles(plan)
    ratings: dict[str, MeterRating] = {}
    for day in days:
        rating = ratings.get(day.nmi)
        if rating is None:
            rating = ratings[day.nmi] = MeterRating(day.nmi, profiles)
        rating.add(day)
    return {nmi: rating for nmi, rating in ratings.items() if rating.rated}
