"""Invoice runs: ``POST /v1/invoice-runs`` (admin; once per Idempotency-Key) starts one,
``GET /v1/invoice-runs/{run_id}`` (read) says how far it is, and
``GET /v1/invoice-runs/{run_id}/journal.csv`` (read) is its documents as accounting journals.

A run is a row and a durable job, made in the request's transaction with its Idempotency-Key
(``freehours.invoicing.service.Invoicing.start_run_in``): the answer is 202, and the workers
(``freehours worker``, ``serve --workers``) do the run, its batches finalising the invoices. A
repeat of the request is answered the same run, never a second one; a second run over the same
periods, at once or later, finds them invoiced and makes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import uuid4

import structlog
from fastapi import APIRouter, Path, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import (
    BaseModel,
    Field,
)

from freehours.api.auth import requires
from freehours.api.bodies import body_operation, bounded_body, parse_body
from freehours.api.headers import NOSNIFF
from freehours.api.keys import ApiKey, Scope
from freehours.api.models import STRICT_BODY, Moment
from freehours.api.once import IDEMPOTENT, IdempotencyKey, run_once
from freehours.api.openapi import TOO_LARGE, link, merged, problem
from freehours.api.problems import Problem
from freehours.api.services import AppServices, Services
from freehours.invoicing.journal import journal_csv
from freehours.invoicing.print_batch import print_batch, render_part
from freehours.observability.logging import bind_fields
from freehours.store.database import Unit
from freehours.store.invoices import InvoiceRun


class InvoiceRunIn(BaseModel):
    """What ``POST /v1/invoice-runs`` may say: the moment the run bills up to (default now)."""

    model_config = STRICT_BODY

    as_of: Moment | None = Field(
        default=None,
        description="RFC 3339 with an offset, from 2000 to 2099 and not in the future: the run"
        " invoices the billing periods that ended before it, on each customer's calendar"
        " (default: now)",
    )


class RunCountsOut(BaseModel):
    """What a run has done so far, added up over its batches done."""

    accounts: int = Field(ge=0, description="accounts looked at")
    invoices: int = Field(ge=0)
    credit_notes: int = Field(ge=0)
    adjustment_invoices: int = Field(ge=0)
    waiting: int = Field(
        ge=0, description="periods not ready (a day still settling): the next run takes them"
    )
    held: int = Field(
        ge=0, description="periods held (an ABORTED quota, a plan that no longer parses)"
    )


class InvoiceRunOut(BaseModel):
    """An invoice run: RUNNING until its last batch is done, then COMPLETED."""

    run_id: str
    state: Literal["RUNNING", "COMPLETED"]
    as_of: datetime
    requested_at: datetime
    finished_at: datetime | None
    batches: int | None = Field(ge=0, description="null until the run is planned")
    batches_done: int = Field(ge=0)
    counts: RunCountsOut
    notes: list[str] = Field(description="why periods wait or are held: the first 100, as examples")
    journal: str = Field(description="the path of the run's accounting journal (CSV)")


log = structlog.get_logger("freehours.api")

router = APIRouter(tags=["invoicing"])

AdminKey = Annotated[ApiKey, requires(Scope.ADMIN)]
RunIdPath = Annotated[
    str,
    Path(pattern=r"^[A-Za-z0-9_-]+$", max_length=64, description="the run's id"),
]

ROUTE = "/v1/invoice-runs"

#: Documents a journal reads at once, each page in a read transaction of its own.
JOURNAL_PAGE = 1000


def run_path(run_id: str) -> str:
    return f"{ROUTE}/{run_id}"


def run_json(run: InvoiceRun) -> dict[str, Any]:
    """The run as ``InvoiceRunOut``."""
    counts = run.counts
    return {
        "run_id": run.run_id,
        "state": run.state,
        "as_of": run.as_of.isoformat(),
        "requested_at": run.requested_at.isoformat(),
        "finished_at": None if run.finished_at is None else run.finished_at.isoformat(),
        "batches": run.batches,
        "batches_done": run.batches_done,
        "counts": {
            "accounts": counts.accounts,
            "invoices": counts.invoices,
            "credit_notes": counts.credit_notes,
            "adjustment_invoices": counts.adjustment_invoices,
            "waiting": counts.waiting,
            "held": counts.held,
        },
        "notes": list(run.notes),
        "journal": f"{run_path(run.run_id)}/journal.csv",
    }


def _accepted(fragment: dict[str, Any]) -> dict[str, Any]:
    """``IDEMPOTENT`` for a route whose answer is 202: its 200's headers on the 202."""
    return {("202" if status == "200" else status): r for status, r in fragment.items()}


