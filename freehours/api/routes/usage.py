"""A household's days: ``GET /v1/customers/{nmi}/usage`` (read key), what the customer's own
page shows, for a retailer's app (docs/api.md, "A household's days")."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from typing import Literal

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from freehours.api.auth import requires
from freehours.api.keys import Scope
from freehours.api.models import DecimalText, NmiPath
from freehours.api.openapi import problem
from freehours.api.problems import Problem
from freehours.api.routes.bills import FromDay, ToDay, check_days
from freehours.api.services import AppServices, Services
from freehours.domain.bill import kwh_text
from freehours.domain.plan import Plan, clock_text
from freehours.domain.rating import MeterRating
from freehours.domain.usage import DayUse, UseTotals, days_of_use
from freehours.observability.logging import bind_fields
from freehours.store.database import Unit


class FreeWindowOut(BaseModel):
    start: str = Field(description="local clock, HH:MM")
    end: str = Field(description="local clock, HH:MM")
    cap_kwh: DecimalText = Field(description="the most free energy a day can have")


class UseDayOut(BaseModel):
    """One local day of the household."""

    date: date
    use_kwh: DecimalText = Field(description="all consumption read that day")
    free_kwh: DecimalText = Field(description="used inside the free window, up to the cap")
    unused_free_kwh: DecimalText | None = Field(
        description="the cap less the free energy (null: the plan has no free window)"
    )
    over_cap_kwh: DecimalText = Field(description="used inside the window past the cap")
    missing_intervals: int = Field(ge=0, description="intervals with no meter value")
    could_have_saved: DecimalText | None = Field(
        description="AUD: what moving use into the window, up to the unused free energy, would"
        " have saved at the day's average price of charged energy (GST included)"
    )
    settled: Literal["PENDING", "LOCKED", "COMPLETED", "ABORTED"] | None = Field(
        description="the status of the day's quota (its newest version); null: none yet"
    )


class UseTotalsOut(BaseModel):
    use_kwh: DecimalText
    free_kwh: DecimalText
    unused_free_kwh: DecimalText | None
    over_cap_kwh: DecimalText
    could_have_saved: DecimalText | None
    free_share_percent: int | None = Field(description="free energy as a share of use")


class HouseholdDaysOut(BaseModel):
    """A household's local days ``from`` to ``to`` under its plan."""

    model_config = ConfigDict(populate_by_name=True)

    nmi: str
    plan: str
    time_zone: str
    first: date = Field(alias="from")
    last: date = Field(alias="to")
    free_window: FreeWindowOut | None
    days: list[UseDayOut]
    totals: UseTotalsOut


@dataclass(frozen=True, slots=True)
class HouseholdDays:
    """What ``household_days`` finds: the plan, each day, and each day's quota status."""

    nmi: str
    plan: Plan
    first: date
    last: date
    days: list[DayUse]
    settled: dict[date, str]

    @property
    def totals(self) -> UseTotals:
        return UseTotals.of(self.days)

    def as_json(self) -> dict[str, object]:
        window = self.plan.free_window
        return {
            "nmi": self.nmi,
            "plan": self.plan.id,
            "time_zone": self.plan.zone_name,
            "from": self.first.isoformat(),
            "to": self.last.isoformat(),
            "free_window": None
            if window is None
            else {
                "start": clock_text(window.start),
                "end": clock_text(window.end),
                "cap_kwh": kwh_text(window.cap_kwh),
            },
            "days": [{**day.as_json(), "settled": self.settled.get(day.day)} for day in self.days],
            "totals": self.totals.as_json(),
        }


def household_days(
    services: Services, unit: Unit, nmi: str, first: date, last: date
) -> HouseholdDays | None:
    """The household's days ``first`` to ``last`` rated from the stored meter data under its
    plan, with each day's quota status; None without a customer whose plan parses."""
    customer = services.settlements.customer_plan(unit, nmi)
    plan, profiles = customer.plan, customer.profiles
    if plan is None or profiles is None:  # no customer, or a plan that no longer parses
        return None
    local_dates = [first + timedelta(days=n) for n in range((last - first).days + 1)]
    nem_dates = {d for day in local_dates for d in plan.nem_dates(day)}
    rating = MeterRating(nmi, profiles)
    for day in unit.meter.days_for(nmi, nem_dates):
        rating.add(day)
    quotas = unit.invoices.latest_quotas([nmi], first, last).get(nmi, {})
    settled = {day: quota.status.value for day, quota in quotas.items()}
    days = days_of_use(plan, rating.days(local_dates).values())
    return HouseholdDays(nmi, plan, first, last, days, settled)


router = APIRouter(tags=["billing"], dependencies=[requires(Scope.READ)])


@router.get(
    "/v1/customers/{nmi}/usage",
    response_model=HouseholdDaysOut,
    response_description="Each day of the household, and the days added up.",
    openapi_extra={
        "responses": {
            "404": problem(
                "No customer of this NMI, or their plan no longer parses:"
                " `/problems/customer-not-found`."
            ),
            "422": {"description": "So is a period whose from is after its to, or over 367 days."},
        }
    },
)
def get_usage(
    nmi: NmiPath,
    services: AppServices,
    first: FromDay,
    last: ToDay,
) -> JSONResponse:
    """Each of the household's local days ``from`` to ``to``: its use, free energy, unused free
    energy, energy over the cap and what moving use into the window would have saved, as the
    customer's own page shows them."""
    bind_fields(nmi=nmi)
    check_days(first, last)
    with services.store.read() as unit:
        found = household_days(services, unit, nmi, first, last)
    if found is None:
        raise Problem(
            404,
            "customer-not-found",
            "No usage for this NMI",
            f"NMI {nmi}: no customer, or their plan no longer parses",
        )
    return JSONResponse(found.as_json())
