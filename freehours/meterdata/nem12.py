"""Reading NEM12 files: streaming, exact, revisions resolved.

A NEM12 file (AEMO's Meter Data File Format) is CSV, one record per line::

    100  header: VersionHeader NEM12, DateTime, FromParticipant, ToParticipant   first, once
    200  a channel: NMI, NMISuffix (E1, B1, ...), UOM, IntervalLength (5/15/30)   opens a block
    300  one NEM date of that channel: its interval values, QualityMethod, ...,
         UpdateDateTime                                                          one per day
    400  per-interval quality for the 300 record before it, when that one says V
    500  B2B details of the 300 record before it (checked for place, not used)
    900  end of data                                                             last, once

``NEM12Reader.days()`` reads its source twice. The first pass finds the superseded rows: it
scans the bytes for where 200 and 300 records start, keeps one small entry per (NMI, suffix,
date), and only for a date that comes more than once reads those rows' UpdateDateTimes (the
latest wins, then the later row). The second pass checks every record and parses every value,
superseded rows' too, so that nothing bad passes, and yields the winners in file order. Memory
holds that index and one record at a time, never the values of the whole file.

Values are exact decimals: each distinct value text is parsed once per unit and shared, since
meter values repeat a great deal, and the cache is emptied whenever it grows past a bound.

A source is bounded (``ReadLimits``): bytes once decompressed, zip members, lines (blank ones
too) and line length. The first pass enforces them all, a block at a time, so a decompression or
blank-line bomb is refused once it passes a limit, not after it has been inflated whole; a zip
whose entries overlap (several entries over the same compressed data, the way zip bombs multiply
it) is refused before any member is read.
"""

from __future__ import annotations

import gzip
import io
import re
import struct
import threading
import zipfile
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from datetime import date, datetime
from decimal import Decimal
from functools import partial
from pathlib import Path
from typing import IO, BinaryIO, TextIO, cast

from freehours.domain import reads
from freehours.domain.reads import IntervalDay, RangeError, StoredForm
from freehours.domain.time import NEM_TIME
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
#: How a line that starts a record begins: its indicator and a comma, or 900 alone.
_RECORD_STARTS = frozenset({f"{indicator}," for indicator in _RECORD_INDICATORS} | {"900"})
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
_NAME = re.compile(r"[A-Za-z0-9]+")
_STARTS_LIKE_VALUE = re.compile(r"[0-9.]*(?:,|$)")
_HAS_QUALITY_FIELD = re.compile(r",[A-Za-z]")
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")
_GZIP_MAGIC = b"\x1f\x8b"
_BOM = "\xef\xbb\xbf"  # a UTF-8 byte order mark, as the latin-1 decoding below sees it
_ONE = Decimal(1)
#: Where a 200 or 300 record starts: the first pass's view of a file.
_KEYS = re.compile(rb"\n(?:(2)00,([^,\n]*),[^,\n]*,[^,\n]*,([^,\n]*)|300,([^,\n]*))")
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


class _Values(dict[str, Decimal | None]):
    """Value text -> value in kWh (or in its own unit, for a unit that is not energy).

    Meter data repeats the same few thousand texts, so each is parsed once; an empty field is a
    missing value. Emptied past ``_CACHE_LIMIT`` entries, so it stays small whatever the file.
    """

    __slots__ = ("scale",)

    def __init__(self, scale: int) -> None:
        super().__init__({"": None})
        self.scale = scale

    def __missing__(self, text: str) -> Decimal:
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
        if len(self) > _CACHE_LIMIT:
            self.clear()
            self[""] = None
        self[text] = value
        return value


def read_days(
    source: Source,
    *,
    name: str | None = None,
    today: date | None = None,
    limits: ReadLimits | None = None,
    stop: threading.Event | None = None,
) -> Iterator[IntervalDay]:
    """The winning revision of every (NMI, suffix, NEM date) in ``source``, in file order.

    ``source`` is a path, or a whole file's content as bytes; CSV, zip (every file in it) or
    gzip, told apart by their first bytes. ``name`` names the source in errors (default: the path,
    or "upload" for bytes). ``today`` (NEM time; default: the system clock's) bounds the
    IntervalDates (``freehours.domain.reads.check_read_date``). Raises ``NEM12Error`` naming the
    file, line and field of the first problem found (``NEM12TooLarge`` past ``limits``),
    ``ReadCancelled`` once ``stop`` is set.
    """
    return NEM12Reader(source, name=name, today=today, limits=limits, stop=stop).days()


