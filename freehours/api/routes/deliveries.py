"""A document's deliveries by email: ``GET {collection}/{number}/deliveries`` (read key) lists
each send and its outcome; ``POST`` the same (admin key) sends it again, an audited action
(docs/invoices.md, Delivery by email)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from freehours.api.auth import requires
from freehours.api.keys import ApiKey, Scope
from freehours.api.openapi import problem
from freehours.api.problems import Problem
from freehours.api.routes.documents import COLLECTIONS, Collection, NumberPath, find
from freehours.api.services import AppServices, Services
from freehours.observability.logging import bind_fields
from freehours.operations.actions import NotFound, Operator


class MailDeliveryOut(BaseModel):
    """One send of a document by email: never its address."""

    id: int
    number: str
    sequence: int = Field(ge=1, description="1 for the first send, then one more each resend")
    status: Literal["queued", "sent", "failed"]
    attempts: int = Field(ge=0)
    created_at: datetime
    finished_at: datetime | None
    last_code: int | None = Field(description="the mail server's last reply code")
    last_error: str | None = Field(description="its last refusal, the address taken out")
    possible_duplicate: bool = Field(
        description="an earlier attempt died between the server's acceptance and its commit: it"
        " may have been sent twice (with one Message-ID)"
    )
    resend: bool


class MailDeliveriesOut(BaseModel):
    number: str
    email: bool = Field(description="whether the customer has chosen email delivery now")
    deliveries: list[MailDeliveryOut]


router = APIRouter(tags=["invoicing"])

NOT_FOUND = problem("No document of this number in this collection.")


def _route(collection: Collection) -> Any:
    def list_deliveries(number: NumberPath, services: AppServices) -> JSONResponse:
        document, _ = find(services, collection, number)
        with services.store.read() as unit:
            sent = unit.mail.of_document(number)
            contact = unit.catalog.contacts([document.nmi]).get(document.nmi)
        email = contact is not None and contact.delivery.value == "email"
        return JSONResponse(
            {"number": number, "email": email, "deliveries": [d.as_json() for d in sent]}
        )

    return list_deliveries


def _resend_route(collection: Collection) -> Any:
    async def resend(
        number: NumberPath,
        key: Annotated[ApiKey, requires(Scope.ADMIN)],
        services: AppServices,
    ) -> JSONResponse:
        return await run_in_threadpool(_resend, services, collection, number, key)

    return resend


def _resend(services: Services, collection: Collection, number: str, key: ApiKey) -> JSONResponse:
    bind_fields(document=number)
    find(services, collection, number)  # a 404 for a number of another collection
    try:
        outcome = services.actions.resend_document(Operator(key.id, key.name), number)
    except NotFound as exc:
        raise Problem(404, "document-not-found", "No such document", str(exc)) from exc
    if not outcome.done:
        raise Problem(422, "no-email-delivery", "Not sent by email", outcome.message)
    with services.store.read() as unit:
        delivery = unit.mail.get(int(outcome.made["delivery_id"]))
    assert delivery is not None
    return JSONResponse(delivery.as_json(), 202)


for _collection in COLLECTIONS:
    router.add_api_route(
        f"{_collection.path}/{{number:path}}/deliveries",
        _route(_collection),
        methods=["GET"],
        name=f"list_{_collection.name}_deliveries",
        summary=f"The {_collection.noun}'s deliveries by email",
        description=f"Each time the {_collection.noun} was sent by email (the first send, then"
        " each resend) and its outcome; never the address it went to.",
        response_model=MailDeliveriesOut,
        dependencies=[requires(Scope.READ)],
        responses={200: {"description": "Its deliveries, first send first."}, 404: NOT_FOUND},
    )
    router.add_api_route(
        f"{_collection.path}/{{number:path}}/deliveries",
        _resend_route(_collection),
        methods=["POST"],
        status_code=202,
        name=f"resend_{_collection.name}",
        summary=f"Send the {_collection.noun} again",
        description=f"The {_collection.noun} sent by email again, to the customer's address as it"
        " is now: a new delivery, queued; an audited action (`document.resend`).",
        response_model=MailDeliveryOut,
        responses={
            202: {"description": "The new delivery, queued: sent by the job workers."},
            404: NOT_FOUND,
            422: problem(
                "The customer has no email delivery now (`/problems/no-email-delivery`), or the"
                " number is malformed."
            ),
        },
    )
