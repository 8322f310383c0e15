"""A NEM12 source opened and bounded: plain, gzip or zip (overlapping entries refused), its bytes
counted as they are decompressed, its physical lines and records checked against ``ReadLimits``."""

from __future__ import annotations

import io
import re
import struct
import threading
import zipfile
import zlib
from collections.abc import Iterator
from itertools import chain
from typing import IO, BinaryIO

from freehours.errors import NEM12Error
from freehours.meterdata.nem12.common import (
    _BLOCK,
    _BOM,
    _HAS_QUALITY_FIELD,
    _RECORD_INDICATORS,
    _STARTS_LIKE_VALUE,
    MAX_LINE,
    NEM12TooLarge,
    ReadCancelled,
    ReadLimits,
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


def _line_too_long(label: str, line: int, max_line: int) -> NEM12Error:
    return NEM12Error(f"a line longer than {max_line:,} characters", source=label, line=line)


def _too_many_lines(label: str, line: int, limits: ReadLimits) -> NEM12TooLarge:
    return NEM12TooLarge(
        f"more than {limits.max_lines:,} lines (blank ones count): refused as a bomb",
        source=label,
        line=line,
    )


#: Line breaks that ``str.splitlines`` knows besides \\r and \\n, which a line of NEM12 (read as
#: latin-1) never ends at: a block holding one of them is split by ``_LINE_END`` instead.
_OTHER_BREAKS = ("\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85")


_LINE_END = re.compile("\r\n|\r|\n")


def _lines(binary: IO[bytes], source: str, max_line: int = MAX_LINE) -> Iterator[str]:
    """The physical lines of ``binary`` read as latin-1, without their ends (\\n, \\r\\n or \\r,
    as universal newlines read them), blank ones included. NEM12 is ASCII; latin-1 decodes any
    byte, so that a stray one is reported by the field check that meets it, with its line, rather
    than as an undecodable stream.

    Read a block at a time and split in C, so that a line costs no call of its own. A line of
    ``max_line`` characters or more is refused (the first pass has refused one already, where it
    ran). Data that cannot be read (a damaged zip member or gzip stream) is a NEM12Error naming
    the last line that could be.
    """
    return chain.from_iterable(_line_blocks(binary, source, max_line))


def _line_blocks(binary: IO[bytes], source: str, max_line: int) -> Iterator[list[str]]:
    """The lines of each block of ``binary`` (see ``_lines``): the last, unfinished one is
    carried over to the next block; a \\r ending a block is too, as its \\n may start the next."""
    number = 0  # lines yielded so far
    tail = ""  # the unfinished line after the last block's last line end
    try:
        while block := binary.read(_BLOCK):
            text = tail + block.decode("latin-1")
            held = text.endswith("\r")
            if held:
                text = text[:-1]
            last = max(text.rfind("\n"), text.rfind("\r"))  # where the last whole line ends
            tail = text[last + 1 :] + ("\r" if held else "")
            if len(tail) > max_line:
                raise _line_too_long(source, number + 1, max_line)
            lines = _split(text)
            lines.pop()  # the unfinished line (or ""), now in ``tail``
            number += len(lines)
            yield lines
    except (OSError, EOFError, zlib.error, zipfile.BadZipFile) as exc:
        raise NEM12Error(
            f"the data cannot be read past this line: {exc}", source=source, line=number
        ) from exc
    if tail:
        yield _split(tail)[:1]  # the last line, ended by the end of the data (or by a \\r)


def _split(text: str) -> list[str]:
    """``text`` split at its line ends: the lines they end, then what follows the last ("" when
    ``text`` ends with one)."""
    if any(other in text for other in _OTHER_BREAKS):
        return _LINE_END.split(text)
    if "\r" not in text:  # lines ended by \n alone, as most files have them: a plainer scan
        return text.split("\n")
    lines = text.splitlines()
    if not text or text.endswith(("\n", "\r")):
        lines.append("")
    return lines


def _records(lines: Iterator[str], max_line: int = MAX_LINE) -> Iterator[str]:
    """Each record of ``lines`` (``_lines``), a 300 record broken across lines joined as
    ``_continues`` says.

    The second pass (``_Scanner``) joins lines itself, faster, by the same rules; this serves the
    first pass, which reads the UpdateDateTime of rows that share a date.
    """
    record = ""
    for number, physical in enumerate(lines, 1):
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