class NEM12Reader:
    """A NEM12 source read as ``IntervalDay`` records, with what it holds in ``stats``.

    ``today`` (NEM time; default: the system clock's) bounds the IntervalDates; ``limits`` bound
    what the source may hold (default: ``ReadLimits()``); ``stop``, when set by another thread,
    stops the reading at its next block (``ReadCancelled``).
    """

    def __init__(
        self,
        source: Source,
        *,
        name: str | None = None,
        today: date | None = None,
        limits: ReadLimits | None = None,
        stop: threading.Event | None = None,
    ) -> None:
        self._source = source
        if name is None:
            name = "upload" if isinstance(source, bytes) else str(source)
        self.name = name
        self.today = today
        self.limits = limits or ReadLimits()
        self.stop = stop
        self.stats = ReadStats(name)
        self._budget = _ByteBudget(self.limits.max_bytes, stop)
        self._spent_before = 0  # bytes of the passes before the latest

    @property
    def bytes_read(self) -> int:
        """Bytes read (decompressed) so far, every pass over the source counted: the work done
        (a bomb's first pass stops at its limit, and there is no second)."""
        return self._spent_before + self._budget.spent

    def days(self) -> Iterator[IntervalDay]:
        """The winning revision of every (NMI, suffix, NEM date), in file order.

        Lazy: nothing is read until the first day is asked for. ``stats`` is complete once the
        iterator is exhausted; calling ``days()`` again reads the source again.
        """
        stats = self.stats = ReadStats(self.name)
        losers = self._superseded()
        scanner = _Scanner(stats, losers, self._today(), self.limits.max_line)
        for label, text in self._texts():
            stats.members.append(label)
            yield from scanner.days(label, text)
        stats.rows = sum(channel.rows for channel in stats.channels.values())
        stats.superseded = len(losers)

    def check(self) -> None:
        """Check the whole source, keeping nothing: every limit (the first pass's scan, its
        index not built), then every record (the second pass, revisions not resolved, nothing
        yielded). Raises what ``days()`` would; memory stays small whatever the source, where
        ``days()`` first indexes every 300 record, so that a hostile file of millions of short
        ones would cost its index before its first bad line is reached. A source that passes
        reads through ``days()`` without an error."""
        stats = self.stats = ReadStats(self.name)
        lines = _LineBudget(self.limits)
        for label, binary in self._binaries():
            for _ in _record_keys(binary, label, lines, keys=False):
                pass
        scanner = _Scanner(stats, set(), self._today(), self.limits.max_line)
        for label, text in self._texts():
            for _ in scanner.days(label, text):
                pass

    def _today(self) -> date:
        """The NEM date that IntervalDates may not be too far past."""
        return self.today or datetime.now(NEM_TIME).date()

    def _superseded(self) -> set[int]:
        """The first pass: the positions (among all 300 records) of the superseded rows.

        Most files hold one row per (NMI, suffix, date), so it first only looks for keys that
        come more than once, scanning the bytes for 200 and 300 records; only when some do does
        it read those rows' UpdateDateTimes. It checks nothing: the second pass checks every
        record before it yields anything that record decides.
        """
        repeated = self._repeated_keys()
        if not repeated:
            return set()
        ranks = self._ranks({seq for seqs in repeated for seq in seqs})
        losers: set[int] = set()
        for seqs in repeated:
            winner = max(seqs, key=ranks.__getitem__)
            losers.update(seq for seq in seqs if seq != winner)
        return losers

    def _repeated_keys(self) -> list[list[int]]:
        """The positions of the 300 records of each (NMI, suffix, date) that has more than one."""
        first: dict[tuple[bytes, bytes, bytes], int] = {}
        repeats: dict[tuple[bytes, bytes, bytes], list[int]] = {}
        seq = 0
        lines = _LineBudget(self.limits)
        for label, binary in self._binaries():
            nmi = suffix = b""
            for is_200, nmi_or_empty, suffix_or_empty, day in _record_keys(binary, label, lines):
                if is_200:
                    nmi, suffix = nmi_or_empty, suffix_or_empty
                    continue
                seq += 1
                key = (nmi, suffix, day)
                earlier = first.setdefault(key, seq)
                if earlier != seq:
                    repeats.setdefault(key, [earlier]).append(seq)
        return list(repeats.values())

    def _ranks(self, wanted: set[int]) -> dict[int, tuple[int, int]]:
        """For the 300 records at positions ``wanted``: (UpdateDateTime as yyyymmddhhmmss, or 0
        without one; position). The larger wins: the later stamp, then on equal stamps the later
        row."""
        ranks: dict[int, tuple[int, int]] = {}
        seq = 0
        for label, text in self._texts():
            count = 48
            for record in _records(text, label, self.limits.max_line):
                if record.startswith("300,"):
                    seq += 1
                    if seq in wanted:
                        # UpdateDateTime is field count + 5 of count + 7: rsplit finds it from
                        # the end, whatever the values hold.
                        after = record.count(",") - count - 4
                        stamp = record.rsplit(",", after)[1] if after > 0 else ""
                        ranks[seq] = (_stamp_rank(stamp), seq)
                elif record.startswith("200,"):
                    fields = record.split(",")
                    length = fields[8] if len(fields) > 8 else ""
                    minutes = int(length) if _is_digits(length) else 0
                    count = reads.intervals_in_day(minutes) or count
        return ranks

    def _texts(self) -> Iterator[tuple[str, TextIO]]:
        """(label, text) for each CSV text in the source: the file, or each member of a zip."""
        for label, binary in self._binaries():
            # NEM12 is ASCII. latin-1 decodes any byte, so a stray byte is reported by the field
            # check that meets it, with its line, instead of as an undecodable stream.
            yield label, io.TextIOWrapper(binary, encoding="latin-1", newline=None)

    def _binaries(self) -> Iterator[tuple[str, IO[bytes]]]:
        """(label, bytes) for each CSV text in the source: the file, or each member of a zip;
        each counted against ``limits.max_bytes`` (all members together) as it is read, and
        stopped by ``stop``."""
        self._spent_before += self._budget.spent
        budget = self._budget = _ByteBudget(self.limits.max_bytes, self.stop)
        with self._open() as raw:
            magic = raw.read(4)
            raw.seek(0)
            if not magic:
                raise NEM12Error("the file is empty: no 100 header", source=self.name)
            if magic in _ZIP_MAGIC:
                for label, member in self._zip_members(raw):
                    yield label, _counted(member, label, budget)
            elif magic.startswith(_GZIP_MAGIC):
                with gzip.GzipFile(fileobj=raw) as unzipped:
                    # A GzipFile is a binary stream, though typeshed does not call it IO[bytes].
                    yield self.name, _counted(cast(IO[bytes], unzipped), self.name, budget)
            else:
                yield self.name, _counted(raw, self.name, budget)

    def _open(self) -> BinaryIO:
        if isinstance(self._source, bytes):
            return io.BytesIO(self._source)
        try:
            return Path(self._source).open("rb")
        except OSError as exc:
            raise NEM12Error(f"cannot open the file: {exc.strerror}", source=self.name) from exc

    def _zip_members(self, raw: BinaryIO) -> Iterator[tuple[str, IO[bytes]]]:
        # The entry count first, from the end record: zipfile would read every entry of the
        # central directory into memory before the count could be checked.
        declared = _zip_entry_count(raw)
        if declared is not None and declared > self.limits.max_members:
            raise self._too_many_members(declared)
        try:
            archive = zipfile.ZipFile(raw)
        except _DAMAGED_ZIP as exc:
            raise NEM12Error(f"not a readable zip archive: {exc}", source=self.name) from exc
        with archive:
            if len(archive.infolist()) > self.limits.max_members:
                raise self._too_many_members(len(archive.infolist()))
            try:
                _refuse_overlaps(archive, raw, self.name)
            except _DAMAGED_ZIP as exc:
                raise NEM12Error(f"not a readable zip archive: {exc}", source=self.name) from exc
            # Directories and the resource forks macOS adds under __MACOSX/ hold no meter data.
            if any(not info.filename for info in archive.infolist()):
                raise NEM12Error("the zip archive has an entry without a name", source=self.name)
            members = [
                info
                for info in archive.infolist()
                if not info.is_dir() and not info.filename.startswith("__MACOSX/")
            ]
            if not members:
                raise NEM12Error("the zip archive holds no files", source=self.name)
            for info in members:
                label = f"{self.name}!{info.filename}"
                try:
                    member = archive.open(info)
                except _DAMAGED_ZIP as exc:
                    # RuntimeError: encrypted, or a compression method zipfile cannot undo;
                    # the others: a damaged directory or local header.
                    raise NEM12Error(
                        f"cannot read from the zip archive: {exc}", source=label
                    ) from exc
                with member:
                    yield label, member

    def _too_many_members(self, count: int) -> NEM12TooLarge:
        return NEM12TooLarge(
            f"the zip archive has {count:,} entries; at most {self.limits.max_members:,} are read",
            source=self.name,
        )


