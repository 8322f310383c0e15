"""The demo's webhook receiver: a small real HTTP server on 127.0.0.1 that does what
docs/webhooks.md asks of one. It verifies each request's signature (the standard library only),
acts on each ``webhook-id`` once (a duplicate is answered 200 and counted), and counts the events
by type. To show the retries, it answers 503 to the first attempt of every ``fail_every``-th
event."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from freehours.domain.webhooks import verify

#: The largest body the receiver reads.
MAX_BODY = 1 << 20


class DemoReceiver:
    """Counts of what arrived: ``events`` by type (each webhook-id once), ``duplicates``,
    ``refused`` (a 503 it answered on purpose), ``bad_signatures``."""

    def __init__(self, fail_every: int = 10) -> None:
        self.secret = ""
        self.fail_every = fail_every
        self.events: Counter[str] = Counter()
        self.seen: set[str] = set()
        self.duplicates = 0
        self.refused = 0
        self.bad_signatures = 0
        self.requests = 0
        self._refused_ids: set[str] = set()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/webhooks"

    def __enter__(self) -> DemoReceiver:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def answer(self, headers: dict[str, str], body: bytes) -> int:
        """What the receiver answers a request: 400 unsigned, 503 on purpose, else 200."""
        with self._lock:
            self.requests += 1
            try:
                signed = verify(self.secret, headers, body, now=int(time.time()))
            except (KeyError, ValueError):
                signed = False
            if not signed:
                self.bad_signatures += 1
                return 400
            ident = headers["webhook-id"]
            if ident in self.seen:
                self.duplicates += 1
                return 200
            if (
                self.fail_every
                and ident not in self._refused_ids
                and (len(self.seen) + len(self._refused_ids)) % self.fail_every == 0
            ):
                self._refused_ids.add(ident)
                self.refused += 1
                return 503
            self.seen.add(ident)
            self.events[str(json.loads(body)["type"])] += 1
            return 200

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = min(int(self.headers.get("content-length") or 0), MAX_BODY)
                body = self.rfile.read(length)
                headers = {name.lower(): value for name, value in self.headers.items()}
                status = receiver.answer(headers, body)
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler
