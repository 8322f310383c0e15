"""``freehours serve``: the HTTP API."""

from __future__ import annotations

from typing import Annotated

import typer
import uvicorn

from freehours.api.app import Services, create_app
from freehours.cli import app
from freehours.settings import get_settings


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port to listen on")] = 8000,
    workers: Annotated[
        int, typer.Option(min=0, help="settlement job workers to run in this process (threads)")
    ] = 0,
) -> None:
    """Serve the HTTP API, and with --workers N run N settlement jobs at once in-process.

    Refuses a database whose schema is out of date (run `freehours db upgrade`). On SIGTERM the
    server drains its requests, then the workers finish or release their jobs.
    """
    settings = get_settings()
    services = Services.from_settings(settings)
    worker = services.runtime.worker(workers) if workers else None
    if worker is not None:
        worker.start()
    try:
        uvicorn.run(
            create_app(services),
            host=host,
            port=port,
            log_level="warning",
            access_log=False,
            lifespan="on",
        )
    finally:
        if worker is not None:
            worker.stop(settings.worker_grace_seconds)
        services.store.close()
