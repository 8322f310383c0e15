"""The audit log: ``GET /v1/audit`` (read), every operator action and sign-in, newest first.

What is recorded, and when, is ``freehours.operations.actions``'; the console shows the same
entries.
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse
from pydantic import (
    BaseModel,
    Field,
)

from freehours.api.auth import requires
from freehours.api.keys import Scope
from freehours.api.services import AppServices


class AuditEntryOut(BaseModel):
    """One operator action or sign-in: who, when, what, and the state before and after."""

    id: int
    at: datetime
    key_id: str = Field(description="the key the operator signed in or called with")
    key_name: str
    action: str = Field(
        description="job.retry, job.cancel, quota.reopen, key.revoke, session.sign_in,"
        " session.sign_out"
    )
    target: str = Field(description="what it acted on: job:ID, quota:NMI:DATE, key:ID")
    outcome: str = Field(description="done, or conflict: the state had changed, nothing done")
    reason: str | None = Field(description="the operator's reason, or why it was not done")
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    trace_id: str | None = Field(description="the trace of the request that did it")


class AuditPageOut(BaseModel):
    """A page of the audit log, newest first."""

    items: list[AuditEntryOut]
    next: str | None = Field(description="the next page's path; null on the last")


router = APIRouter(tags=["operations"], dependencies=[requires(Scope.READ)])

ROUTE = "/v1/audit"
MAX_LIMIT = 200
LARGEST_ID = 2**63 - 1  # a row id is a 64-bit integer on both databases


@router.get(
    ROUTE,
    response_model=AuditPageOut,
    responses={
        200: {
            "description": "A page of entries, newest first.",
            "headers": {
                "Link": {
                    "description": 'The next page, `<path>; rel="next"`: there while `next`'
                    " is not null.",
                    "schema": {"type": "string"},
                }
            },
        }
    },
)
def list_audit(
    services: AppServices,
    target: Annotated[
        str | None,
        Query(max_length=200, description="only the entries of this target (job:ID, ...)"),
    ] = None,
    before: Annotated[
        int | None,
        Query(ge=1, le=LARGEST_ID, description="entries older than this id: a previous `next`"),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="entries in the page")] = 50,
) -> JSONResponse:
    """Operator actions (retry, cancel, reopen, revoke) and console sign-ins, newest first, each
    with who did it, when, and the state before and after; a page of ``limit``, and ``next``
    (also a ``Link: rel=next`` header) while there may be more."""
    with services.store.read() as unit:
        page = unit.audit.page(limit=limit, before_id=before, target=target)
    items = [AuditEntryOut(**asdict(entry)).model_dump(mode="json") for entry in page]
    following = None
    headers = {}
    if len(page) == limit:
        query: dict[str, object] = {"limit": limit, "before": page[-1].id}
        if target is not None:
            query["target"] = target
        following = f"{ROUTE}?{urlencode(query)}"
        headers["Link"] = f'<{following}>; rel="next"'
    return JSONResponse({"items": items, "next": following}, headers=headers)
