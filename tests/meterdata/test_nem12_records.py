"""The NEM12 reader, record by record: what each of 100/200/300/400/500/900 gives."""

from __future__ import annotations

import dataclasses
import pickle
from datetime import date, datetime, timedelta
from decimal import Decimal

import pytest

from freehours.domain.reads import IntervalDay
from freehours.domain.time import NEM_TIME
from freehours.meterdata.nem12 import NEM12Reader, read_days
from tests.meterdata.nem12_text import channel, day, nem12


def read(text: str) -> list[IntervalDay]:
    return list(read_days(text.encode(), name="test.csv"))


def test_header_datetime_is_kept_as_nem_time() -> None:
    reader = NEM12Reader(nem12(channel(), day()).encode())
    list(reader.days())
    assert reader.stats.created == datetime(2026, 7, 2, 3, 0, tzinfo=NEM_TIME)


def test_header_version_is_read_in_any_letter_case() -> None:
    text = nem12(channel(), day(), header="100,nem12,202607020300,MDP1,RETAILER")
    assert len(read(text)) == 1


def test_a_300_record_gives_its_channel_date_values_and_stamp() -> None:
    values = [f"{index}.{index:03d}" for index in range(48)]
    [only] = read(nem12(channel(nmi="QB01234567", suffix="B1"), day("20260705", values)))
    assert (only.nmi, only.suffix, only.day, only.interval_minutes) == (
        "QB01234567",
        "B1",
        date(2026, 7, 5),
        30,
    )
    assert only.values == tuple(Decimal(text) for text in values)
    assert only.values[47] == Decimal("47.047")
    assert only.qualities == "A" * 48
    assert only.update_datetime == datetime(2026, 7, 2, 3, 15, tzinfo=NEM_TIME)
    assert (only.uom, only.source, only.line) == ("KWH", "test.csv", 3)


def test_a_day_read_is_the_interval_day_its_fields_make() -> None:
    """The reader builds each day faster than ``IntervalDay(...)`` does (scanner.py): it is still
    an IntervalDay like any other, equal, hashed alike, frozen, copied and pickled as one."""
    [read_day] = read(nem12(channel(), day("20260705", value="0.25")))
    made = IntervalDay(
        *(getattr(read_day, field.name) for field in dataclasses.fields(IntervalDay))
    )
    assert type(read_day) is IntervalDay
    assert read_day == made
    assert hash(read_day) == hash(made)
    assert read_day.stored_text() == ",".join(["0.25"] * 48)
    with pytest.raises(dataclasses.FrozenInstanceError):
        read_day.nmi = "QB01234567"  # type: ignore[misc]
    assert dataclasses.replace(read_day, line=9).line == 9
    copied = pickle.loads(pickle.dumps(read_day))
    assert copied == read_day
    assert copied.stored_text() is None  # the reader's check of its texts stays with the reader


def test_values_are_exact_decimals_never_floats() -> None:
    [only] = read(nem12(channel(), day(value="0.1")))
    assert all(type(value) is Decimal for value in only.values)
    assert only.total() == Decimal("4.8")


@pytest.mark.parametrize(("minutes", "count"), [(5, 288), (15, 96), (30, 48)])
def test_interval_lengths_5_15_and_30_minutes(minutes: int, count: int) -> None:
    [only] = read(nem12(channel(minutes=minutes), day(minutes=minutes)))
    assert (only.interval_minutes, len(only.values), len(only.qualities)) == (
        minutes,
        count,
        count,
    )
    reads = list(only.intervals())
    assert reads[0].start == datetime(2026, 7, 1, 0, 0, tzinfo=NEM_TIME)
    assert reads[-1].end == datetime(2026, 7, 2, 0, 0, tzinfo=NEM_TIME)
    assert all(r.end - r.start == timedelta(minutes=minutes) for r in reads)


def test_intervals_are_named_in_nem_time_whatever_the_season() -> None:
    [only] = read(nem12(channel(), day("20260105")))  # daylight saving in Sydney, not in NEM time
    first = next(only.intervals())
    assert first.start.utcoffset() == timedelta(hours=10)
    assert first.start.isoformat() == "2026-01-05T00:00:00+10:00"
    assert only.interval_starts()[22].isoformat() == "2026-01-05T11:00:00+10:00"


def test_twelve_digit_update_datetime_is_read_as_whole_minutes() -> None:
    [only] = read(nem12(channel(), day(stamp="202607020315")))
    assert only.update_datetime == datetime(2026, 7, 2, 3, 15, tzinfo=NEM_TIME)


def test_no_update_datetime_is_none() -> None:
    [only] = read(nem12(channel(), day(stamp="")))
    assert only.update_datetime is None


