"""The API as ``freehours serve`` runs it, plus the floor: ``GET /bench/floor`` does one
``SELECT 1`` transaction on the same store and stack.

Run: ``python -m benchmarks.serve_api PORT``."""

from __future__ import annotations

import sys

import uvicorn
from fastapi.responses import JSONResponse

from freehours.api.app import Services, create_app
from freehours.settings import Settings


def main(port: int) -> None:
    services = Services.from_settings(Settings())
    app = create_app(services)

    @app.get("/bench/floor", include_in_schema=False)
    def floor() -> JSONResponse:
        with services.store.read() as conn:
            conn.exec_driver_sql("SELECT 1")
        return JSONResponse({"status": "ok"})

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main(int(sys.argv[1]))
