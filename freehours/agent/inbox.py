"""The NEM12 inbox: a directory that files arrive in, with ``done/`` and ``rejected/`` in it.

A file is taken once it has been still for ``settle_seconds`` (a file being copied in is not sent
half-written; writers that rename a finished file into the directory are safest): one that is
still changing is left where it is and looked at again at the next scan. It goes to ``done/`` once
the API has all of it, or to ``rejected/`` with a reason beside it (``NAME.reason.txt``: why and
when; after the API's refusal also its problem details, ``NAME.problem.json``). The agent itself
rejects what it cannot send: a file it cannot read, and a file larger than ``max_bytes`` (which
is never read at all). Hidden files, names ending ``.tmp`` or ``.part``, and entries that are not
regular files (directories, symbolic links, FIFOs) are never taken.

No file stops the others: each one's fault is its own, and the scan goes on to the next.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from datetime import datetime
from pathlib import Path

import structlog

from freehours import defaults
from freehours.agent.batch import Batch, nem12_batch, upload_name
from freehours.clock import Clock
from freehours.errors import ConfigurationError
from freehours.observability.metrics import AGENT_FILES_REJECTED

log = structlog.get_logger("freehours.agent")

#: A file not written to for two seconds is taken as complete: copies in progress write far more
#: often than that.
SETTLE_SECONDS = 2.0
#: The API's own limit on an upload by default (``FREEHOURS_MAX_UPLOAD_BYTES``'s): a larger file
#: would only be refused with a 413, after the agent had read and spooled all of it.
MAX_FILE_BYTES = defaults.MAX_UPLOAD_BYTES
_IGNORED_SUFFIXES = (".tmp", ".part", ".problem.json", ".reason.txt")
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC


class Inbox:
    """The directory ``directory``: what has arrived in it, and where files go afterwards.

    After each ``arrivals()``: ``unsettled`` lists the files left because they were still being
    written, and ``rejected`` counts the files moved to ``rejected/`` by that scan.
    """

    def __init__(
        self,
        directory: Path,
        clock: Clock,
        *,
        settle_seconds: float = SETTLE_SECONDS,
        max_bytes: int = MAX_FILE_BYTES,
    ) -> None:
        if not directory.is_dir():
            raise ConfigurationError(f"--nem12-dir {directory}: not a directory")
        self.directory = directory
        self._clock = clock
        self._settle = settle_seconds
        self._max_bytes = max_bytes
        # Files already taken, by their (size, modification time): not read again unless changed.
        self._taken: dict[Path, tuple[int, int]] = {}
        self.unsettled: list[Path] = []
        self.rejected = 0

    def arrivals(self) -> list[Batch]:
        """A batch for each file that has arrived (or changed) since the last call and is still,
        oldest first; files that cannot be sent are moved to ``rejected/`` on the way."""
        now = self._clock.now()
        found: list[tuple[int, Path, tuple[int, int]]] = []
        with os.scandir(self.directory) as entries:
            for entry in entries:
                if entry.name.startswith(".") or entry.name.endswith(_IGNORED_SUFFIXES):
                    continue
                try:
                    if not entry.is_file(follow_symlinks=False):
                        continue
                    status = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                found.append(
                    (status.st_mtime_ns, Path(entry.path), (status.st_size, status.st_mtime_ns))
                )
        present = {path for _, path, _ in found}
        self._taken = {path: mark for path, mark in self._taken.items() if path in present}
        self.unsettled = []
        self.rejected = 0
        batches: list[Batch] = []
        for mtime_ns, path, mark in sorted(found):
            if self._taken.get(path) == mark:
                continue
            if 0 <= now.timestamp() - mtime_ns / 1e9 < self._settle:
                # Still being written. (A modification time in the future was copied from a
                # clock ahead of ours: the file was finished before it was moved in.)
                self.unsettled.append(path)
                continue
            size, _ = mark
            if size > self._max_bytes:
                self._reject(path, mark, "too_large", _too_large(size, self._max_bytes), now)
                continue
            try:
                content = self._read(path, mark)
            except FileNotFoundError:
                continue
            except OSError as exc:
                self._reject(path, mark, "unreadable", f"unreadable: {exc}", now)
                continue
            if content is None:  # it changed while it was read: still being written
                self.unsettled.append(path)
                continue
            if isinstance(content, int):  # it grew past the limit after the scan saw it
                self._reject(path, mark, "too_large", _too_large(content, self._max_bytes), now)
                continue
            self._taken[path] = mark
            sent_as = upload_name(str(path))
            if sent_as != path.name:
                log.warning("file_name_encoded", file=path.name, sent_as=sent_as)
            batches.append(nem12_batch(path, content))
        return batches

    def _read(self, path: Path, mark: tuple[int, int]) -> bytes | int | None:
        """The file's bytes; its size when it is now over the limit (never more is read); None
        when it changed since the scan. Raises ``OSError`` when it cannot be read."""
        descriptor = os.open(path, _OPEN_FLAGS)  # never blocks on a FIFO swapped in meanwhile
        with os.fdopen(descriptor, "rb") as file:
            status = os.fstat(file.fileno())
            if not stat.S_ISREG(status.st_mode):
                raise OSError(f"{path.name!r} is no longer a regular file")
            if status.st_size > self._max_bytes:
                return status.st_size
            content = file.read(self._max_bytes + 1)
        if len(content) > self._max_bytes:
            return len(content)
        if (status.st_size, status.st_mtime_ns) != mark or len(content) != status.st_size:
            return None
        return content

    def _reject(
        self, path: Path, mark: tuple[int, int], kind: str, reason: str, now: datetime
    ) -> None:
        log.error("file_rejected", file=path.name, reason=reason)
        # Not looked at again unless it changes, also when it cannot be moved.
        self._taken[path] = mark
        moved: Path | None = None
        failure: str | None = None
        try:
            moved = file_rejected(str(path), reason, now)
        except OSError as exc:
            failure = str(exc)
        if failure is not None:
            log.error("file_not_moved", file=path.name, error=failure)
        elif moved is not None:
            AGENT_FILES_REJECTED.labels(kind).inc()
            self.rejected += 1


def _too_large(size: int, limit: int) -> str:
    return (
        f"too large: {size} bytes, over the agent's limit of {limit} bytes "
        "(--max-file-bytes; the API's FREEHOURS_MAX_UPLOAD_BYTES would refuse it with a 413)"
    )


def file_done(source: str) -> Path | None:
    """Move ``source`` to ``done/`` beside it; None when it is gone already (moved before a
    crash)."""
    path = Path(source)
    return _move(path, path.parent / "done")


def file_rejected(
    source: str, reason: str, when: datetime, problem: bytes | None = None
) -> Path | None:
    """Write why (``reason``, at ``when``; and the API's ``problem`` details, when it refused
    the file) where ``source`` goes in ``rejected/`` beside it, then move it there. None when the
    file is gone."""
    path = Path(source)
    if not path.exists():
        return None
    folder = path.parent / "rejected"
    folder.mkdir(exist_ok=True)
    target = _free_name(folder, path.name)
    if problem is not None:
        target.with_name(f"{target.name}.problem.json").write_bytes(_pretty(problem))
    target.with_name(f"{target.name}.reason.txt").write_text(
        f"{path.name!r} was rejected at {when.isoformat(timespec='seconds')}\n{reason}\n",
        encoding="utf-8",
        errors="backslashreplace",
    )
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
