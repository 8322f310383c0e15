"""Reading NEM12 files: streaming, exact, revisions resolved.

A NEM12 file (AEMO's Meter Data File Format) is CSV, one record per line::

    100  header: VersionHeader NEM12, DateTime, FromParticipant, ToParticipant   first, once
    200  a channel: NMI, NMISuffix (E1, B1, ...), UOM, IntervalLength (5/15/30)   opens a block
    300  one NEM date of that channel: its interval values, QualityMethod, ...,
         UpdateDateTime                                                          one per day
    400  per-interval quality for the 300 record before it, when that one says V
    500  B2B details of the 300 record before it (checked for place, not used)
    900  end of data                                                             last, once

``NEM12Reader.days()`` (``reader.py``) reads its source (``source.py``) twice. The first pass
(``revisions.py``) finds the superseded rows: it scans the bytes for where 200 and 300 records
start, keeps one small entry per (NMI, suffix, date), and only for a date that comes more than once
reads those rows' UpdateDateTimes (the latest wins, then the later row). The second pass
(``scanner.py``) checks every record and parses every value, superseded rows' too, so that nothing
bad passes, and yields the winners in file order. Memory holds that index and one record at a time,
never the values of the whole file.

Values are exact decimals: each distinct value text is parsed once per unit and shared, since
meter values repeat a great deal, and the cache is emptied whenever it grows past a bound.

A source is bounded (``ReadLimits``): bytes once decompressed, zip members, lines (blank ones
too) and line length. The first pass enforces them all, a block at a time, so a decompression or
blank-line bomb is refused once it passes a limit, not after it has been inflated whole; a zip
whose entries overlap (several entries over the same compressed data, the way zip bombs multiply
it) is refused before any member is read.
"""

from freehours.meterdata.nem12.common import (
    ENERGY_UNITS,
    MAX_LINE,
    ChannelStats,
    NEM12TooLarge,
    ReadCancelled,
    ReadLimits,
    ReadStats,
    Source,
)
from freehours.meterdata.nem12.reader import NEM12Reader, read_days

__all__ = [
    "ENERGY_UNITS",
    "MAX_LINE",
    "ChannelStats",
    "NEM12Reader",
    "NEM12TooLarge",
    "ReadCancelled",
    "ReadLimits",
    "ReadStats",
    "Source",
    "read_days",
]
