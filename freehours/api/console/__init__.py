"""The operations console at ``/console`` (docs/console.md): pages rendered on the server from
the package's templates, its two static files (a style sheet and a small script for live
refresh), sign-in with an API key, and the actions of ``freehours.operations.actions``.

``install(app)`` adds it to the API's application: its routes (left out of the OpenAPI document:
they are pages, not the API), its files, and its answers to errors (a page, not JSON; a browser
that has not signed in is sent to the sign-in page).
"""

from __future__ import annotations

from urllib.parse import quote

from fastapi import APIRouter, FastAPI, Request
from starlette.responses import RedirectResponse, Response
from starlette.staticfiles import StaticFiles

from freehours.api.console import forms, pages
from freehours.api.console.render import as_page
from freehours.api.console.session import PATH, SignInRequired


async def _to_overview() -> Response:
    """``/console`` is the overview, ``/console/``: a relative redirect (every redirect is: a
    ``Location`` built from the request's ``Host`` header would send a browser where that
    header says)."""
    return RedirectResponse(f"{PATH}/", 307)


async def _sign_in_first(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, SignInRequired)
    return RedirectResponse(f"{PATH}/sign-in?next={quote(exc.next_path, safe='/')}", 303)


def install(app: FastAPI) -> None:
    """The console in ``app``: call after the API's own error handlers are added."""
    router = APIRouter(prefix=PATH, include_in_schema=False)
    router.include_router(pages.router)
    router.include_router(forms.router)
    app.include_router(router)
    app.add_api_route(PATH, _to_overview, methods=["GET"], include_in_schema=False)
    app.mount(
        f"{PATH}/static",
        StaticFiles(packages=[("freehours.api.console", "static")]),
        name="console_static",
    )
    for exc_class, handler in list(app.exception_handlers.items()):
        app.add_exception_handler(exc_class, as_page(handler))  # type: ignore[arg-type]
    app.add_exception_handler(SignInRequired, _sign_in_first)
