"""The NEM12 inbox: files taken once still, moved to done/ or rejected/ afterwards."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
import structlog

from freehours.agent.inbox import Inbox, file_done, file_rejected
from freehours.clock import ManualClock
from freehours.errors import ConfigurationError

NOW = datetime(2026, 7, 1, 2, 0, tzinfo=UTC)


def write(path: Path, content: bytes, *, age: float) -> Path:
    """``content`` at ``path``, last modified ``age`` seconds before NOW."""
    path.write_bytes(content)
    stamp = NOW.timestamp() - age
    os.utime(path, (stamp, stamp))
    return path


def test_files_are_taken_oldest_first(tmp_path: Path) -> None:
    write(tmp_path / "b.csv", b"second", age=10)
    write(tmp_path / "a.csv", b"first", age=20)
    batches = Inbox(tmp_path, ManualClock(NOW)).arrivals()
    assert [batch.body for batch in batches] == [b"first", b"second"]
    assert batches[0].source == str(tmp_path / "a.csv")


def test_a_file_still_being_written_waits(tmp_path: Path) -> None:
    write(tmp_path / "a.csv", b"half", age=0.2)
    clock = ManualClock(NOW)
    inbox = Inbox(tmp_path, clock, settle_seconds=1.0)
    assert inbox.arrivals() == []
    clock.advance(1.0)
    assert len(inbox.arrivals()) == 1


def test_a_file_is_taken_once_unless_it_changes(tmp_path: Path) -> None:
    path = write(tmp_path / "a.csv", b"one", age=10)
    inbox = Inbox(tmp_path, ManualClock(NOW))
    assert len(inbox.arrivals()) == 1
    assert inbox.arrivals() == []
    write(path, b"two!", age=5)
    (again,) = inbox.arrivals()
    assert again.body == b"two!"


def test_hidden_partial_and_folder_entries_are_ignored(tmp_path: Path) -> None:
    for name in (".hidden.csv", "copying.tmp", "copying.part"):
        write(tmp_path / name, b"x", age=10)
    (tmp_path / "done").mkdir()
    write(tmp_path / "done" / "old.csv", b"x", age=10)
    assert Inbox(tmp_path, ManualClock(NOW)).arrivals() == []


def test_a_delivered_file_moves_to_done(tmp_path: Path) -> None:
    path = write(tmp_path / "a.csv", b"x", age=10)
    assert file_done(str(path)) == tmp_path / "done" / "a.csv"
    assert not path.exists()
    assert file_done(str(path)) is None  # gone already: moved before a crash


def test_a_second_file_of_the_same_name_does_not_overwrite_the_first(tmp_path: Path) -> None:
    file_done(str(write(tmp_path / "a.csv", b"1", age=10)))
    assert file_done(str(write(tmp_path / "a.csv", b"2", age=10))) == tmp_path / "done" / "a.csv.1"
    assert (tmp_path / "done" / "a.csv").read_bytes() == b"1"


def test_a_refused_file_moves_to_rejected_with_its_problem(tmp_path: Path) -> None:
    path = write(tmp_path / "a.csv", b"x", age=10)
    problem = b'{"type": "invalid-input", "detail": "a.csv:3: bad value"}'
    moved = file_rejected(str(path), "refused: HTTP 422", NOW, problem)
    assert moved == tmp_path / "rejected" / "a.csv"
    saved = json.loads((tmp_path / "rejected" / "a.csv.problem.json").read_text())
    assert saved["detail"] == "a.csv:3: bad value"
    reason = (tmp_path / "rejected" / "a.csv.reason.txt").read_text()
    assert reason == f"'a.csv' was rejected at {NOW.isoformat()}\nrefused: HTTP 422\n"


def test_a_file_over_the_limit_is_rejected_unread(tmp_path: Path) -> None:
    big = tmp_path / "big.csv"
    big.touch()
    os.truncate(big, 2 * 1024**3)  # 2 GiB, sparse: no disk, and it would not fit in memory
    os.utime(big, (NOW.timestamp() - 10, NOW.timestamp() - 10))
    write(tmp_path / "small.csv", b"100,NEM12", age=5)
    inbox = Inbox(tmp_path, ManualClock(NOW), max_bytes=1024)
    with structlog.testing.capture_logs() as logs:
        (batch,) = inbox.arrivals()
    assert batch.body == b"100,NEM12"
    assert inbox.rejected == 1
    assert not big.exists()
    assert (tmp_path / "rejected" / "big.csv").stat().st_size == 2 * 1024**3
    reason = (tmp_path / "rejected" / "big.csv.reason.txt").read_text()
    assert "too large: 2147483648 bytes, over the agent's limit of 1024 bytes" in reason
    assert [line["event"] for line in logs] == ["file_rejected", "file_moved"]


def test_an_unreadable_file_is_rejected_and_the_others_taken(tmp_path: Path) -> None:
    locked = write(tmp_path / "a-locked.csv", b"100,NEM12,locked", age=20)
    write(tmp_path / "b-fine.csv", b"100,NEM12,fine", age=10)
    clock = ManualClock(NOW)
    inbox = Inbox(tmp_path, clock)

    # The file is swapped for a FIFO between the scan and the read: opening it must neither
    # block nor be taken for a file (a FIFO is what fails to be read here even as root).
    def swap(path: Path, mark: tuple[int, int]) -> bytes | int | None:
        if path == locked:
            path.unlink()
            os.mkfifo(path)
        return Inbox._read(inbox, path, mark)

    inbox._read = swap  # type: ignore[method-assign]
    (batch,) = inbox.arrivals()
    assert batch.body == b"100,NEM12,fine"
    assert inbox.rejected == 1
    reason = (tmp_path / "rejected" / "a-locked.csv.reason.txt").read_text()
    assert "unreadable:" in reason
    assert "is no longer a regular file" in reason


def test_a_file_still_being_written_is_left_for_the_next_scan(tmp_path: Path) -> None:
    path = write(tmp_path / "growing.csv", b"100,NEM12,", age=0.5)
    clock = ManualClock(NOW)
    inbox = Inbox(tmp_path, clock, settle_seconds=2.0)
    assert inbox.arrivals() == []
    assert inbox.unsettled == [path]
    assert inbox.rejected == 0
    assert path.exists()
    clock.advance(2.0)
    (batch,) = inbox.arrivals()
    assert batch.body == b"100,NEM12,"
    assert inbox.unsettled == []


def test_a_name_that_cannot_travel_in_a_header_is_sent_encoded(tmp_path: Path) -> None:
    write(tmp_path / "Zählerdaten\n2026.csv", b"100,NEM12", age=10)
    with structlog.testing.capture_logs() as logs:
        (batch,) = Inbox(tmp_path, ManualClock(NOW)).arrivals()
    assert batch.source == str(tmp_path / "Zählerdaten\n2026.csv")
    (line,) = [line for line in logs if line["event"] == "file_name_encoded"]
    assert line["sent_as"] == "Z%C3%A4hlerdaten%0A2026.csv"


def test_the_inbox_must_be_a_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="not a directory"):
        Inbox(tmp_path / "missing", ManualClock(NOW))


def test_a_file_stamped_in_the_future_by_another_clock_is_taken(tmp_path: Path) -> None:
    write(tmp_path / "a.csv", b"copied with its times", age=-3600)
    assert len(Inbox(tmp_path, ManualClock(NOW)).arrivals()) == 1
