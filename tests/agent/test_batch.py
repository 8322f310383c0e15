"""Batches: named by their content, so a resend is the same request."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from urllib.parse import unquote

import pytest

from freehours.agent.batch import MAX_UPLOAD_NAME, Route, nem12_batch, readings_batch, upload_name
from freehours.domain.reads import IntervalRead
from freehours.domain.time import NEM_TIME

START = datetime(2026, 7, 1, 11, 0, tzinfo=NEM_TIME)


def reads(*kwh: str) -> list[IntervalRead]:
    step = timedelta(minutes=30)
    return [
        IntervalRead("4100000001", "E1", START + i * step, START + (i + 1) * step, Decimal(v), "A")
        for i, v in enumerate(kwh)
    ]


def test_the_body_is_the_apis_json_with_kwh_as_strings() -> None:
    batch = readings_batch("4100000001", "E1", 30, reads("0.412", "0.300"))
    assert batch.route is Route.READINGS
    assert batch.content_type == "application/json"
    assert batch.reads == 2
    assert json.loads(batch.body) == {
        "nmi": "4100000001",
        "suffix": "E1",
        "interval_minutes": 30,
        "reads": [
            {"start": "2026-07-01T11:00:00+10:00", "kwh": "0.412", "quality": "A"},
            {"start": "2026-07-01T11:30:00+10:00", "kwh": "0.300", "quality": "A"},
        ],
    }


def test_the_same_reads_always_get_the_same_key() -> None:
    first = readings_batch("4100000001", "E1", 30, reads("0.412", "0.300"))
    again = readings_batch("4100000001", "E1", 30, reads("0.412", "0.300"))
    assert first.idempotency_key == again.idempotency_key
    assert first.body == again.body
    assert first.trace_id != again.trace_id


def test_any_difference_in_the_reads_changes_the_key() -> None:
    base = readings_batch("4100000001", "E1", 30, reads("0.412")).idempotency_key
    assert readings_batch("4100000001", "E1", 30, reads("0.413")).idempotency_key != base
    assert readings_batch("4100000001", "B1", 30, reads("0.412")).idempotency_key != base
    assert readings_batch("4100000002", "E1", 30, reads("0.412")).idempotency_key != base


def test_a_nem12_files_key_comes_from_its_bytes(tmp_path: Path) -> None:
    one = nem12_batch(tmp_path / "a.csv", b"100,NEM12,...")
    other_name = nem12_batch(tmp_path / "b.csv", b"100,NEM12,...")
    other_bytes = nem12_batch(tmp_path / "a.csv", b"100,NEM12,,,")
    assert one.idempotency_key == other_name.idempotency_key
    assert one.idempotency_key != other_bytes.idempotency_key
    assert one.route is Route.NEM12
    assert one.content_type == "text/csv"
    assert one.source == str(tmp_path / "a.csv")
    assert nem12_batch(tmp_path / "a.zip", b"PK\x03\x04rest").content_type == "application/zip"


def test_keys_fit_the_apis_limit() -> None:
    assert len(readings_batch("4100000001", "E1", 30, reads("1")).idempotency_key) <= 255


@pytest.mark.parametrize(
    ("name", "sent"),
    [
        ("delivery-20260701.csv", "delivery-20260701.csv"),
        ("Meter data (July).csv", "Meter data (July).csv"),
        ("Zählerdaten.csv", "Z%C3%A4hlerdaten.csv"),
        ("two\nlines.csv", "two%0Alines.csv"),
        ("tab\tand\rreturn.csv", "tab%09and%0Dreturn.csv"),
        ("100%.csv", "100%25.csv"),
        (" padded .csv ", "%20padded .csv%20"),
        ("bad\udcff.csv", "bad%FF.csv"),  # a byte that is not UTF-8, as os.fsdecode gives it
    ],
)
def test_a_file_name_travels_as_printable_ascii(name: str, sent: str) -> None:
    assert upload_name(f"/inbox/{name}") == sent
    assert unquote(sent, errors="surrogateescape") == name


def test_a_long_name_keeps_its_start_and_its_end() -> None:
    name = "ä" * 300 + "-20260701.csv"
    sent = upload_name(f"/inbox/{name}")
    assert len(sent) <= MAX_UPLOAD_NAME
    assert sent.isascii()
    assert sent.isprintable()
    assert sent.startswith("%C3%A4%C3%A4")
    assert sent.endswith("%C3%A4-20260701.csv")
    assert "..." in sent