#: What zipfile raises on a damaged or hostile archive, besides BadZipFile: a directory that
#: points outside the file (ValueError, OSError on seek), cut short (EOFError, struct.error), an
#: undecodable name (UnicodeDecodeError, a ValueError), encryption or a compression method it
#: cannot undo (RuntimeError and its subclass for what is not implemented).
_DAMAGED_ZIP = (
    zipfile.BadZipFile,
    ValueError,
    EOFError,
    struct.error,
    OSError,
    RuntimeError,
)


def _zip_entry_count(raw: BinaryIO) -> int | None:
    """The number of entries a zip's end-of-central-directory record declares (None when it
    cannot be found, or says zip64: zipfile then reports or reads it, and the count after)."""
    raw.seek(0, io.SEEK_END)
    size = raw.tell()
    raw.seek(max(0, size - 22 - 0xFFFF))  # the record is 22 bytes, then a comment of up to 64 kB
    tail = raw.read()
    raw.seek(0)
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) - at < 22:
        return None
    (entries,) = struct.unpack_from("<H", tail, at + 10)
    return None if entries == 0xFFFF else int(entries)


def _refuse_overlaps(archive: zipfile.ZipFile, raw: BinaryIO, source: str) -> None:
    """Refuse a zip whose entries share data: each entry's local header and compressed data must
    lie apart from every other's and before the central directory. Zip bombs that reach a
    thousand-fold and more point many entries at one compressed kernel (or nest each entry's data
    inside the next's), so that it is inflated once per entry."""
    spans: list[tuple[int, int, str]] = []
    for info in archive.infolist():
        if info.header_offset < 0:
            raise NEM12Error(
                f"zip entry {info.filename[:100]!r} starts before the archive does", source=source
            )
        raw.seek(info.header_offset)
        header = raw.read(30)
        if len(header) < 30 or not header.startswith(b"PK\x03\x04"):
            raise NEM12Error(
                f"zip entry {info.filename[:100]!r} has no local header where the directory says",
                source=source,
            )
        name_length, extra_length = struct.unpack_from("<HH", header, 26)
        end = info.header_offset + 30 + name_length + extra_length + info.compress_size
        spans.append((info.header_offset, end, info.filename))
    spans.sort()
    limit = archive.start_dir
    followers: list[tuple[int, int, str] | None] = [*spans[1:], None]
    for (start, end, name), following in zip(spans, followers[: len(spans)], strict=True):
        boundary = following[0] if following is not None else limit
        if end > boundary:
            other = following[2] if following is not None else "the central directory"
            raise NEM12Error(
                f"zip entry {name[:100]!r} (bytes {start:,}-{end:,}) overlaps"
                f" {other[:100]!r}: entries that share data are refused (a zip bomb's trick)",
                source=source,
            )
    raw.seek(0)


class _ByteBudget:
    """Bytes read from a source, once decompressed, against its limit; and its stop event."""

    __slots__ = ("limit", "spent", "stop")

    def __init__(self, limit: int, stop: threading.Event | None) -> None:
        self.limit = limit
        self.spent = 0
        self.stop = stop

    def spend(self, size: int, label: str) -> None:
        if self.stop is not None and self.stop.is_set():
            raise ReadCancelled(label)
        self.spent += size
        if self.spent > self.limit:
            raise NEM12TooLarge(
                f"more than {self.limit:,} bytes once decompressed: refused as a decompression"
                " bomb",
                source=label,
            )


