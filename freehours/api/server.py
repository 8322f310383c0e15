"""How the API is served: uvicorn with the limits a public listener needs.

uvicorn closes a connection that stays idle between requests (``timeout_keep_alive``), but not
one that opens and then sends its request line and headers a byte at a time (slowloris): each
such connection holds a socket and a parser for as long as the client likes. ``HeaderTimeout``
gives every request ``seconds`` from its connection's opening (or, on a kept-alive connection,
from its first byte) until its headers are complete, then closes the connection. Bodies are
bounded by the routes themselves (their byte limits).

Proxy headers (``X-Forwarded-For``, ``X-Forwarded-Proto``) are believed only from the addresses
``FREEHOURS_FORWARDED_ALLOW_IPS`` names: by default none, so a client cannot choose the address
its unknown-key attempts are counted against.
"""

from __future__ import annotations

import asyncio
import os
import socket
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from freehours.errors import ConfigurationError
from freehours.settings import Settings


class HeaderTimeout(HttpToolsProtocol):
    """uvicorn's HTTP/1.1 protocol (httptools), with a deadline for each request's headers."""

    header_seconds: float = 10.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._header_timer: asyncio.TimerHandle | None = None
        self._start_header_timer()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._start_header_timer()  # the next request on a kept-alive connection

    def on_headers_complete(self) -> None:
        self._stop_header_timer()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_header_timer()
        super().connection_lost(exc)

    def _start_header_timer(self) -> None:
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self.header_seconds, self._headers_too_slow)

    def _stop_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if not self.transport.is_closing():
            self.transport.close()


def server_options(settings: Settings) -> dict[str, Any]:
    """uvicorn's options for the API under ``settings``: the header deadline and who may speak
    for the client's address."""
    protocol = type("HeaderTimeout", (HeaderTimeout,), {"header_seconds": settings.header_seconds})
    trusted = settings.forwarded_allow_ips
    return {
        "http": protocol,
        "timeout_keep_alive": 5,
        "proxy_headers": trusted is not None,
        "forwarded_allow_ips": trusted if trusted is not None else "",
    }


def run(app: Any, settings: Settings, *, host: str, port: int) -> None:
    """Serve ``app`` on ``host``:``port`` until SIGINT or SIGTERM.

    Raises ``ConfigurationError`` naming the address when it cannot be listened on (in use, not
    this machine's, a privileged port): the socket is bound here, before the application starts,
    so the command says so in one line rather than uvicorn logging it and exiting.
    """
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        # uvicorn's own lines go through the root logger, rendered as ours are; the access log
        # is replaced by the canonical request line.
        log_config=None,
        access_log=False,
        lifespan="on",
        **server_options(settings),
    )
    listener = listen(host, port)
    with listener:
        uvicorn.Server(config).run(sockets=[listener])


def listen(host: str, port: int) -> socket.socket:
    """A socket listening on ``host``:``port`` (IPv4 or IPv6, as ``host`` resolves)."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family = found[0][0]
        return socket.create_server((host, port), family=family, backlog=2048)
    except socket.gaierror as exc:  # a host name that does not resolve: its errno is not errno's
        raise ConfigurationError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        raise ConfigurationError(f"cannot listen on {host}:{port}: {reason}") from None
