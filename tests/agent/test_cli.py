"""``freehours agent``: its options, their errors (exit 2), and its defaults."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest

from freehours.cli.agent import default_spool_path, parse_duration, parse_start
from freehours.domain.time import NEM_TIME
from freehours.errors import InputError
from tests.support import run_command


def test_an_agent_without_a_source_is_bad_usage(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_command(monkeypatch, "agent", "--api", "http://x", "--api-key", "k") == 2
    assert "--nem12-dir DIR, --simulate N, or both" in capsys.readouterr().err


def test_the_key_may_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FREEHOURS_API_KEY", "from-env")
    assert run_command(monkeypatch, "agent", "--api", "http://x") == 2
    assert "--nem12-dir" in capsys.readouterr().err  # got past the missing key


def test_a_bad_duration_names_the_option(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ("agent", "--api", "http://x", "--api-key", "k", "--simulate", "1")
    assert run_command(monkeypatch, *args, "--duration", "a while") == 2
    assert "--duration 'a while'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1d", timedelta(days=1)),
        ("6h", timedelta(hours=6)),
        ("90m", timedelta(minutes=90)),
        ("1h30m", timedelta(minutes=90)),
        ("45s", timedelta(seconds=45)),
        ("0.5h", timedelta(minutes=30)),
    ],
)
def test_durations(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "1", "h", "1x", "1h 30m", "-1h"])
def test_durations_that_are_not(text: str) -> None:
    with pytest.raises(InputError, match="--duration"):
        parse_duration(text)


def test_a_start_without_an_offset_is_nem_time() -> None:
    assert parse_start("2026-07-01T11:00").tzinfo is NEM_TIME
    assert parse_start("2026-07-01T11:00+09:30").utcoffset() == timedelta(hours=9, minutes=30)
    with pytest.raises(InputError, match="--start"):
        parse_start("tomorrow")


def test_the_spool_lives_in_the_users_state_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    path = default_spool_path("http://a:8000", None)
    assert path.parent == tmp_path / "freehours"
    assert re.fullmatch(r"agent-spool-[0-9a-f]{16}\.db", path.name)
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_spool_path("http://a:8000", None) == (
        tmp_path / ".local" / "state" / "freehours" / path.name
    )


def test_each_api_and_inbox_has_a_default_spool_of_its_own(tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    spools = {
        default_spool_path("http://a:8000", None),
        default_spool_path("http://b:8000", None),
        default_spool_path("http://a:8000", inbox),
        default_spool_path("http://a:8000", tmp_path / "other"),
    }
    assert len(spools) == 4
    # The same agent started again finds its own; a trailing slash is the same API.
    assert default_spool_path("http://a:8000/", inbox) == default_spool_path("http://a:8000", inbox)
