"""The OpenAPI document: valid OpenAPI 3.1, complete by the rules the contract sets, generated
from the routes' own declarations, and committed as docs/openapi.json exactly as served.

(Whether the API answers as the document says is tests/api/test_schemathesis.py's.)
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.routing import APIRoute, iter_route_contexts
from fastapi.testclient import TestClient
from openapi_spec_validator import OpenAPIV31SpecValidator, validate
from pydantic import BaseModel

from freehours.api import openapi, schema
from freehours.api.app import assemble
from freehours.api.auth import BEARER, Requires
from freehours.api.problems import _OTHER, _SLUGS
from freehours.api.routes.bills import BillOut
from freehours.api.routes.meter_readings import IngestCountsOut, Nem12CountsOut
from freehours.api.routes.operations import HealthOut, ReadinessOut
from tests.api.conftest import Api
from tests.api.test_meter_readings import NMI, batch, nem12_file, post_nem12
from tests.api.test_meter_readings import post as post_readings
from tests.api.test_settlements import set_up

ROOT = Path(__file__).resolve().parents[2]
PROBLEM = {"$ref": "#/components/schemas/Problem"}
QUOTA = {"$ref": "#/components/schemas/QuotaOut"}
#: The operations open to anyone, and the one open on loopback.
OPEN = {("get", "/healthz"), ("get", "/readyz")}
#: The error answers whose body is not problem details, as the contract says (docs/api.md).
NOT_PROBLEMS = {
    ("post", "/v1/free-energy/settlements", "409"): {"application/json": QUOTA},
    ("post", "/v1/free-energy/settlements", "422"): {
        "application/json": QUOTA,
        "application/problem+json": PROBLEM,
    },
    ("get", "/readyz", "503"): {"application/json": {"$ref": "#/components/schemas/ReadinessOut"}},
}


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    """The document as the application serves it (no database needed)."""
    with TestClient(assemble()) as client:
        response = client.get("/openapi.json")
    assert response.status_code == 200
    served: dict[str, Any] = response.json()
    return served


def operations(document: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in document["paths"].items():
        for method, operation in item.items():
            yield method, path, operation


def test_the_document_is_valid_openapi_3_1(document: dict[str, Any]) -> None:
    assert document["openapi"].startswith("3.1.")
    validate(document, cls=OpenAPIV31SpecValidator)


def test_every_v1_operation_needs_a_bearer_key_with_the_scope_its_route_declares(
    document: dict[str, Any],
) -> None:
    (scheme,) = document["components"]["securitySchemes"].values()
    assert document["components"]["securitySchemes"]["bearer"] == scheme
    assert scheme == BEARER.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert (scheme["type"], scheme["scheme"]) == ("http", "bearer")
    app = assemble()
    declared = {}
    for route in iter_route_contexts(app.routes):
        if isinstance(route.original_route, APIRoute) and route.include_in_schema:
            access = openapi.access_of(route.dependant)
            for method in route.methods or ():
                declared[method.lower(), route.path_format] = access
    assert set(declared) == {(method, path) for method, path, _ in operations(document)}
    for (method, path), access in declared.items():
        operation = document["paths"][path][method]
        if (method, path) in OPEN:
            assert access is None
            assert "security" not in operation, path
            continue
        assert isinstance(access, Requires), path
        requirement = [{"bearer": [access.scope.value]}]
        if access.open_on_loopback:
            requirement.append({})
        assert operation["security"] == requirement, path
        assert openapi.access_text(access) in operation["description"], path
    assert document["paths"]["/metrics"]["get"]["security"] == [{"bearer": ["read"]}, {}]


def test_the_key_is_no_header_parameter_and_idempotency_key_is_required_where_it_is(
    document: dict[str, Any],
) -> None:
    idempotent = set()
    for method, path, operation in operations(document):
        names = {parameter["name"].lower() for parameter in operation.get("parameters", [])}
        assert "authorization" not in names, path
        for parameter in operation.get("parameters", []):
            if parameter["name"] == "Idempotency-Key":
                assert parameter["in"] == "header"
                assert parameter["required"] is True
                assert parameter["schema"]["maxLength"] == 255
                idempotent.add((method, path))
    assert idempotent == {
        ("post", "/v1/meter-readings"),
        ("post", "/v1/meter-readings/nem12"),
        ("post", "/v1/invoice-runs"),
    }


def test_every_error_answer_is_problem_details_unless_the_contract_says_otherwise(
    document: dict[str, Any],
) -> None:
    assert "HTTPValidationError" not in json.dumps(document)
    assert "ValidationError" not in document["components"]["schemas"]
    for method, path, operation in operations(document):
        for status, response in operation["responses"].items():
            if int(status) < 400:
                continue
            content = {media: entry["schema"] for media, entry in response["content"].items()}
            expected = NOT_PROBLEMS.get(
                (method, path, status), {"application/problem+json": PROBLEM}
            )
            assert content == expected, (method, path, status)
            if status in {"409", "429", "503"}:
                assert "Retry-After" in response["headers"], (method, path, status)


def test_each_route_documents_the_answers_it_can_give(document: dict[str, Any]) -> None:
    """What each route can answer, read from its code (docs/api.md has it as a table)."""
    access = {"401", "403", "429", "503"}
    expected = {
        ("put", "/v1/plans/{plan_id}"): {"200", "413", "422"} | access,
        ("put", "/v1/offers/{offer_id}"): {"200", "413", "415", "422"} | access,
        ("get", "/v1/offers"): {"200", "422"} | access,
        ("post", "/v1/comparisons"): {"200", "413", "422", "503"} | access,
        ("get", "/v1/offers/{offer_id}"): {"200", "404", "422"} | access,
        ("get", "/v1/plans/{plan_id}"): {"200", "404", "406", "422"} | access,
        ("put", "/v1/customers/{nmi}"): {"200", "413", "422"} | access,
        ("post", "/v1/meter-readings"): {"200", "400", "409", "413", "422"} | access,
        ("post", "/v1/meter-readings/nem12"): {"200", "400", "409", "413", "422"} | access,
        ("post", "/v1/free-energy/settlements"): {"200", "409", "413", "422"} | access,
        ("get", "/v1/free-energy/settlements/{nmi}/{day}"): {"200", "422"} | access,
        ("post", "/v1/settlements/schedule"): {"200", "413", "422"} | access,
        ("get", "/v1/customers/{nmi}/bill"): {"200", "404", "422"} | access,
        ("get", "/v1/customers/{nmi}/better-offer"): {"200", "404", "422"} | access,
        ("get", "/v1/customers/{nmi}/usage"): {"200", "404", "422"} | access,
        ("delete", "/v1/customers/{nmi}/page"): {"200", "404", "422"} | access,
        ("get", "/v1/invoice-runs/{run_id}/print-batch.csv"): {"200", "404", "422"} | access,
        ("get", "/v1/invoice-runs/{run_id}/print-batch.pdf"): {"200", "404", "422"} | access,
        ("get", "/v1/invoices/{number}/deliveries"): {"200", "404", "422"} | access,
        ("post", "/v1/invoices/{number}/deliveries"): {"202", "404", "422"} | access,
        ("get", "/v1/credit-notes/{number}/deliveries"): {"200", "404", "422"} | access,
        ("post", "/v1/credit-notes/{number}/deliveries"): {"202", "404", "422"} | access,
        ("post", "/v1/invoice-runs"): {"202", "400", "409", "413", "422"} | access,
        ("get", "/v1/invoice-runs/{run_id}"): {"200", "404", "422"} | access,
        ("get", "/v1/invoice-runs/{run_id}/journal.csv"): {"200", "404", "422"} | access,
        ("get", "/v1/audit"): {"200", "422"} | access,
        ("get", "/v1/invoices"): {"200", "422"} | access,
        ("get", "/v1/invoices/{number}"): {"200", "404", "422"} | access,
        ("get", "/v1/invoices/{number}.pdf"): {"200", "404", "422"} | access,
        ("get", "/v1/invoices/{number}.html"): {"200", "404", "422"} | access,
        ("get", "/v1/credit-notes"): {"200", "422"} | access,
        ("get", "/v1/credit-notes/{number}"): {"200", "404", "422"} | access,
        ("get", "/v1/credit-notes/{number}.pdf"): {"200", "404", "422"} | access,
        ("get", "/v1/credit-notes/{number}.html"): {"200", "404", "422"} | access,
        ("get", "/healthz"): {"200"},
        ("get", "/readyz"): {"200", "503"},
        ("get", "/metrics"): {"200"} | access,
        ("post", "/v1/webhook-endpoints"): {"201", "413", "422"} | access,
        ("get", "/v1/webhook-endpoints"): {"200"} | access,
        ("get", "/v1/webhook-endpoints/{endpoint_id}"): {"200", "404", "422"} | access,
        ("patch", "/v1/webhook-endpoints/{endpoint_id}"): {"200", "404", "413", "422"} | access,
        ("delete", "/v1/webhook-endpoints/{endpoint_id}"): {"204", "404", "422"} | access,
        ("post", "/v1/webhook-endpoints/{endpoint_id}/rotate-secret"): {"200", "404", "422"}
        | access,
        ("get", "/v1/webhook-endpoints/{endpoint_id}/deliveries"): {"200", "404", "422"} | access,
        ("post", "/v1/webhook-endpoints/{endpoint_id}/deliveries/{delivery_id}/replay"): {
            "202",
            "404",
            "422",
        }
        | access,
    }
    answers = {(method, path): set(op["responses"]) for method, path, op in operations(document)}
    assert answers == expected
    replayed = {"$ref": "#/components/headers/Idempotent-Replayed"}
    for path in ("/v1/meter-readings", "/v1/meter-readings/nem12", "/v1/free-energy/settlements"):
        ok = document["paths"][path]["post"]["responses"]["200"]
        assert ok["headers"]["Idempotent-Replayed"] == replayed, path
    accepted = document["paths"]["/v1/invoice-runs"]["post"]["responses"]["202"]
    assert accepted["headers"]["Idempotent-Replayed"] == replayed
    assert accepted["headers"]["Location"]["required"] is True


def test_every_route_has_a_model_for_its_answer_and_the_plan_its_document(
    document: dict[str, Any],
) -> None:
    for method, path, operation in operations(document):
        answers = operation["responses"]
        if "204" in answers:  # no content
            assert "content" not in answers["204"], (method, path)
            continue
        ok = next(answers[status] for status in ("200", "201", "202") if status in answers)
        ok = ok["content"]
        if path == "/metrics":
            assert set(ok) == {"text/plain"}
            continue
        if path.endswith(".pdf"):
            assert set(ok) == {"application/pdf"}, path
            continue
        if path.endswith(".html"):
            assert set(ok) == {"text/html"}, path
            continue
        if path.endswith(".csv"):
            assert set(ok) == {"text/csv"}, path
            continue
        if path.startswith(("/v1/invoices/", "/v1/credit-notes/")) and not path.endswith(
            "/deliveries"
        ):
            # Also the document as the household reads it, by Accept.
            assert set(ok) == {"application/json", "application/pdf", "text/html"}, path
        schema = ok["application/json"]["schema"]
        assert schema.get("$ref", "").startswith("#/components/schemas/"), (method, path)
    plan = document["paths"]["/v1/plans/{plan_id}"]["put"]
    assert plan["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/PlanDocument"
    }
    body = plan["requestBody"]["content"]
    assert set(body) == {
        "application/json",
        "application/toml",
        "application/vnd.cdr.energy-plan+json",
    }
    read = document["paths"]["/v1/plans/{plan_id}"]["get"]["responses"]["200"]["content"]
    assert set(read) == {"application/json", "application/vnd.cdr.energy-plan+json"}
    schema = body["application/json"]["schema"]
    assert schema["title"] == "PlanDocument"
    assert schema["additionalProperties"] is False
    assert "id" in schema["properties"]
    assert "id" not in schema["required"]  # the path's


def test_the_answers_built_by_hand_are_their_declared_models(api: Api) -> None:
    """The routes that build their answers themselves answer what their models declare: each
    answer is its model's, read and written back, member for member."""

    def declared(model: type[BaseModel], response: Any) -> None:
        assert response.status_code in {200, 503}, response.text
        body = response.json()
        again = model.model_validate(body).model_dump(
            mode="json", by_alias=True, exclude_unset=True
        )
        assert again == body, model.__name__
        assert list(again) == list(body), model.__name__

    set_up(api, with_data=False)
    declared(IngestCountsOut, post_readings(api, batch("0.412", "0.300")))
    declared(Nem12CountsOut, post_nem12(api, nem12_file("0.250")))
    read = api.auth("read")
    bill = api.client.get(f"/v1/customers/{NMI}/bill?from=2026-07-01&to=2026-07-02", headers=read)
    declared(BillOut, bill)
    assert bill.json()["days"][0]["consumption_kwh"] == "12"
    declared(HealthOut, api.client.get("/healthz"))
    declared(ReadinessOut, api.client.get("/readyz"))


