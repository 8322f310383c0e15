"""Writing NEM12: fixtures for tests and benchmarks, and the demo's meter data.

``write_nem12`` writes what ``read_days`` reads back unchanged: one 100 header, a 200 record each
time the channel changes, a 300 record per ``IntervalDay`` (with its UpdateDateTime), 400 records
when a day's qualities vary (QualityMethod V), and the 900 end. Days are written in the order
given, revisions included, so the reader's rule (latest UpdateDateTime wins, then the later row)
decides between them as it would for any file. Values are written from their ``Decimal``s exactly.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime
from decimal import Decimal
from itertools import groupby
from pathlib import Path
from typing import TextIO

from freehours.clock import SystemClock
from freehours.domain import reads
from freehours.domain.reads import IntervalDay
from freehours.domain.time import NEM_TIME

#: QualityMethod for each flag. ``IntervalDay`` keeps the flag only, and the format wants a
#: method with E, S and F: these are the commonest in AEMO's own example files (52: previous
#: year; 14: like day).
QUALITY_METHODS = {"A": "A", "N": "N", "E": "E52", "S": "S14", "F": "F14"}
#: ReasonCode, needed with S and F: 0 is "free text", explained by the ReasonDescription.
_REASONS = {"S": "0,substituted", "F": "0,final substitute"}
_END = "\r\n"  # MDFF files end records with CR LF, as AEMO's examples do


def write_nem12(
    days: Iterable[IntervalDay],
    out: Path | TextIO,
    *,
    participant: str = "FREEHOURS",
    recipient: str = "RETAILER",
    created: datetime | None = None,
) -> None:
    """Write ``days`` as one NEM12 file to ``out`` (a path, or a text stream opened with
    ``newline=""``). ``created`` (default: now) is the header's DateTime.

    Streams: holds one NMI's consecutive days at a time, to list its suffixes in the 200 record's
    NMIConfiguration. Raises ``ValueError`` for a day the format cannot carry.
    """
    if isinstance(out, Path):
        with out.open("w", encoding="ascii", newline="") as stream:
            _write(days, stream, participant, recipient, created)
    else:
        _write(days, out, participant, recipient, created)


def _write(
    days: Iterable[IntervalDay],
    out: TextIO,
    participant: str,
    recipient: str,
    created: datetime | None,
) -> None:
    moment = (created or SystemClock().now()).astimezone(NEM_TIME)
    out.write(f"100,NEM12,{moment:%Y%m%d%H%M},{participant},{recipient}{_END}")
    for nmi, group in groupby(days, key=lambda day: day.nmi):
        block = list(group)
        configuration = "".join(dict.fromkeys(day.suffix for day in block))
        channel: tuple[str, str, int] | None = None
        for day in block:
            if (day.suffix, day.uom, day.interval_minutes) != channel:
                channel = (day.suffix, day.uom, day.interval_minutes)
                unit = "kWh" if day.is_energy else day.uom
                out.write(
                    f"200,{nmi},{configuration},,{day.suffix},{day.suffix},,{unit},"
                    f"{day.interval_minutes},{_END}"
                )
            out.writelines(_records(day))
    out.write(f"900{_END}")


def _records(day: IntervalDay) -> Iterator[str]:
    """The 300 record of ``day`` and, when its qualities vary, its 400 records."""
    _check(day)
    values = ",".join(
        _value(value, quality) for value, quality in zip(day.values, day.qualities, strict=True)
    )
    stamp = day.update_datetime
    if stamp is not None:
        if stamp.tzinfo is None:
            raise ValueError(f"{day.key}: update_datetime must be timezone-aware")
        stamp_text = f"{stamp.astimezone(NEM_TIME):%Y%m%d%H%M%S}"
    else:
        stamp_text = ""
    flags = set(day.qualities)
    if len(flags) == 1:
        flag = day.qualities[0]
        reason = _REASONS.get(flag, ",")
        yield f"300,{day.day:%Y%m%d},{values},{QUALITY_METHODS[flag]},{reason},{stamp_text},{_END}"
        return
    yield f"300,{day.day:%Y%m%d},{values},V,,,{stamp_text},{_END}"
    first = 1
    for flag, run in groupby(day.qualities):
        last = first + len(list(run)) - 1
        reason = _REASONS.get(flag, ",")
        yield f"400,{first},{last},{QUALITY_METHODS[flag]},{reason}{_END}"
        first = last + 1


def _check(day: IntervalDay) -> None:
    count = reads.intervals_in_day(day.interval_minutes)
    if not count:
        raise ValueError(f"{day.key}: interval length {day.interval_minutes} is not 5, 15 or 30")
    if len(day.values) != count or len(day.qualities) != count:
        raise ValueError(
            f"{day.key}: {len(day.values)} values and {len(day.qualities)} qualities where"
            f" {day.interval_minutes}-minute intervals need {count}"
        )
    if not set(day.qualities) <= set(reads.QUALITY_FLAGS):
        raise ValueError(f"{day.key}: qualities {day.qualities!r} are not all A, E, F, N or S")
    reads.check_nmi(day.nmi, "nmi")
    reads.check_suffix(day.suffix, "suffix")
    if not day.uom.isascii() or not day.uom.isalnum():
        raise ValueError(f"{day.key}: {day.uom!r} is not letters and digits")


def _value(value: Decimal | None, quality: str) -> str:
    if value is None:
        # A missing interval: NEM12 writes 0 with quality N; any other quality keeps it empty.
        return "0" if quality == reads.NULL_QUALITY else ""
    if quality == reads.NULL_QUALITY:
        raise ValueError(f"an interval of quality N has no value, not {value}")
    if not value.is_finite() or value.is_signed():
        raise ValueError(f"interval value {value} is not a non-negative number")
    return format(reads.check_kwh(value, "interval value"), "f")
