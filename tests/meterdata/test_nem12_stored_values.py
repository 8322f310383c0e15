"""The reader's fast path: a 300 record whose values are written as the store writes them is
stored from its own text, with no work per value. Property-tested against the exact path (each
value parsed to a Decimal and written back by ``encode_values``) on every input: the two agree
whenever the fast path is taken, and a text it takes is never one the exact path refuses."""

from __future__ import annotations

import dataclasses
from datetime import date
from decimal import Decimal

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from freehours.domain.reads import IntervalDay
from freehours.errors import NEM12Error
from freehours.meterdata.nem12 import common, read_days
from freehours.store.meter import encode_values
from tests.meterdata.nem12_text import channel, day, nem12

TODAY = date(2026, 7, 20)
#: Value texts near the edges: leading zeros, bare points, many places, large values, empty.
value_texts = st.one_of(
    st.from_regex(r"[0-9]{0,8}(\.[0-9]{0,8})?", fullmatch=True),
    st.sampled_from(
        [
            "0",
            "00",
            "0.",
            ".5",
            "5.",
            "0.000000",
            "0.0000001",
            "999999.999999",
            "1000000",
            "012",
            "1.000",
            "",
            "0.000001",
            "100000",
        ]
    ),
)


def read(values: list[str], unit: str = "KWH", quality: str = "A") -> list[IntervalDay]:
    text = nem12(channel(uom=unit), day("20260701", values, quality=quality))
    return list(read_days(text.encode(), name="t.csv", today=TODAY))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(value_texts, min_size=48, max_size=48), st.sampled_from(["KWH", "WH", "MWH", "KVARH"])
)
@example(["0.5"] * 48, "KWH")
@example(["00.5"] + ["1"] * 47, "KWH")
def test_the_fast_path_and_the_exact_path_agree(values: list[str], unit: str) -> None:
    try:
        (read_day,) = read(values, unit)
    except NEM12Error as exc:  # refused, as the exact path refuses it: nothing to store
        refused: NEM12Error | None = exc
    else:
        refused = None
    if refused is not None:
        assert "t.csv:3" in str(refused)
        return
    exact = encode_values(read_day.values)
    if read_day.stored_text() is not None:
        assert read_day.stored_text() == exact
    if unit in ("KWH", "KVARH") and all(
        text == "" or str(value) == text
        for text, value in zip(values, read_day.values, strict=True)
    ):
        # Written exactly as stored: the fast path is taken.
        assert read_day.stored_text() == ",".join(values)


def test_a_day_of_quality_n_is_stored_as_empty_values() -> None:
    (read_day,) = read([""] * 48, quality="N")
    assert read_day.stored_text() == "," * 47 == encode_values(read_day.values)


def test_values_not_written_as_stored_take_the_exact_path() -> None:
    (read_day,) = read(["00.5", ".25", "3."] + ["1.0"] * 45)
    assert read_day.stored_text() is None
    assert encode_values(read_day.values).startswith("0.5,0.25,3,1.0")


def test_a_day_copied_with_other_values_is_stored_from_its_values() -> None:
    (read_day,) = read(["0.5"] * 48)
    assert read_day.stored_text() == ",".join(["0.5"] * 48)
    changed = dataclasses.replace(read_day, values=(Decimal("1.25"),) * 48)
    # The reader's text belongs to the values it was read with, not to the copy's.
    assert changed.stored_text() is None
    assert encode_values(changed.values) == ",".join(["1.25"] * 48)
    # A copy that keeps the values keeps the text.
    assert dataclasses.replace(read_day, line=99).stored_text() == read_day.stored_text()


def read_many(days: list[list[str]]) -> list[IntervalDay]:
    records = [day(f"202607{n + 1:02d}", values) for n, values in enumerate(days)]
    return list(read_days(nem12(channel(), *records).encode(), name="t.csv", today=TODAY))


@st.composite
def days_of_texts(draw: st.DrawFn) -> list[list[str]]:
    """Two to four days of 48 value texts, drawn from a palette of at most eight: a text met on
    one day comes back on the others, which is what the property is about (and generating a
    palette costs Hypothesis a fraction of generating every text anew)."""
    palette = draw(st.lists(value_texts, min_size=1, max_size=8))
    picks = st.lists(st.integers(0, len(palette) - 1), min_size=48, max_size=48)
    return [[palette[i] for i in draw(picks)] for _ in range(draw(st.integers(2, 4)))]


@settings(max_examples=200, deadline=None)
@given(days_of_texts())
@example([["00.5"] + ["1"] * 47, ["1"] * 47 + ["00.5"], ["1"] * 48])
def test_the_fast_path_holds_across_the_days_of_a_file(days: list[list[str]]) -> None:
    """The reader remembers which value texts it parsed are not written as stored, for every
    later record: a text met unusual once is never taken as written as stored later."""
    try:
        read_back = read_many(days)
    except NEM12Error:
        return
    for values, read_day in zip(days, read_back, strict=True):
        if read_day.stored_text() is not None:
            assert read_day.stored_text() == encode_values(read_day.values) == ",".join(values)
        elif all(t == "" or str(v) == t for t, v in zip(values, read_day.values, strict=True)):
            raise AssertionError(f"{values}: written as stored, not taken as such")


def test_past_its_limit_of_unusual_texts_the_reader_checks_each_record_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(common, "_CACHE_LIMIT", 3)
    unusual = [[f"0{n}.5"] + ["1"] * 47 for n in range(1, 6)]  # "01.5", "02.5", ...
    usual = ["1"] * 48
    read_back = read_many([*unusual, usual, ["05.5", *usual[1:]]])
    assert [d.stored_text() for d in read_back[:5]] == [None] * 5
    assert read_back[5].stored_text() == ",".join(usual)
    assert read_back[6].stored_text() is None
