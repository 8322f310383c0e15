"""``NEM12Reader`` and ``read_days``: a source read in two passes
(``freehours.meterdata.nem12``)."""

from __future__ import annotations

import gzip
import io
import threading
import zipfile
from collections.abc import Iterator
from datetime import date, datetime
from pathlib import Path
from typing import IO, BinaryIO, cast

from freehours.domain import reads
from freehours.domain.reads import IntervalDay
from freehours.domain.time import NEM_TIME
from freehours.errors import NEM12Error
from freehours.meterdata.nem12.common import (
    _GZIP_MAGIC,
    _ZIP_MAGIC,
    NEM12TooLarge,
    ReadLimits,
    ReadStats,
    Source,
    _is_digits,
)
from freehours.meterdata.nem12.revisions import (
    _channel_dates,
    _stamp_rank,
)
from freehours.meterdata.nem12.scanner import (
    _Scanner,
)
from freehours.meterdata.nem12.source import (
    _DAMAGED_ZIP,
    _ByteBudget,
    _counted,
    _LineBudget,
    _lines,
    _records,
    _refuse_overlaps,
    _zip_entry_count,
)


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
    stops the reading at its next block (``ReadCancelled``). With ``future``, IntervalDates past
    what a meter can have read by ``today`` are read rather than refused, and noted in ``stats``
    (``first_ahead``, ``last_ahead``): for the offline tools (``freehours bill``, ``nem12
    inspect``), which read simulated and reference data; what is stored never is.
    """

    def __init__(
        self,
        source: Source,
        *,
        name: str | None = None,
        today: date | None = None,
        limits: ReadLimits | None = None,
        stop: threading.Event | None = None,
        future: bool = False,
    ) -> None:
        self._source = source
        self.future = future
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
        scanner = _Scanner(stats, losers, self._today(), self.limits.max_line, future=self.future)
        for label, binary in self._binaries():
            stats.members.append(label)
            yield from scanner.days(label, binary)
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
            for _ in _channel_dates(binary, label, lines, keys=False):
                pass
        scanner = _Scanner(stats, set(), self._today(), self.limits.max_line, future=self.future)
        for label, binary in self._binaries():
            for _ in scanner.days(label, binary):
                pass

    def ahead_warning(self) -> str | None:
        """Once the source is read with ``future``: a warning naming its days past what a meter
        can have read by today, or None where it has none."""
        first, last = self.stats.first_ahead, self.stats.last_ahead
        if first is None or last is None:
            return None
        days = str(first) if first == last else f"{first} to {last}"
        return (
            f"{self.name}: {days} {'is' if first == last else 'are'} more than"
            f" {reads.READ_DAYS_AHEAD} days after today ({self._today()}), so no meter has read"
            f" {'it' if first == last else 'them'} yet: read as written here (simulated or"
            " reference data), but 'freehours nem12 import' and the API refuse such a file"
        )

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
        """The positions of the 300 records of each (NMI, suffix, date) that has more than one.

        A run of a channel's rows whose dates are all new to that channel (every run, in most
        files) is noted in one step; only a run that repeats a date is looked at row by row.
        """
        # (NMI, suffix) -> IntervalDate -> the position of its first 300 record
        first: dict[tuple[bytes, bytes], dict[bytes, int]] = {}
        repeats: dict[tuple[bytes, bytes, bytes], list[int]] = {}
        seq = 0
        lines = _LineBudget(self.limits)
        for label, binary in self._binaries():
            for channel, dates in _channel_dates(binary, label, lines):
                seen = first.setdefault(channel, {})
                run = dict(zip(dates, range(seq + 1, seq + 1 + len(dates)), strict=True))
                if len(run) == len(dates) and seen.keys().isdisjoint(run):
                    seen.update(run)
                else:
                    for position, day in enumerate(dates, seq + 1):
                        earlier = seen.setdefault(day, position)
                        if earlier != position:
                            repeats.setdefault((*channel, day), [earlier]).append(position)
                seq += len(dates)
        return list(repeats.values())

    def _ranks(self, wanted: set[int]) -> dict[int, tuple[int, int]]:
        """For the 300 records at positions ``wanted``: (UpdateDateTime as yyyymmddhhmmss, or 0
        without one; position). The larger wins: the later stamp, then on equal stamps the later
        row."""
        ranks: dict[int, tuple[int, int]] = {}
        seq = 0
        max_line = self.limits.max_line
        for label, binary in self._binaries():
            count = 48
            for record in _records(_lines(binary, label, max_line), max_line):
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
