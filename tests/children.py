"""What the tests that run workers as child processes share: on the child's side, its set-up
(warnings only in its log, SIGTERM asking it to stop); on the test's side, the children it
started, killed and reaped at the end whatever the test did."""

from __future__ import annotations

import logging
import signal
import subprocess
import threading
from types import FrameType

import structlog


def child_set_up() -> threading.Event:
    """A worker child's start: log warnings and worse only, and an event that SIGTERM sets."""
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    stop = threading.Event()

    def request_stop(_signal: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    return stop


class Children:
    """The child processes of one test: ``close`` kills those still running and reaps them."""

    def __init__(self) -> None:
        self.started: list[subprocess.Popen[str]] = []

    def close(self) -> None:
        for process in self.started:
            if process.poll() is None:
                process.kill()
            process.wait()
            if process.stdout is not None:
                process.stdout.close()
