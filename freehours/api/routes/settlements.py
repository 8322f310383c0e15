"""Settlements: ``POST /v1/free-energy/settlements`` (settle key; the hot path, in
``freehours.api.settle``) and ``GET /v1/free-energy/settlements/{nmi}/{day}`` (read key)."""

from datetime import date

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from freehours.api import settle
from freehours.api.auth import requires
from freehours.api.keys import Scope
from freehours.api.models import NmiPath, QuotaOut
from freehours.api.openapi import problem
from freehours.api.problems import Problem
from freehours.api.services import AppServices
from freehours.observability.logging import bind_fields

router = APIRouter(tags=["settlement"])

router.add_api_route(
    "/v1/free-energy/settlements",
    settle.post_settlement,
    methods=["POST"],
    dependencies=[requires(Scope.SETTLE)],
    response_model=QuotaOut,
    responses=settle.RESPONSES,
    openapi_extra=settle.OPENAPI,
    route_class_override=settle.ReadsItself,
)


@router.get(
    "/v1/free-energy/settlements/{nmi}/{day}",
    response_model=QuotaOut,
    response_description="The quota's newest version.",
    dependencies=[requires(Scope.READ)],
    openapi_extra={
        "responses": {"404": problem("No quota for this NMI and day: `/problems/quota-not-found`.")}
    },
)
def get_settlement(nmi: NmiPath, day: date, services: AppServices) -> JSONResponse:
    """The quota's current state (its newest version)."""
    bind_fields(nmi=nmi, date=day.isoformat())
    quota = services.settlements.state(nmi, day)
    if quota is None:
        raise Problem(404, "quota-not-found", "No such quota", f"no quota for {nmi} on {day}")
    bind_fields(quota_state=quota.status.value)
    return JSONResponse(settle.quota_body(quota))
