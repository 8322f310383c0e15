"""Both passes read lines as universal newlines do: ends of \\n, \\r\\n or \\r alone, in any mix,
wherever the blocks they read happen to cut them. The first pass counts them, finds a line too
long and the 200 and 300 records; the second reads each line's text."""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from freehours.errors import NEM12Error
from freehours.meterdata.nem12 import ReadLimits, revisions, source
from freehours.meterdata.nem12.source import _LineBudget, _lines

MAX_LINE = 12


def as_the_second_pass_reads(data: bytes) -> list[str]:
    """``data``'s lines, each without its end, as a text stream with universal newlines."""
    text = io.TextIOWrapper(io.BytesIO(data), encoding="latin-1", newline=None).read()
    lines = text.split("\n")
    return lines[:-1] if lines[-1] == "" else lines


def first_pass(data: bytes) -> int:
    """The lines the first pass counted in ``data`` (raises NEM12Error for a line too long)."""
    lines = _LineBudget(ReadLimits(max_line=MAX_LINE))
    list(revisions._channel_dates(io.BytesIO(data), "f", lines, keys=False))
    return lines.read


_PIECES = st.sampled_from([b"\n", b"\r\n", b"\r", b"ab", b"300,", b"x" * 5, b"y" * 11])


# Records and line breaks that str.splitlines knows but a NEM12 line never ends at (read as
# latin-1: \x0b, \x0c, \x1c-\x1e, \x85).
_RECORD_PIECES = st.sampled_from(
    [
        *(b"\n", b"\r\n", b"\r", b"200,N1,c,r,E1,", b"200,N2,c,r,B1", b"300,20260701,", b"300,"),
        *(b"1,", b"\x0b", b"\x0c", b"\x1c", b"\x85", b"\xef\xbb\xbf"),
    ]
)


@settings(max_examples=400, deadline=None)
@given(pieces=st.lists(_RECORD_PIECES, max_size=40), block=st.integers(1, 16))
def test_the_second_pass_reads_each_line_as_universal_newlines_do(
    pieces: list[bytes], block: int
) -> None:
    data = b"".join(pieces)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(source, "_BLOCK", block)
        assert list(_lines(io.BytesIO(data), "f", 1000)) == as_the_second_pass_reads(data)


@settings(max_examples=400, deadline=None)
@given(pieces=st.lists(_RECORD_PIECES, max_size=40), block=st.integers(1, 16))
def test_the_first_pass_finds_the_records_the_second_reads(pieces: list[bytes], block: int) -> None:
    data = b"".join(pieces)
    expected = []  # (NMI, suffix, IntervalDate) of each 300 record
    nmi = suffix = b""
    for line in as_the_second_pass_reads(data):
        fields = line.encode("latin-1").split(b",")
        if fields[0] == b"200" and len(fields) >= 5:
            nmi, suffix = fields[1], fields[4]
        elif fields[0] == b"300":
            expected.append((nmi, suffix, line.encode("latin-1")[revisions._DATE_KEY]))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(revisions, "_BLOCK", block)
        lines = _LineBudget(ReadLimits(max_line=1000))
        runs = list(revisions._channel_dates(io.BytesIO(data), "f", lines))
    assert [(*channel, day) for channel, dates in runs for day in dates] == expected


@pytest.mark.parametrize(
    ("one", "other", "same"),
    [
        (b"300,20260701,1", b"300,20260701,2", True),
        (b"300,20260701,1", b"300,20260702,1", False),
        (b"300,20260701,1", b"300,202607011,1", False),  # a date too long: refused in pass two
        (b"300,20260701,1", b"300,2026070,11", False),  # too short
    ],
)
def test_the_first_pass_compares_rows_by_their_date(one: bytes, other: bytes, same: bool) -> None:
    key = revisions._DATE_KEY
    assert (one[key] == other[key]) is same


@settings(max_examples=400, deadline=None)
@given(pieces=st.lists(_PIECES, max_size=40), block=st.integers(1, 16))
def test_the_first_pass_reads_lines_as_the_second_does(pieces: list[bytes], block: int) -> None:
    data = b"".join(pieces)
    lines = as_the_second_pass_reads(data)
    too_long = next((n for n, line in enumerate(lines, 1) if len(line) >= MAX_LINE), None)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(revisions, "_BLOCK", block)  # blocks cut lines, and \r\n pairs, anywhere
        if too_long is None:
            assert first_pass(data) == len(lines)
        else:
            with pytest.raises(NEM12Error) as refused:
                first_pass(data)
            assert refused.value.line == too_long


@pytest.mark.parametrize("end", ["\n", "\r\n", "\r"])
def test_a_line_one_short_of_the_limit_is_read_whatever_ends_it(end: str) -> None:
    data = (("a" * (MAX_LINE - 1) + end) * 3).encode()
    assert first_pass(data) == 3
    with pytest.raises(NEM12Error) as refused:
        first_pass((("a" * (MAX_LINE - 1) + end) + ("b" * MAX_LINE + end)).encode())
    assert refused.value.line == 2
