"""Where NEM12 comes from: a path (str or Path) or bytes; CSV, zip (every member) or gzip; and
what the text may look like around the records (CRLF, blank lines, a byte order mark)."""

from __future__ import annotations

import gzip
import io
import zipfile
from decimal import Decimal
from pathlib import Path

import pytest

from freehours.errors import NEM12Error
from freehours.meterdata.nem12 import read_days
from tests.meterdata.nem12_text import channel, day, nem12

TEXT = nem12(channel(), day("20260701", value="1.25"), day("20260702", value="2.5"))


def zipped(**members: str) -> bytes:
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as out:
        for name, text in members.items():
            out.writestr(name, text)
    return archive.getvalue()


def totals(source: Path | str | bytes) -> list[Decimal]:
    return [d.total() for d in read_days(source)]


def test_a_csv_path_as_path_or_str(tmp_path: Path) -> None:
    path = tmp_path / "meter.csv"
    path.write_text(TEXT)
    assert totals(path) == totals(str(path)) == [Decimal(60), Decimal(120)]


def test_a_gzip_file_and_gzip_bytes(tmp_path: Path) -> None:
    path = tmp_path / "meter.csv.gz"
    path.write_bytes(gzip.compress(TEXT.encode()))
    assert totals(path) == totals(path.read_bytes()) == [Decimal(60), Decimal(120)]


def test_a_zip_reads_every_member_whatever_its_name(tmp_path: Path) -> None:
    data = zipped(
        **{"a.csv": TEXT, "NEM12#B#MDP#NEMMCO.V01": nem12(channel(nmi="NMI0000002"), day())}
    )
    path = tmp_path / "meters.zip"
    path.write_bytes(data)
    days = list(read_days(path))
    assert [(d.nmi, d.source) for d in days] == [
        ("NMI0000001", f"{path}!a.csv"),
        ("NMI0000001", f"{path}!a.csv"),
        ("NMI0000002", f"{path}!NEM12#B#MDP#NEMMCO.V01"),
    ]
    assert totals(data) == [Decimal(60), Decimal(120), Decimal(24)]


def test_zip_directories_and_macos_resource_forks_are_skipped() -> None:
    data = zipped(**{"data/": "", "data/a.csv": TEXT, "__MACOSX/data/._a.csv": "\x00\x05\x16"})
    assert totals(data) == [Decimal(60), Decimal(120)]


def test_bytes_of_plain_csv_are_named_upload_unless_named() -> None:
    days = list(read_days(TEXT.encode()))
    assert days[0].source == "upload"
    assert next(read_days(TEXT.encode(), name="post.csv")).source == "post.csv"


def test_crlf_blank_lines_and_a_byte_order_mark_are_read() -> None:
    text = "\ufeff" + TEXT.replace("\n", "\r\n").replace("900", "\r\n900\r\n\r\n")
    assert totals(text.encode()) == [Decimal(60), Decimal(120)]


def test_trailing_empty_fields_are_padding() -> None:
    padding = "," * 40
    text = (
        "\n".join(
            [
                "100,NEM12,202607020300,MDP1,RETAILER" + padding,
                channel() + padding,
                day(stamp="20260702031500") + padding,
                "900" + padding,
            ]
        )
        + "\n"
    )
    assert totals(text.encode()) == [Decimal(24)]


def test_a_300_record_broken_across_lines_is_joined_back() -> None:
    values = [str(index) for index in range(48)]
    broken = [
        "300,20260701,",
        ",".join(values[:24]) + ",",
        ",".join(values[24:]) + ",A,,,20260702031500,",
    ]
    reader_days = list(read_days(nem12(channel(), *broken).encode(), name="broken.csv"))
    assert [(d.line, d.total()) for d in reader_days] == [(3, Decimal(sum(range(48))))]


def test_a_break_with_the_comma_on_the_next_line_is_joined_too() -> None:
    values = ["1"] * 48
    broken = ["300,20260701," + ",".join(values[:10]), "," + ",".join(values[10:]) + ",A,,,,"]
    [only] = read_days(nem12(channel(), *broken).encode())
    assert only.total() == Decimal(48)


def test_a_break_inside_a_field_is_ambiguous_and_refused() -> None:
    values = ["1"] * 48
    broken = ["300,20260701," + ",".join(values[:10]), ",".join(values[10:]) + ",A,,,,"]
    with pytest.raises(NEM12Error) as caught:
        list(read_days(nem12(channel(), *broken).encode(), name="broken.csv"))
    assert (caught.value.line, caught.value.field) == (3, "IntervalValue11")
    assert "ends after 10 fields without a QualityMethod" in caught.value.reason


def test_a_line_after_a_complete_300_record_is_not_joined() -> None:
    text = nem12(channel(), day(), "1,2,3")
    with pytest.raises(NEM12Error) as caught:
        list(read_days(text.encode(), name="stray.csv"))
    assert (caught.value.line, caught.value.field) == (4, "RecordIndicator")
    assert "unknown record indicator '1'" in caught.value.reason


def test_a_missing_file_is_a_nem12_error(tmp_path: Path) -> None:
    with pytest.raises(NEM12Error) as caught:
        list(read_days(tmp_path / "absent.csv"))
    assert caught.value.source == str(tmp_path / "absent.csv")
    assert "cannot open the file" in caught.value.reason


def test_a_damaged_zip_is_a_nem12_error() -> None:
    with pytest.raises(NEM12Error, match="not a readable zip archive"):
        list(read_days(b"PK\x03\x04" + b"\x00" * 40, name="bad.zip"))


def test_a_zip_without_files_is_a_nem12_error() -> None:
    with pytest.raises(NEM12Error, match="the zip archive holds no files"):
        list(read_days(zipped(), name="none.zip"))


def test_a_truncated_gzip_names_the_last_line_read() -> None:
    data = gzip.compress((TEXT * 1).encode())[:-12]
    with pytest.raises(NEM12Error) as caught:
        list(read_days(data, name="cut.gz"))
    assert "cannot be read past this line" in caught.value.reason
    assert caught.value.line is not None


def test_a_line_without_end_is_refused_before_it_fills_memory() -> None:
    data = b"100,NEM12," + b"9" * 200_000
    with pytest.raises(NEM12Error) as caught:
        list(read_days(data, name="huge.csv"))
    assert (caught.value.line, caught.value.reason) == (1, "a line longer than 100,000 characters")


def test_the_reader_is_lazy_and_can_read_again(tmp_path: Path) -> None:
    path = tmp_path / "meter.csv"
    path.write_text(TEXT)
    days = read_days(path)
    path.write_text(nem12(channel(), day(value="1")))
    assert [d.total() for d in days] == [Decimal(48)]
