"""The project's own processes as a benchmark runs them: ``freehours worker`` (and any other
command) started with its environment, stopped by SIGTERM as a supervisor would, and measured
from outside: peak memory (``VmHWM``) while it lives, and what its JSON log says failed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from logging import WARNING
from pathlib import Path

import structlog

#: Where the virtual environment's commands are.
BIN = Path(sys.executable).parent


@contextmanager
def warnings_only() -> Iterator[None]:
    """This process logs warnings and worse only while a benchmark measures (a run logs each
    batch it starts), then as it did before."""
    before = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(WARNING))
    try:
        yield
    finally:
        structlog.configure(**before)


def start(
    args: Sequence[str], url: str, log: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """``freehours ARGS`` on the database at ``url``, logging warnings to ``log``."""
    environment = {
        **os.environ,
        "FREEHOURS_DATABASE_URL": url,
        "FREEHOURS_LOG_LEVEL": "warning",
        **(env or {}),
    }
    with log.open("wb") as sink:
        return subprocess.Popen(
            [str(BIN / "freehours"), *args],
            env=environment,
            stdout=subprocess.DEVNULL,
            stderr=sink,
        )


def start_worker(url: str, log: Path) -> subprocess.Popen[bytes]:
    """A ``freehours worker`` process on ``url``, logging warnings to ``log``."""
    return start(["worker"], url, log)


def stop_worker(worker: subprocess.Popen[bytes]) -> None:
    """SIGTERM, as a supervisor stops it, once the worker has started (it handles SIGTERM once
    it has opened the database: before, the signal would kill it, as in a small run that ends
    while a worker is still starting); a worker that does not exit 0 breaks the bench."""
    deadline = time.monotonic() + 60
    while worker.poll() is None and not _handles(worker.pid, signal.SIGTERM):
        if time.monotonic() > deadline:
            raise RuntimeError("worker process did not start within 60 s")
        time.sleep(0.05)
    if worker.poll() is None:
        worker.send_signal(signal.SIGTERM)
    if worker.wait(timeout=60) != 0:
        raise RuntimeError(f"worker process exited with {worker.returncode}")


def _handles(pid: int, signum: int) -> bool:
    """Whether process ``pid`` has a handler of its own for ``signum`` (Linux: SigCgt)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    for line in status.splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    return False


def peak_rss(pid: int) -> int:
    """The peak resident set size of process ``pid`` so far, in bytes (Linux: VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmHWM for process {pid}")


def failures(logs: Sequence[Path]) -> list[str]:
    """The job attempts that failed, as the workers logged them: each one's note."""
    notes = []
    for log in logs:
        for line in log.read_text().splitlines():
            if line.startswith("{"):
                entry = json.loads(line)
                if entry.get("event") == "job_finished" and entry.get("outcome") == "failed":
                    notes.append(str(entry.get("note", "")))
    return notes
