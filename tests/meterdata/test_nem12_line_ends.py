"""The first pass counts lines, and finds a line too long, as the second pass reads them: ends
of \\n, \\r\\n or \\r alone, in any mix, wherever the blocks it reads happen to cut them."""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from freehours.errors import NEM12Error
from freehours.meterdata.nem12 import ReadLimits, revisions
from freehours.meterdata.nem12.source import _LineBudget

MAX_LINE = 12


def as_the_second_pass_reads(data: bytes) -> list[str]:
    """``data``'s lines, each without its end, as a text stream with universal newlines."""
    text = io.TextIOWrapper(io.BytesIO(data), encoding="latin-1", newline=None).read()
    lines = text.split("\n")
    return lines[:-1] if lines[-1] == "" else lines


def first_pass(data: bytes) -> int:
    """The lines the first pass counted in ``data`` (raises NEM12Error for a line too long)."""
    lines = _LineBudget(ReadLimits(max_line=MAX_LINE))
    list(revisions._record_keys(io.BytesIO(data), "f", lines, keys=False))
    return lines.read


_PIECES = st.sampled_from([b"\n", b"\r\n", b"\r", b"ab", b"300,", b"x" * 5, b"y" * 11])


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
