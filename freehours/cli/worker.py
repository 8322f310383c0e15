"""``freehours worker``: run settlement jobs until SIGTERM or SIGINT, then stop gracefully."""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Annotated

import typer

from freehours.cli import app
from freehours.runtime import Runtime
from freehours.settings import get_settings

#: How often the main thread looks up from waiting for a signal: Python runs signal handlers
#: between bytecodes, so a bounded wait keeps the process responsive to them.
_SIGNAL_CHECK_SECONDS = 0.5


@app.command("worker")
def worker(
    concurrency: Annotated[
        int | None,
        typer.Option(
            "--concurrency",
            min=1,
            help="Jobs run at once, on threads (default: FREEHOURS_WORKER_CONCURRENCY, 4)",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Run due jobs from the database (FREEHOURS_DATABASE_URL) until SIGTERM or SIGINT.

    Any number of workers, in any number of processes, may share one PostgreSQL database.

    On SIGTERM or SIGINT: stop claiming, let running jobs finish, release the rest, exit 0.

    Running jobs get FREEHOURS_WORKER_GRACE_SECONDS (default 25) to finish.
    """
    settings = get_settings()
    runtime = Runtime.open(settings)
    try:
        running = runtime.worker(concurrency)
        stop = threading.Event()

        def request_stop(_signal: int, _frame: FrameType | None) -> None:
            stop.set()

        signal.signal(signal.SIGTERM, request_stop)
        signal.signal(signal.SIGINT, request_stop)
        running.start()
        while not stop.wait(_SIGNAL_CHECK_SECONDS):
            pass
        running.stop(settings.worker_grace_seconds)
    finally:
        runtime.close()
