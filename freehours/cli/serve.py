"""``freehours serve``: the HTTP API, from one process or N behind one port."""

from __future__ import annotations

from typing import Annotated

import typer

from freehours.api import server
from freehours.cli import app
from freehours.cli.dbguard import needs_database
from freehours.observability.logging import configure_logging
from freehours.settings import get_settings


@app.command()
@needs_database
def serve(
    host: Annotated[
        str, typer.Option(metavar="ADDRESS", help="address to listen on")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(metavar="PORT", help="port to listen on")] = 8000,
    processes: Annotated[
        int,
        typer.Option(
            min=1,
            metavar="N",
            help=(
                "API processes answering on the one port (a supervisor starts them, replaces "
                "one that dies, and merges their metrics)"
            ),
        ),
    ] = 1,
    workers: Annotated[
        int,
        typer.Option(
            min=0,
            metavar="N",
            help=(
                "a job worker inside each API process with N runner threads in each queue "
                "(settle, invoice, webhook) that FREEHOURS_WORKER_QUEUES does not size; 0: none "
                "(threads, not processes: see --processes; for job workers of their own, "
                "freehours worker)"
            ),
        ),
    ] = 0,
) -> None:
    """Serve the HTTP API: --processes N API processes on one port, each with --workers N
    settlement job threads.

    --processes N starts N API processes that share one socket, bound here first, each under the
    same settings. Their metrics are merged, so /metrics from any of them shows all: in
    PROMETHEUS_MULTIPROC_DIR if it is set (it must be empty), else in a new directory of their
    own, which the first log line names. One that dies is replaced (after a wait that doubles
    while it keeps dying within 10 s of starting); one that cannot start, or dies so five times
    in a row, stops them all (exit 1).

    Refuses a database whose schema is out of date (run `freehours db upgrade`). On SIGTERM each
    process drains its requests (at most 30 s), then its workers finish or release their jobs.

    Logs: one JSON line per request on stderr (FREEHOURS_LOG_LEVEL); traces as FREEHOURS_TRACES
    says; Prometheus metrics on /metrics.
    """
    settings = get_settings()
    configure_logging(settings.log_level)
    server.serve(settings, host=host, port=port, processes=processes, workers=workers)