class _Counted(io.RawIOBase):
    """A binary stream whose reads are counted against a ``_ByteBudget``."""

    def __init__(self, inner: IO[bytes], label: str, budget: _ByteBudget) -> None:
        super().__init__()
        self._inner = inner
        self._label = label
        self._budget = budget

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        size: int = self._inner.readinto(buffer)  # type: ignore[attr-defined]
        self._budget.spend(size, self._label)
        return size


def _counted(inner: IO[bytes], label: str, budget: _ByteBudget) -> IO[bytes]:
    """``inner``, buffered, every byte read from it counted against ``budget``."""
    return io.BufferedReader(_Counted(inner, label, budget), buffer_size=_BLOCK)


class _LineBudget:
    """Physical lines read by the first pass, over all members, against ``max_lines``."""

    __slots__ = ("limits", "read")

    def __init__(self, limits: ReadLimits) -> None:
        self.limits = limits
        self.read = 0


def _record_keys(
    binary: IO[bytes], label: str, lines: _LineBudget, *, keys: bool = True
) -> Iterator[tuple[bytes, bytes, bytes, bytes]]:
    """(b"2", NMI, suffix, b"") for each 200 record, (b"", b"", b"", IntervalDate) for each 300.

    Scans blocks of bytes with one regular expression: a line starts with 200 or 300 exactly
    where the second pass starts such a record, so both count the same 300 records. It also
    counts the lines (ends as the second pass reads them: \\n, \\r\\n or \\r) and finds any line
    too long, in C-speed scans of each block, and refuses the source at the first limit passed
    (``NEM12TooLarge`` for too many lines, ``NEM12Error`` naming a line too long). Without
    ``keys``, it only does that, and yields nothing.
    """
    limits = lines.limits
    max_line = limits.max_line
    done = 0  # complete lines of this member before the one ``tail`` holds
    tail = b"\n"  # the stream starts a line; ``tail`` is the last, unfinished one, after a \n
    carriage = False  # the previous block ended with \r: a \n starting this one ends no line
    try:
        while block := binary.read(_BLOCK):
            if carriage and block.startswith(b"\n"):
                block = block[1:]
            carriage = block.endswith(b"\r")
            if b"\r" in block:  # lines end \r\n (a copy), or rarely \r alone (another)
                block = block.replace(b"\r\n", b"\n")
                if b"\r" in block:
                    block = block.replace(b"\r", b"\n")
            data = tail + block
            cut = data.rfind(b"\n")  # >= 0: ``tail`` starts with one
            ends = data.count(b"\n", 1, cut + 1)
            long = _long_line(data, cut, max_line)
            if long is not None:
                raise _line_too_long(label, done + data.count(b"\n", 1, long) + 1, max_line)
            if lines.read + ends > limits.max_lines:
                raise _too_many_lines(label, done + limits.max_lines - lines.read + 1, limits)
            lines.read += ends
            done += ends
            tail = data[cut:]
            if len(tail) > max_line:  # the unfinished line already has max_line characters
                raise _line_too_long(label, done + 1, max_line)
            # (No 200 or 300 record in a block of blank lines, or of noise: no search.)
            if keys and b"00," in data:
                yield from _KEYS.findall(data, 0, cut)
    except (OSError, EOFError, zlib.error, zipfile.BadZipFile):
        # Damaged data: the second pass stops at the same place and says which line.
        return
    if len(tail) > 1:  # a last line without its end
        if lines.read + 1 > limits.max_lines:
            raise _too_many_lines(label, done + 1, limits)
        lines.read += 1
    if keys:
        yield from _KEYS.findall(tail)