_BODY = body_operation(InvoiceRunIn)
_BODY["requestBody"]["required"] = False

LOCATION = {
    "Location": {
        "description": "The run's path: `/v1/invoice-runs/{run_id}`.",
        "required": True,
        "schema": {"type": "string"},
    }
}

RUN_LINKS = {
    "run": link(
        "get_invoice_run",
        "How far the run is.",
        parameters={"path.run_id": "$response.body#/run_id"},
    ),
    "journal": link(
        "get_invoice_run_journal",
        "The run's documents as accounting journals.",
        parameters={"path.run_id": "$response.body#/run_id"},
    ),
}


@router.post(
    ROUTE,
    status_code=202,
    response_model=InvoiceRunOut,
    response_description="The run, started: its jobs are the workers' (a replay: the same run).",
    openapi_extra=merged(
        _BODY,
        {**IDEMPOTENT, "responses": _accepted(IDEMPOTENT["responses"])},
        {
            "responses": {
                "202": {"headers": LOCATION, "links": RUN_LINKS},
                "413": TOO_LARGE,
                "422": {"description": "So is an as_of without an offset or in the future."},
            }
        },
    ),
)
async def post_invoice_run(
    request: Request,
    key: AdminKey,
    services: AppServices,
    idempotency_key: IdempotencyKey = None,
) -> Response:
    """Start an invoice run as of ``as_of`` (default: now): every account's billing periods
    that ended before it, on the customer's own calendar, and every invoiced period whose days
    were revised since. The body may be left out. The run is done by the job workers; ``GET``
    its ``Location`` to see how far it is."""
    raw = await bounded_body(
        request, services.settings.max_json_body_bytes, title="Body too large", required=None
    )
    body = parse_body(InvoiceRunIn, raw) if raw.strip() else InvoiceRunIn()
    return await run_in_threadpool(_start_run, services, body, key, idempotency_key)


def _start_run(
    services: Services, body: InvoiceRunIn, key: ApiKey, idempotency_key: str | None
) -> Response:
    now = services.clock.now()
    if body.as_of is not None and body.as_of > now:
        reason = f"{body.as_of.isoformat()} is in the future"
        raise Problem(
            422,
            "validation-error",
            "Request is not valid",
            f"body.as_of: {reason}",
            errors=[{"field": "body.as_of", "message": reason}],
        )

    def work(unit: Unit) -> tuple[int, dict[str, Any], InvoiceRun]:
        run = services.runtime.invoicing.start_run_in(
            unit, as_of=body.as_of or services.clock.now(), run_id=uuid4().hex
        )
        return 202, run_json(run), run

    def committed(run: InvoiceRun) -> None:
        bind_fields(run_id=run.run_id)
        log.info("invoice_run_started", run_id=run.run_id, as_of=run.as_of.isoformat())

    response = run_once(
        services,
        key,
        idempotency_key=idempotency_key,
        route=ROUTE,
        payload=body.model_dump_json().encode(),
        work=work,
        committed=committed,
    )
    if response.status_code == 202:
        # The first answer or its replay: the same run either way.
        response.headers["Location"] = run_path(json.loads(bytes(response.body))["run_id"])
    return response


RUN_NOT_FOUND = problem("No run of this id: `/problems/invoice-run-not-found`.")


def _run(services: Services, run_id: str) -> InvoiceRun:
    bind_fields(run_id=run_id)
    with services.store.read() as unit:
        run = unit.invoices.get_run(run_id)
    if run is None:
        raise Problem(
            404, "invoice-run-not-found", "No such invoice run", f"run_id: no run {run_id}"
        )
    return run


