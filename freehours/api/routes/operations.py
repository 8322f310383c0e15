"""Operations: liveness (``/healthz``), readiness (``/readyz``) and Prometheus metrics
(``/metrics``: open on loopback, elsewhere a read key)."""

from collections.abc import Callable
from typing import Literal

import anyio
import structlog
from fastapi import APIRouter, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import (
    BaseModel,
    Field,
)

from freehours.api.auth import requires
from freehours.api.keys import Scope
from freehours.api.openapi import header_refs
from freehours.api.problems import UNAVAILABLE_RETRY_AFTER_SECONDS
from freehours.api.services import AppServices
from freehours.observability.exposition import CONTENT_TYPE, render_metrics
from freehours.store.database import Store


class HealthOut(BaseModel):
    status: Literal["ok"]


class ReadinessOut(BaseModel):
    """Whether this process can serve: its database answers (else 503), and whether Redis
    does (reported, never a 503)."""

    status: Literal["ok", "degraded", "unavailable"] = Field(
        description="ok; degraded: Redis does not answer (the limits count in this process);"
        " unavailable: the database does not answer"
    )
    database: Literal["ok", "not answering", "unavailable"]
    redis: Literal["ok", "unavailable"] | None = Field(
        default=None, description="absent when no Redis is configured"
    )


log = structlog.get_logger("freehours.api")

#: Longest /readyz waits for the database before it says it is unavailable.
READY_TIMEOUT_SECONDS = 2.0

router = APIRouter(tags=["operations"])


@router.get("/healthz", response_model=HealthOut, response_description="The process answers.")
def healthz() -> dict[str, str]:
    """Liveness: the process answers."""
    return {"status": "ok"}


@router.get(
    "/readyz",
    response_model=ReadinessOut,
    response_description="Ready: the database answers (`status` says whether Redis does).",
    responses={
        503: {
            "model": ReadinessOut,
            "description": "Not ready: the database does not answer (`database` says how).",
            "headers": header_refs("Retry-After"),
        }
    },
)
async def readyz(services: AppServices) -> JSONResponse:
    """Readiness: the database answers (else 503), and whether Redis does. Within
    ``READY_TIMEOUT_SECONDS`` whatever the database does; the answer names what failed in
    fixed words, never the driver's text (which goes to the log)."""
    store = services.store
    database = await _check_ready(services.readiness, lambda: _select_one(store))
    body: dict[str, str] = {"database": database}
    status = "ok" if database == "ok" else "unavailable"
    if services.settings.redis_url is not None:
        # Redis is optional (the service runs on without it): reported, never a 503.
        body["redis"] = await services.limits.ping()
        if status == "ok" and body["redis"] != "ok":
            status = "degraded"
    headers = {} if database == "ok" else {"Retry-After": str(UNAVAILABLE_RETRY_AFTER_SECONDS)}
    return JSONResponse(
        {"status": status, **body}, 200 if database == "ok" else 503, headers=headers
    )


@router.get(
    "/metrics",
    response_class=PlainTextResponse,
    dependencies=[requires(Scope.READ, open_on_loopback=True)],
    responses={
        200: {
            "description": "The Prometheus text exposition of this process's metrics"
            " (of every process, with PROMETHEUS_MULTIPROC_DIR)."
        }
    },
)
async def metrics(services: AppServices) -> Response:
    """Prometheus metrics: open on loopback, elsewhere a ``read`` key. With the gauges counted
    in the database as it is scraped (``freehours_jobs_stuck``): each waited for at most 2 s,
    and left out when the database does not answer."""
    body = await run_in_threadpool(render_metrics, services.runtime.measured)
    return Response(body, media_type=CONTENT_TYPE)


def _select_one(store: Store) -> None:
    with store.read() as unit:
        unit.ping()


async def _check_ready(limiter: anyio.CapacityLimiter, check: Callable[[], None]) -> str:
    """``"ok"``, or a fixed word for why not. The check runs on threads of its own (a black-holed
    database holds one until the database timeouts end it), and is waited for at most
    ``READY_TIMEOUT_SECONDS``."""
    try:
        with anyio.fail_after(READY_TIMEOUT_SECONDS):
            await anyio.to_thread.run_sync(check, limiter=limiter, abandon_on_cancel=True)
    except TimeoutError:
        log.warning("readiness_timeout", dependency="database")
        return "not answering"
    except Exception as exc:  # noqa: BLE001 - any failure to answer means not ready
        log.warning(
            "readiness_failed", dependency="database", error=f"{type(exc).__name__}: {exc}"[:500]
        )
        return "unavailable"
    return "ok"