def test_an_empty_value_is_missing() -> None:
    values = ["1.5"] * 48
    values[10] = ""
    [only] = read(nem12(channel(), day(values=values)))
    assert only.values[10] is None
    assert only.total() == Decimal("70.5")


def test_quality_n_makes_every_value_missing_whatever_it_says() -> None:
    [only] = read(nem12(channel(), day(value="3.2", quality="N")))
    assert only.values == (None,) * 48
    assert only.qualities == "N" * 48


@pytest.mark.parametrize("quality", ["A", "E", "F", "S", "E52", "S14", "F51", "A11"])
def test_quality_method_gives_its_flag_to_every_interval(quality: str) -> None:
    [only] = read(nem12(channel(), day(quality=quality)))
    assert only.qualities == quality[0] * 48


def test_quality_v_takes_each_interval_quality_from_the_400_records() -> None:
    text = nem12(
        channel(),
        day(quality="V"),
        "400,1,20,A,,",
        "400,21,22,S14,1,meter fault",
        "400,23,24,N,,",
        "400,25,48,E52,,",
    )
    [only] = read(text)
    assert only.qualities == "A" * 20 + "SS" + "NN" + "E" * 24
    assert only.values[:20] == (Decimal("0.5"),) * 20
    assert only.values[22:24] == (None, None)
    assert only.values[24] == Decimal("0.5")


def test_a_500_record_after_a_300_or_400_is_accepted() -> None:
    text = nem12(
        channel(),
        day("20260701"),
        "500,S,RETSRVORD1,20260701154500,001123.5",
        day("20260702", quality="V"),
        "400,1,48,A,,",
        "500,S,RETSRVORD2,20260702154500,001124.5",
    )
    assert [d.day.day for d in read(text)] == [1, 2]


def test_several_channels_and_nmis_each_keep_their_own_days() -> None:
    text = nem12(
        channel(nmi="NMI0000001", suffix="E1"),
        day("20260701", value="1"),
        channel(nmi="NMI0000001", suffix="B1"),
        day("20260701", value="2"),
        channel(nmi="NMI0000002", suffix="E1", minutes=15),
        day("20260701", value="3", minutes=15),
    )
    got = [(d.nmi, d.suffix, d.interval_minutes, d.total()) for d in read(text)]
    assert got == [
        ("NMI0000001", "E1", 30, Decimal(48)),
        ("NMI0000001", "B1", 30, Decimal(96)),
        ("NMI0000002", "E1", 15, Decimal(288)),
    ]


def test_stats_count_rows_days_qualities_and_missing_per_channel() -> None:
    text = nem12(
        channel(),
        day("20260702", quality="V"),
        "400,1,46,A,,",
        "400,47,48,N,,",
        day("20260701", quality="S14"),
    )
    reader = NEM12Reader(text.encode())
    list(reader.days())
    stats = reader.stats
    [channel_stats] = stats.channels.values()
    assert (channel_stats.first_day, channel_stats.last_day) == (date(2026, 7, 1), date(2026, 7, 2))
    assert (channel_stats.rows, channel_stats.days, channel_stats.intervals) == (2, 2, 96)
    assert channel_stats.qualities == {"A": 46, "N": 2, "S": 48}
    assert (channel_stats.missing, stats.missing) == (2, 2)
    assert (stats.rows, stats.days, stats.superseded, stats.nmis) == (2, 2, 0, ["NMI0000001"])


def test_each_channel_counts_the_intervals_of_each_quality() -> None:
    """A channel's rows come in runs, under any number of 200 records: its stats count every
    winning interval's flag, whichever run and whatever interval length it was read in."""
    text = nem12(
        channel(suffix="E1"),
        day("20260701", quality="A"),
        day("20260702", quality="E52"),
        day("20260703", quality="V"),
        "400,1,10,S53,,",
        "400,11,48,A,,",
        channel(suffix="B1", minutes=15),
        day("20260701", quality="N", minutes=15),
        day("20260702", quality="A", minutes=15),
        channel(suffix="E1"),
        day("20260704", quality="F", value=""),
    )
    reader = NEM12Reader(text.encode())
    list(reader.days())
    channels = {suffix: stats for (_, suffix), stats in reader.stats.channels.items()}
    assert dict(channels["E1"].qualities) == {"A": 48 + 38, "E": 48, "S": 10, "F": 48}
    assert dict(channels["B1"].qualities) == {"N": 96, "A": 96}
    assert (channels["E1"].rows, channels["B1"].rows) == (4, 2)
    assert (channels["E1"].missing, channels["B1"].missing) == (48, 96)
    assert dict(reader.stats.qualities) == {"A": 182, "E": 48, "S": 10, "F": 48, "N": 96}
