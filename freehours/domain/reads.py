"""Meter data's rules, in one place: what a valid NMI, channel suffix, interval length, quality
flag, date and kWh value are; the value types a day of reads travels in (``IntervalDay``,
``IntervalRead``, ``DayKey``); and how JSON reads merge into a stored day. The NEM12 reader and
writer, the JSON API, the store, settlement, plans and bills all use them, and none defines its
own (docs/security.md, "Ranges of meter data", gives each range its reason).

Data that passes here can be stored, addressed by the API, settled and billed: a value that one
path accepts and another cannot handle (an NMI the API's pattern cannot name, a date whose day
after overflows, a kWh whose sum cannot be quantized) is refused where it enters, naming its field.

Each check raises ``RangeError``, a ``ValueError``, so that inside a pydantic model it becomes a
422 naming the field; the NEM12 reader turns it into a ``NEM12Error`` with its line, the store
and the read merge into an ``InputError`` naming the read. This module imports nothing outside
``freehours.domain`` (the standard library only).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import Literal, NamedTuple, TypeAlias, get_args

from freehours.domain.errors import InputError
from freehours.domain.time import NEM_TIME

#: An NMI: 10 characters, upper-case ASCII letters and digits (AEMO allocates NMIs as 10
#: characters; NEM12 writes them without their checksum digit). Lower case is refused, not folded:
#: the API addresses an NMI as written.
NMI_LENGTH = 10
NMI_PATTERN = r"^[A-Z0-9]{10}$"
#: A channel suffix (NMISuffix): a letter (E consumption, B export, Q and K reactive, ...) and a
#: letter or digit, upper case.
SUFFIX_PATTERN = r"^[A-Z][A-Z0-9]$"
#: The minutes of a NEM day (AEST, so always 24 hours).
DAY_MINUTES = 24 * 60
#: Interval lengths NEM12 allows, in minutes: the type (for the API's models) and its values.
IntervalMinutes = Literal[5, 15, 30]
INTERVAL_MINUTES: tuple[int, ...] = get_args(IntervalMinutes)
#: An interval's quality: A an actual read; E a forward estimate, to be replaced by a substitute
#: or an actual; S a substitute, final until an actual arrives; F a final substitute; N null, no
#: data (the interval is missing whatever its value says). A 300 record may also say V (variable:
#: its 400 records give each interval one of these). The type (for the API's models), its flags.
QualityFlag = Literal["A", "E", "S", "F", "N"]
QUALITY_FLAGS = "".join(get_args(QualityFlag))
NULL_QUALITY = "N"

#: The earliest date of a read, a settlement or a bill: interval meter data in the NEM starts
#: well after it, and with it a date can never be year 1, whose day before cannot be written.
EARLIEST_DATE = date(2000, 1, 1)
#: The latest date anything may name (a bill's last day, a NEM12 UpdateDateTime or
#: NextScheduledReadDate): far from ``date.max``, so that date and time-zone arithmetic (a day
#: either side, a local day in UTC) cannot overflow.
LATEST_DATE = date(2099, 12, 31)
#: How many days ahead of today (NEM time) a read or a settlement may be dated: one for the
#: time zones (a local day can start before the NEM day) and two for clocks a little wrong. No
#: meter can have read a later day; a settlement of one would only wait for months.
READ_DAYS_AHEAD = 3

#: A kWh value (one interval, or a plan's cap) is below this: a 30-minute interval at 2 GW,
#: more than twice the largest generating unit in the NEM.
MAX_KWH = Decimal(1_000_000)
#: At most this many decimal places of kWh: meter data carries 3 (Wh written to 3 places is 6
#: places of kWh).
KWH_PLACES = 6
#: A price in AUD (per kWh, or per day) is below this (the NEM's market price cap is under AUD 20
#: per kWh), with at most ``PRICE_PLACES`` decimals. With the kWh bounds, a year of 5-minute
#: values (under 10^12 kWh, 6 places) times a price (under 10^3, 6 places) has at most 27
#: digits: inside Decimal's 28, so no amount is rounded before the bill rounds it to the cent.
MAX_PRICE = Decimal(1_000)
PRICE_PLACES = 6
#: How a decimal is written, in NEM12 and in JSON strings: ASCII digits, at most one point, no
#: sign and no exponent (``re`` ``[0-9]`` is ASCII only, unlike ``\d`` or ``str.isdigit``).
DECIMAL_TEXT = re.compile(r"[0-9]+(?:\.[0-9]*)?|\.[0-9]+")

_NMI = re.compile(NMI_PATTERN)
_SUFFIX = re.compile(SUFFIX_PATTERN)


class RangeError(ValueError):
    """A value outside its range: ``field`` names it, ``reason`` says what is wrong."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def _shown(text: str) -> str:
    """``text`` quoted for a message, cut short: hostile input can be long."""
    return repr(text[:20]) + ("..." if len(text) > 20 else "")


