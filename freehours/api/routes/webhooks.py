"""Webhook endpoints (admin): ``/v1/webhook-endpoints`` to register, list, read, change, delete
and rotate the secret of an endpoint; its deliveries and their attempts, and a delivery replayed
with the same ``webhook-id`` (docs/webhooks.md)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from urllib.parse import urlencode

from fastapi import APIRouter, Path, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import (
    AfterValidator,
    BaseModel,
    Field,
)

from freehours.api.auth import requires
from freehours.api.bodies import body_operation, bounded_body, parse_body
from freehours.api.keys import ApiKey, Scope
from freehours.api.models import STRICT_BODY
from freehours.api.openapi import TOO_LARGE, merged, problem
from freehours.api.problems import Problem, field_problem
from freehours.api.services import AppServices, Services
from freehours.domain.webhooks import (
    EVENT_TYPES,
    MAX_DESCRIPTION_LENGTH,
    MAX_ENDPOINTS,
    MAX_URL_LENGTH,
    DeliveryStatus,
    InvalidEndpoint,
    check_url,
)
from freehours.observability.logging import bind_fields
from freehours.store.webhooks import Attempt, Delivery, Endpoint
from freehours.webhooks.service import NotFound, TooManyEndpoints
from freehours.webhooks.views import delivery_view, endpoint_view

WebhookEventType = Literal[
    "quota.completed",
    "quota.aborted",
    "quota.revised",
    "invoice.finalised",
    "credit_note.issued",
    "document.delivery_failed",
]


def _webhook_url(url: str) -> str:
    try:
        return check_url(url)
    except InvalidEndpoint as exc:
        raise ValueError(exc.reason) from None


WebhookUrl = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_URL_LENGTH,
        description="Where events are POSTed: an http or https URL.",
        examples=["https://example.com/freehours/webhooks"],
    ),
    AfterValidator(_webhook_url),
]

WebhookEvents = Annotated[
    list[WebhookEventType],
    Field(
        min_length=1,
        max_length=2 * len(EVENT_TYPES),
        description="The event types sent to the endpoint.",
    ),
]

WebhookDescription = Annotated[str, Field(max_length=MAX_DESCRIPTION_LENGTH)]


class WebhookEndpointIn(BaseModel):
    """A webhook endpoint to register."""

    model_config = STRICT_BODY

    url: WebhookUrl
    events: WebhookEvents
    description: WebhookDescription = ""


class WebhookEndpointPatch(BaseModel):
    """What to change of an endpoint: the fields given. ``enabled: true`` enables a disabled
    endpoint again (its run of failures forgotten); ``false`` disables it."""

    model_config = STRICT_BODY

    url: WebhookUrl | None = None
    events: WebhookEvents | None = None
    description: WebhookDescription | None = None
    enabled: bool | None = None


class WebhookEndpointOut(BaseModel):
    """A webhook endpoint; never its secret (shown once, when made or rotated)."""

    id: str
    url: str
    description: str
    events: list[str]
    enabled: bool
    disabled_at: datetime | None
    disabled_reason: str | None = Field(
        description="Why it was disabled: its deliveries kept failing, or through the API."
    )
    failing_since: datetime | None = Field(
        description="Since when every attempt has failed (null: the last one succeeded)."
    )
    final_failures: int = Field(description="Deliveries in a row that failed for good.")
    previous_secret_until: datetime | None = Field(
        description="Until when the secret a rotation replaced still signs, beside the new one."
    )
    created_at: datetime
    updated_at: datetime


class WebhookEndpointSecretOut(WebhookEndpointOut):
    """An endpoint with its signing secret: shown this once."""

    secret: str = Field(description="The signing secret, `whsec_` and base64: shown this once.")


class WebhookEndpointsOut(BaseModel):
    items: list[WebhookEndpointOut]


class WebhookAttemptOut(BaseModel):
    at: datetime
    outcome: Literal["succeeded", "failed", "error"] = Field(
        description="succeeded (2xx), failed (another status), error (no answer)."
    )
    status_code: int | None
    latency_ms: int
    error: str | None


class WebhookDeliveryOut(BaseModel):
    """One event's delivery to one endpoint, and its attempts."""

    id: int
    webhook_id: str = Field(description="The event's id: the `webhook-id` of every attempt.")
    event_type: str
    endpoint_id: str
    status: Literal["pending", "succeeded", "failed"]
    attempts: int = Field(description="Attempts since it was created or last replayed.")
    created_at: datetime
    started_at: datetime
    next_attempt_at: datetime | None
    finished_at: datetime | None
    last_status_code: int | None
    last_error: str | None
    replays: int
    attempt_log: list[WebhookAttemptOut] = Field(description="Every attempt, oldest first.")


class WebhookDeliveriesOut(BaseModel):
    items: list[WebhookDeliveryOut]
    next: str | None = Field(description="The next page's path, while there may be more.")


#: One dependency for the router and the routes that use the key: FastAPI runs it once.
_ADMIN = requires(Scope.ADMIN)
AdminKey = Annotated[ApiKey, _ADMIN]
router = APIRouter(tags=["webhooks"], dependencies=[_ADMIN])

