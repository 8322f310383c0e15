"""The operations console served over a finished demo's database (``make demo SERVE=1``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import uvicorn
from pydantic import SecretStr

from freehours.api.app import create_app
from freehours.api.keys import Scope as KeyScope
from freehours.api.keys import create_key
from freehours.api.ratelimit import RateLimits
from freehours.api.services import Services
from freehours.clock import SystemClock
from freehours.operations.runtime import Runtime
from freehours.settings import Settings
from freehours.sim.demo.mail import DEMO_PAGE_SECRET

#: Each region's built-in plan.


@dataclass(frozen=True, slots=True)
class ConsoleServer:
    """The console over a finished demo's database: where, and the key to sign in with."""

    url: str
    key: str
    server: uvicorn.Server
    runtime: Runtime

    def run(self) -> None:
        """Serve until interrupted (Ctrl-C), then close the database."""
        try:
            self.server.run()
        finally:
            self.runtime.close()


def console_server(out: Path, settings: Settings, port: int) -> ConsoleServer:
    """The API and its console on 127.0.0.1:``port`` over the demo's database in ``out``, with
    a new admin key to sign in with (made as ``freehours keys create --scope admin`` makes one).
    Not started: ``run()`` serves until interrupted."""
    settings = settings.model_copy(
        update={
            "database_url": f"sqlite:///{out / 'demo.db'}",
            "redis_url": None,
            # The key the demo's emails signed their page links with.
            "page_secret": SecretStr(DEMO_PAGE_SECRET),
        }
    )
    runtime = Runtime.open(settings, SystemClock())
    with runtime.store.write() as unit:
        _, key = create_key(
            unit.keys, frozenset({KeyScope.ADMIN}), "demo console", runtime.clock.now()
        )
    limits = RateLimits.open(None, settings.rate_limit_per_client, settings.rate_limit_per_nmi)
    app = create_app(Services(runtime, limits))
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        log_config=None,  # uvicorn's lines through the root logger, as the API server's
        access_log=False,
        lifespan="on",
    )
    return ConsoleServer(f"http://127.0.0.1:{port}/console/", key, uvicorn.Server(config), runtime)
