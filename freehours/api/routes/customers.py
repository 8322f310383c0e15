"""Customers: ``PUT /v1/customers/{nmi}`` (admin), the plan an NMI is on and its region."""

from typing import Annotated, Literal

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import (
    BaseModel,
    Field,
)

from freehours.api.auth import requires
from freehours.api.bodies import body_operation, bounded_body, parse_body
from freehours.api.keys import ApiKey, Scope
from freehours.api.models import STRICT_BODY, NmiPath
from freehours.api.openapi import TOO_LARGE, link, merged, problem
from freehours.api.problems import Problem, field_problem
from freehours.api.services import AppServices, Services
from freehours.domain.contacts import MAX_ADDRESS_LINES, MAX_EMAIL, Contact, contact
from freehours.domain.fields import MAX_ADDRESS, MAX_CUSTOMER_NAME
from freehours.domain.invoicing import (
    DEFAULT_PAYMENT_TERM_DAYS,
    MAX_ANCHOR_DAY,
    MAX_PAYMENT_TERM_DAYS,
    MIN_PAYMENT_TERM_DAYS,
    BillingCycle,
    Frequency,
)
from freehours.domain.reads import RangeError
from freehours.domain.time import Region
from freehours.observability.logging import bind_fields
from freehours.operations.actions import NotFound, Operator
from freehours.plans.document import PlanId
from freehours.store.catalog import RegionMismatch, UnknownPlan

BillingFrequency = Literal["monthly", "quarterly"]

#: The longest contact field the body's parser takes: beyond it, a 422 before any other check
#: (the contact's own limits, shorter, are checked with the field named).
MAX_FIELD = 1_000

AnchorDay = Annotated[
    int,
    Field(
        strict=True,
        ge=1,
        le=MAX_ANCHOR_DAY,
        description="the day of the month each billing period starts on (1 to 28, so that"
        " every month has it)",
    ),
]

PaymentTermDays = Annotated[
    int,
    Field(
        strict=True,
        ge=MIN_PAYMENT_TERM_DAYS,
        le=MAX_PAYMENT_TERM_DAYS,
        description="days from an invoice's issue to its due date (the Retail Rules give at"
        " least 13 business days)",
    ),
]


class CustomerIn(BaseModel):
    """A customer: the plan, the region, and the billing cycle (the defaults when left out)."""

    model_config = STRICT_BODY

    plan_id: PlanId
    region: Region
    billing_cycle: BillingFrequency = Field(
        default="monthly", description="how often the customer is invoiced"
    )
    anchor_day: AnchorDay = 1
    payment_term_days: PaymentTermDays = DEFAULT_PAYMENT_TERM_DAYS

    name: str | None = Field(
        default=None,
        max_length=MAX_FIELD,
        description="The customer's name as their documents show it (at most"
        f" {MAX_CUSTOMER_NAME} characters). The contact's fields are set together: give `name`"
        " and `supply_address` (and the others as they apply), or none of them to keep the"
        " contact stored.",
    )
    supply_address: list[Annotated[str, Field(max_length=MAX_FIELD)]] | None = Field(
        default=None,
        max_length=MAX_ADDRESS_LINES,
        description=f"The supply address's lines (1 to {MAX_ADDRESS_LINES}, at most"
        f' {MAX_ADDRESS} characters joined with ", ").',
    )
    billing_address: list[Annotated[str, Field(max_length=MAX_FIELD)]] | None = Field(
        default=None,
        max_length=MAX_ADDRESS_LINES,
        description="Where documents are posted, when not the supply address (none: the"
        " supply address).",
    )
    email: str | None = Field(
        default=None, max_length=MAX_EMAIL, description="Where documents are emailed."
    )
    delivery: Literal["email", "post"] | None = Field(
        default=None,
        description="How documents reach the customer (default: email when an email address is"
        " given, else post; email needs an email address).",
    )

    def cycle(self) -> BillingCycle:
        return BillingCycle(Frequency(self.billing_cycle), self.anchor_day, self.payment_term_days)

    def contact(self) -> Contact | None:
        """The contact given, checked; None where none of its fields is; a 422 naming the field
        that is wrong (never its value)."""
        given = (self.name, self.supply_address, self.billing_address, self.email, self.delivery)
        if all(value is None for value in given):
            return None
        if self.name is None:
            raise field_problem("name", "is required with the contact's other fields")
        try:
            return contact(
                self.name,
                self.supply_address or [],
                self.billing_address or [],
                self.email,
                self.delivery,
            )
        except RangeError as exc:
            raise field_problem(exc.field, exc.reason) from None


class CustomerOut(BaseModel):
    nmi: str
    plan_id: str
    region: Region
    billing_cycle: BillingFrequency
    anchor_day: AnchorDay
    payment_term_days: PaymentTermDays
    name: str | None = Field(description="null: no contact stored")
    supply_address: list[str] | None
    billing_address: list[str] | None
    email: str | None
    delivery: Literal["email", "post"] | None


