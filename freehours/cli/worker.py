"""``freehours worker``: run jobs until SIGTERM or SIGINT, then stop gracefully."""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Annotated

import typer

from freehours.cli import app
from freehours.cli.dbguard import needs_database
from freehours.cli.options import MetricsHost, MetricsPort
from freehours.observability.exposition import forget_process, serve_metrics
from freehours.observability.logging import configure_logging
from freehours.observability.tracing import configure_tracing
from freehours.operations.runtime import Runtime, freeze_start_up_heap
from freehours.settings import get_settings, worker_queues

#: How often the main thread looks up from waiting for a signal: Python runs signal handlers
#: between bytecodes, so a bounded wait keeps the process responsive to them.
_SIGNAL_CHECK_SECONDS = 0.5


def _queues(spec: str) -> dict[str, int]:
    try:
        return worker_queues(spec)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


@app.command("worker")
@needs_database
def worker(
    concurrency: Annotated[
        int | None,
        typer.Option(
            "--concurrency",
            min=1,
            metavar="N",
            help=(
                "Runner threads of each queue (settle, invoice, webhook) that --queues does not"
                " size (default: FREEHOURS_WORKER_CONCURRENCY, 4)"
            ),
            show_default=False,
        ),
    ] = None,
    queues: Annotated[
        dict[str, int] | None,
        typer.Option(
            "--queues",
            metavar="QUEUE=N[,...]",
            parser=_queues,
            help=(
                "Runner threads of the queues named, e.g. settle=8,webhook=16; in place of"
                " FREEHOURS_WORKER_QUEUES (default: none sized on their own)"
            ),
            show_default=False,
        ),
    ] = None,
    metrics_port: MetricsPort = None,
    metrics_host: MetricsHost = "127.0.0.1",
) -> None:
    """Run due jobs from the database (FREEHOURS_DATABASE_URL) until SIGTERM or SIGINT.

    Any number of workers, in any number of processes, may share one PostgreSQL database.

    Each queue's runners take only its jobs: settle (settlements), invoice (invoice runs),
    webhook (deliveries), so that a slow webhook receiver never holds up a settlement.

    On SIGTERM or SIGINT: stop claiming, let running jobs finish, release the rest, exit 0.

    Running jobs get FREEHOURS_WORKER_GRACE_SECONDS (default 25) to finish.

    Logs: one JSON line per job attempt on stderr (FREEHOURS_LOG_LEVEL); traces as
    FREEHOURS_TRACES says, each job in the trace of the request that scheduled it.
    """
    settings = get_settings()
    configure_logging(settings.log_level)
    configure_tracing(settings.traces, service="freehours-worker")
    runtime = Runtime.open(settings, long_running=True)
    metrics_server = None
    try:
        if metrics_port is not None:
            metrics_server = serve_metrics(metrics_port, metrics_host, runtime.measured)
        running = runtime.worker(concurrency, queues)
        freeze_start_up_heap()
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
        if metrics_server is not None:
            metrics_server.shutdown()
        runtime.close()
        forget_process()
