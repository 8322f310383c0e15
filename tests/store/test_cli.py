"""``freehours db upgrade`` and ``freehours nem12 import``, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from freehours.cli import nem12_import
from freehours.domain.reads import IntervalDay
from freehours.domain.time import NEM_TIME
from freehours.meterdata.nem12 import read_days
from freehours.meterdata.writer import write_nem12
from freehours.settings import get_settings
from freehours.store import schema
from freehours.store.database import Store
from freehours.store.engine import create_engine
from tests.support import run_command

STAMP = datetime(2026, 7, 2, 6, 30, tzinfo=NEM_TIME)


def configured(url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """``url`` as FREEHOURS_DATABASE_URL, for commands that read the settings."""
    monkeypatch.setenv("FREEHOURS_DATABASE_URL", url)
    get_settings.cache_clear()
    yield url
    get_settings.cache_clear()


@pytest.fixture
def database_url(store_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A migrated database, configured."""
    yield from configured(store_url, monkeypatch)


@pytest.fixture
def empty_database_url(empty_store_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A database with no schema yet, configured."""
    yield from configured(empty_store_url, monkeypatch)


def nem12_file(path: Path, nmis: list[str], days: int = 3) -> Path:
    write_nem12(
        (
            IntervalDay(
                nmi, suffix, date(2026, 7, 1) + timedelta(days=n), 30, values, "A" * 48, STAMP
            )
            for nmi in nmis
            for suffix in ("E1", "B1")
            for n in range(days)
            for values in [tuple(Decimal(f"0.{n + 1}{i:02d}") for i in range(48))]
        ),
        path,
        created=STAMP,
    )
    return path


def spoil_a_value(path: Path, nmi: str) -> int:
    """Make one interval value of ``nmi``'s last 300 record unreadable; its line number."""
    lines = path.read_text().splitlines(keepends=True)
    in_nmi = [
        n for n, line in enumerate(lines) if line.startswith("200,") and f",{nmi}," in f",{line}"
    ]
    record = max(n for n, line in enumerate(lines) if line.startswith("300,") and n > in_nmi[0])
    fields = lines[record].split(",")
    fields[5] = "1.2.3"
    lines[record] = ",".join(fields)
    path.write_text("".join(lines))
    return record + 1


def stored_nmis(url: str) -> list[str]:
    with Store.open(url) as store, store.read() as unit:
        return sorted(
            {
                nmi
                for day in range(3)
                for nmi in unit.meter.nmis_with_data_on(date(2026, 7, 1 + day))
            }
        )


def test_db_upgrade_brings_the_configured_database_to_head(
    empty_database_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_command(monkeypatch, "db", "upgrade") == 0

    assert f"schema revision {schema.head_revision()}" in capsys.readouterr().out
    engine = create_engine(empty_database_url)
    schema.require_current(engine)
    engine.dispose()


def test_import_stores_every_file_and_sums_them_up(
    database_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    first = nem12_file(tmp_path / "first.csv", ["4103035611", "4103035612"])
    second = nem12_file(tmp_path / "second.csv", ["4103035613"])

    assert run_command(monkeypatch, "nem12", "import", str(first), str(second)) == 0

    out = capsys.readouterr().out
    assert "2 of 2 files stored; counts in channel-days" in out
    assert "NEM12 import, in channel-days (one channel's NEM day, a 300 row)" in out
    header = next(line for line in out.splitlines() if "file" in line)
    assert [cell.strip() for cell in header.split("┃")[1:5]] == [
        "file", "channel-days", "intervals", "new",
    ]  # fmt: skip
    total = next(line for line in out.splitlines() if line.startswith("│ total"))
    # 3 NMIs x 2 channels x 3 days, all new: 18 channel-days of 48 values.
    assert [cell.strip() for cell in total.split("│")[1:8]] == [
        "total", "18", "864", "18", "0", "0", "0",
    ]  # fmt: skip
    assert stored_nmis(database_url) == ["4103035611", "4103035612", "4103035613"]
    with Store.open(database_url) as store, store.read() as unit:
        recorded = [
            (r.source, r.name, r.bytes, r.key_id, r.accepted)
            for r in unit.ingestions.recent(limit=10)
        ]
    assert recorded == [
        ("import", "second.csv", second.stat().st_size, None, 6),
        ("import", "first.csv", first.stat().st_size, None, 12),
    ]


def test_a_file_with_a_bad_line_stores_nothing_of_itself_and_exits_2(
    database_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    good = nem12_file(tmp_path / "good.csv", ["4103035611"])
    bad = nem12_file(tmp_path / "bad.csv", ["4103035612", "4103035613"])
    line = spoil_a_value(bad, "4103035613")

    assert run_command(monkeypatch, "nem12", "import", str(bad), str(good)) == 2

    captured = capsys.readouterr()
    assert f"bad.csv:{line}" in captured.err
    assert "nothing of" in captured.err
    assert "1 of 2 files stored" in captured.out
    # The bad file's first NMI was read, and staged, before its bad line: none of it stayed.
    assert stored_nmis(database_url) == ["4103035611"]
    with Store.open(database_url) as store, store.read() as unit:
        assert [r.name for r in unit.ingestions.recent(limit=10)] == ["good.csv"]


def test_an_interrupted_import_says_which_files_landed(
    database_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Ctrl-C while the second of three files is being stored: the first landed, nothing of the
    second stayed (its transaction rolled back), the third never started, and the command says
    so and exits 130."""
    first = nem12_file(tmp_path / "first.csv", ["4103035611"])
    second = nem12_file(tmp_path / "second.csv", ["4103035612", "4103035613"])
    third = nem12_file(tmp_path / "third.csv", ["4103035614"])

    def read_then_interrupt(path: Path, **options: Any) -> Iterator[IntervalDay]:
        for n, day in enumerate(read_days(path, **options)):
            if path == second and n == 4:  # four of its days read and staged: Ctrl-C
                raise KeyboardInterrupt
            yield day

    monkeypatch.setattr(nem12_import, "read_days", read_then_interrupt)

    assert run_command(monkeypatch, "nem12", "import", str(first), str(second), str(third)) == 130

    captured = capsys.readouterr()
    assert "1 of 1 files stored" in captured.out
    assert f"nothing of {second} was stored" in captured.err
    assert "1 more file not started" in captured.err
    assert stored_nmis(database_url) == ["4103035611"]


def test_import_of_a_missing_file_is_bad_usage(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert run_command(monkeypatch, "nem12", "import", str(tmp_path / "nope.csv")) == 2
