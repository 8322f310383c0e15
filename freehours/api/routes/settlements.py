"""Settlements: ``POST /v1/free-energy/settlements`` (settle key; the hot path, in
``freehours.api.settle``), ``GET /v1/free-energy/settlements/{nmi}/{day}`` (read key) and
``POST /v1/settlements/schedule`` (admin key: the days an operator names scheduled to settle)."""

from datetime import date

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
)

from freehours.api import settle
from freehours.api.auth import requires
from freehours.api.bodies import body_operation, bounded_body, parse_body
from freehours.api.keys import Scope
from freehours.api.models import STRICT_BODY, NemDate, NmiPath, check_read_date
from freehours.api.openapi import TOO_LARGE, merged
from freehours.api.problems import Problem, range_problem
from freehours.api.services import AppServices, Services
from freehours.api.settle import QuotaOut
from freehours.domain import reads as rules
from freehours.domain.reads import NMI_PATTERN
from freehours.observability.logging import bind_fields
from freehours.store.catalog import UnknownCustomer


class ScheduleIn(BaseModel):
    """What ``POST /v1/settlements/schedule`` takes: whose days, and which."""

    model_config = STRICT_BODY

    nmi: str = Field(
        pattern=NMI_PATTERN,
        description="the customer's NMI (every customer at once is `freehours settlements"
        " schedule`'s: a run of minutes, not a request's)",
    )
    first: NemDate = Field(alias="from", description="the first local day scheduled")
    last: NemDate = Field(
        alias="to",
        description=f"the last local day scheduled: at most {rules.SCHEDULE_MAX_DAYS} days in all",
    )


class ScheduleOut(BaseModel):
    """What ``POST /v1/settlements/schedule`` did."""

    model_config = ConfigDict(populate_by_name=True)

    nmi: str
    first: date = Field(alias="from")
    last: date = Field(alias="to")
    scheduled: int = Field(
        ge=0,
        description="days with reads and no COMPLETED or ABORTED quota, each given its settlement"
        " job (or, where one waits already, told to run when due)",
    )


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


@router.post(
    "/v1/settlements/schedule",
    response_model=ScheduleOut,
    dependencies=[requires(Scope.ADMIN)],
    response_description="How many days were scheduled.",
    openapi_extra=merged(
        body_operation(ScheduleIn),
        {
            "responses": {
                "413": TOO_LARGE,
                "422": {
                    "description": "A day no meter can have read yet, `to` before `from` or"
                    f" over {rules.SCHEDULE_MAX_DAYS} days after it, or an `nmi` without a"
                    " customer: `/problems/validation-error`, naming the field in `errors`."
                },
            }
        },
    ),
)
async def schedule_settlements(request: Request, services: AppServices) -> ScheduleOut:
    """Schedule the settlement of every day from ``from`` to ``to`` (local dates) with meter
    data and no COMPLETED or ABORTED quota, of the customer of ``nmi``: each day gets its
    settlement job, due at once when its window has passed (and settled with what there is past
    its data deadline). What ``freehours settlements schedule --nmi`` does; asked again, nothing
    is scheduled twice. One customer a request, so that a request stays short: every customer
    at once is the command's."""
    raw = await bounded_body(
        request, services.settings.max_json_body_bytes, title="Body too large", required=None
    )
    body = parse_body(ScheduleIn, raw)
    bind_fields(nmi=body.nmi)
    try:
        rules.check_schedule_range(body.first, body.last, services.nem_today())
    except rules.RangeError as exc:
        raise range_problem(f"body.{exc.field}", exc) from None
    scheduled = await run_in_threadpool(_schedule, services, body)
    return ScheduleOut(nmi=body.nmi, first=body.first, last=body.last, scheduled=scheduled)


def _schedule(services: Services, body: ScheduleIn) -> int:
    try:
        return services.runtime.ingestion.schedule_unsettled(body.nmi, body.first, body.last)
    except UnknownCustomer as exc:
        raise Problem(
            422,
            "validation-error",
            "Request is not valid",
            str(exc).replace("nmi:", "body.nmi:", 1),
            errors=[{"field": "body.nmi", "message": f"no customer {body.nmi}"}],
        ) from None
