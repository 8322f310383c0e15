"""The NEM12 inbox: files taken once still, moved to done/ or rejected/ afterwards."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

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
    assert file_rejected(str(path), problem) == tmp_path / "rejected" / "a.csv"
    saved = json.loads((tmp_path / "rejected" / "a.csv.problem.json").read_text())
    assert saved["detail"] == "a.csv:3: bad value"


def test_the_inbox_must_be_a_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="not a directory"):
        Inbox(tmp_path / "missing", ManualClock(NOW))


def test_a_file_stamped_in_the_future_by_another_clock_is_taken(tmp_path: Path) -> None:
    write(tmp_path / "a.csv", b"copied with its times", age=-3600)
    assert len(Inbox(tmp_path, ManualClock(NOW)).arrivals()) == 1
