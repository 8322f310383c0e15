"""Request bodies the routes read themselves, and their OpenAPI description.

FastAPI reads a declared body before it runs a route's dependencies, so a body would be read
(and parsed) before its key is checked, and read whole before its size is. The routes with a
body read it themselves instead, after the key and bounded while it is read (``bounded_body``),
parse it as FastAPI would (``parse_body``: the same 422), and describe it as FastAPI would have
described it declared (``body_operation``). A body read in a worker thread stops when its
client goes away (``while_connected``); a NEM12 upload is read holding one of the server's
places for uploads (``upload_body``).
"""

import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar, cast

import anyio
from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, TypeAdapter, ValidationError
from starlette.requests import ClientDisconnect

from freehours.api.openapi import INVALID, problem
from freehours.api.problems import Problem, client_gone
from freehours.api.services import Services

_Body = TypeVar("_Body")


def parse_body(model: type[_Body] | TypeAdapter[_Body], raw: bytes) -> _Body:
    """``raw`` as ``model``, or the 422 FastAPI gives for a declared body (fields as
    ``body.NAME``; a missing body as ``body``)."""
    if not raw:
        missing = {"type": "missing", "loc": ("body",), "msg": "Field required", "input": None}
        raise RequestValidationError([missing], body=raw)
    try:
        if isinstance(model, TypeAdapter):
            return model.validate_json(raw)
        return cast(type[BaseModel], model).model_validate_json(raw)  # type: ignore[return-value]
    except ValidationError as exc:
        errors = [{**error, "loc": ("body", *error["loc"])} for error in exc.errors()]
        raise RequestValidationError(errors, body=raw) from exc


async def bounded_body(
    request: Request,
    limit: int,
    *,
    title: str = "File too large",
    detail: str | None = None,
    required: str | None = "body: a NEM12 file is required",
) -> bytes:
    """The request body, refused with 413 as soon as it passes ``limit`` bytes (before a byte
    is read when its Content-Length says so); a 422 when it is empty and ``required`` says why
    it may not be (None: the caller answers an empty body)."""
    too_large = Problem(413, "payload-too-large", title, detail or f"body: over {limit} bytes")
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise too_large
            chunks.append(chunk)
    except ClientDisconnect:
        raise client_gone() from None
    if size == 0 and required:
        raise Problem(422, "validation-error", "Empty body", required)
    return b"".join(chunks)


def body_operation(
    body: type[BaseModel] | TypeAdapter[Any] | dict[str, Any], *, also: tuple[str, ...] = ()
) -> dict[str, Any]:
    """The OpenAPI description (``openapi_extra``) of a route that reads a JSON ``body``
    itself, as FastAPI would have described it declared, its schema (``body``'s, or ``body``
    itself, a JSON schema) written in whole, and its 422 (``parse_body``'s); ``also``: other
    media types the route takes for the same document."""
    if isinstance(body, dict):
        json_schema = body
    elif isinstance(body, type):
        json_schema = body.model_json_schema()
    else:
        json_schema = body.json_schema()
    schema = {"schema": inline_refs(json_schema)}
    return {
        "requestBody": {
            "required": True,
            "content": dict.fromkeys(("application/json", *also), schema),
        },
        "responses": {"422": problem(INVALID)},
    }


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with its ``$defs`` written in where they are referred to: a ``#/$defs/...``
    reference inside an OpenAPI document would be resolved against the document's root."""
    defs = schema.get("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return inline(defs[ref.removeprefix("#/$defs/")])
            return {name: inline(value) for name, value in node.items() if name != "$defs"}
        if isinstance(node, list):
            return [inline(item) for item in node]
        return node

    result: dict[str, Any] = inline(schema)
    return result


_Result = TypeVar("_Result")


async def while_connected(
    request: Request,
    stop: threading.Event,
    call: Callable[..., _Result],
    *args: Any,
) -> _Result:
    """``call(*args)`` in a worker thread, with ``stop`` set as soon as the client goes away
    (looked at every 0.1 s), for ``call`` to end early."""

    async def watch() -> None:
        while not await request.is_disconnected():
            await anyio.sleep(0.1)
        stop.set()

    outcome: list[_Result] = []
    failure: list[Exception] = []
    async with anyio.create_task_group() as group:
        group.start_soon(watch)
        try:
            outcome.append(await anyio.to_thread.run_sync(call, *args))
        except Exception as exc:  # noqa: BLE001 - raised below, outside the group
            # (raised inside, it would come out wrapped in an ExceptionGroup)
            failure.append(exc)
        group.cancel_scope.cancel()
    if failure:
        raise failure[0]
    return outcome[0]


@asynccontextmanager
async def upload_body(request: Request, services: Services) -> AsyncIterator[bytes]:
    """The request's upload (``bounded_body``, at most ``max_upload_bytes``), read and used
    holding one of the server's ``upload_concurrency`` places for NEM12 uploads, given back
    when the block ends; when all are taken, a 503 ``busy`` (retry in 5 s) before any of it
    is read."""
    try:
        services.uploads.acquire_nowait()
    except anyio.WouldBlock:
        raise Problem(
            503,
            "busy",
            "Too many uploads at once",
            f"this server reads {services.settings.upload_concurrency} NEM12 uploads at once;"
            " retry",
            headers={"Retry-After": "5"},
        ) from None
    try:
        yield await bounded_body(request, services.settings.max_upload_bytes)
    finally:
        services.uploads.release()