def is_nmi(text: str) -> bool:
    return _NMI.fullmatch(text) is not None


def check_nmi(text: str, field: str = "nmi") -> str:
    """``text`` when it is an NMI (see ``NMI_PATTERN``), else ``RangeError``."""
    if not is_nmi(text):
        raise RangeError(
            field, f"{_shown(text)} is not an NMI: 10 upper-case letters and digits (A-Z, 0-9)"
        )
    return text


def is_suffix(text: str) -> bool:
    return _SUFFIX.fullmatch(text) is not None


def check_suffix(text: str, field: str = "suffix") -> str:
    """``text`` when it is a channel suffix (see ``SUFFIX_PATTERN``), else ``RangeError``."""
    if not is_suffix(text):
        raise RangeError(
            field,
            f"{_shown(text)} is not a channel suffix: an upper-case letter and an upper-case"
            " letter or digit, such as E1",
        )
    return text


def intervals_in_day(minutes: int) -> int:
    """How many intervals of ``minutes`` a NEM day has; 0 when ``minutes`` is not one of
    ``INTERVAL_MINUTES``."""
    return DAY_MINUTES // minutes if minutes in INTERVAL_MINUTES else 0


def check_interval_minutes(minutes: int, field: str = "interval_minutes") -> int:
    if minutes not in INTERVAL_MINUTES:
        raise RangeError(field, f"{minutes} is not an interval length of 5, 15 or 30 minutes")
    return minutes


def is_quality(flag: str) -> bool:
    return len(flag) == 1 and flag in QUALITY_FLAGS


def check_quality(flag: str, field: str = "quality") -> str:
    if not is_quality(flag):
        raise RangeError(field, f"{_shown(flag)} is not a quality flag (A, E, S, F or N)")
    return flag


def check_date(day: date, field: str = "date") -> date:
    """``day`` when it is from ``EARLIEST_DATE`` to ``LATEST_DATE``, else ``RangeError``."""
    if not EARLIEST_DATE <= day <= LATEST_DATE:
        raise RangeError(field, f"{day.isoformat()} is outside {EARLIEST_DATE} to {LATEST_DATE}")
    return day


def latest_read_date(today: date) -> date:
    """The last date a read or a settlement may have when it is ``today`` (NEM time)."""
    return min(today + timedelta(days=READ_DAYS_AHEAD), LATEST_DATE)


def check_read_date(day: date, today: date, field: str = "date") -> date:
    """``day`` when a read (or a settlement) may be dated so on ``today``: from
    ``EARLIEST_DATE`` to ``READ_DAYS_AHEAD`` days after ``today``; else ``RangeError``."""
    latest = latest_read_date(today)
    if day < EARLIEST_DATE:
        raise RangeError(field, f"{day.isoformat()} is before {EARLIEST_DATE}")
    if day > latest:
        raise RangeError(
            field,
            f"{day.isoformat()} is more than {READ_DAYS_AHEAD} days ahead of today"
            f" ({today.isoformat()}): no meter has read it yet",
        )
    return day


#: The most days one scheduling of settlements (``freehours settlements schedule``, ``POST
#: /v1/settlements/schedule``) spans: a year, a leap one included. A customer's year of days is
#: one transaction of 366 jobs; more is a range typed wrong more often than a range meant.
SCHEDULE_MAX_DAYS = 366


def check_schedule_range(
    first: date, last: date, today: date, fields: tuple[str, str] = ("from", "to")
) -> None:
    """``first`` to ``last`` when settlements may be scheduled over them on ``today`` (NEM
    time): both dates a read may have, ``first`` not after ``last``, at most
    ``SCHEDULE_MAX_DAYS`` days; else ``RangeError`` naming the field at fault."""
    check_read_date(first, today, fields[0])
    check_read_date(last, today, fields[1])
    if first > last:
        raise RangeError(fields[1], f"{last.isoformat()} is before {fields[0]} {first.isoformat()}")
    if (last - first).days >= SCHEDULE_MAX_DAYS:
        raise RangeError(
            fields[1],
            f"{last.isoformat()} is more than {SCHEDULE_MAX_DAYS} days from {fields[0]}"
            f" {first.isoformat()}",
        )


