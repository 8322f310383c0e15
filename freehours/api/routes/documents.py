"""Invoices and credit notes (read key): ``GET /v1/invoices`` and ``GET /v1/credit-notes``, pages
of a series' finalised documents, and each document as JSON, PDF or HTML
(``/v1/invoices/{number}``, ``.pdf``, ``.html``; the plain path also by ``Accept``).

Invoices and adjustment invoices are numbered from the invoice series, credit notes from their
own (``freehours.domain.invoicing.Series``): each collection holds its series' documents, and a
number of the other series is a 404 that says where it is. A document renders from what was
stored when it was finalised (``freehours.invoicing.documents.document_of``), the same whenever it
is asked for; the PDF takes some milliseconds of CPU, so it renders in a worker thread.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime
from functools import lru_cache
from typing import Annotated, Any, Literal
from urllib.parse import urlencode

from fastapi import APIRouter, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import (
    BaseModel,
    Field,
)

from freehours.api.auth import requires
from freehours.api.headers import NOSNIFF, page_headers
from freehours.api.keys import Scope
from freehours.api.models import BetterOfferOut, DecimalText, NemDate, UsageOut
from freehours.api.openapi import problem
from freehours.api.problems import Problem
from freehours.api.routes.bills import BillLineOut
from freehours.api.services import AppServices, Services
from freehours.documents.html import render_html, style_source
from freehours.domain.invoicing import (
    Series,
)
from freehours.domain.reads import (
    NMI_LENGTH,
    NMI_PATTERN,
    check_date,
)
from freehours.domain.time import Region
from freehours.invoicing.documents import document_of
from freehours.observability.logging import bind_fields
from freehours.store.document_json import COLLECTION_PATHS, summary, whole
from freehours.store.invoices import StoredDocument

DocumentTypeName = Literal["invoice", "credit_note", "adjustment_invoice"]


class DocumentLinksOut(BaseModel):
    """Where the document is, as JSON and as the household reads it."""

    document: str
    pdf: str
    html: str


class DocumentSummaryOut(BaseModel):
    """A finalised document, in short. Amounts in AUD; a correction's are differences."""

    number: str
    type: DocumentTypeName
    nmi: str
    period_start: date
    period_end: date
    issue_date: date
    due_date: date | None = Field(description="null when there is nothing to pay")
    subtotal: DecimalText
    gst: DecimalText
    total: DecimalText
    free_kwh: DecimalText
    free_value: DecimalText
    corrects: str | None = Field(description="the number of the invoice this one corrects")
    corrected_by: list[str] = Field(description="the numbers of its corrections, in order")
    links: DocumentLinksOut


class DocumentPageOut(BaseModel):
    """A page of documents, oldest period first, then by NMI, each invoice before its
    corrections."""

    items: list[DocumentSummaryOut]
    next: str | None = Field(description="the next page's path (its cursor); null on the last")


class DocumentDayOut(BaseModel):
    """One local day of a document, and the quota version it billed (null: no quota, billed
    after its data deadline). On a correction, the change in each figure."""

    date: date
    quota_version: int | None
    consumption_kwh: DecimalText
    free_kwh: DecimalText
    export_kwh: DecimalText


class DocumentOut(DocumentSummaryOut):
    """A finalised document, whole: what it charges, line by line and day by day, each day with
    the quota version it billed, and the plan and retailer it was made with."""

    series: Literal["invoice", "credit_note"]
    serial: int = Field(ge=1)
    sequence: int = Field(ge=0, description="0: the period's invoice; 1 on: its corrections")
    run_id: str | None
    finalised_at: datetime
    plan_id: str
    region: Region
    time_zone: str
    reason: str | None = Field(description="why a correction was made")
    consumption_kwh: DecimalText
    over_cap_kwh: DecimalText
    export_kwh: DecimalText
    lines: list[BillLineOut]
    days: list[DocumentDayOut]
    plan: dict[str, Any] = Field(description="the plan as it was when the document was made")
    retailer: dict[str, Any] = Field(description="the retailer's details printed on it")
    better_offer: BetterOfferOut | None = Field(
        description="an invoice's better offer check, as made when it was finalised (null on"
        " a correction)"
    )
    usage: list[UsageOut] | None = Field(
        description="an invoice's usage compared: this period, the previous one and the same"
        " period a year earlier, where there is data (null on a correction)"
    )


router = APIRouter(tags=["invoicing"], dependencies=[requires(Scope.READ)])

PDF = "application/pdf"
HTML = "text/html"

#: The longest page of a collection, and a page's length unless asked.
MAX_LIMIT = 500
DEFAULT_LIMIT = 100

#: A document number: a prefix of the settings' characters (``FREEHOURS_INVOICE_PREFIX``) and
#: digits.
NUMBER_PATTERN = r"^[A-Za-z0-9/_-]+$"
NumberPath = Annotated[
    str, Path(pattern=NUMBER_PATTERN, max_length=64, description="the document's number")
]


