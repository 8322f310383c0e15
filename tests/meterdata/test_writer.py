"""The NEM12 writer: valid records, exact values, and a round trip through the reader that gives
back the winning days exactly, revisions and mixed qualities included."""

from __future__ import annotations

import io
from dataclasses import replace
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from freehours.domain.reads import KWH_PLACES, MAX_KWH, IntervalDay
from freehours.domain.time import NEM_TIME
from freehours.meterdata.nem12 import NEM12Reader, read_days
from freehours.meterdata.writer import write_nem12

CREATED = datetime(2026, 7, 3, 4, 5, tzinfo=NEM_TIME)
STAMP = datetime(2026, 7, 2, 3, 15, 30, tzinfo=NEM_TIME)


def interval_day(
    suffix: str = "E1",
    day: date = date(2026, 7, 1),
    *,
    values: tuple[Decimal | None, ...] = (Decimal("0.125"),) * 48,
    qualities: str = "A" * 48,
    stamp: datetime | None = STAMP,
    nmi: str = "NMI0000001",
    minutes: int = 30,
) -> IntervalDay:
    return IntervalDay(nmi, suffix, day, minutes, values, qualities, stamp)


def written(*days: IntervalDay) -> str:
    out = io.StringIO(newline="")
    write_nem12(days, out, participant="MDP1", recipient="RETAILER", created=CREATED)
    return out.getvalue()


def test_records_in_order_with_crlf() -> None:
    text = written(interval_day("E1"), interval_day("B1"))
    lines = text.split("\r\n")
    assert lines[0] == "100,NEM12,202607030405,MDP1,RETAILER"
    assert lines[1] == "200,NMI0000001,E1B1,,E1,E1,,kWh,30,"
    assert lines[2] == "300,20260701," + ",".join(["0.125"] * 48) + ",A,,,20260702031530,"
    assert lines[3] == "200,NMI0000001,E1B1,,B1,B1,,kWh,30,"
    assert lines[5:] == ["900", ""]


def test_mixed_qualities_are_written_as_v_with_400_records() -> None:
    qualities = "A" * 10 + "S" * 2 + "N" * 2 + "E" * 4 + "F" * 30
    values = tuple(None if flag == "N" else Decimal(1) for flag in qualities)
    lines = written(interval_day(values=values, qualities=qualities)).split("\r\n")
    assert lines[2].endswith(",V,,,20260702031530,")
    assert lines[2].split(",")[13:17] == ["1", "0", "0", "1"]  # N intervals read 0
    assert lines[3:8] == [
        "400,1,10,A,,",
        "400,11,12,S14,0,substituted",
        "400,13,14,N,,",
        "400,15,18,E52,,",
        "400,19,48,F14,0,final substitute",
    ]


def test_values_are_written_exactly_without_exponents() -> None:
    values = (Decimal("1E+3"), Decimal("0.000001"), Decimal("12.30"), None, *[Decimal(0)] * 44)
    fields = written(interval_day(values=values)).split("\r\n")[2].split(",")
    assert fields[2:6] == ["1000", "0.000001", "12.30", ""]


def test_a_day_without_stamp_and_a_unit_that_is_not_energy() -> None:
    day = replace(interval_day(stamp=None), uom="KVARH")
    lines = written(day).split("\r\n")
    assert lines[1] == "200,NMI0000001,E1,,E1,E1,,KVARH,30,"
    assert lines[2].endswith(",A,,,,")


def test_stamps_in_other_zones_are_written_in_nem_time() -> None:
    utc = datetime(2026, 7, 1, 17, 15, 30, tzinfo=NEM_TIME).astimezone(
        NEM_TIME.__class__(timedelta(0))
    )
    assert written(interval_day(stamp=utc)).split("\r\n")[2].endswith(",A,,,20260701171530,")


