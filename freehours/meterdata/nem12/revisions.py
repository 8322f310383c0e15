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
    carried = b""  # a byte read after a block, to see whether its \r ends a \r\n
    try:
        while block := carried + binary.read(_BLOCK):
            carried = b""
            if block.endswith(b"\r"):  # a \r\n is never split between two blocks
                carried = binary.read(1)
                if carried == b"\n":
                    block, carried = block + carried, b""
            longest = max_line  # characters a line may have, its end not counted, as read here
            ends = block.count(b"\n")
            if b"\r" in block:
                pairs = block.count(b"\r\n")
                if pairs == ends == block.count(b"\r"):
                    # Every line ends \r\n, as most files do (written on Windows): the \n ends
                    # each, and each is one byte longer than the second pass reads it.
                    longest = max_line + 1
                else:  # \r alone ends a line too (rarely): every end made a \n
                    block = block.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
                    ends = block.count(b"\n")
            data = tail + block
            cut = data.rfind(b"\n")  # >= 0: ``tail`` starts with one
            long = _long_line(data, cut, longest)
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