@dataclass(frozen=True, slots=True)
class Collection:
    """A series' documents as a collection of the API."""

    series: Series
    path: str
    #: What one of them is called, in an answer's words.
    noun: str
    #: The operation ids' stem.
    name: str
    #: One of them, with its article.
    one: str


INVOICES = Collection(
    Series.INVOICE, COLLECTION_PATHS[Series.INVOICE], "invoice", "invoice", "an invoice"
)
CREDIT_NOTES = Collection(
    Series.CREDIT_NOTE,
    COLLECTION_PATHS[Series.CREDIT_NOTE],
    "credit note",
    "credit_note",
    "a credit note",
)
COLLECTIONS = (INVOICES, CREDIT_NOTES)


def collection_of(series: Series) -> Collection:
    return INVOICES if series is Series.INVOICE else CREDIT_NOTES


# --- cursors ---------------------------------------------------------------------------------


def encode_cursor(document: StoredDocument) -> str:
    """The opaque cursor after ``document``: its (period start, NMI, sequence), base64url."""
    key = [document.period_start.isoformat(), document.nmi, document.sequence]
    return base64.urlsafe_b64encode(json.dumps(key, separators=(",", ":")).encode()).decode()


def decode_cursor(cursor: str) -> tuple[date, str, int]:
    """The key a cursor holds, or a 422 naming ``query.cursor``."""
    key = None
    try:
        start, nmi, sequence = json.loads(base64.urlsafe_b64decode(cursor.encode("ascii")))
        # Within what the columns hold: a key out of range would be the database's error.
        if (
            isinstance(nmi, str)
            and len(nmi) <= NMI_LENGTH
            and type(sequence) is int
            and 0 <= sequence < 2**31
            and isinstance(start, str)
        ):
            # A date out of the calendar's bounds is a ValueError too (RangeError).
            key = check_date(date.fromisoformat(start)), nmi, sequence
    except (ValueError, TypeError, UnicodeError, binascii.Error):
        key = None
    if key is None:
        raise Problem(
            422,
            "validation-error",
            "Request is not valid",
            "query.cursor: not a cursor this API gave",
            errors=[{"field": "query.cursor", "message": "not a cursor this API gave"}],
        )
    return key


# --- the routes ------------------------------------------------------------------------------

NOT_FOUND = problem(
    "No document of this number in this collection: `/problems/document-not-found`; `detail`"
    " says where a number of the other series is."
)


def find(
    services: Services, collection: Collection, number: str
) -> tuple[StoredDocument, list[str]]:
    """The document ``number`` of ``collection`` and the numbers of its corrections, or a 404."""
    bind_fields(document=number)
    with services.store.read() as unit:
        document = unit.invoices.get_document(number)
        corrected_by = [] if document is None else unit.invoices.corrections_of([number])[number]
    if document is None:
        raise Problem(
            404, "document-not-found", "No such document", f"number: no document {number}"
        )
    if document.series is not collection.series:
        elsewhere = collection_of(document.series)
        raise Problem(
            404,
            "document-not-found",
            f"Not {collection.one}",
            f"number: {number} is {elsewhere.one} (its series' number): {elsewhere.path}/{number}",
        )
    return document, corrected_by


def render(document: StoredDocument, media_type: str) -> Response:
    """The document as a household reads it, PDF or HTML (in the caller's thread)."""
    # reportlab is loaded with the first PDF asked for, not with every API process.
    from freehours.documents.pdf import render_pdf  # noqa: PLC0415

    readable = document_of(document)
    filename = f"{document.number.replace('/', '-')}"
    if media_type == PDF:
        return Response(
            render_pdf(readable),
            media_type=PDF,
            headers={"Content-Disposition": f'inline; filename="{filename}.pdf"', **NOSNIFF},
        )
    return HTMLResponse(render_html(readable), headers=document_headers())


@lru_cache(maxsize=1)
def document_headers() -> dict[str, str]:
    """A document's HTML loads nothing and runs nothing: its one ``<style>`` (named by its
    hash) applies, its chart is inline SVG; nothing may frame it, no form on it may send."""
    return page_headers(
        f"default-src 'none'; style-src '{style_source()}'; frame-ancestors 'none';"
        " base-uri 'none'; form-action 'none'"
    )


def wanted(request: Request) -> str | None:
    """PDF or HTML when ``Accept`` asks for one before JSON, else None (JSON)."""
    accept = request.headers.get("accept", "")
    for part in accept.split(","):
        media = part.split(";")[0].strip().lower()
        if media in {PDF, HTML}:
            return media
        if media in {"application/json", "application/*", "*/*"}:
            return None
    return None


