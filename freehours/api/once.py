"""A request run at most once per Idempotency-Key (``freehours.api.idempotency`` keeps the keys):
``run_once`` around the route's work, ``renew_leases`` while it runs, ``purge_keys`` after the
retention. A route that runs once reads the header as ``IdempotencyKey`` and adds ``IDEMPOTENT``
to its OpenAPI description: the header, required, and the answers ``run_once`` gives.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Annotated, Any, TypeVar

import structlog
from fastapi import Header, Response
from fastapi.concurrency import run_in_threadpool

from freehours.api import idempotency
from freehours.api.keys import ApiKey
from freehours.api.openapi import header_refs, problem
from freehours.api.problems import Problem
from freehours.api.services import Services
from freehours.errors import InputError
from freehours.store.database import Store, Unit
from freehours.store.idempotency import SavedResponse
from freehours.store.maintenance import Expiry

log = structlog.get_logger("freehours.api")

_Result = TypeVar("_Result")

#: Longest Idempotency-Key.
KEY_MAX_LENGTH = 255

#: The route parameter of the header: optional to FastAPI, so that ``run_once`` answers its
#: absence (400, not FastAPI's 422); described as required by ``IDEMPOTENT``.
IdempotencyKey = Annotated[str | None, Header(include_in_schema=False)]

#: The OpenAPI description of a route run once per Idempotency-Key (its ``openapi_extra``, with
#: ``freehours.api.openapi.merged``): the header and ``run_once``'s answers.
IDEMPOTENT: dict[str, Any] = {
    "parameters": [
        {
            "name": "Idempotency-Key",
            "in": "header",
            "required": True,
            "description": "The client's name for this request, unique to its key (IETF httpapi"
            " idempotency-key draft): the request is run at most once per key. Sent again with"
            " the same payload, the first answer is replayed (`Idempotent-Replayed: true`);"
            " with another payload, 422; while the first still runs, 409 with Retry-After."
            " Kept for FREEHOURS_IDEMPOTENCY_RETENTION_HOURS (docs/security.md).",
            "schema": {"type": "string", "minLength": 1, "maxLength": KEY_MAX_LENGTH},
        }
    ],
    "responses": {
        "200": {"headers": header_refs("Idempotent-Replayed")},
        "400": problem(
            "No Idempotency-Key (`/problems/idempotency-key-missing`), or one over"
            f" {KEY_MAX_LENGTH} characters (`/problems/bad-request`)."
        ),
        "409": problem(
            "A request with this Idempotency-Key is still running:"
            " `/problems/idempotency-key-in-flight`; Retry-After is the seconds left on its"
            " lease.",
            "Retry-After",
        ),
        "422": {
            "description": "The Idempotency-Key was first used for another payload"
            " (`/problems/idempotency-key-reused`), or the input is refused as a whole"
            " (`/problems/invalid-input`; replayed to a retry, with Idempotent-Replayed).",
            "headers": header_refs("Idempotent-Replayed"),
        },
    },
}


def check_idempotency_key(idempotency_key: str | None) -> str:
    """The request's Idempotency-Key, or a 400 when it has none or one over ``KEY_MAX_LENGTH``
    characters."""
    if not idempotency_key:
        raise Problem(400, "idempotency-key-missing", "Idempotency-Key header is required")
    if len(idempotency_key) > KEY_MAX_LENGTH:
        raise Problem(400, "bad-request", f"Idempotency-Key is over {KEY_MAX_LENGTH} characters")
    return idempotency_key


def run_once(
    services: Services,
    key: ApiKey,
    *,
    idempotency_key: str | None,
    route: str,
    payload: bytes,
    work: Callable[[Unit], tuple[int, dict[str, Any], _Result]],
    committed: Callable[[_Result], None],
) -> Response:
    """Run ``work`` at most once per Idempotency-Key; replay its answer to repeats.

    ``work`` returns its status, its JSON answer and a result that ``committed`` is given once
    the work's transaction has committed (never for a replay)."""
    idempotency_key = check_idempotency_key(idempotency_key)
    settings = services.settings
    request_hash = idempotency.fingerprint("POST", route, payload)
    with services.store.write() as unit:
        saved = idempotency.begin(
            unit.idempotency,
            principal=key.id,
            key=idempotency_key,
            request_hash=request_hash,
            now=services.clock.now(),
            in_flight_timeout=timedelta(seconds=settings.idempotency_in_flight_seconds),
        )
    if saved is not None:
        return Response(
            saved.body,
            saved.status_code,
            media_type=saved.media_type,
            headers={"Idempotent-Replayed": "true"},
        )
    try:
        with (
            services.in_flight.hold(key.id, idempotency_key),
            services.store.write() as unit,
        ):
            status, answer_payload, result = work(unit)
            answer = idempotency.json_response(status, answer_payload)
            unit.idempotency.finish(
                principal=key.id,
                key=idempotency_key,
                response=answer,
                now=services.clock.now(),
            )
    except InputError as exc:
        # Bad input is the request's final answer: saved, so a repeat gets the same 422.
        problem = Problem(422, "invalid-input", "The input is not valid", str(exc))
        with services.store.write() as unit:
            unit.idempotency.finish(
                principal=key.id,
                key=idempotency_key,
                response=SavedResponse(
                    422, bytes(problem.response(route).body).decode(), "application/problem+json"
                ),
                now=services.clock.now(),
            )
        raise problem from exc
    except BaseException:
        with services.store.write() as unit:
            unit.idempotency.forget(principal=key.id, key=idempotency_key)
        raise
    committed(result)
    return Response(answer.body, status, media_type=answer.media_type)


async def renew_leases(services: Services) -> None:
    """Every third of the in-flight lease, renew the leases of the Idempotency-Keys whose
    requests this process is running: a key stays held however long its request runs."""
    period = services.settings.idempotency_in_flight_seconds / 3
    while True:
        await asyncio.sleep(period)
        held = services.in_flight.held()
        if not held:
            continue

        def renew(held: list[tuple[str, str]] = held) -> int:
            with services.store.write() as unit:
                return unit.idempotency.renew(held, now=services.clock.now())

        try:
            await run_in_threadpool(renew)
        except Exception as exc:  # noqa: BLE001 - the next period tries again, within the lease
            log.warning("idempotency_lease_renewal_failed", keys=len(held), error=str(exc))


def purge_keys(hours: float) -> Expiry:
    """Idempotency-Keys first seen over ``hours`` ago, for the API's retention to delete: a
    repeat within them is replayed, one after them runs afresh."""

    def purge(store: Store, older_than: datetime) -> int:
        with store.write() as unit:
            purged = unit.idempotency.purge(older_than=older_than)
        log.info("idempotency_keys_purged", count=purged)
        return purged

    return Expiry("idempotency_keys", timedelta(hours=hours), purge)