ROUTE = "/v1/webhook-endpoints"
MAX_LIMIT = 200
LARGEST_ID = 2**63 - 1

EndpointIdPath = Annotated[
    str, Path(pattern=r"^ep_[0-9a-f]{24}$", max_length=27, description="the endpoint's id")
]
DeliveryIdPath = Annotated[int, Path(ge=1, le=LARGEST_ID, description="the delivery's id")]

NOT_FOUND = problem("No endpoint of that id: `/problems/webhook-endpoint-not-found`.")
NO_DELIVERY = problem(
    "No endpoint of that id, or no delivery of that id to it:"
    " `/problems/webhook-endpoint-not-found`, `/problems/webhook-delivery-not-found`."
)
REPLAYS_LIMITED = problem(
    "Over a rate limit: the key's, or this endpoint's or this key's replays (5 a minute each,"
    " `FREEHOURS_RATE_LIMIT_WEBHOOK_REPLAYS`): `/problems/rate-limited`.",
    "Retry-After",
)
TOO_MANY = {
    "description": f"So is a registration past the {MAX_ENDPOINTS} endpoints there may be:"
    " `/problems/too-many-endpoints`."
}


def endpoint_json(endpoint: Endpoint, secret: str | None = None) -> dict[str, Any]:
    out = endpoint_view(endpoint)
    if secret is not None:
        return WebhookEndpointSecretOut(**out, secret=secret).model_dump(mode="json")
    return WebhookEndpointOut(**out).model_dump(mode="json")


def delivery_json(delivery: Delivery, attempts: list[Attempt]) -> dict[str, Any]:
    return WebhookDeliveryOut(**delivery_view(delivery, attempts)).model_dump(mode="json")


def _invalid(exc: InvalidEndpoint) -> Problem:
    """A field the destination policy refuses (a literal address), as validation answers it."""
    return field_problem(f"body.{exc.field}", exc.reason)


def _not_found(what: str) -> Problem:
    return Problem(404, "webhook-endpoint-not-found", "Webhook endpoint not found", what)


@router.post(
    ROUTE,
    status_code=201,
    response_model=WebhookEndpointSecretOut,
    response_description="The endpoint, enabled, with its signing secret: shown this once.",
    openapi_extra=merged(
        body_operation(WebhookEndpointIn),
        {"responses": {"413": TOO_LARGE, "422": TOO_MANY}},
    ),
)
async def post_endpoint(request: Request, services: AppServices) -> JSONResponse:
    """Register an endpoint for some event types. Its signing secret is made here and answered
    this once; keep it (``rotate-secret`` makes a new one)."""
    raw = await bounded_body(
        request, services.settings.max_json_body_bytes, title="Body too large", required=None
    )
    body = parse_body(WebhookEndpointIn, raw)

    def register() -> JSONResponse:
        try:
            made = services.runtime.webhooks.register(body.url, list(body.events), body.description)
        except TooManyEndpoints as exc:
            raise Problem(422, "too-many-endpoints", "Too many endpoints", str(exc)) from None
        except InvalidEndpoint as exc:
            raise _invalid(exc) from None
        bind_fields(endpoint=made.endpoint.id)
        return JSONResponse(
            endpoint_json(made.endpoint, made.secret),
            201,
            headers={"Location": f"{ROUTE}/{made.endpoint.id}"},
        )

    return await run_in_threadpool(register)


@router.get(ROUTE, response_model=WebhookEndpointsOut, response_description="Every endpoint.")
def list_endpoints(services: AppServices) -> JSONResponse:
    """Every endpoint (at most 100), oldest first, each with whether it is enabled and why
    not."""
    with services.store.read() as unit:
        endpoints = unit.webhooks.endpoints()
    return JSONResponse({"items": [endpoint_json(e) for e in endpoints]})


@router.get(
    ROUTE + "/{endpoint_id}",
    response_model=WebhookEndpointOut,
    response_description="The endpoint.",
    responses={404: NOT_FOUND},
)
def get_endpoint(endpoint_id: EndpointIdPath, services: AppServices) -> JSONResponse:
    """One endpoint: its events, whether it is enabled (and if not, since when and why), and
    its run of failures."""
    with services.store.read() as unit:
        endpoint = unit.webhooks.endpoint(endpoint_id)
    if endpoint is None:
        raise _not_found(f"endpoint_id: no endpoint {endpoint_id}")
    return JSONResponse(endpoint_json(endpoint))


@router.patch(
    ROUTE + "/{endpoint_id}",
    response_model=WebhookEndpointOut,
    response_description="The endpoint as changed.",
    openapi_extra=merged(
        body_operation(WebhookEndpointPatch),
        {"responses": {"404": NOT_FOUND, "413": TOO_LARGE}},
    ),
)
async def patch_endpoint(
    request: Request, endpoint_id: EndpointIdPath, services: AppServices
) -> JSONResponse:
    """Change an endpoint's URL, events or description; ``enabled`` enables it again (its
    failures forgotten) or disables it."""
    raw = await bounded_body(
        request, services.settings.max_json_body_bytes, title="Body too large", required=None
    )
    body = parse_body(WebhookEndpointPatch, raw)
    return await run_in_threadpool(_patch, services, endpoint_id, body)


