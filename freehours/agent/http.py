"""The agent's one seam to the API: a batch posted, an answer or ``Unreachable`` back.

httpx with explicit connect and read timeouts, and a total deadline per request that httpx alone
does not offer (its timeouts are per phase, so a server that trickles a byte a second would never
trip them): each request runs on an asyncio loop under ``asyncio.timeout``, which cancels it
wherever it is. The loop is private to this object (``asyncio.Runner``) and the surface is
synchronous, because the circuit breaker (pybreaker) guards synchronous calls. Tests pass an
``httpx.MockTransport``.

Each request is a client span, whose context goes with it as a W3C ``traceparent`` header: the
API's server span continues it. Each also says who sent it and how its breaker stands, in a
``Freehours-Agent`` header (``agent_header``; docs/agent.md): the breaker's trial call when
half-open carries it too, since an open breaker sends nothing.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from dataclasses import dataclass

import httpx
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from freehours import __version__
from freehours.agent.batch import Batch, Route, upload_name
from freehours.errors import FreehoursError

tracer = trace.get_tracer("freehours.agent")

#: The header that names the agent and its breaker's state (``agent_header``).
AGENT_HEADER = "Freehours-Agent"
#: The longest agent name sent (the API keeps no more).
AGENT_NAME_LENGTH = 100
BREAKER_STATES = ("closed", "half-open", "open")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def agent_header(name: str, breaker: str, trips: int) -> str:
    """``name=<name>; breaker=<state>; trips=<n>``: the name kept to letters, digits, ``.``,
    ``_`` and ``-`` (others become ``-``) and at most ``AGENT_NAME_LENGTH`` characters
    (``agent`` if nothing is left), a state the breaker does not have sent as ``open``, trips
    at least 0."""
    safe = _UNSAFE.sub("-", name)[:AGENT_NAME_LENGTH] or "agent"
    state = breaker if breaker in BREAKER_STATES else "open"
    return f"name={safe}; breaker={state}; trips={max(0, trips)}"


class Unreachable(FreehoursError):
    """No answer from the API: the connection failed, a timeout or the deadline passed, or the
    exchange broke off."""


class Unsendable(FreehoursError):
    """The batch cannot be made into a valid HTTP request (a header that cannot be encoded):
    the agent's own problem with this batch, not the API failing; resending cannot help."""


@dataclass(frozen=True, slots=True)
class Timeouts:
    """How long one request may take, in seconds."""

    #: A TCP and TLS handshake that takes longer than 5 s is as good as refused.
    connect: float = 5.0
    #: The API may think for a while about a large NEM12 file before its first byte comes back.
    read: float = 60.0
    #: Whatever happens, one request is over within two minutes, and the batch tried again later.
    total: float = 120.0


@dataclass(frozen=True, slots=True)
class Answer:
    """The API's answer: status, headers (names lower-cased) and body."""

    status: int
    headers: dict[str, str]
    body: bytes

    @classmethod
    def of(cls, response: httpx.Response) -> Answer:
        return cls(
            response.status_code,
            {name.lower(): value for name, value in response.headers.items()},
            response.content,
        )


class BlockingClient:
    """An ``httpx.AsyncClient`` called from synchronous code, on an event loop of its own (the
    agent's sender and the simulation's clients are threads, not coroutines)."""

    def __init__(self, client: httpx.AsyncClient, deadline: float | None = None) -> None:
        self._runner = asyncio.Runner()
        self._client = client
        self._deadline = deadline

    def _post(self, route: str, body: bytes | str, headers: dict[str, str]) -> Answer:
        """POST and read the answer; raises ``httpx.TransportError`` when none came, and
        ``TimeoutError`` when none came within the deadline."""
        return self._send(self._client.build_request("POST", route, content=body, headers=headers))

    def _send(self, request: httpx.Request) -> Answer:
        """Send a built request and read the answer (as ``_post``)."""
        return self._runner.run(self._sending(request))

    async def _sending(self, request: httpx.Request) -> Answer:
        async with asyncio.timeout(self._deadline):
            response = await self._client.send(request)
        return Answer.of(response)

    def close(self) -> None:
        """Close the connections and the loop."""
        try:
            self._runner.run(self._client.aclose())
        finally:
            self._runner.close()


class IngestApi(BlockingClient):
    """The API's ingest routes at ``base_url``, called with ``api_key``.

    Not thread-safe: one thread posts (the sender), and it is also the one that closes.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        timeouts: Timeouts,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        identity: Callable[[], str] | None = None,
    ) -> None:
        #: The ``Freehours-Agent`` header's value as each request is made (None: not sent).
        self._identity = identity
        client = httpx.AsyncClient(
            base_url=base_url,
            headers={
                "Authorization": f"Bearer {api_key}",
                "User-Agent": f"freehours-agent/{__version__}",
            },
            timeout=httpx.Timeout(
                connect=timeouts.connect,
                read=timeouts.read,
                write=timeouts.read,
                pool=timeouts.connect,
            ),
            follow_redirects=False,
            transport=transport,
        )
        super().__init__(client, deadline=timeouts.total)

    def check(self, batch: Batch) -> None:
        """Raise ``Unsendable`` when ``batch`` cannot be made into a request (before any attempt,
        so that it is never counted as the API failing)."""
        self._request(batch, {})

    def post(self, batch: Batch) -> Answer:
        """Post ``batch`` in a client span; raises ``Unreachable`` when no answer came within the
        deadline, ``Unsendable`` when the request could not be made."""
        route = batch.route.value
        with tracer.start_as_current_span(
            f"POST {route}",
            kind=SpanKind.CLIENT,
            attributes={"http.request.method": "POST", "url.path": route},
        ) as span:
            trace_headers: dict[str, str] = {}
            TraceContextTextMapPropagator().inject(trace_headers)
            request = self._request(batch, trace_headers)
            try:
                answer = self._send(request)
            except httpx.LocalProtocolError as exc:
                # h11 refused to write the request (a header it will not put on the wire): the
                # request is at fault, not the connection or the API.
                raise Unsendable(f"POST {route}: {exc}") from exc
            except (httpx.TransportError, TimeoutError) as exc:
                what = type(exc).__name__ if isinstance(exc, httpx.TransportError) else "deadline"
                raise Unreachable(f"POST {route}: {what} ({exc})") from exc
            span.set_attribute("http.response.status_code", answer.status)
            if answer.status >= 500:
                span.set_status(Status(StatusCode.ERROR))
            return answer

    def _request(self, batch: Batch, extra: dict[str, str]) -> httpx.Request:
        headers = {"Content-Type": batch.content_type, "Idempotency-Key": batch.idempotency_key}
        if batch.route is Route.NEM12:
            headers["X-Filename"] = upload_name(batch.source)
        if self._identity is not None:
            headers[AGENT_HEADER] = self._identity()
        headers |= extra
        for name, value in headers.items():
            if not value.isascii() or not value.isprintable():
                raise Unsendable(f"header {name} {value!r}: not printable ASCII")
        try:
            return self._client.build_request(
                "POST", batch.route.value, content=batch.body, headers=headers
            )
        except (ValueError, httpx.HTTPError) as exc:  # UnicodeEncodeError is a ValueError
            raise Unsendable(f"POST {batch.route.value}: {exc}") from exc