router = APIRouter(tags=["catalogue"], dependencies=[requires(Scope.ADMIN)])


@router.put(
    "/v1/customers/{nmi}",
    response_model=CustomerOut,
    response_description="The customer as stored.",
    openapi_extra=merged(
        body_operation(CustomerIn),
        {
            "responses": {
                "200": {
                    "links": {
                        "readings": link(
                            "post_readings",
                            "Send the customer's meter reads.",
                            body={"nmi": "$response.body#/nmi"},
                        ),
                        "settlement": link(
                            "post_settlement",
                            "Settle a day of the customer's.",
                            body={"nmi": "$response.body#/nmi"},
                        ),
                        "bill": link(
                            "get_bill",
                            "The customer's bill.",
                            parameters={"path.nmi": "$response.body#/nmi"},
                        ),
                    }
                },
                "413": TOO_LARGE,
                "422": {
                    "description": "A plan_id neither stored nor built in:"
                    " `/problems/unknown-plan`; a plan of another region than the customer's:"
                    " `/problems/region-mismatch`, naming both."
                },
            }
        },
    ),
)
async def put_customer(request: Request, nmi: NmiPath, services: AppServices) -> CustomerOut:
    """Create or update a customer: the plan they are on, their region, and their billing
    cycle (``billing_cycle`` monthly or quarterly from ``anchor_day``, each invoice due
    ``payment_term_days`` after its issue; monthly from the 1st, due in 21 days, when left out:
    a PUT sets them all). A built-in plan
    (``sso-nsw``, ``sso-seq``, ``sso-sa``, ``mps-vic``) needs no ``PUT /v1/plans`` first: it is
    stored the first time a customer is put on it, unless a plan of that id is stored
    already. The plan's region must be the customer's. The days of reads that came before the
    customer are scheduled to settle, however old."""
    bind_fields(nmi=nmi)
    raw = await bounded_body(
        request, services.settings.max_json_body_bytes, title="Body too large", required=None
    )
    body = parse_body(CustomerIn, raw)
    return await run_in_threadpool(_store_customer, services, nmi, body)


def _store_customer(services: Services, nmi: str, body: CustomerIn) -> CustomerOut:
    cycle = body.cycle()
    given = body.contact()
    try:
        services.runtime.put_customer(
            nmi,
            plan_id=body.plan_id,
            region=body.region,
            cycle={
                "frequency": cycle.frequency,
                "anchor_day": cycle.anchor_day,
                "payment_term_days": cycle.payment_term_days,
            },
            contact=given,
        )
    except UnknownPlan as exc:
        raise Problem(422, "unknown-plan", "Unknown plan", f"plan_id: {exc}") from None
    except RegionMismatch as exc:
        raise Problem(
            422, "region-mismatch", "The plan is of another region", f"region: {exc}"
        ) from None
    return CustomerOut(
        nmi=nmi,
        plan_id=body.plan_id,
        region=body.region,
        billing_cycle=body.billing_cycle,
        anchor_day=body.anchor_day,
        payment_term_days=body.payment_term_days,
        **_contact_fields(services, nmi, given),
    )


def _contact_fields(services: Services, nmi: str, given: Contact | None) -> dict[str, object]:
    """The contact as stored (the one given, else the one kept), as ``CustomerOut``'s fields."""
    if given is None:
        with services.store.read() as unit:
            given = unit.catalog.contacts([nmi]).get(nmi)
    if given is None:
        return dict.fromkeys(("name", "supply_address", "billing_address", "email", "delivery"))
    return {
        "name": given.name,
        "supply_address": list(given.supply_address),
        "billing_address": list(given.billing_address) or None,
        "email": given.email,
        "delivery": given.delivery.value,
    }


class PageRevokedOut(BaseModel):
    nmi: str
    revoked: int = Field(ge=0, description="pages whose links stopped opening (0 or 1)")


@router.delete(
    "/v1/customers/{nmi}/page",
    response_model=PageRevokedOut,
    response_description="Every link to the customer's page stops opening.",
    responses={404: problem("No customer of this NMI: `/problems/customer-not-found`.")},
)
async def revoke_page(
    nmi: NmiPath, key: Annotated[ApiKey, requires(Scope.ADMIN)], services: AppServices
) -> JSONResponse:
    """Every link sent to the customer's own page stops opening at once (docs/invoices.md, Each
    customer's page): a lost phone, a forwarded email. Their next email carries a link to a new
    page id. An audited action (``page.revoke``)."""
    bind_fields(nmi=nmi)
    return await run_in_threadpool(_revoke_page, services, nmi, key)


def _revoke_page(services: Services, nmi: str, key: ApiKey) -> JSONResponse:
    try:
        outcome = services.actions.revoke_page(Operator(key.id, key.name), nmi)
    except NotFound as exc:
        raise Problem(404, "customer-not-found", "No such customer", str(exc)) from exc
    return JSONResponse({"nmi": nmi, "revoked": outcome.made["revoked"]})
