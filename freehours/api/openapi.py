"""The OpenAPI document (``/openapi.json``; committed as ``docs/openapi.json``): FastAPI's own,
completed from what the routes declare, so that nothing is written twice.

FastAPI describes the parameters, bodies and models, and, from each route's ``requires``
(``freehours.api.auth``), its security requirement: the ``bearer`` scheme and the scope. This
module adds what those declarations imply and FastAPI does not know (``complete``):

- on every operation with an access check, the scope in its description, and the answers of
  the check: 401, 403, 429 and 503 (the key is looked up in the database), as problem details;
  a route open on loopback also allows no key (``{}`` among its security requirements);
- every 422 as problem details (``Problem``), where FastAPI names its own ``HTTPValidationError``,
  which the API never sends (``freehours.api.problems.validation_handler``);
- the ``Problem`` schema and the response headers the answers refer to.

A route declares the rest of its answers with ``responses=`` (``problem`` describes one), and the
mechanisms it uses describe their own: ``freehours.api.bodies.body_operation`` (a body read by
hand), ``freehours.api.once.IDEMPOTENT`` (an Idempotency-Key). The document is the same for
every deployment: no setting changes it.

``python -m freehours.api.schema --write docs/openapi.json`` writes the document;
``--check docs/openapi.json`` fails when the file differs from it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute, iter_route_contexts
from starlette.routing import BaseRoute

from freehours.api.auth import Requires
from freehours.api.keys import Scope
from freehours.api.problems import PROBLEM_JSON, PROBLEM_SCHEMA

#: Where the committed document is, and the command that writes it.
COMMITTED = "docs/openapi.json"
REGENERATE = f"make openapi (python -m freehours.api.schema --write {COMMITTED})"

PROBLEM_REF = "#/components/schemas/Problem"

#: The response headers answers refer to (``components.headers``).
HEADERS: dict[str, dict[str, Any]] = {
    "Retry-After": {
        "description": "Seconds to wait before trying again (at least 1).",
        "required": True,
        "schema": {"type": "integer", "minimum": 1},
    },
    "Idempotent-Replayed": {
        "description": "`true`: this is the first answer to the same request, replayed (the"
        " same Idempotency-Key and payload, or a quota settled before); nothing was done again.",
        "schema": {"type": "string", "enum": ["true"]},
    },
    "WWW-Authenticate": {
        "description": "The scheme to authenticate with: `Bearer`.",
        "required": True,
        "schema": {"type": "string", "enum": ["Bearer"]},
    },
}


def header_refs(*names: str) -> dict[str, dict[str, str]]:
    """``headers`` of a response: each of ``names``, by reference to ``HEADERS``."""
    for name in names:
        if name not in HEADERS:
            raise KeyError(f"no response header {name!r} in HEADERS")
    return {name: {"$ref": f"#/components/headers/{name}"} for name in names}


def problem(description: str, *headers: str) -> dict[str, Any]:
    """A response of problem details: for a route's ``responses={status: problem(...)}``."""
    response: dict[str, Any] = {
        "description": description,
        "content": {PROBLEM_JSON: {"schema": {"$ref": PROBLEM_REF}}},
    }
    if headers:
        response["headers"] = header_refs(*headers)
    return response


#: A body bounded while it is read (``freehours.api.bodies.bounded_body``).
TOO_LARGE = problem(
    "The body is over the route's limit (docs/security.md), refused as soon as it is:"
    " `/problems/payload-too-large`."
)

#: What every 422 of a parameter or a body FastAPI checked says.
INVALID = (
    "A parameter or the body is not what the route takes, or a value is outside the ranges of"
    " meter data: `/problems/validation-error`, naming every field that is wrong in `errors`."
)

#: The answers of an access check (``freehours.api.auth.authorize``).
ACCESS: dict[str, dict[str, Any]] = {
    "401": problem(
        "No key, an Authorization that is not `Bearer KEY`, or an unknown or revoked key:"
        " `/problems/unauthorized`.",
        "WWW-Authenticate",
    ),
    "403": problem("The key lacks the scope the route needs: `/problems/forbidden`."),
    "429": problem(
        "Over a rate limit (docs/security.md): the key's, the NMI's (settlements), or this"
        " address's for unknown keys: `/problems/rate-limited`.",
        "Retry-After",
    ),
    "503": problem(
        "The database is unavailable (refused, timed out, no free connection):"
        " `/problems/database-unavailable`.",
        "Retry-After",
    ),
}