def _long_line(data: bytes, cut: int, max_line: int) -> int | None:
    """Where the first line of ``data[1:cut]`` with ``max_line`` characters or more starts, or None.

    Such a line holds a whole window of ``max_line // 2`` bytes starting at a multiple of that
    width, so only windows without a line end are looked at: a few ``find`` calls a block.
    """
    width = max(max_line // 2, 1)
    checked = 0  # lines before here are known to be short
    for start in range(1, cut - width + 1, width):
        if start < checked or data.find(b"\n", start, start + width) >= 0:
            continue
        begin = data.rfind(b"\n", 0, start) + 1
        end = data.find(b"\n", start, cut + 1)
        if end - begin >= max_line:
            return begin
        checked = end
    return None


def _line_too_long(label: str, line: int, max_line: int) -> NEM12Error:
    return NEM12Error(f"a line longer than {max_line:,} characters", source=label, line=line)


def _too_many_lines(label: str, line: int, limits: ReadLimits) -> NEM12TooLarge:
    return NEM12TooLarge(
        f"more than {limits.max_lines:,} lines (blank ones count): refused as a bomb",
        source=label,
        line=line,
    )


def _physical_lines(text: TextIO, source: str, max_line: int = MAX_LINE) -> Iterator[str]:
    """The lines of ``text`` as read, line ends kept, each cut at ``max_line`` characters.

    Data that cannot be read (a damaged zip member or gzip stream) is a NEM12Error naming the last
    line that could be.
    """
    number = 0
    try:
        for physical in iter(partial(text.readline, max_line), ""):
            number += 1
            yield physical
    except (OSError, EOFError, zlib.error, zipfile.BadZipFile) as exc:
        raise NEM12Error(
            f"the data cannot be read past this line: {exc}", source=source, line=number
        ) from exc


def _records(text: TextIO, source: str, max_line: int = MAX_LINE) -> Iterator[str]:
    """Each record of ``text``, a 300 record broken across lines joined as ``_continues`` says.

    The second pass (``_Scanner``) reads lines itself, faster, by the same rules; this serves the
    first pass, which reads the UpdateDateTime of rows that share a date.
    """
    record = ""
    for number, physical in enumerate(_physical_lines(text, source, max_line), 1):
        line = physical.rstrip()
        if number == 1 and line.startswith(_BOM):
            line = line[len(_BOM) :]
        if not line:
            continue
        if record and len(record) < max_line and _continues(record, line):
            record += line
            continue
        if record:
            yield record
        record = line
    if record:
        yield record


def _continues(record: str, line: str) -> bool:
    """Whether ``line`` is the rest of a 300 ``record`` broken across lines.

    One of AEMO's scenario files has such a break. It is joined back only when that is
    unambiguous: the record has not reached its QualityMethod yet, exactly one side of the break
    has the comma, and the line starts with a value, not a record indicator.
    """
    return (
        record.startswith("300,")
        and record.endswith(",") != line.startswith(",")
        and line.partition(",")[0] not in _RECORD_INDICATORS
        and _HAS_QUALITY_FIELD.search(record) is None
        and _STARTS_LIKE_VALUE.match(line) is not None
    )


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


class _Scanner:
    """The second pass: every record checked in order, every value parsed, winners yielded."""

    def __init__(
        self, stats: ReadStats, losers: set[int], today: date, max_line: int = MAX_LINE
    ) -> None:
        self.stats = stats
        self.losers = losers
        self.today = today
        self.max_line = max_line
        self.seq = 0  # 300 records seen in the source so far
        self.source = ""
        self.dates: dict[str, date] = {}
        self.stamps: dict[str, datetime | None] = {"": None}
        # yyyymmdd -> that day's midnight, for the dates of stamps already checked: a file's
        # stamps are many (one a row, near enough) but fall on few days.
        self.stamp_days: dict[str, datetime] = {}
        self.values: dict[int, _Values] = {}  # unit scale -> its value cache
        # interval count -> flag -> that flag for every interval of a day: shared strings
        self.uniform: dict[int, dict[str, str]] = {}
        self.last_400 = 0  # line of the latest 400 record

    def error(self, message: str, line: int | None, field: str | None = None) -> NEM12Error:
        return NEM12Error(message, source=self.source, line=line, field=field)

    def days(self, source: str, text: TextIO) -> Iterator[IntervalDay]:
        """The winning days of one CSV text, each yielded once its records are all checked."""
        self.source = source
        losers = self.losers
        methods = _QUALITY_METHODS
        null = reads.NULL_QUALITY
        dates = self.dates
        stamps = self.stamps
        seq = self.seq
        header = ended = False
        channel: _Channel | None = None
        channel_stats: ChannelStats | None = None
        waiting: _Waiting | None = None
        value_of = self.value_cache(0).__getitem__
        plain = True
        count = 0
        uniform: dict[str, str] = {}  # flag -> that flag for every interval of a day
        kind = ""
        max_line = self.max_line
        lines = _physical_lines(text, source, max_line)
        number = line = rows = 0
        for physical in lines:
            number += 1
            if physical == "\n":  # a blank line: nothing to check, and bombs are made of them
                continue
            record = physical.rstrip()
            if record[:4] not in _RECORD_STARTS or len(physical) >= max_line:
                record = self.rare_line(physical, record, number)
                if not record:
                    continue
            line = number
            if ended:
                raise self.error(
                    "a record after the 900 end-of-data record", line, "RecordIndicator"
                )
            fields = record.split(",")
            previous, kind = kind, fields[0]
            if waiting is not None and kind != "400":
                day = self.close(waiting)
                waiting = None
                if day is not None:
                    yield day
            if kind == "300" and channel is not None:
                # The hot path: one NEM date of the channel in force.
                size = len(fields)
                at = count + 2  # where QualityMethod is
                flag = methods.get(fields[at]) if size > at else None
                if flag is None:
                    fields, joined = self.rejoin(record, channel, line, lines)
                    number += joined
                    size = len(fields)
                    flag = methods[fields[at]]
                date_text = fields[1]
                day_of = dates.get(date_text) or self.date(date_text, line, "IntervalDate")
                stamp_text = fields[at + 3] if size > at + 3 else ""
                stamp = (
                    stamps[stamp_text]
                    if stamp_text in stamps
                    else self.stamp(stamp_text, line, "UpdateDateTime")
                )
                if size > at + 5 and any(fields[at + 5 :]):
                    raise self.error("a field after MSATSLoadDateTime", line, f"field {size}")
                texts = fields[2:at]
                try:
                    values = tuple(map(value_of, texts))
                except _BadValue as bad:
                    raise self.error(
                        bad.message,
                        line,
                        f"IntervalValue{texts.index(bad.text) + 1}",
                    ) from None
                seq += 1
                rows += 1
                if channel_stats is None:
                    channel_stats = self.channel_stats(channel, day_of)
                channel_stats.rows += 1
                if day_of < channel_stats.first_day:
                    channel_stats.first_day = day_of
                elif day_of > channel_stats.last_day:
                    channel_stats.last_day = day_of
                loser = seq in losers
                if loser:
                    channel_stats.superseded += 1
                if flag == "V":
                    waiting = _Waiting(channel, day_of, values, stamp, line=line, loser=loser)
                    continue
                if loser:
                    continue
                stored: str | None
                if flag == null:
                    values = (None,) * count
                    stored = "," * (count - 1)
                    channel_stats.missing += count
                else:
                    channel_stats.missing += texts.count("")
                    # Every value was parsed and checked above; where the texts are written as
                    # the store writes those values, they are stored as they are.
                    stored = ",".join(texts) if plain else None
                    if stored is not None and _STORED_VALUES.fullmatch(stored) is None:
                        stored = None
                qualities = uniform[flag]
                channel_stats.qualities[flag] += count
                yield _interval_day(
                    channel.nmi,
                    channel.suffix,
                    day_of,
                    channel.minutes,
                    values,
                    qualities,
                    stamp,
                    channel.uom,
                    source,
                    line,
                    stored,
                )
            elif not header and kind != "100":
                raise self.error(
                    "no 100 header: a NEM12 file starts with 100,NEM12,... but this one starts"
                    f" with a {kind[:20]!r} record",
                    line,
                    "RecordIndicator",
                )
            elif kind == "300":
                raise self.error("a 300 record before any 200 record", line, "RecordIndicator")
            elif kind == "400":
                if waiting is None:
                    raise self.error(
                        "a 400 record must follow a 300 record whose QualityMethod is V",
                        line,
                        "RecordIndicator",
                    )
                self.run(waiting, fields, line)
            elif kind == "200":
                channel = self.channel(fields, line)
                channel_stats = None
                count = channel.count
                uniform = self.uniform.get(count) or self.uniform.setdefault(
                    count, {flag: flag * count for flag in "AEFNS"}
                )
                value_of = self.value_cache(channel.scale or 0).__getitem__
                plain = not channel.scale  # values as written, not moved to kWh
            elif kind == "500":
                if previous not in ("300", "400", "500"):
                    raise self.error(
                        "a 500 record must follow a 300 or 400 record", line, "RecordIndicator"
                    )
            elif kind == "900":
                if rows == 0:
                    raise self.error("no interval data: the file has no 300 records", line)
                ended = True
            elif kind == "100":
                if header:
                    raise self.error("a second 100 header", line, "RecordIndicator")
                self.header(fields, line)
                header = True
            elif kind in ("250", "550"):
                raise self.error(
                    f"a {kind} record is NEM13 accumulation data, which cannot be rated for a"
                    " free window; a NEM12 file holds 200/300 interval data",
                    line,
                    "RecordIndicator",
                )
            else:
                raise self.error(
                    f"unknown record indicator {kind[:20]!r}: NEM12 records are 100, 200, 300,"
                    " 400, 500 and 900",
                    line,
                    "RecordIndicator",
                )
        self.seq = seq
        if not ended:
            if line == 0:
                raise self.error("the file is empty: no 100 header", None)
            raise self.error("the file ends without its 900 end-of-data record", line)

    def value_cache(self, scale: int) -> _Values:
        """The parsed values of a unit's scale, shared by every channel in that unit."""
        cache = self.values.get(scale)
        if cache is None:
            cache = self.values[scale] = _Values(scale)
        return cache

    def channel_stats(self, channel: _Channel, day: date) -> ChannelStats:
        """The stats of ``channel``'s NMI and suffix, made on their first row."""
        key = (channel.nmi, channel.suffix)
        stats = self.stats.channels.get(key)
        if stats is None:
            stats = self.stats.channels[key] = ChannelStats(channel.nmi, channel.suffix, day, day)
        stats.units.add(channel.uom)
        stats.interval_minutes.add(channel.minutes)
        return stats

    def header(self, fields: list[str], line: int) -> None:
        """Check a 100 record: NEM12, with a valid DateTime when it has one."""
        version = fields[1].upper() if len(fields) > 1 else ""
        if version == "NEM13":
            raise self.error(
                "NEM13 accumulation data cannot be rated for a free window: it holds register"
                " reads between two dates, not interval values; freehours needs NEM12",
                line,
                "VersionHeader",
            )
        if version != "NEM12":
            raise self.error(
                f"VersionHeader {version[:20]!r}: not a NEM12 file", line, "VersionHeader"
            )
        created = fields[2] if len(fields) > 2 else ""
        if created:
            moment = self.stamp(created, line, "DateTime")
            if self.stats.created is None:
                self.stats.created = moment

    def channel(self, fields: list[str], line: int) -> _Channel:
        """Check a 200 record and return the channel it opens."""
        size = len(fields)
        if size < 9:
            raise self.error(
                f"the 200 record has {size} fields; it needs at least 9, up to IntervalLength",
                line,
                _FIELDS_200[size],
            )
        if size > 10 and any(fields[10:]):
            raise self.error("a field after NextScheduledReadDate", line, f"field {size}")
        nmi, suffix = fields[1], fields[4]
        try:
            reads.check_nmi(nmi, "NMI")
            reads.check_suffix(suffix, "NMISuffix")
        except RangeError as exc:
            raise self.error(exc.reason, line, exc.field) from None
        unit = fields[7]
        if not _NAME.fullmatch(unit):
            raise self.error(f"UOM {unit[:20]!r} is not a unit of measure", line, "UOM")
        scale = ENERGY_UNITS.get(unit.lower())
        length = fields[8]
        minutes = int(length) if _is_digits(length) else 0
        if minutes not in reads.INTERVAL_MINUTES:
            raise self.error(
                f"IntervalLength {length[:20]!r} is not 5, 15 or 30 minutes",
                line,
                "IntervalLength",
            )
        if size > 9 and fields[9]:
            self.any_date(fields[9], line, "NextScheduledReadDate")
        uom = "KWH" if scale is not None else unit.upper()
        return _Channel(nmi, suffix, uom, scale=scale, minutes=minutes, line=line)

    def rare_line(self, physical: str, line: str, number: int) -> str:
        """A line that does not start a record as most do: refused when too long; without its
        byte order mark when it is the first; otherwise as it is (blank, or not a record)."""
        if len(physical) >= self.max_line and not physical.endswith("\n"):
            raise self.error(f"a line longer than {self.max_line:,} characters", number)
        if number == 1 and line.startswith(_BOM):
            return line[len(_BOM) :]
        return line

    def rejoin(
        self, record: str, channel: _Channel, line: int, lines: Iterator[str]
    ) -> tuple[list[str], int]:
        """A 300 record that stops short of its QualityMethod, joined with the lines that
        continue it (see ``_continues``): its fields and how many more lines it took. Refused
        with the reason its shape is wrong when no line continues it."""
        at = channel.count + 2
        taken = 0
        while True:
            fields = record.split(",")
            if len(fields) > at and fields[at] in _QUALITY_METHODS:
                return fields, taken
            rest = ""
            for physical in lines:
                taken += 1
                if len(physical) >= self.max_line and not physical.endswith("\n"):
                    raise self.error(
                        f"a line longer than {self.max_line:,} characters", line + taken
                    )
                rest = physical.rstrip()
                if rest:
                    break
            if not rest or not _continues(record, rest):
                raise self.shape_error(fields, channel, line)
            record += rest
            self.stats.joined_lines += 1
            if len(record) > self.max_line:
                raise self.error(f"a record longer than {self.max_line:,} characters", line)

    def shape_error(self, fields: list[str], channel: _Channel, line: int) -> NEM12Error:
        """Why a 300 record has no QualityMethod where its channel's IntervalLength puts it."""
        count = channel.count
        needs = (
            f"IntervalLength {channel.minutes} (the 200 record on line {channel.line}) needs"
            f" {count} interval values"
        )
        found = next((i for i, text in enumerate(fields[2:]) if text[:1].isalpha()), None)
        if found is None:
            return self.error(
                f"the 300 record ends after {len(fields) - 2} fields without a QualityMethod;"
                f" {needs} and then a QualityMethod",
                line,
                f"IntervalValue{min(len(fields) - 1, count)}",
            )
        if found < count:
            return self.error(
                f"the 300 record has {found} interval values; {needs}",
                line,
                f"IntervalValue{found + 1}",
            )
        if found > count:
            return self.error(
                f"the 300 record has {found} interval values; {needs}", line, "QualityMethod"
            )
        return self.error(
            f"QualityMethod {fields[found + 2][:20]!r} is not a quality flag (A, E, F, N, S or V)"
            " with an optional two-digit method",
            line,
            "QualityMethod",
        )

    def run(self, waiting: _Waiting, fields: list[str], line: int) -> None:
        """Check a 400 record and add its run of intervals to the V row waiting for it."""
        size = len(fields)
        if size < 4:
            raise self.error(
                f"the 400 record has {size} fields; it needs StartInterval, EndInterval and"
                " QualityMethod",
                line,
                _FIELDS_400[size],
            )
        if size > 6 and any(fields[6:]):
            raise self.error("a field after ReasonDescription", line, f"field {size}")
        first_text, last_text = fields[1], fields[2]
        if not _is_digits(first_text):
            raise self.error(
                f"StartInterval {first_text[:20]!r} is not a number", line, "StartInterval"
            )
        if not _is_digits(last_text):
            raise self.error(f"EndInterval {last_text[:20]!r} is not a number", line, "EndInterval")
        first, last, count = int(first_text), int(last_text), waiting.channel.count
        if first != waiting.next_interval:
            raise self.error(
                f"StartInterval {first} where {waiting.next_interval} was due: the 400 records"
                " of a day cover its intervals in order from 1, without gaps or overlaps",
                line,
                "StartInterval",
            )
        if not first <= last <= count:
            raise self.error(
                f"EndInterval {last} is outside {first}-{count}, the rest of a day of"
                f" {count} intervals",
                line,
                "EndInterval",
            )
        flag = _QUALITY_METHODS.get(fields[3])
        if flag is None or flag == "V":
            raise self.error(
                f"QualityMethod {fields[3][:20]!r} is not a quality flag (A, E, F, N or S) with"
                " an optional two-digit method",
                line,
                "QualityMethod",
            )
        waiting.runs.append((first - 1, last, flag))
        waiting.next_interval = last + 1
        self.last_400 = line

    def close(self, waiting: _Waiting) -> IntervalDay | None:
        """A V row whose 400 records are all in, checked: its day, or None when superseded."""
        channel = waiting.channel
        count = channel.count
        if not waiting.runs:
            raise self.error(
                "QualityMethod V needs 400 records giving each interval's quality",
                waiting.line,
                "QualityMethod",
            )
        if waiting.next_interval <= count:
            raise self.error(
                f"the 400 records cover intervals 1-{waiting.next_interval - 1} of the day's"
                f" {count}",
                self.last_400,
                "EndInterval",
            )
        if waiting.loser:
            return None
        qualities = "".join(flag * (end - first) for first, end, flag in waiting.runs)
        values = waiting.values
        null = reads.NULL_QUALITY
        if null in qualities:
            values = tuple(
                None if flag == null else value
                for value, flag in zip(values, qualities, strict=True)
            )
        stats = self.stats.channels[(channel.nmi, channel.suffix)]
        for flag in set(qualities):
            stats.qualities[flag] += qualities.count(flag)
        stats.missing += sum(value is None for value in values)
        return IntervalDay(
            channel.nmi,
            channel.suffix,
            waiting.day,
            channel.minutes,
            values,
            qualities,
            waiting.stamp,
            channel.uom,
            self.source,
            waiting.line,
        )

    def any_date(self, text: str, line: int, field: str) -> date:
        """A date written yyyymmdd, inside ``freehours.domain.reads``' range."""
        day = _date(text)
        if day is None:
            raise self.error(f"{field} {text[:20]!r} is not a date (yyyymmdd)", line, field)
        try:
            return reads.check_date(day, field)
        except RangeError as exc:
            raise self.error(exc.reason, line, field) from None

    def date(self, text: str, line: int, field: str) -> date:
        """An IntervalDate written yyyymmdd: a day a meter can have read by ``today``."""
        day = _date(text)
        if day is None:
            raise self.error(f"{field} {text[:20]!r} is not a date (yyyymmdd)", line, field)
        try:
            reads.check_read_date(day, self.today, field)
        except RangeError as exc:
            raise self.error(exc.reason, line, field) from None
        if len(self.dates) > _CACHE_LIMIT:
            self.dates.clear()
        self.dates[text] = day
        return day

    def stamp(self, text: str, line: int, field: str) -> datetime:
        """A NEM time written yyyymmddhhmmss (or yyyymmddhhmm)."""
        digits = text + "00" if len(text) == 12 else text
        midnight = self.stamp_days.get(digits[:8]) if len(digits) == 14 else None
        # A day already checked: the time of day is all that is left to read (and a moment
        # of that day is in range), in half the time.
        moment = _time_of(midnight, digits) if midnight is not None else _moment(digits)
        if moment is None:
            raise self.error(
                f"{field} {text[:20]!r} is not a date and time (yyyymmddhhmmss)", line, field
            )
        if midnight is None:
            try:
                reads.check_moment(moment, field)
            except RangeError as exc:
                raise self.error(exc.reason, line, field) from None
            if len(self.stamp_days) > _CACHE_LIMIT:
                self.stamp_days.clear()
            self.stamp_days[digits[:8]] = moment.replace(hour=0, minute=0, second=0)
        if len(self.stamps) > _CACHE_LIMIT:
            self.stamps.clear()
            self.stamps[""] = None
        self.stamps[text] = moment
        return moment


def _is_digits(text: str) -> bool:
    """ASCII digits only (str.isdigit also takes the likes of "²", which int() refuses)."""
    return text.isascii() and text.isdigit()


def _stamp_rank(text: str) -> int:
    """An UpdateDateTime as the number yyyymmddhhmmss, to compare; 0 when absent (or invalid,
    which the second pass reports)."""
    if not _is_digits(text):
        return 0
    if len(text) == 12:
        return int(text) * 100
    return int(text) if len(text) == 14 else 0


def _date(text: str) -> date | None:
    """``yyyymmdd`` as a date, or None."""
    if len(text) != 8 or not _is_digits(text):
        return None
    try:
        return date(int(text[:4]), int(text[4:6]), int(text[6:]))
    except ValueError:
        return None


def _moment(digits: str) -> datetime | None:
    """``yyyymmddhhmmss`` as a moment in NEM time, or None."""
    if len(digits) != 14 or not _is_digits(digits):
        return None
    try:
        return datetime.fromisoformat(f"{digits[:8]}T{digits[8:]}").replace(tzinfo=NEM_TIME)
    except ValueError:
        return None


def _time_of(midnight: datetime, digits: str) -> datetime | None:
    """``yyyymmddhhmmss`` as a moment, its day's ``midnight`` known: as ``_moment`` reads it."""
    if not _is_digits(digits):
        return None
    try:
        return datetime(
            midnight.year,
            midnight.month,
            midnight.day,
            int(digits[8:10]),
            int(digits[10:12]),
            int(digits[12:]),
            tzinfo=NEM_TIME,
        )
    except ValueError:
        return None


# IntervalDay is frozen, so its generated __init__ sets each field through object.__setattr__,
# which finds the slot by name every time. The hot path above (one call per 300 record) sets the
# slots through their descriptors instead: the same object in about half the time. Importing
# fails if IntervalDay's fields ever change, so this cannot silently fall behind.
_DAY_FIELDS = (
    "nmi",
    "suffix",
    "day",
    "interval_minutes",
    "values",
    "qualities",
    "update_datetime",
    "uom",
    "source",
    "line",
    "stored_form",
)
if tuple(day_field.name for day_field in fields(IntervalDay)) != _DAY_FIELDS:
    raise ImportError("IntervalDay's fields changed: update _interval_day in this module")
(
    _set_nmi,
    _set_suffix,
    _set_day,
    _set_interval_minutes,
    _set_values,
    _set_qualities,
    _set_update_datetime,
    _set_uom,
    _set_source,
    _set_line,
    _set_stored_form,
) = (getattr(IntervalDay, name).__set__ for name in _DAY_FIELDS)


def _interval_day(  # noqa: PLR0917 - the positional fields of IntervalDay(...) itself
    nmi: str,
    suffix: str,
    day: date,
    interval_minutes: int,
    values: tuple[Decimal | None, ...],
    qualities: str,
    update_datetime: datetime | None,
    uom: str,
    source: str,
    line: int,
    stored_text: str | None,
) -> IntervalDay:
    """``IntervalDay(nmi, suffix, ...)``, built faster (see above)."""
    interval_day: IntervalDay = object.__new__(IntervalDay)
    _set_nmi(interval_day, nmi)
    _set_suffix(interval_day, suffix)
    _set_day(interval_day, day)
    _set_interval_minutes(interval_day, interval_minutes)
    _set_values(interval_day, values)
    _set_qualities(interval_day, qualities)
    _set_update_datetime(interval_day, update_datetime)
    _set_uom(interval_day, uom)
    _set_source(interval_day, source)
    _set_line(interval_day, line)
    _set_stored_form(interval_day, None if stored_text is None else StoredForm(values, stored_text))
    return interval_day
