"""What every suite's tests share: waiting, with a deadline, for what another thread or process
is doing, and running a ``freehours`` command in the test's own process.

A test that looks again and again writes ``eventually(look, within=..., what=...)`` rather than
its own loop, so that every wait has a deadline, fails saying what did not happen and what was
last seen, and does not spin.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from datetime import date, datetime
from typing import TypeVar

import pytest

from freehours.cli import main
from freehours.domain.settlement import Quota, new_quota
from freehours.store.database import Unit

T = TypeVar("T")

#: Between two looks at something another thread or process is doing.
POLL_SECONDS = 0.02


def eventually(
    look: Callable[[], T | None],
    *,
    within: float = 20.0,
    what: str = "it",
    every: float = POLL_SECONDS,
    ignoring: tuple[type[Exception], ...] = (),
) -> T:
    """Look every ``every`` s until ``look`` answers something truthy, and return it; fail
    after ``within`` s. ``look`` may itself fail (assert) to give up early: a process that
    exited, say. An exception of ``ignoring`` (a service not up yet refusing a connection) counts
    as no answer, and is what was last seen."""
    deadline = time.monotonic() + within
    while True:
        seen: object
        try:
            seen = look()
        except AssertionError:
            raise
        except ignoring as exc:
            seen = exc
        else:
            if seen:
                return seen  # type: ignore[return-value]
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {within:g} s (last seen: {seen!r})")
        time.sleep(every)


async def eventually_async(
    holds: Callable[[], bool], *, within: float = 10.0, what: str = "it"
) -> None:
    """``eventually`` for a test on an event loop: look every ``POLL_SECONDS`` until ``holds``
    answers true, letting the loop run between looks; fail after ``within`` s."""
    deadline = time.monotonic() + within
    while not holds():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {within:g} s")
        await asyncio.sleep(POLL_SECONDS)


def run_captured(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    *args: str,
    width: int = 200,
) -> tuple[int, str, str]:
    """``run_command``, and what it wrote: (exit status, stdout, stderr)."""
    code = run_command(monkeypatch, *args, width=width)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def run_flat(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    *args: str,
    width: int = 200,
) -> tuple[int, str, str]:
    """``run_captured``, stderr on one line (Rich wraps long errors to the terminal)."""
    code, out, err = run_captured(monkeypatch, capsys, *args, width=width)
    return code, out, " ".join(err.split())


def run_command(monkeypatch: pytest.MonkeyPatch, *args: str, width: int = 200) -> int:
    """Run ``freehours ARGS`` through its entry point, as the shell would; its exit status.
    Rich draws at ``width`` columns, whatever the terminal running the tests; stdout is not a
    terminal, so a list prints JSON unless ``--format table`` is given."""
    monkeypatch.setattr(sys, "argv", ["freehours", *args])
    monkeypatch.setenv("COLUMNS", str(width))
    with pytest.raises(SystemExit) as exited:
        main()
    return exited.value.code if isinstance(exited.value.code, int) else 1


def stored_or_new(unit: Unit, nmi: str, day: date, *, at: datetime) -> Quota:
    """The quota's newest version locked for ``unit``'s transaction, version 1 inserted (written
    ``at``) when there is none: a quota to put in a state before a test settles it."""
    unit.quotas.insert_if_absent([new_quota(nmi, day)], at=at)
    quota = unit.quotas.latest(nmi, day, for_update=True)
    assert quota is not None, "version 1 was just inserted or already existed"
    return quota
