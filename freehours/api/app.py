"""The HTTP API (docs/design.md, contract): the application, assembled.

``create_app`` puts the services in the application's state (``app.state.services``, where the
routes find them), includes one router per resource (``freehours.api.routes``; the settlement
request's hot path is ``freehours.api.settle``), answers every error as problem details
(``freehours.api.problems``), and runs two loops for its lifespan: the renewal of the leases of
the Idempotency-Keys this process is running, and the hourly purge of those past their
retention (``freehours.store.maintenance``); with ``workers``, settlement job workers too.

Access and rate limits are checked on the event loop (a known key is in memory, the limits are
``limits.aio``); whatever waits on the database runs in a worker thread, the synchronous
driver's way.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import anyio
from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Lifespan

from freehours.api import console, household, openapi
from freehours.api.docs import mount_docs
from freehours.api.once import purge_keys, renew_leases
from freehours.api.problems import (
    Problem,
    data_error_handler,
    database_unavailable_handler,
    http_exception_handler,
    internal_error_handler,
    problem_handler,
    validation_handler,
)
from freehours.api.routes import (
    audit,
    bills,
    comparisons,
    customers,
    deliveries,
    documents,
    invoice_runs,
    meter_readings,
    offers,
    operations,
    plans,
    settlements,
    usage,
    webhooks,
)
from freehours.api.services import Services
from freehours.api.telemetry import RequestTelemetry
from freehours.observability.exposition import forget_process
from freehours.store.errors import UNAVAILABLE, DataError
from freehours.store.maintenance import Retention, history_partitions


def create_app(services: Services, *, workers: int = 0, owned: bool = False) -> FastAPI:
    """The API over ``services``.

    ``workers``: a job worker, ``workers`` runners in each queue, runs beside the requests for
    the application's lifespan (``serve --workers``), stopped after the server has drained its
    requests (running jobs get FREEHOURS_WORKER_GRACE_SECONDS, the rest are released).
    ``owned``: the application a process builds for itself (``freehours.api.server``), whose
    lifespan ends by closing the services and dropping the process's live gauges.
    """

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        # The requests' blocking work (each with a database connection) runs on at most as many
        # threads as the pool keeps connections: past them a request waits for a thread, not
        # for a connection opened and closed for it (docs/scale.md, Connections).
        threads = anyio.to_thread.current_default_thread_limiter()
        threads.total_tokens = services.settings.database_pool_size
        retention = Retention(
            services.store,
            services.clock,
            [
                purge_keys(services.settings.idempotency_retention_hours),
                history_partitions(
                    services.settings.history_retention_months,
                    services.settings.partitions_ahead_months,
                ),
            ],
        )
        worker = services.runtime.worker(workers) if workers else None
        if worker is not None:
            worker.start()
        loops = [
            asyncio.create_task(retention.keep_running()),
            asyncio.create_task(renew_leases(services)),
        ]
        try:
            yield
        finally:
            for loop in loops:
                loop.cancel()
            for loop in loops:
                with contextlib.suppress(asyncio.CancelledError):
                    await loop
            if worker is not None:
                grace = services.settings.worker_grace_seconds
                await anyio.to_thread.run_sync(worker.stop, grace)
            await anyio.to_thread.run_sync(services.agents.close)
            if owned:
                services.store.close()
                forget_process()

    app = assemble(lifespan)
    app.state.services = services
    return app


def assemble(lifespan: Lifespan[FastAPI] | None = None) -> FastAPI:
    """The application without its services: its routes, error handlers, telemetry and
    OpenAPI document (which ``freehours.api.openapi`` writes from this, with no database)."""
    app = FastAPI(
        title="freehours",
        version="1",
        description="Meter data in, free-energy quotas settled exactly once, bills out."
        " The contract in words: docs/api.md.",
        lifespan=lifespan,
        # FastAPI's server span (freehours.api.telemetry), without one more span each for
        # dependencies, the route and serialization: on the settlement path they cost more
        # than they tell.
        telemetry={"operation_spans": False},
        # The document is served by a route of its own (mount_docs), and the documentation
        # pages have no third party's scripts (freehours.api.docs).
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
        # Each operation named as its route function (put_plan, post_settlement, ...): the
        # names its links and clients' generated code use.
        generate_unique_id_function=lambda route: route.name,
        # No redirect to a path with (or without) its trailing slash: Starlette's is absolute,
        # its host taken from the request's Host header, which anyone can set. The console's
        # one such address, /console, redirects itself, relative.
        redirect_slashes=False,
    )
    openapi.install(app)
    mount_docs(app, "freehours")
    app.add_exception_handler(Problem, problem_handler)
    app.add_exception_handler(StarletteHTTPException, http_exception_handler)
    app.add_exception_handler(RequestValidationError, validation_handler)
    app.add_exception_handler(DataError, data_error_handler)
    for unavailable in UNAVAILABLE:
        app.add_exception_handler(unavailable, database_unavailable_handler)
    app.add_exception_handler(Exception, internal_error_handler)
    app.add_middleware(RequestTelemetry)
    resources = (
        plans,
        offers,
        customers,
        meter_readings,
        settlements,
        bills,
        usage,
        comparisons,
        invoice_runs,
        deliveries,  # before documents: its paths would take ".../deliveries" for a number
        documents,
        operations,
        audit,
        webhooks,
    )
    for resource in resources:
        app.include_router(resource.router)
    app.include_router(plans.reader)
    app.include_router(offers.reader)
    app.include_router(household.router)
    console.install(app)
    return app
