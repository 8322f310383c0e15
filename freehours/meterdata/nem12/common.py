"""What the NEM12 reader's parts share: the limits, the statistics, the record indicators and
the patterns every pass matches (``freehours.meterdata.nem12``)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path

from freehours.domain import reads
from freehours.domain.reads import RangeError
from freehours.errors import NEM12Error

Source = Path | str | bytes


#: Units of energy, lower-cased, and the power of ten that turns each into kWh.
ENERGY_UNITS = {"wh": -3, "kwh": 0, "mwh": 3}


#: The longest physical line accepted. A 5-minute 300 record is about 2,000 characters; the bound
#: keeps a file without line breaks (or not CSV at all) from being read into memory in one piece.
MAX_LINE = 100_000


@dataclass(frozen=True, slots=True)
class ReadLimits:
    """What one NEM12 source may hold (``FREEHOURS_NEM12_*``), far above any real MDP file.

    The yardstick is a month of 5-minute data for 10,000 NMIs, one channel each: 310,000 300
    records of 288 values, about 1,800 bytes each, so about 560 MB and 320,000 lines (a million
    with a 400 and a 500 record under every day). The defaults allow twice the channels and
    twice the lines; a bomb meets them long before it has cost a second (reading 2 million blank
    lines costs about half a second in the second pass, should a file stop just short).
    """

    max_bytes: int = 2 * 1024**3  # bytes read, once decompressed, over all members
    max_members: int = 10_000  # files in a zip archive
    max_lines: int = 2_000_000  # physical lines, blank ones included, over all members
    max_line: int = MAX_LINE  # characters in one line: longer ones are refused


class NEM12TooLarge(NEM12Error):
    """A source past one of its ``ReadLimits``: the HTTP API answers 413, not 422."""


class ReadCancelled(Exception):
    """The reader's ``stop`` event was set (the client went away): reading stopped."""


# Distinct value texts and UpdateDateTimes kept parsed before the caches start again: 100,000
# Decimals are about 15 MB, far more distinct values than a real file of kWh to 3 decimals has.
_CACHE_LIMIT = 100_000


_RECORD_INDICATORS = frozenset({"100", "200", "250", "300", "400", "500", "550", "900"})


#: QualityMethod -> quality flag: the flag alone, or the flag and a two-digit method (not for V,
#: which only says "see the 400 records").
_QUALITY_METHODS: dict[str, str] = {flag: flag for flag in reads.QUALITY_FLAGS + "V"} | {
    f"{flag}{method:02d}": flag for flag in reads.QUALITY_FLAGS for method in range(100)
}


_VALUE = reads.DECIMAL_TEXT


#: A 300 record's values written exactly as the store writes them (``str`` of each Decimal): no
#: leading zeros, no bare point, at most 6 digits before the point and ``KWH_PLACES`` after, no
#: exponent; empty where missing. Such a record's text is stored as it is (``_stored_text``).
_STORED_VALUE = r"(?:(?:0|[1-9][0-9]{0,5})(?:\.[0-9]{1,6})?)?"


_STORED_VALUES = re.compile(f"{_STORED_VALUE}(?:,{_STORED_VALUE})*")
_STORED_ONE = re.compile(_STORED_VALUE)


_NAME = re.compile(r"[A-Za-z0-9]+")


_STARTS_LIKE_VALUE = re.compile(r"[0-9.]*(?:,|$)")


_HAS_QUALITY_FIELD = re.compile(r",[A-Za-z]")


_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")


_GZIP_MAGIC = b"\x1f\x8b"


_BOM = "\xef\xbb\xbf"  # a UTF-8 byte order mark, as the latin-1 decoding below sees it


_ONE = Decimal(1)


_BLOCK = 1 << 18  # bytes the first pass reads at a time


