"""A real HTTP receiver for webhook tests: a ``ThreadingHTTPServer`` on 127.0.0.1 and a free
port, recording every request, answering as scripted (a status, headers, a delay), or down."""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from freehours.domain.webhooks import Destinations

#: The destination policy that lets deliveries reach these receivers (loopback is refused by
#: default, docs/security.md).
LOOPBACK = Destinations.parse("127.0.0.1/32")


@dataclass(frozen=True)
class Received:
    headers: dict[str, str]
    body: bytes

    @property
    def webhook_id(self) -> str:
        return self.headers["webhook-id"]


@dataclass(frozen=True)
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    body: bytes = b"ok"


class Receiver:
    """Answers ``script``'s replies in turn, then ``default``; records what it got."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        self.script: list[Reply] = []
        self.default = Reply()
        self.lock = threading.Lock()
        self.server: ThreadingHTTPServer | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks"

    def ids(self) -> list[str]:
        with self.lock:
            return [item.webhook_id for item in self.received]

    def _next(self) -> Reply:
        with self.lock:
            return self.script.pop(0) if self.script else self.default

    def start(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length)
                reply = receiver._next()
                with receiver.lock:
                    receiver.received.append(
                        Received({k.lower(): v for k, v in self.headers.items()}, body)
                    )
                if reply.delay:
                    time.sleep(reply.delay)
                try:
                    self.send_response(reply.status)
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.send_header("content-length", str(len(reply.body)))
                    self.end_headers()
                    self.wfile.write(reply.body)
                except OSError:
                    pass  # the sender gave up waiting

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        """Down: the port refuses connections until ``start`` again (on the same port)."""
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None


@contextmanager
def receiving() -> Iterator[Receiver]:
    receiver = Receiver()
    receiver.start()
    try:
        yield receiver
    finally:
        receiver.stop()


class Hostile:
    """A receiver that takes a request and then answers a byte every ``trickle`` seconds (a
    status line that never ends), or, with ``trickle`` None, never answers at all; records how
    many requests it has open at once (``most_open``)."""

    def __init__(self, trickle: float | None) -> None:
        self.trickle = trickle
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.stopped = threading.Event()
        self.lock = threading.Lock()
        self.open = 0
        self.most_open = 0
        self.requests = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks"

    def serve(self) -> None:
        self.listener.settimeout(0.05)
        while not self.stopped.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=self._hold, args=(conn,), daemon=True).start()

    def _hold(self, conn: socket.socket) -> None:
        with self.lock:
            self.requests += 1
            self.open += 1
            self.most_open = max(self.most_open, self.open)
        try:
            conn.settimeout(0.05)
            line = b"HTTP/1.1 200 OK\r\n" * 1000
            sent = 0
            while not self.stopped.is_set():
                try:
                    if not conn.recv(65536):
                        break  # the sender gave up and closed
                except TimeoutError:
                    pass
                if self.trickle is not None:
                    conn.sendall(line[sent : sent + 1])
                    sent += 1
                    self.stopped.wait(self.trickle)
        except OSError:
            pass  # the sender closed mid-trickle
        finally:
            conn.close()
            with self.lock:
                self.open -= 1


@contextmanager
def hostile(trickle: float | None) -> Iterator[Hostile]:
    receiver = Hostile(trickle)
    thread = threading.Thread(target=receiver.serve, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.stopped.set()
        thread.join()
        receiver.listener.close()


#: A self-signed certificate for the name ``localhost`` (and no address), and its key: for
#: receivers on TLS, which a sender trusting it verifies by the URL's name.
CERTIFICATE = Path(__file__).with_name("localhost.pem")
KEY = Path(__file__).with_name("localhost.key")


@contextmanager
def receiving_tls() -> Iterator[tuple[Receiver, list[str | None]]]:
    """A ``Receiver`` on TLS with ``CERTIFICATE``, and the server names (SNI) its clients sent."""
    names: list[str | None] = []
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(CERTIFICATE, KEY)
    context.sni_callback = lambda _sock, name, _context: names.append(name)
    receiver = Receiver()
    receiver.start()
    assert receiver.server is not None
    receiver.server.socket = context.wrap_socket(receiver.server.socket, server_side=True)
    try:
        yield receiver, names
    finally:
        receiver.stop()
