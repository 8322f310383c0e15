"""The one definition of a valid read (freehours.domain.reads): every value inside a range is
accepted as it is and survives being written out and read back; every value outside is refused
with a RangeError naming the field."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from freehours.domain import reads
from freehours.domain.reads import (
    EARLIEST_DATE,
    KWH_PLACES,
    LATEST_DATE,
    MAX_KWH,
    READ_DAYS_AHEAD,
    IntervalRead,
    RangeError,
)
from freehours.domain.time import NEM_TIME
from freehours.errors import InputError

_NMI = re.compile(reads.NMI_PATTERN)
_SUFFIX = re.compile(reads.SUFFIX_PATTERN)


def kwh_values(places: int = KWH_PLACES) -> st.SearchStrategy[Decimal]:
    """Every kWh value the rules allow, up to ``places`` decimal places."""
    return st.integers(0, places).flatmap(
        lambda shift: st.integers(0, int(MAX_KWH.scaleb(shift)) - 1).map(
            lambda digits: Decimal(digits).scaleb(-shift)
        )
    )


@given(st.from_regex(r"\A[A-Z0-9]{10}\Z"))
def test_an_nmi_is_accepted_as_written(nmi: str) -> None:
    assert reads.check_nmi(nmi) == nmi


@given(st.text(max_size=12).filter(lambda text: _NMI.fullmatch(text) is None))
def test_anything_else_is_not_an_nmi(text: str) -> None:
    with pytest.raises(RangeError) as caught:
        reads.check_nmi(text, "NMI")
    assert caught.value.field == "NMI"
    assert str(caught.value).startswith("NMI: ")


@pytest.mark.parametrize("text", ["nlower0001", "ABC", "NMI000000\u0661", "NMI00000001", ""])
def test_the_nmis_of_the_issue_are_refused(text: str) -> None:
    assert not reads.is_nmi(text)


@given(st.from_regex(r"\A[A-Z][A-Z0-9]\Z"))
def test_a_suffix_is_accepted_as_written(suffix: str) -> None:
    assert reads.check_suffix(suffix) == suffix


@given(st.text(max_size=3).filter(lambda text: _SUFFIX.fullmatch(text) is None))
def test_anything_else_is_not_a_suffix(text: str) -> None:
    with pytest.raises(RangeError, match=r"^suffix: .* is not a channel suffix"):
        reads.check_suffix(text)


@given(kwh_values())
def test_a_kwh_value_survives_being_written_and_read_back(value: Decimal) -> None:
    text = format(value, "f")
    back = reads.kwh_of(text)
    assert back == value
    assert format(back, "f") == text


@given(
    st.one_of(
        # too large
        st.integers(0, 10**40).map(lambda n: MAX_KWH + n),
        # too precise
        st.integers(1, 10**9)
        .filter(lambda n: n % 10 != 0)
        .map(lambda n: Decimal(n).scaleb(-KWH_PLACES - 1)),
        # negative
        kwh_values().filter(bool).map(lambda value: -value),
    )
)
def test_a_kwh_value_outside_the_range_is_refused(value: Decimal) -> None:
    with pytest.raises(RangeError, match=r"^kwh: "):
        reads.check_kwh(value)
    with pytest.raises(RangeError, match=r"^kwh: "):
        reads.kwh_of(format(value, "f"))


@pytest.mark.parametrize(
    "text",
    [
        "1e999999",
        "1e309",
        "9" * 40,
        "1e-999999",
        "\u0663",
        "\uff10.\uff15",
        "NaN",
        "-1",
        " 1",
        "1_0",
    ],
)
def test_the_kwh_texts_of_the_issue_are_refused(text: str) -> None:
    with pytest.raises(RangeError) as caught:
        reads.kwh_of(text, "IntervalValue1")
    assert caught.value.field == "IntervalValue1"


@given(st.text(alphabet=st.characters(categories=["Nd"]), min_size=1, max_size=5))
def test_only_ascii_digits_are_digits(text: str) -> None:
    if text.isascii():
        assert reads.kwh_of(text) == Decimal(text)
    else:
        with pytest.raises(RangeError, match="ASCII"):
            reads.kwh_of(text)


@given(st.dates())
def test_a_date_is_in_range_exactly_from_2000_to_2099(day: date) -> None:
    if EARLIEST_DATE <= day <= LATEST_DATE:
        assert reads.check_date(day) == day
    else:
        with pytest.raises(RangeError, match=r"^date: .* is outside 2000-01-01 to 2099-12-31"):
            reads.check_date(day)


@given(st.dates(EARLIEST_DATE, LATEST_DATE), st.dates())
def test_a_read_date_is_at_most_a_few_days_ahead_of_today(today: date, day: date) -> None:
    allowed = EARLIEST_DATE <= day <= min(today + timedelta(days=READ_DAYS_AHEAD), LATEST_DATE)
    if allowed:
        assert reads.check_read_date(day, today) == day
    else:
        with pytest.raises(RangeError, match=r"^date: "):
            reads.check_read_date(day, today)


_ZONES = st.sampled_from(
    [UTC, NEM_TIME, timezone(timedelta(hours=14)), timezone(-timedelta(hours=12))]
)


@given(st.datetimes(timezones=_ZONES))
def test_a_moment_in_range_moves_to_any_zone_and_one_outside_is_refused(moment: datetime) -> None:
    if EARLIEST_DATE <= moment.date() <= LATEST_DATE:
        assert reads.check_moment(moment) == moment
        for zone in (UTC, NEM_TIME, timezone(timedelta(hours=-23, minutes=-59))):
            moved = moment.astimezone(zone)
            assert moved + timedelta(days=2) > moved - timedelta(days=2)  # no overflow
    else:
        with pytest.raises(RangeError, match=r"^start: .* is outside"):
            reads.check_moment(moment)


def test_a_moment_without_an_offset_is_refused() -> None:
    with pytest.raises(RangeError, match="no UTC offset"):
        reads.check_moment(datetime(2026, 7, 1, 11))


@given(st.sampled_from(reads.INTERVAL_MINUTES) | st.integers(-100, 100))
def test_interval_lengths_are_5_15_or_30(minutes: int) -> None:
    if minutes in (5, 15, 30):
        assert reads.check_interval_minutes(minutes) == minutes
    else:
        with pytest.raises(RangeError, match=r"^interval_minutes: "):
            reads.check_interval_minutes(minutes)


@given(st.integers(-100, 100))
def test_a_nem_day_has_1440_minutes_of_intervals(minutes: int) -> None:
    expected = 1440 // minutes if minutes in (5, 15, 30) else 0
    assert reads.intervals_in_day(minutes) == expected


@given(st.text(max_size=2))
def test_quality_flags_are_a_e_s_f_n(flag: str) -> None:
    if flag in ("A", "E", "S", "F", "N"):
        assert reads.check_quality(flag) == flag
    else:
        with pytest.raises(RangeError, match=r"^quality: "):
            reads.check_quality(flag)


@pytest.mark.parametrize(
    ("price", "words"),
    [
        ("1e999999", "not below 1000"),
        ("1000", "not below 1000"),
        ("0.0000001", "more than 6 decimal places"),
        ("-0.5", "negative"),
        ("Infinity", "not a finite price"),
    ],
)
def test_a_price_outside_its_range_is_refused(price: str, words: str) -> None:
    with pytest.raises(RangeError, match=words):
        reads.check_price(Decimal(price))


# --- the read merge ----------------------------------------------------------------------------

_NMI_1 = "NMI0000001"


def _read(start: datetime, kwh: str | None, quality: str = "A", minutes: int = 30) -> IntervalRead:
    value = None if kwh is None else Decimal(kwh)
    return IntervalRead(_NMI_1, "E1", start, start + timedelta(minutes=minutes), value, quality)


def test_reads_fall_on_their_nem_day_and_interval_whatever_their_offset() -> None:
    # 00:30 NEM time on 2 July, written in UTC: the second interval of 2 July.
    utc = datetime(2026, 7, 1, 14, 30, tzinfo=UTC)
    by_day = reads.reads_by_day([_read(utc, "0.5"), _read(utc, "0.7"), _read(utc, "1", "N")])
    assert list(by_day) == [(_NMI_1, "E1", date(2026, 7, 2))]
    (day_reads,) = by_day.values()
    assert day_reads.interval_minutes == 30
    # The last read of an interval counts; quality N makes it missing whatever its kWh.
    assert day_reads.values == {1: (None, "N")}


@pytest.mark.parametrize(
    ("read", "message"),
    [
        (_read(datetime(2026, 7, 2, 0, 10, tzinfo=NEM_TIME), "1"), "not on the NEM day's"),
        (_read(datetime(2026, 7, 2, tzinfo=NEM_TIME), "1", minutes=20), "is not 5, 15 or 30"),
        (_read(datetime(2026, 7, 2, tzinfo=NEM_TIME), "1", "V"), "quality 'V' is not one of"),
        (_read(datetime(2026, 7, 2, tzinfo=NEM_TIME), "-1"), "read 0: kwh: -1 is negative"),
        (_read(datetime(2026, 7, 2), "1"), "start and end need a UTC offset"),
    ],
)
def test_a_read_that_cannot_merge_is_refused_by_number(read: IntervalRead, message: str) -> None:
    with pytest.raises(InputError, match=re.escape(message)) as caught:
        reads.reads_by_day([read])
    assert str(caught.value).startswith("read 0: ")


def test_one_day_takes_one_interval_length_per_batch() -> None:
    start = datetime(2026, 7, 2, tzinfo=NEM_TIME)
    with pytest.raises(InputError, match=r"^read 1: 15-minute interval on a day that has 30-min"):
        reads.reads_by_day([_read(start, "1"), _read(start, "1", minutes=15)])


def test_a_merge_counts_what_each_read_did_and_changes_the_day_in_place() -> None:
    start = datetime(2026, 7, 2, tzinfo=NEM_TIME)
    reads_of_day = [
        _read(start, "0.5"),  # a value where there was none
        _read(start + timedelta(minutes=30), "0.25"),  # the same value and quality again
        _read(start + timedelta(minutes=60), "0.75", "E"),  # another quality
    ]
    (day_reads,) = reads.reads_by_day(reads_of_day).values()
    values, qualities = day_reads.blank()
    assert (len(values), set(values), set(qualities)) == (48, {""}, {"N"})
    values[1], qualities[1] = "0.25", "A"
    values[2], qualities[2] = "0.75", "A"
    merged = day_reads.merge(values, qualities)
    assert merged == reads.MergeCounts(accepted=1, superseded=1, unchanged=1)
    assert merged.changes
    assert (values[:3], qualities[:3]) == (["0.5", "0.25", "0.75"], ["A", "A", "E"])
    assert not day_reads.merge(values, qualities).changes


def test_reads_merge_only_into_a_kwh_day_of_their_interval_length() -> None:
    key = (_NMI_1, "E1", date(2026, 7, 2))
    day_reads = reads.DayReads(30, {})
    day_reads.check_stored(key, 30, "KWH")
    with pytest.raises(InputError, match="is stored in KVARH; reads in kWh cannot merge"):
        day_reads.check_stored(key, 30, "KVARH")
    with pytest.raises(InputError, match="stored at 15-minute intervals; 30-minute reads cannot"):
        day_reads.check_stored(key, 15, "KWH")
