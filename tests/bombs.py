"""Hostile NEM12 uploads, built in memory: the attacks of issue 13, for the tests and the
benchmarks alike."""

from __future__ import annotations

import gzip
import io
import struct
import zipfile

HEADER = b"100,NEM12,202607020000,MDA1,Ret1\n"


def gzipped(*parts: bytes, repeat: int = 1) -> bytes:
    """``parts`` gzipped, the last of them ``repeat`` times over: that one compressed once, as a
    gzip member of its own, repeated (a gzip stream may be several members, read as one)."""
    *first, last = parts
    head = gzip.compress(b"".join(first), 9) if first else b""
    return head + gzip.compress(last, 9) * repeat


def blank_line_bomb(lines: int = 20_000_000) -> bytes:
    """A gzip of a 100 header and ``lines`` blank lines (20 million: 39 kB in issue 13; 20 kB
    here)."""
    block = 1 << 20
    return gzipped(HEADER, b"\n" * block, repeat=max(lines // block, 1))


def zeros_bomb(size: int = 1 << 30) -> bytes:
    """A gzip of ``size`` zero bytes without a line end (1 GiB: about 1 MB)."""
    block = 1 << 20
    return gzipped(HEADER.rstrip(b"\n"), b"\0" * block, repeat=size // block)


def overlapping_zip(member: bytes, entries: int = 20) -> bytes:
    """A zip of one ``member`` whose central directory lists it ``entries`` times: each entry
    points at the same local header and compressed data, so a reader that trusts the directory
    inflates the member once per entry (issue 13: 20 entries over one 200 MB member, 4 GB)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("meter.csv", member)
    data = buffer.getvalue()
    end = data.rindex(b"PK\x05\x06")
    size, offset = struct.unpack_from("<II", data, end + 12)
    record = data[offset : offset + size]
    directory = record * entries
    end_record = struct.pack(
        "<4sHHHHIIH", b"PK\x05\x06", 0, 0, entries, entries, len(directory), offset, 0
    )
    return data[:offset] + directory + end_record


def nested_zip(first: bytes, second: bytes) -> bytes:
    """A zip of two members whose first entry's compressed size is stretched to take in the
    second's local header and data: entries nested inside each other, the overlapping zip bomb's
    other form."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("a.csv", first)
        archive.writestr("b.csv", second)
    data = bytearray(buffer.getvalue())
    end = data.rindex(b"PK\x05\x06")
    (offset,) = struct.unpack_from("<I", data, end + 16)
    # The first central record: its compressed size (offset 20) now runs to the directory.
    struct.pack_into("<I", data, offset + 20, offset - 30 - len("a.csv"))
    return bytes(data)


def short_rows_bomb(rows: int = 1_990_000) -> bytes:
    """A gzip of a channel and ``rows`` 300 records of one field each, all dates apart: invalid
    from its first row, but within the line limit (2 million), so that a reader that indexes
    every 300 record before it checks one holds millions of entries (about 400 MB here)."""
    channel = b"200,NMI0000001,E1B1,1,E1,N1,METER1,kWh,30,\n"
    body = b"".join(b"300,%08d,\n" % n for n in range(rows))
    return gzip.compress(HEADER + channel + body, 6)


def dotted_key(parts: int = 20_000) -> bytes:
    """A TOML plan body of one key of ``parts`` dotted parts (``a.a.a...=1``; issue 32: 20,000
    parts, 39 kB, took the API from 143 MB to 1.67 GB while ``tomllib`` read it)."""
    return b"a" + b".a" * (parts - 1) + b" = 1\n"


def nested_toml_arrays(depth: int = 5_000) -> bytes:
    """A TOML plan body of arrays nested ``depth`` deep (``tomllib`` recursed out: a 500)."""
    return b"a = " + b"[" * depth + b"]" * depth + b"\n"


def nested_inline_tables(depth: int = 5_000) -> bytes:
    """A TOML plan body of inline tables nested ``depth`` deep."""
    return b"a = " + b"{ b = " * depth + b"1" + b" }" * depth + b"\n"


def long_toml_integer(digits: int = 5_000) -> bytes:
    """A TOML plan body of an integer of ``digits`` digits (over ``int``'s 4,300: a 500)."""
    return b'id = "x"\ndaily_supply_charge = ' + b"9" * digits + b"\n"


def nested_json_arrays(depth: int = 5_000) -> bytes:
    """A CDR plan body of arrays nested ``depth`` deep."""
    return b'{"data": ' + b"[" * depth + b"]" * depth + b"}"


def long_json_integer(digits: int = 5_000) -> bytes:
    """A CDR plan body of an integer of ``digits`` digits."""
    return b'{"data": {"planId": ' + b"9" * digits + b"}}"


#: Issue 32's plan bodies: (name, Content-Type, body, the limit the refusal names).
PLAN_BOMBS: tuple[tuple[str, str, bytes, str], ...] = (
    ("TOML key of 20,000 dotted parts", "application/toml", dotted_key(), "dotted parts"),
    ("TOML key of 100,000 dotted parts", "application/toml", dotted_key(100_000), "dotted parts"),
    ("TOML arrays nested 5,000 deep", "application/toml", nested_toml_arrays(), "nesting"),
    ("TOML inline tables nested 5,000 deep", "application/toml", nested_inline_tables(), "nesting"),
    ("TOML integer of 5,000 digits", "application/toml", long_toml_integer(), "a number"),
    (
        "CDR arrays nested 5,000 deep",
        "application/vnd.cdr.energy-plan+json",
        nested_json_arrays(),
        "nesting",
    ),
    (
        "CDR integer of 5,000 digits",
        "application/vnd.cdr.energy-plan+json",
        long_json_integer(),
        "a number",
    ),
)
