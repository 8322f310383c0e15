"""The settlement request, ``POST /v1/free-energy/settlements``: the API's hot path.

It reads its request itself: FastAPI's dependency solving cost this route more CPU than
everything else it does on the event loop (measured), so its route class (``ReadsItself``)
hands the request straight to the endpoint, after the access its route declares (the same
``Requires`` object that FastAPI runs for every other route). Its answers, and its OpenAPI
description, are those of a declared access and ``SettlementIn`` body
(tests/api/test_settle_route.py holds the two together). Its answer is built by hand too
(``quota_body``): the quota, as ``QuotaOut`` declares it.
"""

from collections.abc import Awaitable, Callable, Coroutine, Sequence
from datetime import date, datetime
from typing import Any, Literal

from fastapi import Request, Response
from fastapi.params import Depends
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from opentelemetry import trace
from pydantic import (
    BaseModel,
    Field,
)

from freehours.api.auth import Requires
from freehours.api.bodies import body_operation, bounded_body, parse_body
from freehours.api.models import STRICT_BODY, NemDate, check_read_date
from freehours.api.openapi import TOO_LARGE, header_refs, link, merged
from freehours.api.services import services_of
from freehours.domain.reads import NMI_PATTERN
from freehours.domain.settlement import Quota
from freehours.observability.logging import bind_fields
from freehours.settlement.model import Answer, Outcome, SettleRequest


class SettlementIn(BaseModel):
    model_config = STRICT_BODY

    nmi: str = Field(pattern=NMI_PATTERN)
    date: NemDate


class QuotaOut(BaseModel):
    """The quota, as every settlement answer carries it."""

    nmi: str
    date: date
    version: int
    status: Literal["PENDING", "LOCKED", "COMPLETED", "ABORTED"]
    free_kwh: str | None
    attempts: int
    completed_at: datetime | None
    reason: str | None


class ReadsItself(APIRoute):
    """A route whose endpoint, ``async (request) -> Response``, reads the request itself: no
    dependency solved, no body read for it. The ``Requires`` in its ``dependencies`` are
    checked before it, and described in its OpenAPI operation as any route's are (its security
    requirement)."""

    def __init__(
        self,
        path: str,
        endpoint: Callable[..., Any],
        *,
        dependencies: Sequence[Depends] | None = None,
        **options: Any,
    ) -> None:
        self.access: list[Requires] = []
        for dependency in dependencies or ():
            if not isinstance(dependency.dependency, Requires):
                raise TypeError(f"{path}: a route that reads itself takes only access checks")
            self.access.append(dependency.dependency)
        # Declared to FastAPI for the OpenAPI document only: ``handle`` runs them.
        super().__init__(path, endpoint, dependencies=dependencies, **options)

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        access = tuple(self.access)
        endpoint: Callable[[Request], Awaitable[Response]] = self.endpoint

        async def handle(request: Request) -> Response:
            for check in access:
                await check(request)
            return await endpoint(request)

        return handle


#: From a quota answered to its state.
_QUOTA_LINKS = {
    "quota": link(
        "get_settlement",
        "The quota's current state.",
        parameters={"path.nmi": "$response.body#/nmi", "path.day": "$response.body#/date"},
    )
}

#: The answers that carry the quota (docs/api.md, the settlement answers), for the route's
#: ``responses``; ``_STATUS_CODES`` gives them.
RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "model": QuotaOut,
        "description": "COMPLETED: settled now, or settled before (a replay, with"
        " Idempotent-Replayed: true). Stop.",
        "headers": header_refs("Idempotent-Replayed"),
        "links": _QUOTA_LINKS,
    },
    409: {
        "model": QuotaOut,
        "description": "LOCKED: another worker holds a live lock on the quota; PENDING: its"
        " window is not over, its data is not complete, or this attempt failed and was"
        " released. Retry after Retry-After seconds.",
        "headers": header_refs("Retry-After"),
        "links": _QUOTA_LINKS,
    },
    413: TOO_LARGE,
    422: {"model": QuotaOut},
}

#: The operation's body, as FastAPI would describe ``body: SettlementIn``, and what its 422s
#: are (the quota's, as JSON, or the body's problem details).
OPENAPI = merged(
    {
        "responses": {
            "422": {
                "description": "ABORTED (`application/json`, the quota): it can never be settled"
                " (an unknown NMI, no plan, out of attempts); do not retry. Or"
                " (`application/problem+json`) the request itself is not valid:"
            }
        }
    },
    body_operation(SettlementIn),
)


async def post_settlement(request: Request) -> JSONResponse:
    """Settle one day's quota exactly once; every answer says to stop, or when to retry."""
    services = services_of(request)
    raw = await bounded_body(
        request, services.settings.max_json_body_bytes, title="Body too large", required=None
    )
    body = parse_body(SettlementIn, raw)
    bind_fields(nmi=body.nmi, date=body.date.isoformat())
    check_read_date(body.date, services.nem_today(), "date")
    await services.limits.check_nmi(body.nmi)
    answer = await services.settle_queue.settle(SettleRequest(body.nmi, body.date))
    bind_fields(quota_state=answer.quota.status.value)
    span = trace.get_current_span()
    if span.is_recording():
        span.set_attribute("freehours.quota.key", answer.quota.key)
        span.set_attribute("freehours.settlement.outcome", answer.outcome.value)
        span.set_attribute("freehours.quota.status", answer.quota.status.value)
    return settlement_response(answer)


def quota_body(quota: Quota) -> dict[str, Any]:
    """The contract's quota body (``QuotaOut``), decimals as strings, times ISO 8601 with
    offset."""
    return {
        "nmi": quota.nmi,
        "date": quota.date.isoformat(),
        "version": quota.version,
        "status": quota.status.value,
        "free_kwh": None if quota.free_kwh is None else str(quota.free_kwh),
        "attempts": quota.attempts,
        "completed_at": None if quota.completed_at is None else quota.completed_at.isoformat(),
        "reason": quota.reason,
    }


_STATUS_CODES = {
    Outcome.SETTLED: 200,
    Outcome.REPLAYED: 200,
    Outcome.LOCKED: 409,
    Outcome.NOT_DUE: 409,
    Outcome.RETRY: 409,
    Outcome.ABORTED: 422,
}


def settlement_response(answer: Answer) -> JSONResponse:
    """The contract's answer to a settlement request."""
    headers: dict[str, str] = {}
    if answer.retry_after is not None:
        headers["Retry-After"] = str(answer.retry_after)
    if answer.outcome is Outcome.REPLAYED:
        headers["Idempotent-Replayed"] = "true"
    return JSONResponse(quota_body(answer.quota), _STATUS_CODES[answer.outcome], headers=headers)
