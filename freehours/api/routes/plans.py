"""Tariff plans: ``PUT /v1/plans/{plan_id}`` (admin) and ``GET /v1/plans/{plan_id}`` (read),
as freehours plan documents or as CDR energy plans (``EnergyPlanDetailV3``)."""

from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from freehours.api.auth import requires
from freehours.api.bodies import body_operation, bounded_body, parse_body
from freehours.api.keys import Scope
from freehours.api.models import PLAN_DOCUMENT, plan_body_schema
from freehours.api.openapi import TOO_LARGE, link, merged, problem
from freehours.api.problems import Problem
from freehours.api.services import AppServices, Services
from freehours.domain.time import Region
from freehours.errors import InputError, PlanError
from freehours.plans import BUILTIN_IDS, builtin_document, toml_document
from freehours.plans.cdr import CDR_MEDIA_TYPE, cdr_from_plan, plan_document_from_cdr, read_json
from freehours.plans.document import (
    PLAN_ID_MAX_LENGTH,
    PLAN_ID_PATTERN,
    PlanDocument,
    parse_plan,
)
from freehours.store.catalog import RegionMismatch

router = APIRouter(tags=["catalogue"], dependencies=[requires(Scope.ADMIN)])
reader = APIRouter(tags=["catalogue"], dependencies=[requires(Scope.READ)])


#: The media type of a plan file sent as it is (RFC 9618).
TOML = "application/toml"


@router.put(
    "/v1/plans/{plan_id}",
    response_model=None,
    responses={
        200: {
            "model": PlanDocument,
            "description": "The plan as stored, its id included.",
            "links": {
                "customer": link(
                    "put_customer",
                    "Put a customer on this plan.",
                    body={"plan_id": "$response.body#/id", "region": "$response.body#/region"},
                )
            },
        }
    },
    openapi_extra=merged(
        body_operation(plan_body_schema(), also=(TOML,)),
        {
            "requestBody": {
                "content": {
                    CDR_MEDIA_TYPE: {
                        "schema": {
                            "type": "object",
                            "description": "A CDR EnergyPlanDetailV3 (CDS 1.36.0), bare or as"
                            " its response's `data`: see docs/plans.md for what is rated.",
                        }
                    }
                }
            }
        },
        {
            "responses": {
                "413": TOO_LARGE,
                "422": {
                    "description": "A TOML body that is not TOML or not UTF-8, or an id that is"
                    " not the path's, is a `/problems/validation-error` too; a plan that its"
                    " validation refuses is a `/problems/invalid-plan`, every problem named in"
                    " `detail`; a plan whose region is not that of customers on it, a"
                    " `/problems/region-mismatch` naming both."
                },
            }
        },
    ),
)
async def put_plan(
    request: Request,
    plan_id: Annotated[
        str, Path(pattern=PLAN_ID_PATTERN, max_length=PLAN_ID_MAX_LENGTH, description="plan id")
    ],
    services: AppServices,
    region: Annotated[
        Region | None,
        Query(description="a CDR plan's region, where its geography names none"),
    ] = None,
) -> dict[str, Any]:
    """Create or replace a tariff plan: the plan file's fields as JSON, the plan file itself
    (``Content-Type: application/toml``), or a CDR energy plan
    (``Content-Type: application/vnd.cdr.energy-plan+json``), stored as the plan it rates as."""
    limit = services.settings.max_json_body_bytes
    raw = await bounded_body(request, limit, title="Body too large", required=None)
    media_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    # Parsed in a worker thread: a body at the limits still takes a parser a while, and the
    # event loop serves every other request (/healthz too) meanwhile.
    return await run_in_threadpool(
        _put_plan_body, services, plan_id, raw, media_type=media_type, region=region, limit=limit
    )


def _put_plan_body(
    services: Services,
    plan_id: str,
    raw: bytes,
    *,
    media_type: str,
    region: Region | None,
    limit: int,
) -> dict[str, Any]:
    if media_type == TOML:
        document = _toml_body(raw)
    elif media_type == CDR_MEDIA_TYPE:
        document = _cdr_body(raw, plan_id, region, limit)
    else:
        document = parse_body(PLAN_DOCUMENT, raw)
    return _store_plan(services, plan_id, document)


