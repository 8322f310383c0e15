"""Issue 32's hostile plan bodies against ``PUT /v1/plans/{id}``: each a 422 problem naming the
limit it passes, checked before a parser reads it (freehours.plans.limits)."""

from __future__ import annotations

import re

import pytest

from freehours.domain.fields import MAX_PLAN_NAME
from freehours.plans import builtin_document
from tests.api.conftest import Api
from tests.bombs import PLAN_BOMBS


@pytest.mark.parametrize(
    ("media_type", "body", "limit"),
    [pytest.param(media, body, limit, id=name) for name, media, body, limit in PLAN_BOMBS],
)
def test_a_hostile_plan_body_is_422_naming_the_limit_and_line(
    api: Api, media_type: str, body: bytes, limit: str
) -> None:
    response = api.client.put(
        "/v1/plans/x", content=body, headers={**api.auth("admin"), "Content-Type": media_type}
    )
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    detail = response.json()["detail"]
    assert re.match(r"body: line \d+: ", detail)
    assert "over the limit of" in detail
    assert limit in detail


def test_a_plan_body_of_too_many_keys_is_422_naming_the_limit(api: Api) -> None:
    body = b"".join(b"k%d = 1\n" % n for n in range(20_001))
    response = api.client.put(
        "/v1/plans/x",
        content=body,
        headers={**api.auth("admin"), "Content-Type": "application/toml"},
    )
    assert response.status_code == 422
    assert (
        "line 20001: 20001 keys or more, over the limit of 20000 keys in all"
        in (response.json()["detail"])
    )


def test_a_plan_whose_name_an_invoice_could_not_hold_is_422_naming_the_field(api: Api) -> None:
    plan = {**builtin_document("sso-nsw"), "id": "x", "description": "x" * (MAX_PLAN_NAME + 1)}
    response = api.client.put("/v1/plans/x", json=plan, headers=api.auth("admin"))
    assert response.status_code == 422
    assert f"description: String should have at most {MAX_PLAN_NAME}" in response.json()["detail"]
