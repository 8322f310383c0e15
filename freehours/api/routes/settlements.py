"""Settlements: ``POST /v1/free-energy/settlements`` (settle key; the hot path, in
``freehours.api.settle``) and ``GET /v1/free-energy/settlements/{nmi}/{day}`` (read key)."""

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from freehours.api import settle
from freehours.api.auth import requires
from freehours.api.keys import Scope
from freehours.api.models import NemDate, NmiPath, QuotaOut, check_read_date
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
    dependencies=[requires(Scope.READ)],
    responses={
        200: {
            "description": "The quota's newest version, as a settlement request would find it"
            " (nothing written): COMPLETED, LOCKED, PENDING (a day nobody has asked to settle"
            " yet is PENDING, version 1, its reason naming when it is due) or ABORTED (an NMI"
            " without a customer, or a plan without a free window). Retry-After while it is"
            " PENDING or LOCKED: the seconds until a settlement request could settle it.",
            "headers": {
                "Retry-After": {
                    "description": "While PENDING or LOCKED: seconds until a settlement request"
                    " could settle the quota (at least 1); absent when one could now, or when"
                    " the quota is COMPLETED or ABORTED.",
                    "required": False,
                    "schema": {"type": "integer", "minimum": 1},
                }
            },
        }
    },
)
def get_settlement(nmi: NmiPath, day: NemDate, services: AppServices) -> JSONResponse:
    """The quota's current state (its newest version), as a settlement request would find it,
    without settling it or writing anything: always 200 with the quota. A day nobody has asked
    to settle yet is PENDING (version 1), with ``Retry-After`` (the seconds until it can be
    settled) while it is not due; an NMI without a customer, or on a plan without a free
    window, is ABORTED with the reason, as ``POST`` answers (not stored)."""
    bind_fields(nmi=nmi, date=day.isoformat())
    check_read_date(day, services.nem_today(), "day", where="path")
    view = services.settlements.view(nmi, day)
    bind_fields(quota_state=view.quota.status.value)
    headers = {} if view.retry_after is None else {"Retry-After": str(view.retry_after)}
    return JSONResponse(settle.quota_body(view.quota), headers=headers)
