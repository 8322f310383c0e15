"""The NEM12 inbox: a directory that files arrive in, with ``done/`` and ``rejected/`` in it.

A file is taken once it has been still for ``settle_seconds`` (a file being copied in is not sent
half-written; writers that rename a finished file into the directory are safest). It goes to
``done/`` once the API has all of it, or to ``rejected/`` with the API's problem details beside it
(``NAME.problem.json``). Hidden files and names ending ``.tmp`` or ``.part`` are never taken.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

import structlog

from freehours.agent.batch import Batch, nem12_batch
from freehours.clock import Clock
from freehours.errors import ConfigurationError

log = structlog.get_logger("freehours.agent")

#: A file not written to for a second is taken as complete: copies in progress write far more
#: often than that.
SETTLE_SECONDS = 1.0
_IGNORED_SUFFIXES = (".tmp", ".part", ".problem.json")


class Inbox:
    """The directory ``directory``: what has arrived in it, and where files go afterwards."""

    def __init__(
        self, directory: Path, clock: Clock, *, settle_seconds: float = SETTLE_SECONDS
    ) -> None:
        if not directory.is_dir():
            raise ConfigurationError(f"--nem12-dir {directory}: not a directory")
        self.directory = directory
        self._clock = clock
        self._settle = settle_seconds
        # Files already taken, by their (size, modification time): not read again unless changed.
        self._taken: dict[Path, tuple[int, int]] = {}

    def arrivals(self) -> list[Batch]:
        """A batch for each file that has arrived (or changed) since the last call and is still,
        oldest first."""
        now = self._clock.now().timestamp()
        found: list[tuple[int, Path, tuple[int, int]]] = []
        with os.scandir(self.directory) as entries:
            for entry in entries:
                if entry.name.startswith(".") or entry.name.endswith(_IGNORED_SUFFIXES):
                    continue
                try:
                    if not entry.is_file(follow_symlinks=False):
                        continue
                    stat = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                found.append((stat.st_mtime_ns, Path(entry.path), (stat.st_size, stat.st_mtime_ns)))
        present = {path for _, path, _ in found}
        self._taken = {path: mark for path, mark in self._taken.items() if path in present}
        batches: list[Batch] = []
        for mtime_ns, path, mark in sorted(found):
            if self._taken.get(path) == mark or 0 <= now - mtime_ns / 1e9 < self._settle:
                # (A modification time in the future was copied from a clock ahead of ours: the
                # file was finished before it was moved in.)
                continue
            try:
                content = path.read_bytes()
            except FileNotFoundError:
                continue
            self._taken[path] = mark
            batches.append(nem12_batch(path, content))
        return batches


def file_done(source: str) -> Path | None:
    """Move ``source`` to ``done/`` beside it; None when it is gone already (moved before a
    crash)."""
    path = Path(source)
    return _move(path, path.parent / "done")


def file_rejected(source: str, problem: bytes) -> Path | None:
    """Write the problem where ``source`` goes in ``rejected/`` beside it, then move it there."""
    path = Path(source)
    if not path.exists():
        return None
    folder = path.parent / "rejected"
    folder.mkdir(exist_ok=True)
    target = _free_name(folder, path.name)
    target.with_name(f"{target.name}.problem.json").write_bytes(_pretty(problem))
    return _move(path, folder, target)


def _move(path: Path, folder: Path, target: Path | None = None) -> Path | None:
    folder.mkdir(exist_ok=True)
    target = target or _free_name(folder, path.name)
    try:
        path.rename(target)
    except FileNotFoundError:
        return None
    log.info("file_moved", source=str(path), to=str(target))
    return target


def _free_name(folder: Path, name: str) -> Path:
    """``folder/name``, or ``folder/name.1``, ``.2``, ... when a file of that name is there."""
    target = folder / name
    number = 0
    while target.exists():
        number += 1
        target = folder / f"{name}.{number}"
    return target


def _pretty(problem: bytes) -> bytes:
    with contextlib.suppress(ValueError):
        return json.dumps(json.loads(problem), indent=2).encode() + b"\n"
    return problem
