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
) -> None:
    """Serve the HTTP API. Refuses a database whose schema is out of date (run `db upgrade`)."""
    services = Services.from_settings(get_settings())
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
        services.store.close()
