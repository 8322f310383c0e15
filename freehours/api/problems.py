"""RFC 9457 problem details: every error answer of the API, each with a stable ``type``."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import structlog
from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from freehours.domain.reads import RangeError
from freehours.observability.metrics import DATABASE_UNAVAILABLE

log = structlog.get_logger("freehours.api")

PROBLEM_JSON = "application/problem+json"

#: The JSON schema of every problem body (``Problem.response``): RFC 9457's members, and the one
#: extension the API sends, ``errors``. The OpenAPI document's ``Problem``.
PROBLEM_SCHEMA: dict[str, Any] = {
    "title": "Problem",
    "description": "RFC 9457 problem details, as application/problem+json. Its type is stable"
    " (docs/api.md lists every type); title and detail are for people.",
    "type": "object",
    "required": ["type", "title", "status", "instance"],
    "properties": {
        "type": {
            "type": "string",
            "format": "uri-reference",
            "pattern": "^/problems/[a-z][a-z0-9-]*$",
            "description": "what went wrong, stable: /problems/{slug}",
        },
        "title": {"type": "string", "description": "the type, for people"},
        "status": {"type": "integer", "minimum": 400, "maximum": 599},
        "detail": {"type": "string", "description": "this occurrence: the field, the value"},
        "instance": {
            "type": "string",
            "format": "uri-reference",
            "description": "the path of the request answered",
        },
        "errors": {
            "type": "array",
            "description": "validation-error: every field that is wrong",
            "items": {
                "type": "object",
                "required": ["field", "message"],
                "properties": {
                    "field": {"type": "string", "description": "e.g. body.reads.0.kwh"},
                    "message": {"type": "string"},
                },
            },
        },
    },
}


class Problem(Exception):
    """An error answer. ``slug`` makes the stable type ``/problems/{slug}``."""

    def __init__(
        self,
        status: int,
        slug: str,
        title: str,
        detail: str | None = None,
        *,
        headers: dict[str, str] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(detail or title)
        self.status = status
        self.slug = slug
        self.title = title
        self.detail = detail
        self.headers = headers or {}
        self.extra = extra

    def response(self, instance: str | None = None) -> JSONResponse:
        body: dict[str, Any] = {"type": f"/problems/{self.slug}", "title": self.title}
        body["status"] = self.status
        if self.detail:
            body["detail"] = self.detail
        if instance:
            body["instance"] = instance
        body.update(self.extra)
        return JSONResponse(body, self.status, headers=self.headers, media_type=PROBLEM_JSON)


def range_problem(field: str, exc: RangeError) -> Problem:
    """A 422 naming ``field`` as the validation answer does (``errors: [{field, message}]``)."""
    return field_problem(field, exc.reason)


def field_problem(field: str, reason: str) -> Problem:
    """A 422 naming ``field`` and why, as the validation answer does: for a check that needs
    more than the body (the settings, the database)."""
    return Problem(
        422,
        "validation-error",
        "Request is not valid",
        f"{field}: {reason}",
        errors=[{"field": field, "message": reason}],
    )


def client_gone() -> Problem:
    """What a request whose client went away answers (nginx's 499): to no one, but counted."""
    return Problem(499, "client-closed-request", "The client closed the request")


_SLUGS = {
    400: ("bad-request", "Bad request"),
    401: ("unauthorized", "Unauthorized"),
    403: ("forbidden", "Forbidden"),
    404: ("not-found", "Not found"),
    405: ("method-not-allowed", "Method not allowed"),
    406: ("not-acceptable", "Not acceptable"),
    409: ("conflict", "Conflict"),
    413: ("payload-too-large", "Payload too large"),
    415: ("unsupported-media-type", "Unsupported media type"),
    422: ("validation-error", "Unprocessable content"),
    429: ("rate-limited", "Too many requests"),
}
#: The framework's HTTP error of any other status.
_OTHER = ("error", "Error")


#: What a path keeps unencoded in ``instance``: RFC 3986's unreserved and sub-delimiter
#: characters, ":", "@" and "/".
_PATH_SAFE = "/!$&'()*+,;=:@-._~"


def instance(request: Request) -> str:
    """The request's path as the problem's ``instance``: a URI reference, so percent-encoded
    where the decoded path holds what a URI may not (a space, a non-ASCII character)."""
    return quote(request.url.path, safe=_PATH_SAFE)


async def problem_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, Problem)
    return exc.response(instance(request))


async def http_exception_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    slug, title = _SLUGS.get(exc.status_code, _OTHER)
    detail = exc.detail if isinstance(exc.detail, str) and exc.detail != title else None
    headers = dict(exc.headers) if exc.headers else None
    return Problem(exc.status_code, slug, title, detail, headers=headers).response(
        instance(request)
    )


async def data_error_handler(request: Request, exc: Exception) -> JSONResponse:
    """A value the database cannot store (a NUL byte in text, a number out of range) is the
    request's fault: 422, not a server error. Validation should have caught it first; this is
    the net under it."""
    return Problem(
        422,
        "validation-error",
        "A value in the request cannot be stored",
        type(exc).__name__,
    ).response(instance(request))


#: How long a client is asked to wait before trying again while the database is unavailable.
UNAVAILABLE_RETRY_AFTER_SECONDS = 5


def database_unavailable() -> Problem:
    """503: the database refused, did not answer in time, or no connection was free. The
    driver's text (hosts, SQL) stays in the server's log, never in the answer."""
    return Problem(
        503,
        "database-unavailable",
        "Service unavailable",
        "the database is not answering; try again later",
        headers={"Retry-After": str(UNAVAILABLE_RETRY_AFTER_SECONDS)},
    )


async def database_unavailable_handler(request: Request, exc: Exception) -> JSONResponse:
    """SQLAlchemy's OperationalError (connection refused or lost, a statement cancelled by its
    timeout), the pool's TimeoutError (no free connection in time) and DisconnectionError: the
    request is not at fault and may succeed later, so 503 with Retry-After, never a 500."""
    DATABASE_UNAVAILABLE.inc()
    log.warning(
        "database_unavailable", path=request.url.path, error=f"{type(exc).__name__}: {exc}"[:500]
    )
    return database_unavailable().response(instance(request))


async def internal_error_handler(request: Request, exc: Exception) -> JSONResponse:
    """Anything else unexpected: a 500 problem, its cause in the log only (not plain text)."""
    log.error("unhandled_error", path=request.url.path, error=f"{type(exc).__name__}: {exc}"[:500])
    return Problem(500, "internal-error", "Internal server error").response(instance(request))


async def validation_handler(request: Request, exc: Exception) -> JSONResponse:
    """422 naming every field that is wrong, as ``errors: [{field, message}]``."""
    assert isinstance(exc, RequestValidationError)
    errors = [
        {"field": ".".join(str(part) for part in err["loc"]), "message": err["msg"]}
        for err in exc.errors()
    ]
    detail = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
    return Problem(
        422, "validation-error", "Request body is not valid", detail, errors=errors
    ).response(instance(request))