def link(
    operation_id: str,
    description: str,
    *,
    parameters: dict[str, str] | None = None,
    body: dict[str, str] | None = None,
) -> dict[str, Any]:
    """An OpenAPI link from an answer to the operation ``operation_id`` (a route function's
    name): its ``parameters`` and the members of its ``body`` as runtime expressions
    (``$response.body#/nmi``)."""
    definition: dict[str, Any] = {"operationId": operation_id, "description": description}
    if parameters:
        definition["parameters"] = parameters
    if body:
        definition["requestBody"] = body
    return definition


def merged(*parts: dict[str, Any]) -> dict[str, Any]:
    """OpenAPI fragments (``openapi_extra``) as one: objects merged member by member, lists
    joined, descriptions joined as sentences; any other value must agree."""
    result: dict[str, Any] = {}
    for part in parts:
        for name, value in part.items():
            if name not in result:
                result[name] = value
            elif isinstance(value, dict) and isinstance(result[name], dict):
                result[name] = merged(result[name], value)
            elif isinstance(value, list) and isinstance(result[name], list):
                result[name] = [*result[name], *value]
            elif name == "description":
                result[name] = f"{result[name]} {value}"
            elif result[name] != value:
                raise ValueError(f"{name}: {result[name]!r} and {value!r} disagree")
    return result


def install(app: FastAPI) -> None:
    """Make ``app.openapi()`` (and so ``/openapi.json``) FastAPI's document, completed."""
    generate: Callable[[], dict[str, Any]] = app.openapi
    completed: list[dict[str, Any]] = []

    def openapi() -> dict[str, Any]:
        document = generate()  # FastAPI's, kept until the routes change
        if not completed or completed[0] is not document:
            complete(document, app.routes)
            completed[:] = [document]
        return document

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented way


def complete(document: dict[str, Any], routes: Sequence[BaseRoute]) -> None:
    """Add to FastAPI's ``document`` of ``routes`` what their declarations imply."""
    for route in iter_route_contexts(routes):
        # A route as its router includes it: its dependencies with the router's.
        if not isinstance(route.original_route, APIRoute) or not route.include_in_schema:
            continue
        access = access_of(route.dependant)
        for method in sorted(route.methods or ()):
            operation = document["paths"][route.path_format][method.lower()]
            if access is not None:
                _describe_access(operation, access)
            _problem_422(operation)
    components = document.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    schemas["Problem"] = PROBLEM_SCHEMA
    components["headers"] = HEADERS
    for name in ("HTTPValidationError", "ValidationError"):
        if f'"#/components/schemas/{name}"' not in json.dumps(document["paths"]):
            schemas.pop(name, None)


def access_of(dependant: Dependant) -> Requires | None:
    """The access check among ``dependant``'s dependencies (at any depth), if it has one."""
    for dependency in dependant.dependencies:
        if isinstance(dependency.call, Requires):
            return dependency.call
        found = access_of(dependency)
        if found is not None:
            return found
    return None


def access_text(access: Requires) -> str:
    """The operation's access, in words."""
    key = (
        "a key with the `admin` scope"
        if access.scope is Scope.ADMIN
        else f"a key with the `{access.scope}` scope (or `admin`, which implies every scope)"
    )
    if access.open_on_loopback:
        return f"Access: open from a loopback address; from any other, {key}."
    return f"Access: {key}."


def _describe_access(operation: dict[str, Any], access: Requires) -> None:
    description = operation.get("description", "").rstrip()
    operation["description"] = f"{description}\n\n{access_text(access)}".lstrip()
    if access.open_on_loopback:
        operation.setdefault("security", []).append({})
    responses = operation.setdefault("responses", {})
    for status, response in ACCESS.items():
        responses.setdefault(status, response)


def _problem_422(operation: dict[str, Any]) -> None:
    """FastAPI's 422 (``HTTPValidationError``, as JSON) as the problem details the API sends."""
    response = operation.get("responses", {}).get("422")
    if response is None:
        return
    content = response.setdefault("content", {})
    schema = content.get("application/json", {}).get("schema", {})
    if schema.get("$ref") == "#/components/schemas/HTTPValidationError":
        # FastAPI checks the route's parameters: its 422 says so, whatever the route adds.
        del content["application/json"]
        content[PROBLEM_JSON] = {"schema": {"$ref": PROBLEM_REF}}
        description = response.get("description", "")
        if description == "Validation Error":
            response["description"] = INVALID
        elif INVALID not in description:
            response["description"] = f"{INVALID} {description}"


def render(document: dict[str, Any]) -> str:
    """The document as it is committed: indented, keys sorted, a newline at the end."""
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