def check_moment(moment: datetime, field: str = "start") -> datetime:
    """An aware ``moment`` whose date, on its own clock, is from ``EARLIEST_DATE`` to
    ``LATEST_DATE``: it can then be moved to any time zone without overflowing."""
    if moment.utcoffset() is None:
        raise RangeError(field, f"{moment.isoformat()} has no UTC offset")
    if not EARLIEST_DATE <= moment.date() <= LATEST_DATE:
        raise RangeError(field, f"{moment.isoformat()} is outside {EARLIEST_DATE} to {LATEST_DATE}")
    return moment


def _bounded(value: Decimal, field: str, *, most: Decimal, places: int, what: str) -> Decimal:
    if not value.is_finite():
        raise RangeError(field, f"{value} is not a finite {what}")
    if value < 0:
        raise RangeError(field, f"{value} is negative")
    if value >= most:
        raise RangeError(field, f"{value:.3g} is not below {most} (the most a {what} can be)")
    exponent = value.as_tuple().exponent
    assert isinstance(exponent, int), "finite"
    if exponent < -places:
        raise RangeError(field, f"{value} has more than {places} decimal places")
    return value


def check_kwh(value: Decimal, field: str = "kwh") -> Decimal:
    """``value`` when it is a kWh value: finite, not negative, below ``MAX_KWH``, at most
    ``KWH_PLACES`` decimal places; else ``RangeError``."""
    return _bounded(value, field, most=MAX_KWH, places=KWH_PLACES, what="kWh value")


def check_price(value: Decimal, field: str = "unit_price") -> Decimal:
    """``value`` when it is a price in AUD: finite, not negative, below ``MAX_PRICE``, at most
    ``PRICE_PLACES`` decimal places; else ``RangeError``."""
    return _bounded(value, field, most=MAX_PRICE, places=PRICE_PLACES, what="price")


def decimal_of(text: str, field: str) -> Decimal:
    """A Decimal written as ``DECIMAL_TEXT`` allows (ASCII digits and a point), else
    ``RangeError``. ``Decimal()`` itself also takes exponents, signs, NaN, spaces, and the digits
    of every script (Arabic-Indic, full-width, ...): none of them is meter data."""
    if DECIMAL_TEXT.fullmatch(text) is None:
        raise RangeError(
            field, f"{_shown(text)} is not a decimal number of ASCII digits and a point"
        )
    try:
        return Decimal(text)
    except InvalidOperation:  # pragma: no cover - the pattern admits only what Decimal reads
        raise RangeError(field, f"{_shown(text)} is not a decimal number") from None


def kwh_of(text: str, field: str = "kwh") -> Decimal:
    """A kWh value written as text: ``decimal_of`` then ``check_kwh``."""
    return check_kwh(decimal_of(text, field), field)


# --- a day of reads --------------------------------------------------------------------------

_ZERO = Decimal(0)

#: What a revision replaces, and what settlement looks at again: one (NMI, suffix, NEM date).
DayKey = tuple[str, str, date]


@dataclass(frozen=True, slots=True)
class IntervalRead:
    """One interval: [start, end) in NEM time, its energy in kWh (None when missing)."""

    nmi: str
    suffix: str
    start: datetime
    end: datetime
    kwh: Decimal | None
    quality: str


#: A day's values, the comma-joined texts they were read from, and a check of that text, or None
#: (see ``IntervalDay.stored_form``). The text is the values' text as the store writes it when
#: the check (made only when the day is stored: most days read are never stored, and the NEM12
#: reader's is a set look-up over the texts it parsed) says so, or always without one. A plain
#: tuple: the NEM12 reader makes one a row, its text a slice of the record.
StoredForm: TypeAlias = tuple[tuple[Decimal | None, ...], str, Callable[[str], bool] | None]


