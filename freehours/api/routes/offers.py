"""The retailer's offers: ``PUT /v1/offers/{offer_id}`` (admin) stores a CDR plan the retailer
publishes as an offer, a new version when it changed; ``GET /v1/offers`` and
``GET /v1/offers/{offer_id}`` (read) list them and show one with its plan."""

from datetime import date
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, Field

from freehours.api.auth import requires
from freehours.api.bodies import bounded_body
from freehours.api.keys import Scope
from freehours.api.openapi import TOO_LARGE, merged, problem
from freehours.api.problems import Problem
from freehours.api.services import AppServices, Services
from freehours.domain.offers import OfferSource
from freehours.domain.time import Region
from freehours.errors import PlanError
from freehours.plans.cdr import CDR_MEDIA_TYPE, read_json
from freehours.plans.cdr.offers import offer_from_cdr
from freehours.plans.document import PLAN_ID_MAX_LENGTH, PLAN_ID_PATTERN
from freehours.store.catalog import NewOffer

router = APIRouter(tags=["catalogue"], dependencies=[requires(Scope.ADMIN)])
reader = APIRouter(tags=["catalogue"], dependencies=[requires(Scope.READ)])

OfferIdPath = Annotated[
    str, Path(pattern=PLAN_ID_PATTERN, max_length=PLAN_ID_MAX_LENGTH, description="offer id")
]


class OfferOut(BaseModel):
    """One version of an offer: where and when it applies."""

    offer_id: str
    version: int = Field(description="A new version each time its plan, name or terms change.")
    name: str
    source: Literal["cdr", "plan"] = Field(description="a CDR plan, or a freehours plan file")
    region: Region
    distributors: list[str] = Field(description="The networks it is offered on (none: every one).")
    controlled_load: bool = Field(description="For premises with a controlled load.")
    effective_from: date | None
    effective_to: date | None


class OfferWithPlanOut(OfferOut):
    plan: dict[str, Any] = Field(description="The offer's plan, as a plan file's fields.")


class OffersOut(BaseModel):
    items: list[OfferOut]


@router.put(
    "/v1/offers/{offer_id}",
    response_model=OfferOut,
    response_description="The offer as it now stands.",
    openapi_extra=merged(
        {
            "requestBody": {
                "required": True,
                "content": {
                    CDR_MEDIA_TYPE: {
                        "schema": {
                            "type": "object",
                            "description": "A CDR EnergyPlanDetailV3 (CDS 1.36.0), bare or as"
                            " its response's `data`; its planId is the path's offer id.",
                        }
                    }
                },
            }
        },
        {
            "responses": {
                "413": TOO_LARGE,
                "415": problem(
                    "A body that is not sent as a CDR plan (`/problems/unsupported-media-type`)."
                ),
                "422": {
                    "description": "A body that is not a CDR plan freehours can rate, a"
                    " business plan, or dates that cannot be: `/problems/invalid-offer`, the"
                    " JSON path in `detail`."
                },
            }
        },
    ),
)
async def put_offer(
    request: Request,
    offer_id: OfferIdPath,
    services: AppServices,
    region: Annotated[
        Region | None, Query(description="its region, where its geography names none")
    ] = None,
) -> dict[str, Any]:
    """Store a CDR plan the retailer publishes as one of its offers: a new version when its
    plan, name or terms (distributors, controlled load, effective dates) changed, else the
    version stored. Only a residential plan is an offer."""
    limit = services.settings.max_json_body_bytes
    raw = await bounded_body(request, limit, title="Body too large", required=None)
    media_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media_type != CDR_MEDIA_TYPE:
        raise Problem(
            415,
            "unsupported-media-type",
            "An offer is a CDR plan",
            f"send a CDR EnergyPlanDetailV3 with Content-Type: {CDR_MEDIA_TYPE}",
        )
    return await run_in_threadpool(_put_offer, services, offer_id, raw, region, limit)


def _put_offer(
    services: Services, offer_id: str, raw: bytes, region: Region | None, limit: int
) -> dict[str, Any]:
    try:
        cdr = read_json(raw, source="body", limit=limit)
        plan, terms, name = offer_from_cdr(cdr, source="body", region=region)
    except PlanError as exc:
        raise Problem(422, "invalid-offer", "The offer cannot be stored", str(exc)) from None
    if plan["id"] != offer_id:
        raise Problem(
            422,
            "invalid-offer",
            "The offer cannot be stored",
            f"body: planId {plan['id']!r} is not the path's offer id {offer_id!r}",
        )
    with services.store.write() as unit:
        (offer,) = unit.catalog.put_offers(
            [NewOffer(offer_id, name, OfferSource.CDR, terms, plan)], at=services.clock.now()
        )
    return offer.as_json()


@reader.get("/v1/offers", response_model=OffersOut, response_description="The offers.")
def list_offers(
    services: AppServices,
    region: Annotated[Region | None, Query(description="only this region's offers")] = None,
) -> dict[str, Any]:
    """Every offer, its latest version, by id."""
    with services.store.read() as unit:
        found = unit.catalog.current_offers(region=region)
    return {"items": [offer.as_json() for offer in found]}


@reader.get(
    "/v1/offers/{offer_id}",
    response_model=OfferWithPlanOut,
    response_description="The offer, with its plan.",
    responses={404: problem("No offer has this id (or this version).")},
)
def get_offer(
    offer_id: OfferIdPath,
    services: AppServices,
    version: Annotated[
        int | None,
        Query(ge=1, le=2**31 - 1, description="a version (default: the latest)"),
    ] = None,
) -> dict[str, Any]:
    """One offer, its latest version or the one asked for, with its plan."""
    with services.store.read() as unit:
        offer = unit.catalog.offer(offer_id, version)
    if offer is None:
        raise Problem(404, "not-found", "No such offer", f"no offer {offer_id!r}")
    return {**offer.as_json(), "plan": offer.document}
