"""The API's documentation, served from the API itself: the OpenAPI document and its pages.

FastAPI's ``/docs`` and ``/redoc`` load their scripts from a CDN (and ReDoc its fonts from
Google): a third party's script running on the API's own origin, and pages that fail where
the API has no way out. Here both load their assets from ``/docs/static``, shipped by the
``fastapi-offline`` package, and say so in a Content-Security-Policy that lets a browser run
nothing from anywhere else.

Each is a route of the application, so that its requests are counted under their own route
label (``freehours.api.telemetry``), not as ``unmatched``: the document and the pages are API
routes outside the document, and the assets' mount names itself as their route.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.resources import files

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.routing import Mount
from starlette.types import Receive, Scope, Send

from freehours.api.headers import page_headers

STATIC = "/docs/static"
#: Where the OpenAPI document is served.
OPENAPI_URL = "/openapi.json"

#: Scripts, styles, images and requests from this origin only; the pages' one inline script
#: (which starts the viewer) is why inline is allowed.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; worker-src 'self' blob:; connect-src 'self'; frame-ancestors 'none'"
)


def mount_docs(app: FastAPI, title: str) -> None:
    """``/openapi.json`` (``app.openapi()``), ``/docs`` (Swagger UI) and ``/redoc`` (ReDoc) over
    it, with their assets at ``/docs/static``. ``app`` must be made with ``openapi_url=None,
    docs_url=None, redoc_url=None``."""
    openapi_url = OPENAPI_URL

    def document() -> JSONResponse:
        return JSONResponse(app.openapi())

    app.add_api_route(openapi_url, document, include_in_schema=False)
    static = StaticFiles(directory=str(files("fastapi_offline") / "static"))

    async def asset(scope: Scope, receive: Receive, send: Send) -> None:
        scope["route"] = mount  # as FastAPI's routes do: the request's route label
        await static(scope, receive, send)

    mount = Mount(STATIC, app=asset, name="docs-static")
    app.router.routes.append(mount)
    # Both pages are the same for every request: made once, served with the policy.
    pages = {
        "/docs": get_swagger_ui_html(
            openapi_url=openapi_url,
            title=f"{title} - API",
            swagger_js_url=f"{STATIC}/swagger-ui-bundle.js",
            swagger_css_url=f"{STATIC}/swagger-ui.css",
            swagger_favicon_url=f"{STATIC}/favicon.png",
        ),
        "/redoc": get_redoc_html(
            openapi_url=openapi_url,
            title=f"{title} - API",
            redoc_js_url=f"{STATIC}/redoc.standalone.js",
            redoc_favicon_url=f"{STATIC}/favicon.png",
            with_google_fonts=False,
        ),
    }
    for path, page in pages.items():
        html = HTMLResponse(page.body, headers=page_headers(CONTENT_SECURITY_POLICY))
        app.add_api_route(path, _serve(html), include_in_schema=False)


def _serve(page: HTMLResponse) -> Callable[[], HTMLResponse]:
    def serve() -> HTMLResponse:
        return page

    return serve
