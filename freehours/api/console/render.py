"""The console's pages as HTML: the templates shipped in the package, rendered with the headers
every page carries, and the API's problems (a 404, a 422 naming its field, a 503 when the
database does not answer) shown as a page instead of JSON."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import datetime
from decimal import Decimal
from typing import Any

from fastapi import Request
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from starlette.responses import HTMLResponse, Response

from freehours.api.headers import page_headers
from freehours.domain.time import NEM_TIME

#: What a page may load: only its own origin's files; nothing of it may be framed.
SECURITY_HEADERS = page_headers(
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:;"
    " connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)

NAV = (
    ("overview", "Overview", "/console/"),
    ("quotas", "Quotas", "/console/quotas"),
    ("jobs", "Jobs", "/console/jobs"),
    ("ingestion", "Ingestion", "/console/ingestion"),
    ("invoices", "Invoices", "/console/invoices"),
    ("audit", "Audit log", "/console/audit"),
    ("keys", "Keys", "/console/keys"),
    ("settings", "Settings", "/console/settings"),
)


def _when(value: datetime | None) -> str:
    """A time on the NEM clock (AEST, every page's clock), to the second."""
    return "—" if value is None else value.astimezone(NEM_TIME).strftime("%Y-%m-%d %H:%M:%S")


def _kwh(value: Decimal | None) -> str:
    return "—" if value is None else f"{value:,.3f}"


def _money(value: Decimal | None) -> str:
    return "—" if value is None else f"{value:,.2f}"


def _as_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, indent=1, default=str)


ENVIRONMENT = Environment(
    loader=PackageLoader("freehours.api.console", "templates"),
    autoescape=select_autoescape(default=True),
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
ENVIRONMENT.filters.update(when=_when, kwh=_kwh, money=_money, as_json=_as_json)
ENVIRONMENT.globals.update(nav=NAV)


def render(
    request: Request,
    template: str,
    *,
    status: int = 200,
    headers: dict[str, str] | None = None,
    **context: Any,
) -> HTMLResponse:
    """``template`` with ``context``, as a page."""
    context.setdefault("session", None)
    context.setdefault("current", "")
    context.setdefault("refresh", 0)
    html = ENVIRONMENT.get_template(template).render(request=request, **context)
    return HTMLResponse(html, status, headers={**SECURITY_HEADERS, **(headers or {})})


def is_console(request: Request) -> bool:
    path = request.url.path
    return (path == "/console" or path.startswith("/console/")) and not path.startswith(
        "/console/static/"
    )


Handler = Callable[[Request, Exception], Awaitable[Response]]


def as_page(handler: Handler) -> Handler:
    """``handler`` (one of the API's problem handlers), answering a console request with a page
    that says the same: the same status, title, detail and headers (Retry-After, say)."""

    async def answer(request: Request, exc: Exception) -> Response:
        response = await handler(request, exc)
        if not is_console(request) or not isinstance(response.body, bytes):
            return response
        try:
            problem = json.loads(response.body)
        except ValueError:
            return response
        kept = {
            name: value
            for name, value in response.headers.items()
            if name.lower() in ("retry-after", "www-authenticate")
        }
        return render(
            request,
            "problem.html",
            status=response.status_code,
            headers=kept,
            title=problem.get("title", "Error"),
            problem=problem,
        )

    return answer
