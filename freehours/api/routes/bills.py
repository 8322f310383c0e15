"""Bills: ``GET /v1/customers/{nmi}/bill`` (read key), rated from the stored meter data."""

from datetime import date, timedelta
from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
)

from freehours.api.auth import requires
from freehours.api.keys import Scope
from freehours.api.models import BetterOfferOut, DecimalText, NemDate, NmiPath
from freehours.api.openapi import problem
from freehours.api.problems import Problem
from freehours.api.services import AppServices
from freehours.domain.bill import make_bill
from freehours.domain.rating import MeterRating
from freehours.observability.logging import bind_fields
from freehours.settlement.model import NoQuotas


class BillDayOut(BaseModel):
    """One local day of a bill."""

    date: date
    consumption_kwh: DecimalText
    free_kwh: DecimalText
    over_cap_kwh: DecimalText
    export_kwh: DecimalText
    missing_intervals: int = Field(ge=0)


class BillTotalsOut(BaseModel):
    consumption_kwh: DecimalText
    free_kwh: DecimalText
    over_cap_kwh: DecimalText
    export_kwh: DecimalText


class BillLineOut(BaseModel):
    """One priced line: energy in a band, the supply charge, or feed-in (a credit)."""

    code: str
    description: str
    quantity: DecimalText
    unit: str
    unit_price: DecimalText
    amount: DecimalText


class BillOut(BaseModel):
    """The bill, the same JSON as ``freehours bill --format json`` (docs/design.md section 4);
    amounts in AUD, GST on top of ``subtotal``."""

    model_config = ConfigDict(populate_by_name=True)

    nmi: str
    plan: str
    time_zone: str
    first: date = Field(alias="from")
    last: date = Field(alias="to")
    days: list[BillDayOut]
    totals: BillTotalsOut
    lines: list[BillLineOut]
    subtotal: DecimalText
    gst: DecimalText
    total: DecimalText
    free_energy_value: DecimalText


router = APIRouter(tags=["billing"], dependencies=[requires(Scope.READ)])

#: A span of local days a route reads: ``from`` to ``to``, at most ``MOST_DAYS``.
FromDay = Annotated[NemDate, Query(alias="from", description="first local day, YYYY-MM-DD")]
ToDay = Annotated[NemDate, Query(alias="to", description="last local day, YYYY-MM-DD")]
#: The longest span one request reads (a year and a leap day).
MOST_DAYS = 367


def check_days(first: date, last: date) -> None:
    """A 422 for ``from`` after ``to``, or a span over ``MOST_DAYS``."""
    if first > last:
        raise Problem(422, "validation-error", "Empty period", f"from: {first} is after {last}")
    if (last - first).days >= MOST_DAYS:
        raise Problem(422, "validation-error", "Period too long", f"to: at most {MOST_DAYS} days")


@router.get(
    "/v1/customers/{nmi}/bill",
    response_model=BillOut,
    response_description="The bill of those days.",
    openapi_extra={
        "responses": {
            "404": problem(
                "No bill for this NMI: no customer, or a plan that no longer parses (`detail`"
                " says which): `/problems/customer-not-found`. (A plan without a free window"
                " bills all the same.)"
            ),
            "422": {"description": "So is a period whose from is after its to, or over 367 days."},
        }
    },
)
def get_bill(
    nmi: NmiPath,
    services: AppServices,
    first: FromDay,
    last: ToDay,
) -> JSONResponse:
    """The customer's bill for local days ``from`` to ``to``: the same JSON as ``freehours
    bill``, rated from the stored meter data."""
    bind_fields(nmi=nmi)
    check_days(first, last)
    with services.store.read() as unit:
        customer = services.settlements.customer_plan(unit, nmi)
        if isinstance(customer, NoQuotas):
            if customer.plan is None or customer.profiles is None:
                raise Problem(404, "customer-not-found", "No bill for this NMI", customer.reason)
            # A plan without a free window has no quotas, and bills all the same.
            plan, profiles = customer.plan, customer.profiles
        else:
            plan, profiles = customer.plan, customer.profiles
        # Every NEM date that covers a local day asked for: each day is billed whole.
        local_dates = [first + timedelta(days=n) for n in range((last - first).days + 1)]
        nem_dates = {d for day in local_dates for d in plan.nem_dates(day)}
        days = unit.meter.days_for(nmi, nem_dates)
    rating = MeterRating(nmi, profiles)
    for day in days:
        rating.add(day)
    bill = make_bill(plan, nmi, rating.days(local_dates).values())
    return JSONResponse(bill.as_json())


@router.get(
    "/v1/customers/{nmi}/better-offer",
    response_model=BetterOfferOut,
    response_description="The check, as an invoice issued on as_of would make it.",
    openapi_extra={
        "responses": {
            "404": problem(
                "No customer of this NMI, or their plan no longer parses (`detail` says which):"
                " `/problems/customer-not-found`."
            ),
        }
    },
)
def get_better_offer(
    nmi: NmiPath,
    services: AppServices,
    as_of: Annotated[
        NemDate | None,
        Query(
            description="the day an invoice would be issued, YYYY-MM-DD (default: today on the"
            " customer's clock); the usage priced is the 12 months of billing periods to the"
            " last one ended before it"
        ),
    ] = None,
) -> JSONResponse:
    """The better offer check on demand, as an invoice issued on ``as_of`` would make it: the
    customer's usage of the 12 months of billing periods to the last one ended before it,
    priced on their plan and on every offer that applies to them that day
    (docs/invoices.md, The better offer check)."""
    bind_fields(nmi=nmi)
    check = services.runtime.invoicing.better_offer(nmi, as_of)
    if check is None:
        raise Problem(
            404,
            "customer-not-found",
            "No better offer check for this NMI",
            f"NMI {nmi}: no customer, or their plan no longer parses",
        )
    return JSONResponse(check.as_json())
