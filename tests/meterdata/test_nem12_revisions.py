"""Revisions: for one (NMI, suffix, date) the latest UpdateDateTime wins; a tie goes to the later
row. Only winners are yielded, in file order, and the superseded rows are counted."""

from __future__ import annotations

import io
import zipfile
from datetime import datetime
from decimal import Decimal

import pytest

from freehours.domain.time import NEM_TIME
from freehours.meterdata.nem12 import NEM12Reader
from tests.meterdata.nem12_text import channel, day, nem12


def read(data: bytes) -> tuple[list[tuple[str, str, Decimal | None, int]], NEM12Reader]:
    reader = NEM12Reader(data, name="revisions.csv")
    got = [(d.suffix, d.day.isoformat(), d.values[0], d.line) for d in reader.days()]
    return got, reader


#: The rows of one day, each its first value and its UpdateDateTime, in file order; and the row
#: that wins: its value and its line (the 100 and 200 records are lines 1 and 2), the others
#: counted as superseded.
ONE_DAY = [
    pytest.param(
        [("1", "20260702010000"), ("2", "20260703010000")],
        (2, 4),
        id="a later stamp wins when it comes later in the file",
    ),
    pytest.param(
        [("2", "20260703010000"), ("1", "20260702010000")],
        (2, 3),
        id="a later stamp wins when it comes earlier in the file",
    ),
    pytest.param(
        [("1", "20260702010000"), ("2", "20260702010000"), ("3", "20260702010000")],
        (3, 5),
        id="equal stamps go to the later row",
    ),
    pytest.param(
        [("1", "20260702010000"), ("2", "")],
        (1, 3),
        id="a row with a stamp beats one without",
    ),
    pytest.param(
        [("1", "20260702010030"), ("2", "202607020100")],  # 01:00:00, earlier
        (1, 3),
        id="twelve and fourteen digit stamps compare as moments",
    ),
]


@pytest.mark.parametrize(("rows", "winner"), ONE_DAY)
def test_one_row_of_a_day_wins_and_the_others_are_counted_superseded(
    rows: list[tuple[str, str]], winner: tuple[int, int]
) -> None:
    text = nem12(channel(), *(day("20260701", value=value, stamp=stamp) for value, stamp in rows))
    got, reader = read(text.encode())
    value, line = winner
    assert got == [("E1", "2026-07-01", Decimal(value), line)]
    assert reader.stats.superseded == len(rows) - 1


def test_winners_come_in_file_order_and_other_days_are_untouched() -> None:
    text = nem12(
        channel(suffix="E1"),
        day("20260701", value="1", stamp="20260702010000"),
        day("20260702", value="1", stamp="20260703010000"),
        channel(suffix="B1"),
        day("20260701", value="5", stamp="20260702010000"),
        channel(suffix="E1"),
        day("20260701", value="9", stamp="20260705010000"),
    )
    got, reader = read(text.encode())
    assert got == [
        ("E1", "2026-07-02", Decimal(1), 4),
        ("B1", "2026-07-01", Decimal(5), 6),
        ("E1", "2026-07-01", Decimal(9), 8),
    ]
    stats = reader.stats
    assert (stats.rows, stats.days, stats.superseded) == (4, 3, 1)
    assert stats.channels[("NMI0000001", "E1")].superseded == 1
    assert stats.channels[("NMI0000001", "B1")].superseded == 0


def test_the_winner_keeps_its_own_quality_and_stamp() -> None:
    text = nem12(
        channel(),
        day("20260701", quality="E52", stamp="20260702010000"),
        day("20260701", quality="V", stamp="20260704010000"),
        "400,1,47,A,,",
        "400,48,48,N,,",
    )
    reader = NEM12Reader(text.encode())
    [only] = reader.days()
    assert only.qualities == "A" * 47 + "N"
    assert only.update_datetime == datetime(2026, 7, 4, 1, tzinfo=NEM_TIME)
    assert reader.stats.qualities == {"A": 47, "N": 1}


def test_a_superseded_row_keeps_its_500_record() -> None:
    text = nem12(
        channel(),
        day("20260701", value="1", stamp="20260702010000"),
        "500,S,RETSRVORD1,20260701154500,001123.5",
        day("20260701", value="2", stamp="20260703010000"),
        "500,S,RETSRVORD2,20260701154500,001124.5",
    )
    got, reader = read(text.encode())
    assert got == [("E1", "2026-07-01", Decimal(2), 5)]
    assert reader.stats.superseded == 1


def test_a_revision_in_a_later_zip_member_wins_over_an_earlier_member() -> None:
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("first.csv", nem12(channel(), day(value="1", stamp="20260702010000")))
        zipped.writestr("second.csv", nem12(channel(), day(value="2", stamp="20260702010000")))
    reader = NEM12Reader(archive.getvalue(), name="both.zip")
    [only] = reader.days()
    assert (only.values[0], only.source, only.line) == (Decimal(2), "both.zip!second.csv", 3)
    assert reader.stats.members == ["both.zip!first.csv", "both.zip!second.csv"]
