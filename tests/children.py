"""What the tests that run workers as child processes share: on the child's side, its set-up
(warnings only in its log, SIGTERM asking it to stop); on the test's side, the children it
started, killed and reaped at the end whatever the test did."""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import threading
from pathlib import Path
from types import FrameType

import pytest
import structlog


def child_set_up() -> threading.Event:
    """A worker child's start: log warnings and worse only, and an event that SIGTERM sets."""
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    stop = threading.Event()

    def request_stop(_signal: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    return stop


#: The repository: where a child runs ``python -m tests....`` from.
ROOT = Path(__file__).resolve().parents[1]


class Children:
    """The child processes of one test: ``close`` kills those still running and reaps them."""

    def __init__(self) -> None:
        self.started: list[subprocess.Popen[str]] = []

    def start_module(self, module: str, *args: str) -> subprocess.Popen[str]:
        """``python -m module args``, its stdout read by ``wait_for``."""
        process = subprocess.Popen(
            [sys.executable, "-m", module, *args], cwd=ROOT, stdout=subprocess.PIPE, text=True
        )
        self.started.append(process)
        return process

    def wait_for(self, process: subprocess.Popen[str], marker: str) -> str:
        """Until ``process`` prints a line with ``marker``: that line; fails if it exits first."""
        assert process.stdout is not None
        for line in process.stdout:
            if marker in line:
                return line
        what = " ".join(map(str, process.args[:4]))
        pytest.fail(f"{what} exited ({process.wait()}) before saying {marker!r}")

    def close(self) -> None:
        for process in self.started:
            if process.poll() is None:
                process.kill()
            process.wait()
            if process.stdout is not None:
                process.stdout.close()
