"""``freehours serve``: the HTTP API."""

from __future__ import annotations

from typing import Annotated

import typer

from freehours.api import server
from freehours.api.app import create_app
from freehours.api.services import Services
from freehours.cli import app, needs_database
from freehours.observability.exposition import forget_process
from freehours.observability.logging import configure_logging
from freehours.observability.tracing import configure_tracing
from freehours.settings import get_settings


@app.command()
@needs_database
def serve(
    host: Annotated[
        str, typer.Option(metavar="ADDRESS", help="address to listen on")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(metavar="PORT", help="port to listen on")] = 8000,
    workers: Annotated[
        int,
        typer.Option(
            min=0, metavar="N", help="settlement job workers to run in this process (threads)"
        ),
    ] = 0,
) -> None:
    """Serve the HTTP API, and with --workers N run N settlement jobs at once in-process.

    Refuses a database whose schema is out of date (run `freehours db upgrade`). On SIGTERM the
    server drains its requests, then the workers finish or release their jobs.

    Logs: one JSON line per request on stderr (FREEHOURS_LOG_LEVEL); traces as FREEHOURS_TRACES
    says; Prometheus metrics on /metrics (PROMETHEUS_MULTIPROC_DIR for several processes).
    """
    settings = get_settings()
    configure_logging(settings.log_level)
    configure_tracing(settings.traces, service="freehours-api")
    services = Services.from_settings(settings)
    worker = services.runtime.worker(workers) if workers else None
    if worker is not None:
        worker.start()
    try:
        server.run(create_app(services), settings, host=host, port=port)
    finally:
        if worker is not None:
            worker.stop(settings.worker_grace_seconds)
        services.store.close()
        forget_process()
