"""The invoice lists' cursor: whatever a client sends as one is a key this API gave, or a 422
naming ``query.cursor``; never an error of the database's."""

from __future__ import annotations

import base64
import json
from datetime import date

import pytest
from hypothesis import given
from hypothesis import strategies as st

from freehours.api.problems import Problem
from freehours.api.routes.documents import decode_cursor
from freehours.domain.reads import EARLIEST_DATE, LATEST_DATE

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4),
    max_leaves=8,
)


def _cursor(value: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode()


def _decoded(cursor: str) -> tuple[date, str, int] | Problem:
    try:
        return decode_cursor(cursor)
    except Problem as problem:
        return problem


@given(st.text(max_size=200) | json_values.map(_cursor))
def test_anything_is_a_key_within_the_columns_or_a_422(cursor: str) -> None:
    decoded = _decoded(cursor)
    if isinstance(decoded, Problem):
        assert decoded.status == 422
        assert "query.cursor" in str(decoded.detail)
        return
    start, nmi, sequence = decoded
    assert isinstance(start, date)
    assert len(nmi) <= 10
    assert 0 <= sequence < 2**31


@given(st.dates(EARLIEST_DATE, LATEST_DATE), st.text(max_size=10), st.integers(0, 2**31 - 1))
def test_a_key_round_trips(start: date, nmi: str, sequence: int) -> None:
    assert decode_cursor(_cursor([start.isoformat(), nmi, sequence])) == (start, nmi, sequence)


@pytest.mark.parametrize(
    "key",
    [
        ["2026-07-01", "4103000000", 2**63],
        ["2026-07-01", "4103000000", True],
        ["2026-07-01", "x" * 11, 0],
        ["2026-07-01", "4103000000", -1],
        ["0001-01-01", "4103000000", 0],  # a period no document has: outside the calendar
        ["9999-12-31", "4103000000", 0],
    ],
)
def test_a_key_the_columns_cannot_hold_is_refused(key: list[object]) -> None:
    with pytest.raises(Problem):
        decode_cursor(_cursor(key))
