"""Tariff plans: ``PUT /v1/plans/{plan_id}`` (admin)."""

from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from fastapi.concurrency import run_in_threadpool

from freehours.api.auth import requires
from freehours.api.bodies import body_operation, bounded_body, parse_body
from freehours.api.keys import Scope
from freehours.api.models import PLAN_DOCUMENT, plan_body_schema
from freehours.api.openapi import TOO_LARGE, link, merged
from freehours.api.problems import Problem
from freehours.api.services import AppServices, Services
from freehours.errors import InputError, PlanError
from freehours.plans import toml_document
from freehours.plans.document import (
    PLAN_ID_MAX_LENGTH,
    PLAN_ID_PATTERN,
    PlanDocument,
    parse_plan,
)

router = APIRouter(tags=["catalogue"], dependencies=[requires(Scope.ADMIN)])


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
            "responses": {
                "413": TOO_LARGE,
                "422": {
                    "description": "A TOML body that is not TOML or not UTF-8, or an id that is"
                    " not the path's, is a `/problems/validation-error` too; a plan that its"
                    " validation refuses is a `/problems/invalid-plan`, every problem named in"
                    " `detail`."
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
) -> dict[str, Any]:
    """Create or replace a tariff plan: the plan file's fields as JSON, or the plan file itself
    (``Content-Type: application/toml``)."""
    raw = await bounded_body(
        request, services.settings.max_json_body_bytes, title="Body too large", required=None
    )
    media_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    document = _toml_body(raw) if media_type == TOML else parse_body(PLAN_DOCUMENT, raw)
    return await run_in_threadpool(_store_plan, services, plan_id, document)


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
    with services.store.write() as unit:
        stored = unit.catalog.put_plan(plan_id, document, updated_at=services.clock.now())
    return stored.document