def _cdr_body(raw: bytes, plan_id: str, region: Region | None, limit: int) -> dict[str, Any]:
    """A CDR plan sent as the body, as the plan document it rates as."""
    try:
        cdr = read_json(raw, source="body", limit=limit)
        return plan_document_from_cdr(cdr, source="body", plan_id=plan_id, region=region)
    except PlanError as exc:
        raise Problem(422, "invalid-plan", "The CDR plan cannot be rated", str(exc)) from None


@reader.get(
    "/v1/plans/{plan_id}",
    response_model=None,
    responses={
        200: {
            "description": "The plan: its document (JSON), or with `Accept:"
            f" {CDR_MEDIA_TYPE}` a CDR EnergyPlanDetailV3 (CDS 1.36.0).",
            "model": PlanDocument,
            "content": {CDR_MEDIA_TYPE: {"schema": {"type": "object"}}},
        },
        404: problem("No plan stored or built in has this id."),
        406: problem(
            "A CDR plan was asked for, and the plan says what the CDR cannot (a GST rate other"
            " than 10%, a band type that is not a CDR time-of-use type)."
        ),
    },
)
async def get_plan(
    request: Request,
    plan_id: Annotated[
        str, Path(pattern=PLAN_ID_PATTERN, max_length=PLAN_ID_MAX_LENGTH, description="plan id")
    ],
    services: AppServices,
) -> JSONResponse:
    """A plan as stored (or a built-in plan not stored yet); as a CDR energy plan when the
    ``Accept`` header asks for one."""
    document, updated_at = await run_in_threadpool(_plan_document, services, plan_id)
    if CDR_MEDIA_TYPE not in request.headers.get("accept", ""):
        return JSONResponse(document)
    plan = parse_plan(document, source=f"plan {plan_id}")
    try:
        cdr = cdr_from_plan(
            plan, last_updated=updated_at, information=document.get("information", ())
        )
    except PlanError as exc:
        raise Problem(
            406, "not-acceptable", "The plan cannot be written as a CDR plan", str(exc)
        ) from None
    return JSONResponse(cdr, media_type=CDR_MEDIA_TYPE)


def _plan_document(services: Services, plan_id: str) -> tuple[dict[str, Any], datetime]:
    with services.store.read() as unit:
        stored = unit.catalog.get_plan(plan_id)
    if stored is not None:
        return stored.document, stored.updated_at
    if plan_id in BUILTIN_IDS:
        return builtin_document(plan_id), BUILTIN_UPDATED
    raise Problem(404, "not-found", "No such plan", f"no plan {plan_id!r} is stored or built in")


#: When the built-in plans' prices were set: their CDR ``lastUpdated`` until one is stored.
BUILTIN_UPDATED = datetime(2026, 7, 1, tzinfo=UTC)


def _toml_body(raw: bytes) -> dict[str, Any]:
    """A plan file sent as the body, read as any plan file is; ``parse_plan`` then checks it as
    it checks JSON."""
    try:
        return toml_document(raw, source="body")
    except PlanError as exc:
        raise Problem(422, "validation-error", "Request body is not valid", str(exc)) from None


def _store_plan(services: Services, plan_id: str, document: dict[str, Any]) -> dict[str, Any]:
    document = {**document, "id": document.get("id", plan_id)}
    if document["id"] != plan_id:
        raise Problem(422, "validation-error", "Plan id mismatch", "body id differs from path")
    try:
        parse_plan(document, source=f"plan {plan_id}")
    except InputError as exc:
        raise Problem(422, "invalid-plan", "The plan is not valid", str(exc)) from exc
    try:
        with services.store.write() as unit:
            stored = unit.catalog.put_plan(plan_id, document, updated_at=services.clock.now())
    except RegionMismatch as exc:
        raise Problem(
            422, "region-mismatch", "The plan's region is not its customers'", str(exc)
        ) from None
    return stored.document