def test_writing_to_a_path(tmp_path: Path) -> None:
    path = tmp_path / "out.csv"
    write_nem12([interval_day()], path, created=CREATED)
    assert path.read_bytes().startswith(b"100,NEM12,202607030405,FREEHOURS,")
    assert [d.total() for d in read_days(path)] == [Decimal(6)]


@pytest.mark.parametrize(
    ("day", "words"),
    [
        (interval_day(values=(Decimal(1),) * 47), "47 values and 48 qualities"),
        (interval_day(minutes=10), "interval length 10"),
        (interval_day(qualities="A" * 47 + "V"), "not all A, E, F, N or S"),
        (interval_day(qualities="N" * 48), "quality N has no value"),
        (interval_day(values=(Decimal(-1),) * 48), "not a non-negative number"),
        (interval_day(values=(Decimal("NaN"),) * 48), "not a non-negative number"),
        (interval_day(stamp=datetime(2026, 7, 2)), "timezone-aware"),
        (interval_day(nmi="NMI,1"), "is not an NMI"),
        (interval_day(suffix="e1"), "is not a channel suffix"),
        (interval_day(values=(Decimal("1E+6"),) * 48), "not below 1000000"),
    ],
)
def test_a_day_the_format_cannot_carry_is_refused(day: IntervalDay, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        written(day)


# The round trip. Few NMIs, suffixes, dates and stamps, so that revisions of one day, and ties
# between their stamps, are common.
_values = st.one_of(
    st.none(),
    # Every value the rules allow: below MAX_KWH, up to KWH_PLACES decimal places.
    st.integers(0, KWH_PLACES).flatmap(
        lambda places: st.builds(
            lambda digits: Decimal(digits).scaleb(-places),
            st.integers(0, int(MAX_KWH.scaleb(places)) - 1),
        )
    ),
)
_stamps = st.one_of(
    st.none(),
    st.sampled_from([STAMP, STAMP + timedelta(seconds=1), STAMP + timedelta(days=1)]),
)


@st.composite
def interval_days(draw: st.DrawFn) -> IntervalDay:
    minutes = draw(st.sampled_from([30, 30, 15, 5]))
    count = 24 * 60 // minutes
    # A day repeats a few drawn values and qualities: cheap to draw, and every mix still occurs.
    pattern = draw(st.lists(st.tuples(_values, st.sampled_from("AAAEFNS")), min_size=1, max_size=7))
    cycle = [pattern[index % len(pattern)] for index in range(count)]
    qualities = "".join(flag for _, flag in cycle)
    values = tuple(None if flag == "N" else value for value, flag in cycle)
    return IntervalDay(
        nmi=draw(st.sampled_from(["NMI0000001", "NMI0000002"])),
        suffix=draw(st.sampled_from(["E1", "B1"])),
        day=draw(st.dates(date(2026, 7, 1), date(2026, 7, 3))),
        interval_minutes=minutes,
        values=values,
        qualities=qualities,
        update_datetime=draw(_stamps),
        uom=draw(st.sampled_from(["KWH", "KWH", "KVARH"])),
    )


def winners(days: list[IntervalDay]) -> list[IntervalDay]:
    """The rule, stated directly: per key the latest stamp wins, then the later row."""
    best: dict[tuple[str, str, date], int] = {}
    for position, day in enumerate(days):
        current = best.get(day.key)
        if current is None or _rank(day, position) > _rank(days[current], current):
            best[day.key] = position
    return [days[position] for position in sorted(best.values())]


def _rank(day: IntervalDay, position: int) -> tuple[datetime, int]:
    return (day.update_datetime or datetime.min.replace(tzinfo=NEM_TIME), position)


@settings(max_examples=200, deadline=None)
@given(st.lists(interval_days(), min_size=1, max_size=12))
def test_write_then_read_gives_back_the_winning_days(days: list[IntervalDay]) -> None:
    reader = NEM12Reader(written(*days).encode(), name="round-trip.csv")
    got = [replace(day, source="", line=0) for day in reader.days()]
    assert got == winners(days)
    assert reader.stats.superseded == len(days) - len(got)
