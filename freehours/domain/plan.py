"""Tariff plans: the immutable plan that rating and billing work with.

A ``Plan`` is made of frozen dataclasses (bands, periods, the free window, the feed-in price),
built from a validated plan document by ``freehours.plans.document`` (a plan file and the body of
``PUT /v1/plans/{id}`` are that document, with the fields of DESIGN.md section 4); the domain
only reads the plan, it never parses one.

Conventions:

- Money and energy are ``Decimal``.
- Times of day are minutes since local midnight (0 to 1440) on the customer's clock. A period
  never crosses midnight: 22:00-06:00 is 22:00-24:00 and 00:00-06:00.
- Bands are matched in the order listed: where periods of several bands cover a moment, the first
  listed band wins. ``PUBLIC_HOLIDAYS`` adds the region's public holidays to the days a period
  applies on; to make holidays off-peak, list a holiday band before the weekday bands. Which days
  are public holidays the plan is told by whoever made it (``Plan.holiday_calendar``): the domain
  imports nothing from outside ``freehours.domain``.
"""

from __future__ import annotations

from collections.abc import Callable, Container
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta, tzinfo
from decimal import ROUND_HALF_UP, Decimal
from enum import StrEnum
from fractions import Fraction

from freehours.domain.reads import DAY_MINUTES
from freehours.domain.time import NEM_TIME, REGION_ZONES, Region


class DayName(StrEnum):
    """The day names a period may list (as in the CDR energy plan schema)."""

    MON = "MON"
    TUE = "TUE"
    WED = "WED"
    THU = "THU"
    FRI = "FRI"
    SAT = "SAT"
    SUN = "SUN"
    WEEKDAYS = "WEEKDAYS"  # MON to FRI
    WEEKENDS = "WEEKENDS"  # SAT and SUN
    ALL = "ALL"  # every day
    PUBLIC_HOLIDAYS = "PUBLIC_HOLIDAYS"  # the region's public holidays (``Plan.holiday_calendar``)


#: Day names by ``date.weekday()``: MON is 0.
WEEKDAY_NAMES = (
    DayName.MON,
    DayName.TUE,
    DayName.WED,
    DayName.THU,
    DayName.FRI,
    DayName.SAT,
    DayName.SUN,
)


def day_names(weekday: int, *, public_holiday: bool) -> frozenset[DayName]:
    """Every day name that a date with this weekday (0 = Monday) answers to."""
    names = {WEEKDAY_NAMES[weekday], DayName.ALL}
    names.add(DayName.WEEKDAYS if weekday < 5 else DayName.WEEKENDS)
    if public_holiday:
        names.add(DayName.PUBLIC_HOLIDAYS)
    return frozenset(names)


class TimeZoneMode(StrEnum):
    """Which clock a plan's windows and bands are on."""

    LOCAL = "LOCAL"  # the region's zone, daylight saving included
    AEST = "AEST"  # NEM time: UTC+10 all year, as the CDR plan schema allows


#: The Solar Sharer defaults by region: the free window (minutes of the local day) and the cap.
REGION_WINDOWS: dict[Region, tuple[int, int]] = {
    Region.NSW: (11 * 60, 14 * 60),
    Region.SEQ: (11 * 60, 14 * 60),
    Region.SA: (12 * 60, 15 * 60),
    Region.VIC: (11 * 60, 14 * 60),
}
DEFAULT_CAP_KWH = Decimal(24)