def _list_route(collection: Collection) -> Callable[..., JSONResponse]:
    def list_documents(
        *,
        services: AppServices,
        nmi: Annotated[
            str | None, Query(pattern=NMI_PATTERN, description="only this NMI's documents")
        ] = None,
        first: Annotated[
            NemDate | None,
            Query(alias="from", description="periods that end on or after this day"),
        ] = None,
        last: Annotated[
            NemDate | None,
            Query(alias="to", description="periods that start on or before this day"),
        ] = None,
        cursor: Annotated[
            str | None,
            Query(max_length=200, description="where the page starts: a previous page's `next`"),
        ] = None,
        limit: Annotated[
            int, Query(ge=1, le=MAX_LIMIT, description="documents in the page")
        ] = DEFAULT_LIMIT,
    ) -> JSONResponse:
        if first is not None and last is not None and first > last:
            raise Problem(422, "validation-error", "Empty period", f"from: {first} is after {last}")
        after = None if cursor is None else decode_cursor(cursor)
        with services.store.read() as unit:
            page = unit.invoices.list_documents(
                nmi=nmi,
                first=first,
                last=last,
                series=collection.series,
                after=after,
                limit=limit,
            )
            corrected = unit.invoices.corrections_of([d.number for d in page])
        following = None
        headers = {}
        if len(page) == limit:
            query = {"nmi": nmi, "from": first, "to": last, "limit": limit}
            query = {name: value for name, value in query.items() if value is not None}
            query["cursor"] = encode_cursor(page[-1])
            following = f"{collection.path}?{urlencode(query)}"
            headers["Link"] = f'<{following}>; rel="next"'
        items = [summary(d, corrected[d.number]) for d in page]
        return JSONResponse({"items": items, "next": following}, headers=headers)

    list_documents.__doc__ = (
        f"The {collection.noun}s whose billing period overlaps ``from`` to ``to`` (either or"
        " both may be left out), oldest period first, then by NMI, each invoice before its"
        " corrections; a page of ``limit``, and ``next`` (also a ``Link: rel=next`` header)"
        " while there may be more."
    )
    return list_documents


def _document_route(collection: Collection, media_type: str | None) -> Callable[..., Any]:
    async def get_document(request: Request, number: NumberPath, services: AppServices) -> Any:
        document, corrected_by = await run_in_threadpool(find, services, collection, number)
        chosen = media_type or wanted(request)
        if chosen is None:
            return JSONResponse(whole(document, corrected_by))
        return await run_in_threadpool(render, document, chosen)

    return get_document


LINK_HEADER = {
    "Link": {
        "description": 'The next page, `<path>; rel="next"`: there while `next` is not null.',
        "schema": {"type": "string"},
    }
}

for _collection in COLLECTIONS:
    # The suffixed paths first: the plain one's number would take ".pdf" too.
    for _suffix, _media in ((".pdf", PDF), (".html", HTML)):
        router.add_api_route(
            f"{_collection.path}/{{number:path}}{_suffix}",
            _document_route(_collection, _media),
            methods=["GET"],
            name=f"get_{_collection.name}_{_suffix[1:]}",
            summary=f"The {_collection.noun} as {_suffix[1:].upper()}",
            description=f"The {_collection.noun} as the household reads it"
            f" ({_media}), rendered from what was stored when it was finalised.",
            response_class=Response,
            responses={
                200: {
                    "description": f"The {_collection.noun}, {_suffix[1:].upper()}.",
                    "content": {_media: {"schema": {"type": "string"}}},
                },
                404: NOT_FOUND,
            },
        )
    router.add_api_route(
        f"{_collection.path}/{{number:path}}",
        _document_route(_collection, None),
        methods=["GET"],
        name=f"get_{_collection.name}",
        summary=_collection.one.capitalize(),
        description=f"The {_collection.noun}, every field: its lines, each day with the quota"
        " version it billed (its traceability to the ledger), its plan and its corrections."
        f" `Accept: {PDF}` or `{HTML}` answers what `.pdf` and `.html` do.",
        response_model=DocumentOut,
        responses={
            200: {
                "description": f"The {_collection.noun}.",
                "content": {
                    PDF: {"schema": {"type": "string"}},
                    HTML: {"schema": {"type": "string"}},
                },
            },
            404: NOT_FOUND,
        },
    )
    router.add_api_route(
        _collection.path,
        _list_route(_collection),
        methods=["GET"],
        name=f"list_{_collection.name}s",
        summary=f"{_collection.noun.capitalize()}s",
        response_model=DocumentPageOut,
        responses={200: {"description": f"A page of {_collection.noun}s.", "headers": LINK_HEADER}},
        openapi_extra={
            "responses": {
                "422": {
                    "description": "So is a period whose from is after its to, or a cursor"
                    " this API did not give."
                }
            }
        },
    )