@dataclass(frozen=True, slots=True)
class IntervalDay:
    """One channel's interval values for one NEM date: a NEM12 300 record with its 400 records
    applied, or a stored day row.

    ``values[i]`` is interval ``i + 1`` of the day, in kWh (units are normalised on reading), or
    None when missing (quality N, or no value). ``qualities[i]`` is that interval's flag, one of
    ``QUALITY_FLAGS``. ``uom`` is ``"KWH"`` for energy; other units (kVArh, ...) are kept as
    written, upper-cased, and are never rated. ``update_datetime`` decides which revision wins;
    ``source`` and ``line`` say where the day was read, for messages.

    ``stored_form``, when given, pairs a values tuple with the text it was read from, which is
    its text as the store writes it (each value's exact ``str``, comma-joined, empty where
    missing: ``freehours.store.meter.encode_values``) when written so: the NEM12 reader passes
    on a slice of the record itself, so that storing the day costs no work per value. The text
    counts only for the very tuple it was made from (``stored_text``), so a day copied with
    other values (``dataclasses.replace``) is stored from its values, never from stale text.
    """

    nmi: str
    suffix: str
    day: date
    interval_minutes: int
    values: tuple[Decimal | None, ...]
    qualities: str
    update_datetime: datetime | None
    uom: str = "KWH"
    source: str = ""
    line: int = 0
    stored_form: StoredForm | None = dataclasses.field(default=None, compare=False, repr=False)

    def __reduce__(self) -> tuple[type[IntervalDay], tuple[object, ...]]:
        """Pickled without ``stored_form``, whose check belongs to the reader that made it (its
        cache of parsed texts, in C where compiled): the copy is stored from its values."""
        return IntervalDay, (
            self.nmi,
            self.suffix,
            self.day,
            self.interval_minutes,
            self.values,
            self.qualities,
            self.update_datetime,
            self.uom,
            self.source,
            self.line,
        )

    def stored_text(self) -> str | None:
        """The values' text as stored, when the reader kept it for these very values."""
        if self.stored_form is None:
            return None
        values, text, written = self.stored_form
        if values is not self.values or (written is not None and not written(text)):
            return None
        return text

    @property
    def start(self) -> datetime:
        """Start of the NEM day (00:00 AEST)."""
        return datetime.combine(self.day, time(0), NEM_TIME)

    @property
    def is_energy(self) -> bool:
        return self.uom == "KWH"

    def interval_start(self, index: int) -> datetime:
        """Start of interval ``index`` (0-based) in NEM time."""
        return self.start + timedelta(minutes=self.interval_minutes * index)

    def interval_starts(self) -> tuple[datetime, ...]:
        """Start of every interval of the day in NEM time, in order (``values[i]`` starts at [i]).

        The tuple is shared by every day with the same date and interval length, so a file of a
        thousand meters builds each day's datetimes once.
        """
        return _interval_starts(self.day, self.interval_minutes)

    def total(self) -> Decimal:
        """The sum of the day's values, exactly; missing intervals add nothing."""
        try:
            # Most days miss nothing: sum them as they are, and let a None say otherwise (the
            # type not narrowed by cast(), which would be a call a day).
            return sum(self.values, _ZERO)  # type: ignore[type-var, return-value]
        except TypeError:
            return sum([value for value in self.values if value is not None], _ZERO)

    def intervals(self) -> Iterator[IntervalRead]:
        """Every interval of the day as an ``IntervalRead``, in time order."""
        step = timedelta(minutes=self.interval_minutes)
        for value, quality, start in zip(
            self.values, self.qualities, self.interval_starts(), strict=True
        ):
            yield IntervalRead(self.nmi, self.suffix, start, start + step, value, quality)

    @property
    def key(self) -> DayKey:
        """What a revision replaces: one (NMI, suffix, NEM date)."""
        return (self.nmi, self.suffix, self.day)