@router.get(
    f"{ROUTE}/{{run_id}}",
    response_model=InvoiceRunOut,
    dependencies=[requires(Scope.READ)],
    responses={
        200: {"description": "The run, as far as it is.", "links": RUN_LINKS},
        404: RUN_NOT_FOUND,
    },
)
def get_invoice_run(run_id: RunIdPath, services: AppServices) -> JSONResponse:
    """The run: RUNNING until its last batch is done, then COMPLETED; how many batches it has
    (null until it is planned) and has done, what they made (invoices, credit notes,
    adjustment invoices) and left (periods waiting for data, or held), and why."""
    return JSONResponse(run_json(_run(services, run_id)))


@router.get(
    f"{ROUTE}/{{run_id}}/journal.csv",
    response_class=Response,
    dependencies=[requires(Scope.READ)],
    responses={
        200: {
            "description": "The journals, CSV with a header row (freehours/invoicing/journal.py).",
            "content": {"text/csv": {"schema": {"type": "string"}}},
        },
        404: RUN_NOT_FOUND,
    },
)
def get_invoice_run_journal(run_id: RunIdPath, services: AppServices) -> Response:
    """The run's documents as manual journals in the layout Xero imports
    (``*Narration,*Date,Description,*AccountCode,*TaxRate,*Amount,TrackingName1,TrackingOption1``):
    one journal per document, balanced, its narration the document's number and NMI. A run
    still running has the documents finalised so far."""
    _run(services, run_id)

    def rows() -> Iterator[str]:
        yield journal_csv([])
        after = None
        while True:
            with services.store.read() as unit:
                page = unit.invoices.list_documents(run_id=run_id, after=after, limit=JOURNAL_PAGE)
            if not page:
                return
            text = journal_csv(page)
            yield text[text.index("\n") + 1 :]  # without its header
            last = page[-1]
            after = (last.period_start, last.nmi, last.sequence)

    return StreamingResponse(
        rows(),
        media_type="text/csv",
        headers={"Content-Disposition": f'attachment; filename="journal-{run_id}.csv"'},
    )


@router.get(
    f"{ROUTE}/{{run_id}}/print-batch.csv",
    response_class=Response,
    dependencies=[requires(Scope.ADMIN)],
    responses={
        200: {
            "description": "The manifest: a row per document to post, in print order.",
            "content": {"text/csv": {"schema": {"type": "string"}}},
        },
        404: RUN_NOT_FOUND,
    },
)
def get_print_manifest(run_id: RunIdPath, services: AppServices) -> Response:
    """The run's print batch manifest (docs/invoices.md, Post): the documents of its customers
    who chose post, in print order, each with its part, the name and the address lines it is
    posted to. An admin key: it lists names and addresses."""
    _run(services, run_id)
    batch = print_batch(services.store, run_id)
    return StreamingResponse(
        batch.manifest(),
        media_type="text/csv",
        headers={
            "Content-Disposition": f'attachment; filename="print-{run_id}.csv"',
            "Cache-Control": "no-store",
            "X-Print-Parts": str(batch.counts().parts),
        },
    )


@router.get(
    f"{ROUTE}/{{run_id}}/print-batch.pdf",
    response_class=Response,
    dependencies=[requires(Scope.ADMIN)],
    responses={
        200: {
            "description": "One part of the batch: its documents' PDFs, joined, in order.",
            "content": {"application/pdf": {"schema": {"type": "string"}}},
        },
        404: problem(
            "No invoice run of this id (`/problems/invoice-run-not-found`), or no such part"
            " (`/problems/print-part-not-found`)."
        ),
    },
)
def get_print_part(
    run_id: RunIdPath,
    services: AppServices,
    part: Annotated[int, Query(ge=1, le=100_000, description="the part, from 1")] = 1,
) -> Response:
    """Part ``part`` of the run's print batch: at most 500 documents in one PDF, in the
    manifest's order (the run's documents read up to it, a page at a time)."""
    _run(services, run_id)
    batch = print_batch(services.store, run_id)
    documents = batch.part(part)
    if not documents:
        raise Problem(
            404,
            "print-part-not-found",
            "No such part",
            f"part: the run's print batch has {batch.counts().parts} part(s)",
        )
    return Response(
        render_part(services.store, documents),
        media_type="application/pdf",
        headers={
            "Content-Disposition": f'attachment; filename="print-{run_id}-{part}.pdf"',
            "Cache-Control": "no-store",
            **NOSNIFF,
        },
    )
