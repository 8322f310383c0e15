"""What a valid read is made of: the one definition of an NMI, a channel suffix, an interval
length, a quality flag, a date and a kWh value, used by the NEM12 reader, the JSON API, the store,
plans and bills alike (docs/security.md, "Ranges of meter data", gives each range its reason).

Data that passes here can be stored, addressed by the API, settled and billed: a value that one
path accepts and another cannot handle (an NMI the API's pattern cannot name, a date whose day
after overflows, a kWh whose sum cannot be quantized) is refused where it enters, naming its field.

Each check raises ``RangeError``, a ``ValueError``, so that inside a pydantic model it becomes a
422 naming the field; the NEM12 reader turns it into a ``NEM12Error`` with its line. This module
imports nothing outside ``freehours.domain`` (the standard library only).
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from decimal import Decimal, InvalidOperation

#: An NMI: 10 characters, upper-case ASCII letters and digits (AEMO allocates NMIs as 10
#: characters; NEM12 writes them without their checksum digit). Lower case is refused, not folded:
#: the API addresses an NMI as written.
NMI_LENGTH = 10
NMI_PATTERN = r"^[A-Z0-9]{10}$"
#: A channel suffix (NMISuffix): a letter (E consumption, B export, Q and K reactive, ...) and a
#: letter or digit, upper case.
SUFFIX_PATTERN = r"^[A-Z][A-Z0-9]$"
#: Interval lengths NEM12 allows, in minutes.
INTERVAL_MINUTES = (5, 15, 30)
#: An interval's quality: A actual, E estimated, S substitute, F final substitute, N null. A 300
#: record may also say V (variable: its 400 records give each interval one of these).
QUALITY_FLAGS = "AESFN"

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


def check_interval_minutes(minutes: int, field: str = "interval_minutes") -> int:
    if minutes not in INTERVAL_MINUTES:
        raise RangeError(field, f"{minutes} is not an interval length of 5, 15 or 30 minutes")
    return minutes


def check_quality(flag: str, field: str = "quality") -> str:
    if len(flag) != 1 or flag not in QUALITY_FLAGS:
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