# 1,024 (date, length) pairs: almost three years of days, and at most about 14 MB of datetimes
# (5-minute days), so memory stays flat however long the file.
@lru_cache(maxsize=1024)
def _interval_starts(day: date, interval_minutes: int) -> tuple[datetime, ...]:
    start = datetime.combine(day, time(0), NEM_TIME)
    step = timedelta(minutes=interval_minutes)
    return tuple(start + step * index for index in range(DAY_MINUTES // interval_minutes))


def check_channel(nmi: str, suffix: str, what: str) -> None:
    """An ``InputError`` naming ``what`` unless ``nmi`` and ``suffix`` are an NMI and a suffix:
    only what the API can address again is stored."""
    try:
        check_nmi(nmi)
        check_suffix(suffix)
    except RangeError as exc:
        raise InputError(f"{what}: {exc}") from None


# --- JSON reads, merged into a day interval by interval ------------------------------------------
#
# A JSON read (``POST /v1/meter-readings``) names one interval of a day; a request may cover part
# of a day or several days. Each read replaces its interval's value and quality in the day, and the
# last read of an interval in one request counts. The day's values are merged as the store keeps
# them, decimal texts ("" where missing), so a merge parses only the intervals it touches.


class MergeCounts(NamedTuple):
    """What a merge did, in intervals: ``accepted`` a value where there was none, ``superseded``
    a different value or quality, ``unchanged`` the same value and quality again."""

    accepted: int
    superseded: int
    unchanged: int

    @property
    def changes(self) -> bool:
        """Whether the day's fields changed (and so must be written)."""
        return bool(self.accepted or self.superseded)


@dataclass(slots=True)
class DayReads:
    """One day's reads from one request: interval index -> (kWh or None, quality)."""

    interval_minutes: int
    values: dict[int, tuple[Decimal | None, str]]

    def blank(self) -> tuple[list[str], list[str]]:
        """The fields of a day with nothing read yet: every interval missing, quality N."""
        intervals = DAY_MINUTES // self.interval_minutes
        return [""] * intervals, [NULL_QUALITY] * intervals

    def check_stored(self, key: DayKey, interval_minutes: int, uom: str) -> None:
        """An ``InputError`` unless these reads can merge into the day ``key`` stored with this
        interval length and unit."""
        nmi, suffix, day = key
        if uom != "KWH":
            raise InputError(
                f"{nmi} {suffix} {day.isoformat()} is stored in {uom}; "
                "reads in kWh cannot merge into it"
            )
        if interval_minutes != self.interval_minutes:
            raise InputError(
                f"{nmi} {suffix} {day.isoformat()} is stored at "
                f"{interval_minutes}-minute intervals; "
                f"{self.interval_minutes}-minute reads cannot merge into it"
            )

    def merge(self, values: list[str], qualities: list[str]) -> MergeCounts:
        """Apply the reads to a day's fields, changed in place; count what each read did."""
        accepted = superseded = unchanged = 0
        for index, (kwh, quality) in self.values.items():
            old_kwh = Decimal(values[index]) if values[index] else None
            if old_kwh == kwh and qualities[index] == quality:
                unchanged += 1
                continue
            if old_kwh is None:
                accepted += 1
            else:
                superseded += 1
            values[index] = "" if kwh is None else str(kwh)
            qualities[index] = quality
        return MergeCounts(accepted, superseded, unchanged)


def reads_by_day(reads: Iterable[IntervalRead]) -> dict[DayKey, DayReads]:
    """``reads`` checked and grouped by the day each falls on.

    A read names its interval by ``start`` and ``end`` (any UTC offset; the interval must lie on
    the NEM day's grid of 5, 15 or 30 minutes). Quality N makes the interval missing whatever
    ``kwh`` says. Raises ``InputError`` naming the read (0-based) that cannot be merged.
    """
    by_day: dict[DayKey, DayReads] = {}
    for number, read in enumerate(reads):
        what = f"read {number}"
        check_channel(read.nmi, read.suffix, what)
        if read.start.utcoffset() is None or read.end.utcoffset() is None:
            raise InputError(f"{what}: start and end need a UTC offset")
        length = read.end - read.start
        minutes = int(length.total_seconds()) // 60
        if minutes not in INTERVAL_MINUTES or length != timedelta(minutes=minutes):
            raise InputError(f"{what}: an interval of {length} is not 5, 15 or 30 minutes")
        start = read.start.astimezone(NEM_TIME)
        offset = start - datetime.combine(start.date(), time(0), NEM_TIME)
        index, rest = divmod(offset, timedelta(minutes=minutes))
        if rest:
            raise InputError(
                f"{what}: start {read.start.isoformat()} is not on the NEM day's "
                f"{minutes}-minute grid"
            )
        if not is_quality(read.quality):
            raise InputError(f"{what}: quality {read.quality!r} is not one of A, E, S, F, N")
        kwh = None if read.quality == NULL_QUALITY else read.kwh
        try:
            check_moment(read.start, "start")
            if kwh is not None:
                check_kwh(kwh)
        except RangeError as exc:
            raise InputError(f"{what}: {exc}") from None
        key = (read.nmi, read.suffix, start.date())
        day_reads = by_day.setdefault(key, DayReads(minutes, {}))
        if day_reads.interval_minutes != minutes:
            raise InputError(
                f"{what}: {minutes}-minute interval on a day that has "
                f"{day_reads.interval_minutes}-minute reads in this batch"
            )
        day_reads.values[index] = (kwh, read.quality)
    return by_day
