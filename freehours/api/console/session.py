"""Signing in to the console: an API key in, a session cookie out; and the checks every page and
action makes of it.

- The key is typed once into the sign-in form and never kept: the session is a random token of
  its own (the cookie ``freehours_session``), stored only as its SHA-256, with an expiry
  (``FREEHOURS_CONSOLE_SESSION_MINUTES``). A ``read`` key may look; an ``admin`` key may act;
  a key with neither may not sign in.
- The cookie is HttpOnly, SameSite=Strict, limited to ``/console``, and Secure when the console
  is served over TLS (directly, or behind a proxy uvicorn trusts).
- Every form that changes something carries the session's CSRF token, and every POST must come
  from the console's own origin (its ``Origin``, else its ``Referer``): a page elsewhere can
  neither read the token nor send the cookie (SameSite), and is refused if it tries.
- A session ends at its expiry, at sign-out, or when its key is revoked (checked on every
  request: revocation takes effect at once in the console).
- Sign-in attempts with unknown keys count against the address's limit as the API's do.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import parse_qs, urlsplit

from fastapi import Request

from freehours.api.bodies import bounded_body
from freehours.api.keys import ApiKey, Scope, hash_secret
from freehours.api.problems import Problem
from freehours.api.services import Services, services_of
from freehours.operations.actions import Operator

COOKIE = "freehours_session"
PATH = "/console"
#: A form is a few short fields: an action's reason is the longest.
FORM_BYTES = 8 * 1024
FORM_FIELDS = 20


@dataclass(frozen=True, slots=True)
class Session:
    """A signed-in operator."""

    key_id: str
    key_name: str
    scopes: frozenset[str]
    csrf_token: str
    expires_at: datetime
    token_hash: str

    @property
    def may_act(self) -> bool:
        return Scope.ADMIN.value in self.scopes

    @property
    def operator(self) -> Operator:
        return Operator(self.key_id, self.key_name)


class SignInRequired(Exception):
    """No live session: the browser is sent to the sign-in page, and back here after."""

    def __init__(self, next_path: str) -> None:
        super().__init__(next_path)
        self.next_path = next_path


def current(request: Request) -> Session:
    """The request's live session, else ``SignInRequired`` (run in a worker thread: it reads the
    database)."""
    token = request.cookies.get(COOKIE)
    if token and len(token) <= 100:
        services = services_of(request)
        token_hash = hash_secret(token)
        with services.store.read() as unit:
            stored = unit.sessions.live(token_hash, services.clock.now())
        if stored is not None:
            return Session(
                stored.key_id,
                stored.key_name,
                stored.scopes,
                stored.csrf_token,
                stored.expires_at,
                token_hash,
            )
    path = request.url.path
    raise SignInRequired(f"{path}?{request.url.query}" if request.url.query else path)


def start(services: Services, key: ApiKey) -> tuple[str, Session]:
    """A new session for ``key``: its cookie's token (shown to the browser once) and itself."""
    now = services.clock.now()
    token = secrets.token_urlsafe(32)
    csrf = secrets.token_urlsafe(32)
    expires = now + timedelta(minutes=services.settings.console_session_minutes)
    session = Session(
        key.id,
        key.name,
        frozenset(scope.value for scope in key.scopes),
        csrf,
        expires,
        hash_secret(token),
    )
    with services.store.write() as unit:
        unit.sessions.add(
            session.token_hash,
            key_id=key.id,
            csrf_token=csrf,
            created_at=now,
            expires_at=expires,
        )
        services.actions.record(
            unit,
            session.operator,
            "session.sign_in",
            f"key:{key.id}",
            after={"expires_at": expires.isoformat(), "scopes": sorted(session.scopes)},
        )
    return token, session


def end(services: Services, session: Session) -> None:
    with services.store.write() as unit:
        if unit.sessions.end(session.token_hash):
            services.actions.record(
                unit, session.operator, "session.sign_out", f"key:{session.key_id}", after={}
            )


def may_sign_in(key: ApiKey) -> bool:
    return key.allows(Scope.READ)


def cookie_options(request: Request, session: Session, now: datetime) -> dict[str, object]:
    """What ``Response.set_cookie`` is given for ``session``."""
    return {
        "key": COOKIE,
        "max_age": max(0, int((session.expires_at - now).total_seconds())),
        "path": PATH,
        "httponly": True,
        "secure": request.url.scheme == "https",
        "samesite": "strict",
    }


async def read_form(request: Request) -> dict[str, str]:
    """A POST's form, from the console's own origin, bounded: each field's first value. A form
    from elsewhere is a 403; one too large a 413; one not url-encoded a 415."""
    same_origin(request)
    media = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media != "application/x-www-form-urlencoded":
        raise Problem(
            415,
            "unsupported-media-type",
            "Unsupported Media Type",
            "a console form is application/x-www-form-urlencoded",
        )
    raw = await bounded_body(
        request,
        FORM_BYTES,
        title="Form too large",
        detail=f"form: over {FORM_BYTES} bytes",
        required=None,
    )
    try:
        fields = parse_qs(raw.decode(), max_num_fields=FORM_FIELDS, keep_blank_values=True)
    except (UnicodeDecodeError, ValueError) as exc:
        raise Problem(400, "bad-request", "Bad Request", f"form: {exc}") from None
    return {name: values[0] for name, values in fields.items()}


def same_origin(request: Request) -> None:
    """A state-changing request must come from this console's pages."""
    expected = f"{request.url.scheme}://{request.url.netloc}"
    origin = request.headers.get("origin")
    if origin is None:
        referer = request.headers.get("referer")
        if referer:
            parts = urlsplit(referer)
            origin = f"{parts.scheme}://{parts.netloc}"
    if origin != expected:
        raise Problem(
            403, "forbidden", "Forbidden", "a console form must come from the console's own pages"
        )


def check_csrf(session: Session, form: dict[str, str]) -> None:
    """The form carries the session's CSRF token, else a 403."""
    sent = form.get("csrf_token", "")
    if not hmac.compare_digest(sent.encode(), session.csrf_token.encode()):
        raise Problem(
            403,
            "forbidden",
            "Forbidden",
            "the form's CSRF token is missing or not this session's: reload the page",
        )


def require_act(session: Session) -> None:
    """Only an admin key acts."""
    if not session.may_act:
        raise Problem(
            403, "forbidden", "Forbidden", "this key may only look: acting needs an admin key"
        )


def safe_next(path: str | None) -> str:
    """Where to go after signing in: a console path, never another site."""
    if not path or not path.startswith(PATH) or path.startswith("//") or "\\" in path:
        return PATH + "/"
    parts = urlsplit(path)
    if parts.scheme or parts.netloc:
        return PATH + "/"
    return path