def _patch(services: Services, endpoint_id: str, body: WebhookEndpointPatch) -> JSONResponse:
    try:
        endpoint = services.runtime.webhooks.update(
            endpoint_id,
            url=body.url,
            events=None if body.events is None else list(body.events),
            description=body.description,
            enabled=body.enabled,
        )
    except NotFound:
        raise _not_found(f"endpoint_id: no endpoint {endpoint_id}") from None
    except InvalidEndpoint as exc:
        raise _invalid(exc) from None
    return JSONResponse(endpoint_json(endpoint))


@router.delete(
    ROUTE + "/{endpoint_id}",
    status_code=204,
    response_class=Response,
    response_description="Deleted, with its deliveries.",
    responses={404: NOT_FOUND},
)
def delete_endpoint(endpoint_id: EndpointIdPath, services: AppServices) -> Response:
    """Delete an endpoint, its deliveries and their attempts: nothing more is sent to it."""
    try:
        services.runtime.webhooks.delete(endpoint_id)
    except NotFound:
        raise _not_found(f"endpoint_id: no endpoint {endpoint_id}") from None
    return Response(status_code=204)


@router.post(
    ROUTE + "/{endpoint_id}/rotate-secret",
    response_model=WebhookEndpointSecretOut,
    response_description="The endpoint with its new secret: shown this once.",
    responses={404: NOT_FOUND},
)
def rotate_secret(endpoint_id: EndpointIdPath, services: AppServices) -> JSONResponse:
    """A new signing secret; the one it replaces still signs, beside it, for 24 hours
    (``previous_secret_until``): every delivery carries both signatures meanwhile."""
    try:
        made = services.runtime.webhooks.rotate(endpoint_id)
    except NotFound:
        raise _not_found(f"endpoint_id: no endpoint {endpoint_id}") from None
    return JSONResponse(endpoint_json(made.endpoint, made.secret))


@router.get(
    ROUTE + "/{endpoint_id}/deliveries",
    response_model=WebhookDeliveriesOut,
    response_description="A page of the endpoint's deliveries, newest first.",
    responses={404: NOT_FOUND},
)
def list_deliveries(
    endpoint_id: EndpointIdPath,
    services: AppServices,
    status: Annotated[
        DeliveryStatus | None, Query(description="only the deliveries in this status")
    ] = None,
    before: Annotated[
        int | None,
        Query(ge=1, le=LARGEST_ID, description="deliveries older than this id: a previous `next`"),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="deliveries in the page")] = 50,
) -> JSONResponse:
    """The endpoint's deliveries, newest first, each with every attempt (when, the status code
    or the error, the latency)."""
    with services.store.read() as unit:
        if unit.webhooks.endpoint(endpoint_id) is None:
            raise _not_found(f"endpoint_id: no endpoint {endpoint_id}")
        page = unit.webhooks.deliveries(
            endpoint_id=endpoint_id, status=status, before=before, limit=limit
        )
        attempts = unit.webhooks.attempts([d.id for d in page])
    following = None
    if len(page) == limit:
        query: dict[str, object] = {"limit": limit, "before": page[-1].id}
        if status is not None:
            query["status"] = status.value
        following = f"{ROUTE}/{endpoint_id}/deliveries?{urlencode(query)}"
    items = [delivery_json(d, attempts[d.id]) for d in page]
    return JSONResponse({"items": items, "next": following})


@router.post(
    ROUTE + "/{endpoint_id}/deliveries/{delivery_id}/replay",
    status_code=202,
    response_model=WebhookDeliveryOut,
    response_description="The delivery, pending again: sent by the job workers.",
    responses={404: NO_DELIVERY, 429: REPLAYS_LIMITED},
)
async def replay_delivery(
    endpoint_id: EndpointIdPath, delivery_id: DeliveryIdPath, key: AdminKey, services: AppServices
) -> JSONResponse:
    """Send a delivery again: the same event, body and ``webhook-id`` (a receiver that
    deduplicates sees it once), tried on the schedule from now. Replays are limited per
    endpoint and per key (``FREEHOURS_RATE_LIMIT_WEBHOOK_REPLAYS``, 5 a minute): past it, 429
    with ``Retry-After``."""
    await services.limits.check_replay(endpoint_id, key.id)
    return await run_in_threadpool(_replay, services, endpoint_id, delivery_id)


def _replay(services: Services, endpoint_id: str, delivery_id: int) -> JSONResponse:
    with services.store.read() as unit:
        found = unit.webhooks.delivery(delivery_id)
    if found is None or found.endpoint_id != endpoint_id:
        raise Problem(
            404,
            "webhook-delivery-not-found",
            "Webhook delivery not found",
            f"delivery_id: no delivery {delivery_id} to endpoint {endpoint_id}",
        )
    delivery = services.runtime.webhooks.replay(delivery_id)
    with services.store.read() as unit:
        attempts = unit.webhooks.attempts([delivery_id])[delivery_id]
    return JSONResponse(delivery_json(delivery, attempts), 202)
