"""The API as ``freehours serve`` runs it, plus the floor: ``GET /bench/floor`` does one
``SELECT 1`` transaction on the same store and stack (a plain ``def`` route, on FastAPI's
threadpool); ``GET /bench/floor-settle-threads`` does it on the settlement route's threads.

Run: ``python -m benchmarks.serve_api PORT``."""

from __future__ import annotations

import sys

import anyio
from fastapi.responses import JSONResponse

from freehours.api import server
from freehours.api.app import create_app
from freehours.api.services import Services
from freehours.observability.logging import configure_logging
from freehours.observability.tracing import configure_tracing
from freehours.operations.runtime import freeze_start_up_heap
from freehours.settings import Settings


def main(port: int) -> None:
    settings = Settings()
    # As serve does: a canonical line per request, spans made (and dropped unless exported).
    configure_logging(settings.log_level)
    configure_tracing(settings.traces, service="freehours-api")
    services = Services.from_settings(settings)
    app = create_app(services)

    def select_one() -> None:
        with services.store.read() as unit:
            unit.connection.exec_driver_sql("SELECT 1")

    @app.get("/bench/floor", include_in_schema=False)
    def floor() -> JSONResponse:
        select_one()
        return JSONResponse({"status": "ok"})

    # The same, on as many threads as the settlement route has (FREEHOURS_SETTLE_THREADS),
    # handed over as that route hands over its work: the floor of that arrangement.
    threads = anyio.CapacityLimiter(services.settle_threads)

    @app.get("/bench/floor-settle-threads", include_in_schema=False)
    async def floor_on_settle_threads() -> JSONResponse:
        await anyio.to_thread.run_sync(select_one, limiter=threads)
        return JSONResponse({"status": "ok"})

    freeze_start_up_heap()  # as the API's processes do (freehours.api.server.api_application)
    server.run(app, services.settings, host="127.0.0.1", port=port)


if __name__ == "__main__":
    main(int(sys.argv[1]))
