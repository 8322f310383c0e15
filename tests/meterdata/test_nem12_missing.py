"""Missing values, counted: the reader's value cache counts the blank texts it is asked for
(``_Values.missed``), and the scanner takes that count row by row. Property-tested against the
days themselves: a channel's ``missing`` is the number of None values in its winning days,
whatever the rows before held (blanks, quality N, V with 400 records, superseded revisions), and
whenever the cache is emptied."""

from __future__ import annotations

from datetime import date
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from freehours.meterdata.nem12 import NEM12Reader, common
from tests.meterdata.nem12_text import channel, day, nem12

TODAY = date(2026, 7, 20)

#: One 300 record: its date (repeats are revisions), QualityMethod, and which values are blank.
rows = st.tuples(
    st.integers(1, 4),
    st.sampled_from(["A", "E52", "N", "V"]),
    st.sets(st.integers(0, 47), max_size=48),
    st.sampled_from(["0.5", "1.25", "0", "12.375"]),
)


def records(spec: list[tuple[int, str, set[int], str]]) -> list[str]:
    lines = []
    for number, (day_of_month, quality, blanks, value) in enumerate(spec):
        values = ["" if index in blanks else value for index in range(48)]
        # Each row its own UpdateDateTime, later than the rows before: a repeated date's last
        # row wins.
        stamp = f"20260710{number // 60:02d}{number % 60:02d}00"
        lines.append(day(f"202607{day_of_month:02d}", values, quality=quality, stamp=stamp))
        if quality == "V":
            lines += ["400,1,20,A,,", "400,21,30,N,,", "400,31,48,E52,,"]
    return lines


@settings(max_examples=150, deadline=None)
@given(st.lists(rows, min_size=1, max_size=8), st.sampled_from([2, 5, 100_000]))
def test_a_channels_missing_values_are_the_none_values_of_its_days(
    spec: list[tuple[int, str, set[int], str]], cache_limit: int
) -> None:
    with mock.patch.object(common, "_CACHE_LIMIT", cache_limit):
        reader = NEM12Reader(nem12(channel(), *records(spec)).encode(), today=TODAY)
        days = list(reader.days())
    [stats] = reader.stats.channels.values()
    assert stats.missing == sum(value is None for read in days for value in read.values)
    assert stats.superseded == len(spec) - len(days)
    winners = {row[0]: row for row in spec}  # the last row of each date
    assert len(days) == len(winners)
    for read in days:
        _, quality, blanks, _ = winners[read.day.day]
        if quality == "N":
            expected = set(range(48))
        elif quality == "V":  # intervals 21-30 are N by its 400 records
            expected = blanks | set(range(20, 30))
        else:
            expected = blanks
        assert {index for index, value in enumerate(read.values) if value is None} == expected


def test_blank_texts_are_counted_row_by_row_not_carried_over() -> None:
    """A row of blanks under quality N, then a row of blanks that loses to a later revision, then
    rows with a few: each counted where it belongs."""
    text = nem12(
        channel(),
        day("20260701", [""] * 48, quality="N"),
        day("20260702", [""] * 48, stamp="20260702031500"),
        day("20260702", ["", "", *["0.5"] * 46], stamp="20260703031500"),
        day("20260703", ["0.5"] * 47 + [""]),
        day("20260704", ["0.5"] * 48),
    )
    reader = NEM12Reader(text.encode(), today=TODAY)
    days = list(reader.days())
    assert [sum(value is None for value in read.values) for read in days] == [48, 2, 1, 0]
    [stats] = reader.stats.channels.values()
    assert (stats.missing, stats.superseded) == (51, 1)
