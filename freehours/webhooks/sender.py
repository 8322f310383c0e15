"""Sending one delivery: ``HttpSender``, an HTTP client of the standard library's ``http.client``
with one deadline for the whole attempt (connect, send, answer together), a bounded answer,
and only to an address the destination policy allows (docs/webhooks.md)."""

from __future__ import annotations

import http.client
import io
import ipaddress
import socket
import ssl
import time
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol
from urllib.parse import urlsplit

import structlog

from freehours import defaults
from freehours.domain.webhooks import (
    Destinations,
)

log = structlog.get_logger("freehours.webhooks")


#: Seconds to connect to one of the host's addresses (within the attempt's deadline).
CONNECT_TIMEOUT = 5.0


#: The most of an answer's body read; the rest is never read.
MAX_ANSWER_BYTES = 4096


USER_AGENT = "freehours-webhooks/1"


@dataclass(frozen=True, slots=True)
class Answer:
    """What a receiver answered: its status, its ``Retry-After`` and the start of its body; or
    ``error`` when there was no answer (refused, reset, timed out), ``refused`` when the
    destination policy refused every address of the host (nothing was sent)."""

    status: int | None
    retry_after: str | None = None
    body: bytes = b""
    error: str | None = None
    refused: bool = False


class Sender(Protocol):
    def __call__(self, url: str, body: bytes, headers: dict[str, str]) -> Answer: ...


class DestinationRefused(OSError):
    """Every address the host resolved to is one the destination policy refuses."""


class _Deadline:
    """The moment an attempt must be over by (``time.monotonic``)."""

    def __init__(self, seconds: float) -> None:
        self.at = time.monotonic() + seconds

    def left(self) -> float:
        """Seconds left; ``TimeoutError`` once there are none."""
        left = self.at - time.monotonic()
        if left <= 0:
            raise TimeoutError("the attempt's deadline passed")
        return left


class _BoundedReader(io.RawIOBase):
    """A socket's reads, each given only the attempt's time left: a receiver trickling its
    answer a byte at a time is cut off at the deadline, not at a read timeout per byte."""

    def __init__(self, owner: _BoundedSocket) -> None:
        super().__init__()
        self._owner = owner

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        sock = self._owner.sock
        sock.settimeout(self._owner.deadline.left())
        return sock.recv_into(buffer)

    def close(self) -> None:
        if not self.closed:
            self._owner.file_closed()
        super().close()


class _BoundedSocket:
    """What ``http.client`` uses of a connected socket (``sendall``, ``makefile``, ``close``),
    every send and read bounded by the attempt's time left. As a socket does, it stays open
    while a file made of it (the response's) is, however early the connection closes it."""

    def __init__(self, sock: socket.socket, deadline: _Deadline) -> None:
        self.sock = sock
        self.deadline = deadline
        self._files = 0
        self._closed = False

    def sendall(self, data: bytes) -> None:
        # A timeout bounds the whole of a sendall (not each send) since Python 3.5.
        self.sock.settimeout(self.deadline.left())
        self.sock.sendall(data)

    def makefile(self, mode: str) -> io.BufferedReader:
        self._files += 1
        return io.BufferedReader(_BoundedReader(self))

    def file_closed(self) -> None:
        self._files -= 1
        if self._closed and not self._files:
            self.sock.close()

    def close(self) -> None:
        self._closed = True
        if not self._files:
            self.sock.close()


def connection_to(
    url: str, timeout: float, tls: ssl.SSLContext | None = None
) -> tuple[http.client.HTTPConnection, str]:
    """An unconnected ``http.client`` connection to ``url``'s host and port (https verified by
    ``tls``, by default the system's trusted certificates and the host's name), and the path
    (with its query) to POST to."""
    parts = urlsplit(url)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    host = parts.hostname or ""
    # The port always given: http.client would read an IPv6 address's last group as one.
    if parts.scheme == "https":
        return http.client.HTTPSConnection(
            host, parts.port or 443, timeout=timeout, context=tls
        ), path
    return http.client.HTTPConnection(host, parts.port or 80, timeout=timeout), path


class HttpSender:
    """POSTs a delivery (``http.client``, no redirects followed). The whole attempt (connect,
    TLS handshake, the request sent, the answer's status, headers and first ``max_answer``
    bytes read) ends by ``deadline`` seconds. The host is resolved here and each address checked
    against ``destinations`` before it is connected to, and the socket connected to that checked
    address, so a name that resolves (or is rebound) to a refused address reaches nothing; the
    Host header and TLS (SNI, the certificate's name) keep the URL's name. Name resolution is the
    system resolver's, outside the deadline."""

    def __init__(
        self,
        destinations: Destinations | None = None,
        *,
        deadline: float = defaults.WEBHOOK_DEADLINE.total_seconds(),
        connect_timeout: float = CONNECT_TIMEOUT,
        max_answer: int = MAX_ANSWER_BYTES,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.destinations = destinations or Destinations()
        self.tls = tls
        self.deadline = deadline
        self.connect_timeout = connect_timeout
        self.max_answer = max_answer

    def __call__(self, url: str, body: bytes, headers: dict[str, str]) -> Answer:
        deadline = _Deadline(self.deadline)
        conn: http.client.HTTPConnection | None = None
        try:
            conn, path = connection_to(url, self.connect_timeout, self.tls)
            # http.client connects through this attribute (socket.create_connection); ours
            # resolves, checks and connects within the deadline. TLS then wraps what it returns.
            setattr(conn, "_create_connection", partial(self._connect, deadline=deadline))  # noqa: B010 - no public seam
            conn.connect()
            assert conn.sock is not None
            conn.sock = _BoundedSocket(conn.sock, deadline)
            conn.request(
                "POST",
                path,
                body=body,
                headers={**headers, "content-type": "application/json", "user-agent": USER_AGENT},
            )
            response = conn.getresponse()
            status, retry_after = response.status, response.getheader("retry-after")
            try:
                answer = response.read(self.max_answer)
            except (TimeoutError, OSError, http.client.HTTPException):
                answer = b""  # the status is the answer; its body is only a failure's reason
            return Answer(status, retry_after, answer)
        except TimeoutError:
            return Answer(None, error=f"timed out (the {self.deadline:g} s deadline)")
        except DestinationRefused as exc:
            return Answer(None, error=str(exc), refused=True)
        except Exception as exc:  # noqa: BLE001 - whatever a URL or a receiver does is an answer
            return Answer(None, error=f"{type(exc).__name__}: {exc}"[:500])
        finally:
            if conn is not None:
                conn.close()

    def _connect(
        self,
        address: tuple[str, int],
        timeout: float | None = None,
        source_address: object = None,
        *,
        deadline: _Deadline,
    ) -> socket.socket:
        """A socket connected to the first address of ``address``'s host that the destination
        policy allows and that answers, its timeout the time left."""
        host, port = address
        refusals: list[str] = []
        failure: OSError | None = None
        for family, kind, proto, _, sockaddr in socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM
        ):
            reached = ipaddress.ip_address(str(sockaddr[0]))
            refusal = self.destinations.refusal(reached)
            if refusal is not None:
                log.warning("webhook_destination_refused", host=host, address=str(reached))
                refusals.append(refusal)
                continue
            sock = socket.socket(family, kind, proto)
            try:
                sock.settimeout(min(self.connect_timeout, deadline.left()))
                sock.connect(sockaddr)
                sock.settimeout(deadline.left())
            except OSError as exc:
                sock.close()
                failure = exc
                continue
            return sock
        if failure is not None:
            raise failure
        raise DestinationRefused(f"refused by the destination policy: {host}: {refusals[0]}")