def test_the_committed_document_is_the_served_one(api: Api) -> None:
    """docs/openapi.json is the document exactly; when the API changes, regenerate it."""
    committed = ROOT / openapi.COMMITTED
    served = api.client.get("/openapi.json").json()
    message = f"{openapi.COMMITTED} is not what the API serves; regenerate it: {openapi.REGENERATE}"
    assert committed.read_text(encoding="utf-8") == openapi.render(served), message


def test_the_command_writes_the_document_and_checks_a_written_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "openapi.json"
    assert schema.main(["--write", str(path)]) == 0
    assert path.read_text(encoding="utf-8") == openapi.render(schema.served())
    assert path.read_text(encoding="utf-8").endswith("}\n")
    assert schema.main(["--check", str(path)]) == 0
    path.write_text(path.read_text(encoding="utf-8").replace("freehours", "other"))
    assert schema.main(["--check", str(path)]) == 1
    assert openapi.REGENERATE in capsys.readouterr().err


def problem_types() -> set[str]:
    """Every problem type the code can send: the slug of each ``Problem(status, "slug", ...)``
    written in freehours/, and those of the framework's HTTP errors (``_SLUGS``, ``_OTHER``)."""
    slugs = {slug for slug, _ in [*_SLUGS.values(), _OTHER]}
    for path in (ROOT / "freehours").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "id", getattr(node.func, "attr", None))
            if name != "Problem" or len(node.args) < 2:
                continue
            slug = node.args[1]
            if isinstance(slug, ast.Constant) and isinstance(slug.value, str):
                slugs.add(slug.value)
    return {f"/problems/{slug}" for slug in slugs}


def test_docs_api_md_lists_every_problem_type_and_no_other(document: dict[str, Any]) -> None:
    sent = problem_types()
    assert len(sent) > 20  # the collection found the calls
    page = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"/problems/[a-z0-9-]+", page))
    assert sent - listed == set(), "problem types sent but missing from docs/api.md"
    assert listed - sent == set(), "problem types in docs/api.md that nothing sends"
    described = set(re.findall(r"/problems/[a-z0-9-]+", json.dumps(document)))
    assert described - sent == set(), "problem types in the OpenAPI document that nothing sends"


def test_a_problems_instance_is_a_uri_reference_whatever_the_path(api: Api) -> None:
    """The decoded path is percent-encoded again where it holds what a URI may not (schemathesis
    found a non-ASCII path answered in ``instance`` as it was)."""
    response = api.client.get("/v1/customers/ä%20b%25/bill", headers=api.auth("read"))
    assert response.status_code == 422
    assert response.json()["instance"] == "/v1/customers/%C3%A4%20b%25/bill"
    response = api.client.get("/v1/customers/4102000001/bill?from=x&to=y", headers=api.auth("read"))
    assert response.json()["instance"] == "/v1/customers/4102000001/bill"
