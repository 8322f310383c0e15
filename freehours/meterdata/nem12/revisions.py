"""The first pass: where each 200 and 300 record starts, one small entry per (NMI, suffix,
date), and the UpdateDateTimes that decide which of a repeated date's rows wins."""

from __future__ import annotations

import zipfile
import zlib
from collections.abc import Generator, Iterator
from typing import IO

from freehours.meterdata.nem12.common import (
    _BLOCK,
    _is_digits,
)
from freehours.meterdata.nem12.source import (
    _line_too_long,
    _LineBudget,
    _too_many_lines,
)

Channel = tuple[bytes, bytes]  # (NMI, suffix) of a 200 record


#: What the first pass compares of a 300 record's IntervalDate: the nine bytes after ``300,``,
#: the date and the comma after it. Rows with the same date (eight digits, when it is valid)
#: share them; a date of another length never passes for a valid one (and the second pass refuses
#: its row).
_DATE_KEY = slice(4, 13)


#: Before the first 200 record: no channel yet (the second pass refuses a 300 record there).
_NO_CHANNEL: Channel = (b"", b"")


def _channel_dates(
    binary: IO[bytes], label: str, lines: _LineBudget, *, keys: bool = True
) -> Iterator[tuple[Channel, list[bytes]]]:
    """(NMI, suffix) of the 200 record in force and the IntervalDates of the 300 records under
    it, in file order, a run at a time (a channel's rows may come in several runs).

    Reads a block of bytes at a time and splits it into lines in C (``bytes.splitlines`` ends a
    line where universal newlines do: \\n, \\r\\n or \\r), so that it counts the lines as the
    second pass reads them, finds any line too long, and refuses the source at the first limit
    passed (``NEM12TooLarge`` for too many lines, ``NEM12Error`` naming a line too long). Then it
    picks out the 200 and 300 records from those lines, the same lines the second pass reads, so
    that both count the same 300 records. Without ``keys``, it only checks, and yields nothing.
    """
    channel = _NO_CHANNEL
    limits = lines.limits
    max_line = limits.max_line
    done = 0  # complete lines of this member before the one ``tail`` holds
    # The last, unfinished line after the line end before it: the stream starts a line.
    tail = b"\n"
    try:
        while block := binary.read(_BLOCK):
            data = tail + block
            held = data.endswith(b"\r")  # its \n may start the next block: kept for it
            if held:
                data = data[:-1]
            last = max(data.rfind(b"\n"), data.rfind(b"\r"))  # >= 0: ``data`` starts with one
            unfinished = last + 1 < len(data)
            # "" for the line end that starts ``data``, its lines, then the unfinished one
            if b"\r" in data:
                found = data.splitlines()
            else:  # lines ended by \n alone, as most files have them: a plainer scan
                found = data.split(b"\n")
                if not unfinished:
                    found.pop()  # the "" after the last line end
            ends = len(found) - unfinished  # the line ends in ``data``, its first included
            if max(map(len, found)) >= max_line:
                at = next(i for i, text in enumerate(found) if len(text) >= max_line)
                raise _line_too_long(label, done + at, max_line)
            ended = ends - 1  # lines this block finished
            if lines.read + ended > limits.max_lines:
                raise _too_many_lines(label, done + limits.max_lines - lines.read + 1, limits)
            lines.read += ended
            done += ended
            tail = data[last:] + (b"\r" if held else b"")
            # (No 200 or 300 record in a block of blank lines, or of noise: nothing to pick out.)
            if keys and b"00," in data:
                channel = yield from _runs(found[1 : len(found) - unfinished], channel)
    except (OSError, EOFError, zlib.error, zipfile.BadZipFile):
        # Damaged data: the second pass stops at the same place and says which line.
        return
    if len(tail) > 1:  # a last line without its end
        if lines.read + 1 > limits.max_lines:
            raise _too_many_lines(label, done + 1, limits)
        lines.read += 1
        if keys:  # (after a \n, whatever ended the line before)
            yield from _runs([tail[1:].rstrip(b"\r")], channel)


def _runs(
    lines: list[bytes], channel: Channel
) -> Generator[tuple[Channel, list[bytes]], None, Channel]:
    """The runs of 300 records in ``lines``, the first under ``channel``, each record's date as
    ``_DATE_KEY`` takes it; returns the channel in force after them."""
    dates: list[bytes] = []
    for line in lines:
        kind = line[:4]
        if kind == b"300,":
            dates.append(line[_DATE_KEY])
        elif kind == b"200,":
            fields = line.split(b",", 5)
            if len(fields) >= 5:
                if dates:
                    yield channel, dates
                    dates = []
                channel = (fields[1], fields[4])
    if dates:
        yield channel, dates
    return channel


def _stamp_rank(text: str) -> int:
    """An UpdateDateTime as the number yyyymmddhhmmss, to compare; 0 when absent (or invalid,
    which the second pass reports)."""
    if not _is_digits(text):
        return 0
    if len(text) == 12:
        return int(text) * 100
    return int(text) if len(text) == 14 else 0
