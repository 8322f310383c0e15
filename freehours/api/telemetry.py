"""What every request leaves behind: two metrics and one canonical log line.

The server span is FastAPI's own (FastAPI 0.143 and later make one for every request once a
tracer provider is set, as ``freehours serve`` does): it continues the trace of the W3C
``traceparent`` the client sent (the agent sends one with every attempt) and is current while the
route runs, so that the settlement's spans and a job the ingest schedules belong to that trace.

``RequestTelemetry`` is an ASGI middleware around the routes, inside that span. For each HTTP
request it

- counts the request in ``freehours_http_requests_total{method,route,status}`` and times it in
  ``freehours_http_request_seconds{method,route}``, ``route`` being the route's template so that
  NMIs and dates do not make a series each;
- logs ``request_finished`` once the answer has gone: method, route, status, duration_ms,
  trace_id and span_id (of the server span), the Idempotency-Key, whether the answer was a
  replay, and what the route bound on the way (``bind_fields``: key_id, nmi, date, quota_state);
  with the exception when the route raised one.

Probes and scrapes (``/healthz``, ``/readyz``, ``/metrics``) are logged at debug level: they come
every few seconds and say nothing about the work.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import structlog
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from freehours.observability.logging import canonical_line
from freehours.observability.metrics import HTTP_REQUEST_SECONDS, HTTP_REQUESTS

log = structlog.get_logger("freehours.api")

#: The ``route`` label of a request that matched no route (a 404 for an unknown path).
UNMATCHED = "unmatched"
_QUIET_ROUTES = frozenset({"/healthz", "/readyz", "/metrics"})


class RequestTelemetry:
    """The metrics and the canonical line of every HTTP request to ``app``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        headers = Headers(scope=scope)
        method: str = scope["method"]
        answer: dict[str, Any] = {"status": 500, "replayed": False}

        async def send_noting_status(message: Message) -> None:
            if message["type"] == "http.response.start":
                answer["status"] = message["status"]
                answer["replayed"] = any(
                    name.lower() == b"idempotent-replayed" for name, _ in message.get("headers", ())
                )
            await send(message)

        failure: Exception | None = None
        with canonical_line() as fields:
            try:
                await self.app(scope, receive, send_noting_status)
            except Exception as exc:
                failure = exc  # the 500's cause, on the canonical line; the server answers it
                raise
            finally:
                route = _route(scope)
                status: int = answer["status"]
                seconds = time.perf_counter() - started
                HTTP_REQUESTS.labels(method, route, str(status)).inc()
                HTTP_REQUEST_SECONDS.labels(method, route).observe(seconds)
                line = {
                    "method": method,
                    "route": route,
                    "status": status,
                    "duration_ms": round(seconds * 1000, 1),
                    "idempotency_key": headers.get("idempotency-key"),
                    "replayed": answer["replayed"] or None,
                    "exc_info": failure,
                    **fields,
                }
                log.log(
                    _level(route, status),
                    "request_finished",
                    **{name: value for name, value in line.items() if value is not None},
                )


def _route(scope: Scope) -> str:
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else UNMATCHED


def _level(route: str, status: int) -> int:
    if status >= 500:
        return logging.ERROR
    if route in _QUIET_ROUTES:
        return logging.DEBUG
    return logging.INFO
