"""Bad NEM12 never passes silently: each kind of bad input is a NEM12Error naming the file, the
line and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from freehours.errors import InputError, NEM12Error
from freehours.meterdata.nem12 import read_days
from tests.meterdata.nem12_text import END, HEADER, channel, day, nem12

VALUES = ["0.5"] * 48


def values_with(index: int, text: str) -> list[str]:
    values = list(VALUES)
    values[index] = text
    return values


# (case, file text, line, field, words the reason must contain)
CASES = [
    ("empty", "", None, None, "the file is empty"),
    ("blank lines only", "\n\r\n  \n", None, None, "the file is empty: no 100 header"),
    ("no header", f"{channel()}\n{day()}\n{END}\n", 1, "RecordIndicator", "no 100 header"),
    (
        "nem13",
        "100,NEM13,200401101030,MDA1,Ret1\n250,VABC005890,11,1,11,11,M,E,1,20031005093055,A\n900\n",
        1,
        "VersionHeader",
        "NEM13 accumulation data cannot be rated for a free window",
    ),
    ("not nem12", nem12(header="100,NEM99,202607020300,A,B"), 1, "VersionHeader", "'NEM99'"),
    ("header time", nem12(header="100,NEM12,2026070203,A,B"), 1, "DateTime", "'2026070203'"),
    ("second header", nem12(channel(), day(), HEADER), 4, "RecordIndicator", "a second 100"),
    ("300 before 200", nem12(day()), 2, "RecordIndicator", "before any 200 record"),
    ("short 200", nem12("200,NMI0000001,E1,1,E1"), 2, "MDMDataStreamIdentifier", "5 fields"),
    ("nmi", nem12(channel(nmi="NMI-01"), day()), 2, "NMI", "'NMI-01'"),
    ("long nmi", nem12(channel(nmi="NMI00000001"), day()), 2, "NMI", "not an NMI: 10 upper"),
    ("suffix", nem12(channel(suffix="E"), day()), 2, "NMISuffix", "'E'"),
    ("unit", nem12(channel(uom=""), day()), 2, "UOM", "''"),
    ("interval length", nem12(channel(minutes=10)), 2, "IntervalLength", "'10' is not 5, 15 or 30"),
    (
        "next read date",
        nem12(channel() + "20261341", day()),
        2,
        "NextScheduledReadDate",
        "'20261341'",
    ),
    (
        "a value short",
        nem12(channel(), day(values=VALUES[:47])),
        3,
        "IntervalValue48",
        "47 interval values",
    ),
    (
        "a value too many",
        nem12(channel(), day(values=[*VALUES, "1"])),
        3,
        "QualityMethod",
        "49 interval values",
    ),
    (
        "15-minute values in a 30-minute channel",
        nem12(channel(minutes=30), day(minutes=15)),
        3,
        "QualityMethod",
        "96 interval values; IntervalLength 30 (the 200 record on line 2) needs 48",
    ),
    (
        "quality",
        nem12(channel(), day(quality="X")),
        3,
        "QualityMethod",
        "'X' is not a quality flag",
    ),
    ("quality V with a method", nem12(channel(), day(quality="V14")), 3, "QualityMethod", "'V14'"),
    ("quality method", nem12(channel(), day(quality="S1")), 3, "QualityMethod", "'S1'"),
    (
        "interval date",
        nem12(channel(), day("20260231")),
        3,
        "IntervalDate",
        "'20260231' is not a date",
    ),
    (
        "update time",
        nem12(channel(), day(stamp="20260702256000")),
        3,
        "UpdateDateTime",
        "'20260702256000'",
    ),
    (
        # Its day met before (the first row's stamp): only its time of day is read; "²" and "¹"
        # are digits to str.isdigit, read as latin-1.
        "update time in digits not ASCII",
        nem12(
            channel(),
            day("20260701"),
            day("20260702", stamp="20260702\u00b23\u00b9500"),
        ),
        4,
        "UpdateDateTime",
        "is not a date and time",
    ),
    (
        "update time digits",
        nem12(channel(), day(stamp="2026070203")),
        3,
        "UpdateDateTime",
        "'2026070203'",
    ),
    (
        "field after the end",
        nem12(channel(), day() + ",extra"),
        3,
        "field 56",
        "after MSATSLoadDateTime",
    ),
    (
        "value",
        nem12(channel(), day(values=values_with(4, "1.2.3"))),
        3,
        "IntervalValue5",
        "'1.2.3'",
    ),
    (
        "negative value",
        nem12(channel(), day(values=values_with(0, "-1"))),
        3,
        "IntervalValue1",
        "'-1'",
    ),
    (
        "exponent",
        nem12(channel(), day(values=values_with(47, "1e3"))),
        3,
        "IntervalValue48",
        "'1e3'",
    ),
    (
        "not a number",
        nem12(channel(), day(values=values_with(9, "NaN"))),
        3,
        "IntervalValue10",
        "'NaN'",
    ),
    ("space", nem12(channel(), day(values=values_with(9, " 1"))), 3, "IntervalValue10", "' 1'"),
    (
        "underscore",
        nem12(channel(), day(values=values_with(9, "1_0"))),
        3,
        "IntervalValue10",
        "'1_0'",
    ),
    (
        "non-ascii",
        nem12(channel(), day(values=values_with(2, "1²"))),
        3,
        "IntervalValue3",
        "not a non-negative",
    ),
    (
        "400 without V",
        nem12(channel(), day(), "400,1,48,A,,"),
        4,
        "RecordIndicator",
        "QualityMethod is V",
    ),
    ("400 short", nem12(channel(), day(quality="V"), "400,1"), 4, "EndInterval", "2 fields"),
    (
        "400 start",
        nem12(channel(), day(quality="V"), "400,2,48,A,,"),
        4,
        "StartInterval",
        "2 where 1 was due",
    ),
    (
        "400 start text",
        nem12(channel(), day(quality="V"), "400,one,48,A,,"),
        4,
        "StartInterval",
        "'one'",
    ),
    ("400 end text", nem12(channel(), day(quality="V"), "400,1,x,A,,"), 4, "EndInterval", "'x'"),
    (
        "400 end",
        nem12(channel(), day(quality="V"), "400,1,49,A,,"),
        4,
        "EndInterval",
        "outside 1-48",
    ),
    (
        "400 overlap",
        nem12(channel(), day(quality="V"), "400,1,20,A,,", "400,20,48,A,,"),
        5,
        "StartInterval",
        "20 where 21 was due",
    ),
    (
        "400 quality V",
        nem12(channel(), day(quality="V"), "400,1,48,V,,"),
        4,
        "QualityMethod",
        "'V'",
    ),
    (
        "400 short of the day",
        nem12(channel(), day(quality="V"), "400,1,20,A,,", "400,21,40,S14,,"),
        5,
        "EndInterval",
        "cover intervals 1-40 of the day's 48",
    ),
    ("V without 400", nem12(channel(), day(quality="V")), 3, "QualityMethod", "needs 400 records"),
    (
        "500 out of place",
        nem12(channel(), "500,S,X,20260701154500,1", day()),
        3,
        "RecordIndicator",
        "500",
    ),
    (
        "250 in a NEM12 file",
        nem12(channel(), day(), "250,VABC005890,11,1,11,11,M,E"),
        4,
        "RecordIndicator",
        "NEM13 accumulation data, which cannot be rated for a free window",
    ),
    ("unknown record", nem12(channel(), day(), "700,1"), 4, "RecordIndicator", "'700'"),
    (
        "record after 900",
        nem12(channel(), day()) + f"{channel()}\n",
        5,
        "RecordIndicator",
        "after the 900",
    ),
    ("no 900", f"{HEADER}\n{channel()}\n{day()}\n", 3, None, "without its 900"),
    ("no 300 records", nem12(channel()), 3, None, "no interval data"),
    (
        "a bad value in a superseded row",
        nem12(
            channel(),
            day(values=values_with(3, "x"), stamp="20260702000000"),
            day(stamp="20260703000000"),
        ),
        3,
        "IntervalValue4",
        "'x'",
    ),
    (
        "a bad 400 of a superseded row",
        nem12(
            channel(),
            day(quality="V", stamp="20260702000000"),
            "400,1,47,A,,",
            day(stamp="20260703000000"),
        ),
        4,
        "EndInterval",
        "1-47 of the day's 48",
    ),
]


@pytest.mark.parametrize(
    ("text", "line", "field", "words"),
    [pytest.param(text, line, field, words, id=case) for case, text, line, field, words in CASES],
)
def test_bad_input_names_file_line_and_field(
    tmp_path: Path, text: str, line: int | None, field: str | None, words: str
) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(text, encoding="latin-1")
    with pytest.raises(NEM12Error) as caught:
        list(read_days(path))
    error = caught.value
    assert (error.source, error.line, error.field) == (str(path), line, field)
    assert words in error.reason
    where = str(path) if line is None else f"{path}:{line}"
    assert str(error).startswith(f"{where}: ")


def test_a_nem12_error_is_an_input_error() -> None:
    assert issubclass(NEM12Error, InputError)


def test_days_before_a_bad_line_may_be_yielded_but_the_read_fails() -> None:
    text = nem12(channel(), day("20260701"), day("20260702", values=values_with(0, "?")))
    days = read_days(text.encode(), name="late.csv")
    assert next(days).day.day == 1
    with pytest.raises(NEM12Error, match=r"^late\.csv:4: "):
        next(days)
