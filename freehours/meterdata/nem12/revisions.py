"""The first pass: where each 200 and 300 record starts, one small entry per (NMI, suffix,
date), and the UpdateDateTimes that decide which of a repeated date's rows wins."""

from __future__ import annotations

import re
import zipfile
import zlib
from collections.abc import Iterator
from typing import IO

from freehours.meterdata.nem12.common import (
    _BLOCK,
    _is_digits,
)
from freehours.meterdata.nem12.source import (
    _line_too_long,
    _LineBudget,
    _long_line,
    _too_many_lines,
)

#: Where a 200 or 300 record starts: the first pass's view of a file.
_KEYS = re.compile(rb"\n(?:(2)00,([^,\n]*),[^,\n]*,[^,\n]*,([^,\n]*)|300,([^,\n]*))")


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


def _stamp_rank(text: str) -> int:
    """An UpdateDateTime as the number yyyymmddhhmmss, to compare; 0 when absent (or invalid,
    which the second pass reports)."""
    if not _is_digits(text):
        return 0
    if len(text) == 12:
        return int(text) * 100
    return int(text) if len(text) == 14 else 0
