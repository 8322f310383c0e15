"""What a NEM12 source may hold (``ReadLimits``): bombs refused by the first pass at the limit
they pass, counted by what was read; real files, however large, well inside the defaults."""

from __future__ import annotations

import io
import threading
import tracemalloc
import zipfile

import pytest

from freehours.errors import NEM12Error
from freehours.meterdata.nem12 import (
    NEM12Reader,
    NEM12TooLarge,
    ReadCancelled,
    ReadLimits,
)
from freehours.settings import Settings
from tests.bombs import (
    blank_line_bomb,
    gzipped,
    nested_zip,
    overlapping_zip,
    short_rows_bomb,
    zeros_bomb,
)
from tests.meterdata.nem12_text import channel, day, nem12

TEXT = nem12(channel(), day("20260701", value="1.25"), day("20260702", value="2.5"))


def refused(source: bytes, limits: ReadLimits | None = None) -> tuple[NEM12Error, NEM12Reader]:
    reader = NEM12Reader(source, name="bomb", limits=limits)
    with pytest.raises(NEM12Error) as caught:
        list(reader.days())
    return caught.value, reader


def test_a_blank_line_bomb_stops_at_the_line_limit() -> None:
    error, reader = refused(blank_line_bomb(20_000_000))
    assert isinstance(error, NEM12TooLarge)
    assert error.line == 2_000_001  # the header, then blank lines up to the limit
    assert "more than 2,000,000 lines" in error.reason
    # Of 20 MB inflated, the 2 MB the limit allows and a block more were read.
    assert reader.bytes_read < 2_000_000 + 2**20


def test_blank_lines_count_however_they_end() -> None:
    text = TEXT.replace("\n", "\r\n", 2).encode() + b"\r\r\n\n" * 10
    error, _ = refused(text, ReadLimits(max_lines=7))
    # 4 records, then \r, \r\n, \n, \r, \r\n, ...: the 8th line is the fourth of those.
    assert (type(error), error.line) == (NEM12TooLarge, 8)


def test_a_decompression_bomb_stops_at_the_byte_limit() -> None:
    lines = gzipped(b"0,0,0,0,0,0,0,0,0\n" * 1000, repeat=10_000)  # 180 MB of short lines
    error, reader = refused(lines, ReadLimits(max_bytes=10 * 2**20))
    assert isinstance(error, NEM12TooLarge)
    assert "more than 10,485,760 bytes once decompressed" in error.reason
    assert reader.bytes_read <= 11 * 2**20


def test_a_line_without_end_is_refused_by_the_first_pass() -> None:
    error, reader = refused(zeros_bomb(1 << 30))
    assert (type(error), error.line) == (NEM12Error, 1)
    assert error.reason == "a line longer than 100,000 characters"
    assert reader.bytes_read <= 2**20  # one block of the gigabyte


def test_a_long_line_further_on_is_named_by_the_first_pass() -> None:
    lines = TEXT.splitlines()
    long = "300,20260703," + "1," * 60_000
    text = "\n".join([*lines[:3], *[""] * 5, long, *lines[3:]]).encode()
    error, _ = refused(text, ReadLimits(max_line=50_000))
    assert (error.line, error.reason) == (9, "a line longer than 50,000 characters")


def test_a_zip_whose_entries_share_one_member_is_refused_before_it_is_read() -> None:
    error, reader = refused(overlapping_zip(TEXT.encode(), entries=20))
    assert "overlaps" in error.reason
    assert "meter.csv" in error.reason
    assert reader.bytes_read == 0


def test_a_zip_with_an_entry_inside_another_is_refused() -> None:
    error, reader = refused(nested_zip(TEXT.encode(), TEXT.encode()))
    assert "'a.csv'" in error.reason
    assert "overlaps 'b.csv'" in error.reason
    assert reader.bytes_read == 0


def test_a_zip_with_too_many_entries_is_refused_from_its_end_record() -> None:
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as out:
        for n in range(12):
            out.writestr(f"m{n}.csv", TEXT)
    error, reader = refused(archive.getvalue(), ReadLimits(max_members=10))
    assert isinstance(error, NEM12TooLarge)
    assert error.reason == "the zip archive has 12 entries; at most 10 are read"
    assert reader.bytes_read == 0


def test_a_set_stop_event_ends_the_read() -> None:
    stop = threading.Event()
    stop.set()
    with pytest.raises(ReadCancelled):
        list(NEM12Reader(TEXT.encode(), stop=stop).days())


def test_every_pass_is_counted() -> None:
    reader = NEM12Reader(TEXT.encode())
    assert len(list(reader.days())) == 2
    assert reader.bytes_read == 2 * len(TEXT)  # the first pass and the second


def test_a_month_of_five_minute_data_for_ten_thousand_nmis_is_within_the_defaults() -> None:
    """One NMI's month, with a 400 and a 500 record under every day, read within a 10,000th of
    each default limit (two channels' worth of bytes): 10,000 such NMIs fit whole."""
    values = [f"{(n * 37 % 1000) / 1000:.3f}" for n in range(288)]
    records = [channel(minutes=5)]
    for date in range(1, 32):
        records.append(day(f"202607{date:02d}", values, quality="V", minutes=5))
        records.extend(["400,1,288,A,,", "500,O,S01,20260801000000,"])
    text = nem12(*records).encode()
    defaults = ReadLimits()
    share = ReadLimits(
        max_bytes=defaults.max_bytes // 10_000 // 2,
        max_lines=defaults.max_lines // 10_000,
    )
    reader = NEM12Reader(text, limits=share)
    assert len(list(reader.days())) == 31


def test_the_settings_defaults_are_the_readers() -> None:
    assert Settings().nem12_limits() == ReadLimits()
    assert Settings(nem12_max_lines=7).nem12_limits().max_lines == 7


def test_check_refuses_a_file_of_short_rows_without_indexing_them() -> None:
    """``days()`` indexes every 300 record before it checks one; ``check()`` (what the API runs
    first) scans for the limits, then checks records from the top, keeping nothing."""
    data = short_rows_bomb(500_000)
    reader = NEM12Reader(data, name="short.csv.gz")
    tracemalloc.start()
    try:
        with pytest.raises(NEM12Error) as caught:
            reader.check()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (caught.value.line, caught.value.field) == (3, "IntervalValue2")
    assert peak < 8 * 2**20  # a few blocks; the index of days() takes about 100 MB here


def test_check_raises_what_days_raises_and_passes_what_it_reads() -> None:
    bad = TEXT.replace("1.25", "x", 1).encode()
    with pytest.raises(NEM12Error) as from_check:
        NEM12Reader(bad).check()
    with pytest.raises(NEM12Error) as from_days:
        list(NEM12Reader(bad).days())
    assert str(from_check.value) == str(from_days.value)
    reader = NEM12Reader(TEXT.encode())
    reader.check()
    assert len(list(reader.days())) == 2
