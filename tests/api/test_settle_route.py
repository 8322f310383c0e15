"""The routes that read their requests themselves are described as if they were declared.

``POST /v1/free-energy/settlements`` (``freehours.api.settle``) and the routes with a body read
their keys and bodies by hand, and write their OpenAPI description by hand; the settlement
route builds its answer by hand too. Each is compared here with what FastAPI makes of the same
route declared, so that the two cannot drift apart.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pytest
from fastapi import FastAPI

from freehours.api.auth import requires
from freehours.api.keys import Scope
from freehours.api.models import NmiPath
from freehours.api.routes.customers import CustomerIn
from freehours.api.routes.meter_readings import MeterReadingsIn
from freehours.api.settle import QuotaOut, SettlementIn, quota_body
from freehours.domain.settlement import QuotaStatus, new_quota
from tests.api.conftest import Api


def declared() -> dict[str, Any]:
    """The OpenAPI document of the hand-read routes, declared the ordinary way."""
    app = FastAPI()

    @app.post("/v1/free-energy/settlements", dependencies=[requires(Scope.SETTLE)])
    async def post_settlement(body: SettlementIn) -> None:
        raise NotImplementedError

    @app.put("/v1/customers/{nmi}")
    async def put_customer(nmi: NmiPath, body: CustomerIn) -> None:
        raise NotImplementedError

    @app.post("/v1/meter-readings")
    async def post_readings(body: MeterReadingsIn) -> None:
        raise NotImplementedError

    return app.openapi()


def resolved(node: Any, schemas: dict[str, Any]) -> Any:
    """``node`` with its ``#/components/schemas/`` references written in."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            return resolved(schemas[ref.removeprefix("#/components/schemas/")], schemas)
        return {name: resolved(value, schemas) for name, value in node.items()}
    if isinstance(node, list):
        return [resolved(item, schemas) for item in node]
    return node


@pytest.mark.parametrize(
    ("path", "method"),
    [
        ("/v1/free-energy/settlements", "post"),
        ("/v1/customers/{nmi}", "put"),
        ("/v1/meter-readings", "post"),
    ],
)
def test_a_hand_read_body_is_described_as_its_declared_model(
    api: Api, path: str, method: str
) -> None:
    served = api.client.get("/openapi.json").json()["paths"][path][method]
    document = declared()
    reference = document["paths"][path][method]
    schemas = document["components"]["schemas"]
    assert served["requestBody"] == resolved(reference["requestBody"], schemas)


def test_the_settlement_route_describes_the_access_it_checks_as_a_declared_one(api: Api) -> None:
    document = api.client.get("/openapi.json").json()
    served = document["paths"]["/v1/free-energy/settlements"]["post"]
    reference_document = declared()
    reference = reference_document["paths"]["/v1/free-energy/settlements"]["post"]
    assert served["security"] == reference["security"] == [{"bearer": ["settle"]}]
    assert "parameters" not in served  # the key is the security scheme's, not a header's
    assert "parameters" not in reference
    schemes = reference_document["components"]["securitySchemes"]
    assert document["components"]["securitySchemes"] == schemes


@pytest.mark.parametrize("status", list(QuotaStatus))
def test_the_hand_built_quota_is_the_declared_quota(status: QuotaStatus) -> None:
    quota = replace(
        new_quota("4102000001", date(2026, 7, 1)),
        status=status,
        free_kwh=Decimal("1.250"),
        attempts=1,
        completed_at=datetime(2026, 7, 1, 4, 15, tzinfo=UTC),
        reason="a reason",
    )
    body = quota_body(quota)
    assert list(body) == list(QuotaOut.model_fields)
    assert QuotaOut.model_validate(body) == QuotaOut(
        nmi=quota.nmi,
        date=quota.date,
        version=quota.version,
        status=status.value,
        free_kwh="1.250",
        attempts=1,
        completed_at=quota.completed_at,
        reason="a reason",
    )
