"""Access: every route names the scope its key needs, once, and one object checks it.

A route declares its access as a dependency, ``requires(Scope.X)``: in its ``dependencies``
(or its router's) when it does not use the key, as its ``key`` parameter when it does. FastAPI
runs the check before the route; the check is a security scheme to FastAPI (``Requires`` is a
``SecurityBase``), so the OpenAPI document names the scheme (``bearer``: HTTP Bearer) and, on the
operation, the scope it needs, from this one declaration (``freehours.api.openapi`` adds what
the declaration implies: the scope in the description, the 401, 403, 429 and 503 answers). The
settlement route, which reads its request itself for speed, declares its access the same way;
its route class (``freehours.api.settle.ReadsItself``) runs the same check.

The check runs on the event loop: a known key (``KeyCache``) and its rate limit cost no thread
hop. A client address that keeps sending unknown keys is refused (429) before its next unknown
key costs a database lookup; a valid key from that address still works: before it is refused,
a key is checked against the live keys' hashes (``KeyCache.may_be_live``, read at most once a
second whatever the flood), so only the guesses are throttled.
"""

from fastapi import Request, params
from fastapi.openapi.models import HTTPBearer
from fastapi.security.base import SecurityBase

from freehours.api.keys import ApiKey, Scope
from freehours.api.problems import Problem
from freehours.api.services import services_of
from freehours.cache.breaker import start_request
from freehours.observability.logging import bind_fields

#: Client addresses that a route open on loopback lets in without a key.
LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})


#: The security scheme of every key: ``Authorization: Bearer KEY``.
BEARER = HTTPBearer(
    bearerFormat="fh_ and 43 URL-safe base64 characters",
    description="An API key, made with `freehours keys create --scope SCOPE` (scopes ingest,"
    " settle, read, admin; admin implies every other). An operation's security names the scope"
    " it needs.",
)


class Requires(SecurityBase):
    """The access a route needs: a key with ``scope``, within its limit; or, for a route
    ``open_on_loopback``, no key from a loopback address (the key is then None). The key is read
    from the ``Authorization`` header here, not declared as a parameter: the OpenAPI document
    describes it as the security scheme ``BEARER``."""

    model = BEARER
    scheme_name = "bearer"

    def __init__(self, scope: Scope, *, open_on_loopback: bool = False) -> None:
        self.scope = scope
        self.open_on_loopback = open_on_loopback

    async def __call__(self, request: Request) -> ApiKey | None:
        """The request's key, else a 401, 403 or 429 problem."""
        if self.open_on_loopback and request.client and request.client.host in LOOPBACK:
            return None
        return await authorize(request, request.headers.get("authorization"), self.scope)


def requires(scope: Scope, *, open_on_loopback: bool = False) -> params.Depends:
    """``Requires`` as a route dependency: ``dependencies=[requires(Scope.READ)]``, or
    ``key: Annotated[ApiKey, requires(Scope.INGEST)]`` for a route that uses the key. A
    security dependency to FastAPI, its scope the operation's security requirement."""
    return params.Security(Requires(scope, open_on_loopback=open_on_loopback), scopes=[scope.value])


async def authorize(request: Request, authorization: str | None, scope: Scope) -> ApiKey:
    """The key of ``authorization`` (``Bearer KEY``), if it may use ``scope`` and is within its
    limit; else a 401, 403 or 429 problem."""
    start_request()  # the request's Redis budget (freehours.cache.breaker)
    key = await look_up(request, _bearer(authorization))
    if key is None:
        raise Problem(
            401,
            "unauthorized",
            "Unauthorized",
            "unknown or revoked key",
            headers={"WWW-Authenticate": "Bearer"},
        )
    bind_fields(key_id=key.id)
    if not key.allows(scope):
        raise Problem(403, "forbidden", "Forbidden", f"this key lacks the {scope} scope")
    await services_of(request).limits.check_client(key.id)
    return key


async def look_up(request: Request, secret: str) -> ApiKey | None:
    """The live key of ``secret``, or None (counted against the client's address, whose next
    unknown key is refused with a 429 before it costs a database lookup; never a live key)."""
    services = services_of(request)
    key = services.keys.cached(secret)
    address = request.client.host if request.client else ""
    if key is False:
        try:
            await services.limits.check_unknown_keys(address)
        except Problem:
            if not await services.keys.may_be_live(secret):
                raise
        key = await services.keys.load(secret)
    if key is None:
        await services.limits.count_unknown_key(address)
    return key


def _bearer(authorization: str | None) -> str:
    if not authorization:
        raise Problem(
            401,
            "unauthorized",
            "Unauthorized",
            "Authorization: Bearer KEY is required",
            headers={"WWW-Authenticate": "Bearer"},
        )
    scheme, _, secret = authorization.partition(" ")
    if scheme.lower() != "bearer" or not secret.strip():
        raise Problem(
            401,
            "unauthorized",
            "Unauthorized",
            "Authorization must be Bearer KEY",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return secret.strip()
