"""The API's documentation pages, served from the API itself.

FastAPI's ``/docs`` and ``/redoc`` load their scripts from a CDN (and ReDoc its fonts from
Google): a third party's script running on the API's own origin, and pages that fail where
the API has no way out. Here both load their assets from ``/docs/static``, shipped by the
``fastapi-offline`` package, and say so in a Content-Security-Policy that lets a browser run
nothing from anywhere else.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.resources import files

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

STATIC = "/docs/static"

#: Scripts, styles, images and requests from this origin only; the pages' one inline script
#: (which starts the viewer) is why inline is allowed.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; worker-src 'self' blob:; connect-src 'self'; frame-ancestors 'none'"
)


def mount_docs(app: FastAPI, title: str) -> None:
    """``/docs`` (Swagger UI) and ``/redoc`` (ReDoc) over ``app.openapi_url``, with their
    assets at ``/docs/static``. ``app`` must be made with ``docs_url=None, redoc_url=None``."""
    openapi_url = app.openapi_url or "/openapi.json"
    assets = files("fastapi_offline") / "static"
    app.mount(STATIC, StaticFiles(directory=str(assets)), name="docs-static")
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
        html = HTMLResponse(page.body, headers={"Content-Security-Policy": CONTENT_SECURITY_POLICY})
        app.add_api_route(path, _serve(html), include_in_schema=False)


def _serve(page: HTMLResponse) -> Callable[[], HTMLResponse]:
    def serve() -> HTMLResponse:
        return page

    return serve