@dataclass(slots=True)
class ChannelStats:
    """What one channel (NMI and suffix) of a file holds."""

    nmi: str
    suffix: str
    first_day: date
    last_day: date
    units: set[str] = field(default_factory=set)
    interval_minutes: set[int] = field(default_factory=set)
    rows: int = 0  # 300 records read, superseded ones included
    superseded: int = 0  # 300 records replaced by a later revision of the same day
    missing: int = 0  # intervals of the winning days with no value (quality N, or empty)
    qualities: Counter[str] = field(default_factory=Counter)  # flag -> winning intervals

    @property
    def days(self) -> int:
        """Distinct NEM dates: one winning row each."""
        return self.rows - self.superseded

    @property
    def intervals(self) -> int:
        """Intervals of the winning days."""
        return sum(self.qualities.values())


@dataclass(slots=True)
class ReadStats:
    """What a NEM12 source holds; complete once ``NEM12Reader.days()`` has been exhausted."""

    source: str
    members: list[str] = field(default_factory=list)  # the CSV texts read (zip members)
    created: datetime | None = None  # the first 100 header's DateTime, NEM time
    rows: int = 0  # 300 records read
    superseded: int = 0  # of those, rows that a later revision replaced
    joined_lines: int = 0  # physical lines joined to the 300 record they continue
    channels: dict[tuple[str, str], ChannelStats] = field(default_factory=dict)
    # IntervalDates past what a meter can have read by today (read with ``future``): the first
    # and the last, or None
    first_ahead: date | None = None
    last_ahead: date | None = None

    def ahead(self, day: date) -> None:
        """Note an IntervalDate past what a meter can have read."""
        if self.first_ahead is None or day < self.first_ahead:
            self.first_ahead = day
        if self.last_ahead is None or day > self.last_ahead:
            self.last_ahead = day

    @property
    def days(self) -> int:
        return self.rows - self.superseded

    @property
    def nmis(self) -> list[str]:
        return sorted({nmi for nmi, _ in self.channels})

    @property
    def intervals(self) -> int:
        return sum(channel.intervals for channel in self.channels.values())

    @property
    def missing(self) -> int:
        return sum(channel.missing for channel in self.channels.values())

    @property
    def qualities(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for channel in self.channels.values():
            total.update(channel.qualities)
        return total


class _Channel:
    """The 200 record in force: which channel the 300 records below it belong to."""

    __slots__ = ("count", "line", "minutes", "nmi", "scale", "suffix", "uom")

    def __init__(
        self, nmi: str, suffix: str, uom: str, *, scale: int | None, minutes: int, line: int
    ) -> None:
        self.nmi = nmi
        self.suffix = suffix
        self.uom = uom
        self.scale = scale  # power of ten to kWh; None for units that are not energy
        self.minutes = minutes
        self.count = reads.DAY_MINUTES // minutes
        self.line = line


class _Waiting:
    """A 300 record of quality V, waiting for its 400 records."""

    __slots__ = ("channel", "day", "line", "loser", "next_interval", "runs", "stamp", "values")

    def __init__(
        self,
        channel: _Channel,
        day: date,
        values: tuple[Decimal | None, ...],
        stamp: datetime | None,
        *,
        line: int,
        loser: bool,
    ) -> None:
        self.channel = channel
        self.day = day
        self.values = values
        self.stamp = stamp
        self.line = line
        self.loser = loser  # superseded: checked, then not yielded
        self.runs: list[tuple[int, int, str]] = []  # (first, end, flag) per 400, 0-based
        self.next_interval = 1  # where the next 400 record must start


class _BadValue(Exception):
    """A value text that is not a kWh value as ``freehours.domain.reads`` defines it (reported
    with its field by the caller)."""

    def __init__(self, text: str, message: str) -> None:
        super().__init__(text)
        self.text = text
        self.message = message


def _read_row(
    rest: str, count: int, lookup: Callable[[str], Decimal | None]
) -> tuple[tuple[Decimal | None, ...], int] | None:
    """A 300 record's values: ``rest`` is the record past its IntervalDate. None where it has
    fewer than ``count`` commas (nothing looked up); else (the first ``count`` texts through
    ``lookup``; the index in ``rest`` just past the ``count``-th comma, where QualityMethod
    starts). ``_rows.Table().read`` (C) answers the same, faster; this is what runs where it was
    not compiled, and what the tests hold it to."""
    texts = rest.split(",", count)
    if len(texts) <= count:
        return None
    tail = texts.pop()
    return tuple(map(lookup, texts)), len(rest) - len(tail)


_Table: type[_CompiledTable] | None
try:
    from freehours.meterdata.nem12._rows import Table as _CompiledTable

    _Table = _CompiledTable
except ImportError:  # built without a C compiler: the pure-Python twin reads every row
    _Table = None


class _Values(dict[str, Decimal | None]):
    """Value text -> value in kWh (or in its own unit, for a unit that is not energy).

    Meter data repeats the same few thousand texts, so each is parsed once. An empty field is a
    missing value (None), never held, so that each one looked up is counted in ``missed`` (for
    the scanner to take and zero after each row: most rows miss no value, and a look at the
    count costs less than a look at every text). Emptied past ``_CACHE_LIMIT`` entries, so it
    stays small whatever the file.

    It also keeps the texts it parsed that the store writes otherwise (``unusual``: "00.5",
    ".5", "1E3"), so that ``written_as_stored`` tells whether a record's texts can be stored as
    they are with a set lookup, not a regular expression over the whole record: up to
    ``_CACHE_LIMIT`` of them, past which it matches the expression again.
    """

    __slots__ = ("missed", "overflowed", "read_row", "scale", "unusual")

    def __init__(self, scale: int) -> None:
        super().__init__()
        self.scale = scale
        self.missed = 0
        self.unusual: set[str] = set()
        self.overflowed = False
        # read_row(rest, count, lookup), ``_read_row``'s contract: in C where it was compiled,
        # with a table of its own, keyed by the texts' bytes, in front of this dict.
        self.read_row: Callable[
            [str, int, Callable[[str], Decimal | None]],
            tuple[tuple[Decimal | None, ...], int] | None,
        ] = _read_row if _Table is None else _Table().read

    def written_as_stored(self, text: str) -> bool:
        """Whether each of the comma-separated texts of ``text`` (every one looked up here
        already) is written as the store writes its value (``_STORED_VALUES``). Asked at any
        time after the look-ups, the answer is the same: ``unusual`` only grows, and past its
        limit the expression decides."""
        if self.overflowed:
            return _STORED_VALUES.fullmatch(text) is not None
        unusual = self.unusual
        return not unusual or unusual.isdisjoint(text.split(","))

    def __missing__(self, text: str) -> Decimal | None:
        if not text:
            self.missed += 1
            return None
        if _VALUE.fullmatch(text) is None:
            raise _BadValue(
                text, f"interval value {text[:40]!r} is not a non-negative decimal number"
            )
        value = Decimal(text)
        if self.scale:
            # scaleb moves the exponent only: exact. MWh gets a positive exponent (1.5E+3), which
            # quantize writes out as 1500 so that values print plainly (after the range check:
            # quantize cannot write out a huge value).
            value = value.scaleb(self.scale)
        try:
            reads.check_kwh(value)  # once per distinct text: the cache keeps this off the hot path
        except RangeError as exc:
            raise _BadValue(text, f"interval value {text[:40]!r}: {exc.reason}") from None
        if value.as_tuple().exponent > 0:  # type: ignore[operator]
            value = value.quantize(_ONE)
        if not self.overflowed and _STORED_ONE.fullmatch(text) is None:
            if len(self.unusual) < _CACHE_LIMIT:
                self.unusual.add(text)
            else:
                self.overflowed = True
        if len(self) > _CACHE_LIMIT:
            self.clear()
        self[text] = value
        return value


_FIELDS_200 = (
    "RecordIndicator",
    "NMI",
    "NMIConfiguration",
    "RegisterID",
    "NMISuffix",
    "MDMDataStreamIdentifier",
    "MeterSerialNumber",
    "UOM",
    "IntervalLength",
    "NextScheduledReadDate",
)


_FIELDS_400 = ("RecordIndicator", "StartInterval", "EndInterval", "QualityMethod")


def _is_digits(text: str) -> bool:
    """ASCII digits only (str.isdigit also takes the likes of "²", which int() refuses)."""
    return text.isascii() and text.isdigit()