def clock_text(minutes: int) -> str:
    """``HH:MM`` for minutes since midnight (1440 is ``24:00``)."""
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def local_moment(local_date: date, minutes: int, zone: tzinfo) -> datetime:
    """The aware moment ``minutes`` after midnight of ``local_date`` on that zone's wall clock."""
    days, rest = divmod(minutes, DAY_MINUTES)
    wall = datetime.combine(local_date + timedelta(days=days), time(rest // 60, rest % 60))
    return wall.replace(tzinfo=zone)


#: The public holidays of a region, as dates: ``freehours.plans.calendars`` gives the
#: ``holidays`` package's, so that the domain needs no package of its own.
HolidayCalendar = Callable[[Region], Container[date]]


def no_public_holidays(region: Region) -> Container[date]:
    """A calendar without public holidays: the default of a plan that lists none."""
    return frozenset()


# --- the domain -----------------------------------------------------------------------------


def month_day(on: date) -> int:
    """A date's place in the calendar year as ``MMDD`` (1231 is 31 December): what a period's
    ``dates`` compare with."""
    return on.month * 100 + on.day


@dataclass(frozen=True, slots=True)
class Period:
    """When a band applies: on ``days``, from ``start`` to ``end`` (minutes of the local day),
    and, where ``dates`` is given, only from its first to its last day of the year (``MMDD``,
    both included; a first day after the last wraps over the new year, as a summer from 1201 to
    0228 does)."""

    days: frozenset[DayName]
    start: int
    end: int
    dates: tuple[int, int] | None = None

    def applies_on(self, names: frozenset[DayName], on: int | None = None) -> bool:
        """Whether it applies on a day with these names, ``on`` that ``MMDD`` (None: any)."""
        if self.days.isdisjoint(names):
            return False
        return self.dates is None or on is None or in_dates(self.dates, on)


@dataclass(frozen=True, slots=True)
class Band:
    """A time-of-use band: its CDR type (PEAK, OFF_PEAK, ...), price per kWh and periods, and
    its steps where the price rises (or falls) with usage (``StepRates``)."""

    type: str
    unit_price: Decimal
    periods: tuple[Period, ...]
    steps: StepRates | None = None


@dataclass(frozen=True, slots=True)
class Step:
    """From ``after_kwh`` of a step period's usage of a band type on, ``unit_price``."""

    after_kwh: Decimal
    unit_price: Decimal


#: Days in a step period of each ISO 8601 unit: a month is a twelfth of a year of 365 days.
STEP_PERIOD_DAYS: dict[str, Fraction] = {
    "D": Fraction(1),
    "W": Fraction(7),
    "M": Fraction(365, 12),
    "Y": Fraction(365),
}
#: A step's threshold on a bill, pro rata, is rounded half up to the watt-hour.
STEP_QUANTUM = Decimal("0.001")


@dataclass(frozen=True, slots=True)
class StepRates:
    """Stepped (block) rates of a band type: the band's ``unit_price`` up to the first step's
    ``after_kwh``, each step's price from there, per ``period`` (an ISO 8601 duration of one
    unit: ``P1D``, ``P1M``, ``P3M``, ``P1Y``). A bill's thresholds are the steps' pro rata to the
    days it bills: ``after_kwh x days / days of the period``, to the watt-hour (a quarterly 1,000
    kWh step is 339.726 kWh on a bill of 31 days)."""

    steps: tuple[Step, ...]
    period: str

    @property
    def period_days(self) -> Fraction:
        return int(self.period[1:-1]) * STEP_PERIOD_DAYS[self.period[-1]]

    def thresholds(self, days: int) -> tuple[Decimal, ...]:
        """Each step's threshold on a bill of ``days`` days, in kWh."""
        share = Fraction(days) / self.period_days
        found = []
        for step in self.steps:
            exact = Fraction(step.after_kwh) * share
            kwh = Decimal(exact.numerator) / Decimal(exact.denominator)
            found.append(kwh.quantize(STEP_QUANTUM, ROUND_HALF_UP))
        return tuple(found)


def band_timeline(
    bands: tuple[Band, ...], names: frozenset[DayName], on: int | None = None
) -> tuple[int, ...]:
    """The band in force at each minute of a day with these day names, ``on`` that ``MMDD`` (see
    ``month_day``; None: dated periods apply too): an index into ``bands``, or -1 where no band
    covers the minute. The first listed band wins where several cover it."""
    timeline = [-1] * DAY_MINUTES
    for index in range(len(bands) - 1, -1, -1):
        for period in bands[index].periods:
            if period.applies_on(names, on):
                timeline[period.start : period.end] = [index] * (period.end - period.start)
    return tuple(timeline)


@dataclass(frozen=True, slots=True)
class FreeWindow:
    """The daily free window on the local clock, and the most free energy a day can have."""

    start: int
    end: int
    cap_kwh: Decimal

    @property
    def label(self) -> str:
        return f"{clock_text(self.start)}-{clock_text(self.end)}"

    def contains(self, minute: int) -> bool:
        """Whether this minute of the local day (wall clock) is inside the window."""
        return self.start <= minute < self.end

    def bounds(self, local_date: date, zone: tzinfo) -> tuple[datetime, datetime]:
        """The window of ``local_date`` as aware moments: ``[start, end)``."""
        return local_moment(local_date, self.start, zone), local_moment(local_date, self.end, zone)


@dataclass(frozen=True, slots=True)
class FeedIn:
    """What exported energy earns, per kWh."""

    unit_price: Decimal


@dataclass(frozen=True, slots=True)
class ControlledLoad:
    """A controlled load (an off-peak hot-water or slab-heating circuit, metered on a channel of
    its own): its channels' energy is never free and is charged at its own price, with its own
    daily supply charge where it has one."""

    suffixes: tuple[str, ...]
    unit_price: Decimal
    daily_supply_charge: Decimal | None = None


def in_dates(dates: tuple[int, int], on: int) -> bool:
    """Whether ``MMDD`` ``on`` is in ``dates`` (first and last ``MMDD``, both included; a first
    after the last wraps over the new year)."""
    first, last = dates
    if first <= last:
        return first <= on <= last
    return on >= first or on <= last


@dataclass(frozen=True, slots=True)
class SupplyCharge:
    """A daily supply charge of part of the year (``dates`` as ``Period.dates``), in place of the
    plan's own on the days it covers."""

    dates: tuple[int, int]
    unit_price: Decimal


@dataclass(frozen=True, slots=True)
class Plan:
    """A validated tariff plan. Prices exclude GST; ``gst_rate`` is added on the bill."""

    id: str
    region: Region
    time_zone: TimeZoneMode
    daily_supply_charge: Decimal
    gst_rate: Decimal
    consumption_suffixes: tuple[str, ...] | None  # None: every suffix starting with E
    free_window: FreeWindow | None  # None: the plan has no free window
    bands: tuple[Band, ...]
    feed_in: FeedIn | None
    description: str = ""
    controlled_load: ControlledLoad | None = None
    #: Seasonal daily supply charges, each in place of ``daily_supply_charge`` on its dates.
    supply_charges: tuple[SupplyCharge, ...] = ()
    #: Makes the calendar of ``region``'s public holidays, once per ``DayProfiles``, when a
    #: period lists ``PUBLIC_HOLIDAYS``. Not part of the plan's value: plans compare by content.
    holiday_calendar: HolidayCalendar = field(default=no_public_holidays, compare=False, repr=False)

    @property
    def name(self) -> str:
        """What documents call the plan: its description, or its id when the description is
        empty or blank (a document's plan name is never blank)."""
        return self.description.strip() or self.id

    @property
    def zone(self) -> tzinfo:
        """The customer's clock: the region's zone, or NEM time for an AEST plan."""
        if self.time_zone is TimeZoneMode.AEST:
            return NEM_TIME
        return self.region.zone

    @property
    def zone_name(self) -> str:
        """The zone's name as bills show it: an IANA name, or ``AEST`` for NEM time."""
        if self.time_zone is TimeZoneMode.AEST:
            return "AEST"
        return REGION_ZONES[self.region]

    def supply_charge_on(self, local_date: date) -> tuple[int, Decimal]:
        """The daily supply charge of a local date: (0, the plan's), or (n, the nth seasonal
        charge's) for the first of ``supply_charges`` (1-based) whose dates hold it."""
        on = month_day(local_date)
        for number, charge in enumerate(self.supply_charges, 1):
            if in_dates(charge.dates, on):
                return number, charge.unit_price
        return 0, self.daily_supply_charge

    @property
    def uses_public_holidays(self) -> bool:
        return any(
            DayName.PUBLIC_HOLIDAYS in period.days for band in self.bands for period in band.periods
        )

    def is_consumption(self, suffix: str) -> bool:
        """Whether a channel suffix is general consumption (the only energy that can be free)."""
        if self.consumption_suffixes is None:
            return suffix.startswith("E") and not self.is_controlled_load(suffix)
        return suffix in self.consumption_suffixes

    def is_controlled_load(self, suffix: str) -> bool:
        """Whether a channel suffix is the plan's controlled load."""
        return self.controlled_load is not None and suffix in self.controlled_load.suffixes

    @staticmethod
    def is_export(suffix: str) -> bool:
        """Whether a channel suffix is export, which earns the feed-in price."""
        return suffix.startswith("B")

    def local_day_bounds(self, local_date: date) -> tuple[datetime, datetime]:
        """The customer's local day as aware moments ``[start, end)``: 23, 24 or 25 hours."""
        zone = self.zone
        return local_moment(local_date, 0, zone), local_moment(local_date, DAY_MINUTES, zone)

    def nem_dates(self, local_date: date) -> tuple[date, ...]:
        """The NEM dates (AEST days, as NEM12 names them) whose intervals cover ``local_date``."""
        return _nem_dates_of(*self.local_day_bounds(local_date))

    def window_nem_dates(self, local_date: date) -> tuple[date, ...]:
        """The NEM dates whose intervals cover ``local_date``'s free window (none without one):
        the data a quota of that day is settled from, so the day has a quota only once one of
        them has data. In South Australia a local day begins in the NEM day before, but its
        window never does."""
        bounds = self.window_bounds(local_date)
        return () if bounds is None else _nem_dates_of(*bounds)

    def window_bounds(self, local_date: date) -> tuple[datetime, datetime] | None:
        """``local_date``'s free window as aware moments ``[start, end)`` on the customer's
        clock, or None for a plan without one."""
        if self.free_window is None:
            return None
        return self.free_window.bounds(local_date, self.zone)


def _nem_dates_of(start: datetime, end: datetime) -> tuple[date, ...]:
    """The NEM dates that ``[start, end)`` overlaps."""
    first = start.astimezone(NEM_TIME).date()
    last = (end.astimezone(NEM_TIME) - timedelta(microseconds=1)).date()
    return tuple(first + timedelta(days=n) for n in range((last - first).days + 1))
