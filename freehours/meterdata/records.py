"""What a NEM12 file holds, as the rest of freehours sees it.

One ``IntervalDay`` is one 300 record (one NMI, one channel suffix, one NEM date) with its 400
records applied: the day's interval values in kWh as exact decimals, a quality flag per interval,
and the UpdateDateTime that decides which revision wins.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from enum import StrEnum
from functools import lru_cache
from typing import cast

from freehours.domain.time import NEM_TIME

_ZERO = Decimal(0)


class Quality(StrEnum):
    """NEM12 quality flags, one per interval (V is resolved into these through 400 records)."""

    ACTUAL = "A"  # an actual read
    ESTIMATED = "E"  # forward estimate, to be replaced by a substitute or actual
    SUBSTITUTED = "S"  # a substitute: final until an actual arrives
    FINAL = "F"  # a final substitute
    NULL = "N"  # no data: the interval is missing whatever its value field says


@dataclass(frozen=True, slots=True)
class IntervalRead:
    """One interval: [start, end) in NEM time, its energy in kWh (None when missing)."""

    nmi: str
    suffix: str
    start: datetime
    end: datetime
    kwh: Decimal | None
    quality: str


@dataclass(frozen=True, slots=True)
class IntervalDay:
    """One 300 record: a channel's interval values for one NEM date.

    ``values[i]`` is interval ``i + 1`` of the day, in kWh (units are normalised on reading), or
    None when missing (quality N, or no value). ``qualities[i]`` is that interval's flag, one
    character of ``Quality``. ``uom`` is ``"KWH"`` for energy; other units (kVArh, ...) are kept as
    written, upper-cased, and are never rated.
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
            # Most days miss nothing: sum them as they are, and let a None say otherwise.
            return sum(cast("tuple[Decimal, ...]", self.values), _ZERO)
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
    def key(self) -> tuple[str, str, date]:
        """What a revision replaces: one (NMI, suffix, NEM date)."""
        return (self.nmi, self.suffix, self.day)


# 1,024 (date, length) pairs: almost three years of days, and at most about 14 MB of datetimes
# (5-minute days), so memory stays flat however long the file.
@lru_cache(maxsize=1024)
def _interval_starts(day: date, interval_minutes: int) -> tuple[datetime, ...]:
    start = datetime.combine(day, time(0), NEM_TIME)
    step = timedelta(minutes=interval_minutes)
    return tuple(start + step * index for index in range(24 * 60 // interval_minutes))
