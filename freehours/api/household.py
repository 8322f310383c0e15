"""Each customer's own page (docs/invoices.md, Each customer's page): ``/my/{token}``, opened by
the signed link in their emails, no key and no sign-in; their documents under it.

Plain server-rendered HTML, no script, phone-first. A link that does not open (tampered with,
expired, revoked, signed under another secret) gets one answer, naming no one. Requests are
limited per client address (``FREEHOURS_RATE_LIMIT_PAGES``) before any work.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from starlette.responses import HTMLResponse, Response

from freehours.api.console.render import ENVIRONMENT
from freehours.api.headers import NOSNIFF, page_headers
from freehours.api.problems import Problem
from freehours.api.routes.documents import HTML, PDF, render
from freehours.api.routes.usage import HouseholdDays, household_days
from freehours.api.services import Services
from freehours.documents import wording
from freehours.documents.model import InvoiceDocument
from freehours.domain.bill import kwh_text
from freehours.domain.invoicing import DocumentType
from freehours.domain.page_links import verify
from freehours.invoicing.documents import document_of
from freehours.observability.logging import bind_fields
from freehours.observability.tracing import hide_path
from freehours.store.invoices import StoredDocument

PATH = "/my"

#: Only this site's style sheet; no script at all; never framed; no address sent on.
HEADERS = {
    **page_headers(
        "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'none';"
        " frame-ancestors 'none'; base-uri 'none'"
    ),
    "Referrer-Policy": "no-referrer",
    "X-Robots-Tag": "noindex",
}

router = APIRouter(prefix=PATH, include_in_schema=False)


@dataclass(frozen=True, slots=True)
class DayRow:
    day: date
    use: str
    free: str
    share: int  # of the cap, percent (0-100)
    unused: str
    saved: str
    missing: bool


def _page(template: str, status: int = 200, **context: Any) -> HTMLResponse:
    html = ENVIRONMENT.get_template(template).render(**context)
    return HTMLResponse(html, status, headers=HEADERS)


def _invalid() -> HTMLResponse:
    return _page("household_invalid.html", 404, busy=False)


async def _opened(request: Request, token: str) -> tuple[Services, str] | HTMLResponse:
    """The customer's NMI the token opens, or the page saying the link does not open."""
    # The token is a credential: the trace has the route's template, never the path asked for.
    route = getattr(request.scope.get("route"), "path", PATH)
    hide_path(str(route))
    services: Services = request.app.state.services
    address = request.client.host if request.client else ""
    try:
        await services.limits.check_page(address)
    except Problem as exc:
        retry = (exc.headers or {}).get("Retry-After", "60")
        busy = _page("household_invalid.html", 429, busy=True)
        busy.headers["Retry-After"] = retry
        return busy
    secret = services.settings.page_secret.get_secret_value().encode()
    page_id = verify(token, secret, services.clock.now().timestamp())
    if page_id is None:
        return _invalid()
    nmi = await run_in_threadpool(_nmi_of, services, page_id)
    if nmi is None:
        return _invalid()
    return services, nmi


def _nmi_of(services: Services, page_id: str) -> str | None:
    with services.store.read() as unit:
        return unit.pages.nmi_of(page_id)


@router.get("/{token}", response_class=HTMLResponse, name="household_page")
async def household_page(request: Request, token: str) -> Response:
    opened = await _opened(request, token)
    if isinstance(opened, Response):
        return opened
    services, nmi = opened
    bind_fields(nmi=nmi)
    context = await run_in_threadpool(_context, services, nmi)
    if context is None:
        return _invalid()
    return _page("household.html", token=token, **context)


@router.get("/{token}/documents/{number}.{kind}", name="household_document")
async def household_document(request: Request, token: str, number: str, kind: str) -> Response:
    opened = await _opened(request, token)
    if isinstance(opened, Response):
        return opened
    services, nmi = opened
    media = {"pdf": PDF, "html": HTML}.get(kind)
    if media is None or len(number) > 64:
        return _invalid()
    stored = await run_in_threadpool(_document_of, services, number)
    if stored is None or stored.nmi != nmi:  # another customer's: as if there were none
        return _invalid()
    answer = await run_in_threadpool(render, stored, media)
    answer.headers.update(
        {**NOSNIFF, "Referrer-Policy": "no-referrer", "Cache-Control": "no-store"}
    )
    return answer


def _document_of(services: Services, number: str) -> StoredDocument | None:
    with services.store.read() as unit:
        return unit.invoices.get_document(number)


def _context(services: Services, nmi: str) -> dict[str, Any] | None:
    today = services.clock.now().date()
    with services.store.read() as unit:
        stored = unit.invoices.list_documents(nmi=nmi, first=today - timedelta(days=400), limit=100)
        invoices = [d for d in stored if d.document_type is DocumentType.INVOICE]
        latest = invoices[-1] if invoices else None
        if latest is not None:
            first, last = latest.period_start, latest.period_end
        else:
            first, last = today - timedelta(days=30), today - timedelta(days=1)
        days = household_days(services, unit, nmi, first, last)
    if days is None:
        return None
    document: InvoiceDocument | None = None if latest is None else document_of(latest)
    return {
        "days": days,
        "rows": _rows(days),
        "totals": days.totals,
        "window": days.plan.free_window,
        "plan_name": days.plan.name,
        "documents": list(reversed(stored)),
        "better_offer": None if document is None else wording.better_offer(document),
        "usage_rows": [] if document is None else wording.usage_rows(document),
        "retailer": None if document is None else document.retailer,
        "long_date": wording.long_date,
        "money": wording.dollars,
        "kwh": wording.kwh,
    }


def _rows(days: HouseholdDays) -> list[DayRow]:
    window = days.plan.free_window
    rows = []
    for day in days.days:
        share = 0
        if window is not None and window.cap_kwh > 0:
            share = min(int(day.free_kwh * 100 / window.cap_kwh), 100)
        rows.append(
            DayRow(
                day.day,
                kwh_text(day.use_kwh),
                kwh_text(day.free_kwh),
                share,
                "" if day.unused_free_kwh is None else kwh_text(day.unused_free_kwh),
                "" if day.could_have_saved is None else wording.dollars(day.could_have_saved),
                day.missing_intervals > 0,
            )
        )
    return rows
