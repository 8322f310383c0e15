"""How the API is served: uvicorn with the limits a public listener needs, in one process or in
N processes behind one port.

uvicorn closes a connection that stays idle between requests (``timeout_keep_alive``), but not
one that opens and then sends its request line and headers a byte at a time (slowloris): each
such connection holds a socket and a parser for as long as the client likes. ``HeaderTimeout``
gives every request ``header_seconds`` from its connection's opening (or, on a kept-alive
connection, from its first byte) until its headers are complete, then closes the connection.
Bodies are bounded by the routes themselves (their byte limits).

An answer sent before its request's body was read (a 401, a 413 on ``Content-Length``) must
reach a client that is still sending that body. Closing a socket with unread bytes in it sends
a reset, which can destroy the answer before the client reads it; and kept alive, uvicorn would
read and discard the whole body, however large. So, as nginx does, the connection is closed
lingering (``HeaderTimeout``, ``Lingering``): the answer sent, the server half-closes
(``SHUT_WR``: the client reads the answer, then end of file), reads and drops what the client
still sends for at most ``LINGER_SECONDS`` and ``LINGER_BYTES``, then closes.

Proxy headers (``X-Forwarded-For``, ``X-Forwarded-Proto``) are believed only from the addresses
``FREEHOURS_FORWARDED_ALLOW_IPS`` names: by default none, so a client cannot choose the address
its unknown-key attempts are counted against.

``serve`` opens the database, then binds the socket (an address it cannot listen on is one line
naming it) before any application starts, then serves it from this process, or with
``processes`` > 1 from that many API processes, which ``freehours.api.supervisor`` starts on the
one socket, bound once here and shared:

- the database is opened here first, once (a new one migrated, one whose schema is behind
  refused in one line), before any API process opens it, and the socket is bound once, here;
- each process is started afresh (``spawn``) and builds its application from ``ApiProcess``:
  the settings this process read, the same in every one;
- their metrics are merged (prometheus-client's multiprocess mode): ``PROMETHEUS_MULTIPROC_DIR``
  if it is set, else a new, empty directory of their own, removed when they have stopped;
- on SIGTERM or SIGINT each stops accepting, lets its requests finish (at most
  ``SHUTDOWN_GRACE_SECONDS``), stops its job workers, closes its database pool; then serve exits 0;
- one that dies is replaced (``api_process_replaced`` in the log); one that cannot start stops
  them all, and serve exits 1.

An application server of one's own (gunicorn's uvicorn worker, ``uvicorn --workers``) can name
the factory ``freehours.api.server:create_app_from_env`` (the settings from the environment), and
``freehours.api.server:HeaderTimeout`` as its HTTP protocol.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog
import uvicorn
from uvicorn.config import STARTUP_FAILURE
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from freehours.api.supervisor import Supervisor
from freehours.errors import ConfigurationError, FreehoursError
from freehours.observability.exposition import MULTIPROC_DIR
from freehours.settings import Settings, get_settings

if TYPE_CHECKING:
    from fastapi import FastAPI

log = structlog.get_logger("freehours.api")

#: After SIGTERM, how long the requests in flight may take to finish before they are cancelled
#: (then the job workers get FREEHOURS_WORKER_GRACE_SECONDS): within systemd's 90 s to stop.
SHUTDOWN_GRACE_SECONDS = 30


#: How long a connection whose answer went before its request's body lingers, reading and
#: dropping the rest: time for a client to see the answer and stop sending (nginx lingers 5 s
#: between reads and 30 s in all; an API client stops at once).
LINGER_SECONDS = 5.0
#: How much of a body nobody reads a lingering connection drops before it closes: more than a
#: client has in its socket buffers and in flight when the answer reaches it (a few MB on a fast
#: network), far less than an upload, so that an unauthenticated client cannot make the server
#: read its 100 MB.
LINGER_BYTES = 16 * 1024 * 1024


class Lingering:
    """A connection's transport whose ``close`` lingers when its protocol asks
    (``HeaderTimeout.unread_body``): half-closed, the client's bytes dropped, closed at the end
    of file, after ``LINGER_SECONDS`` or past ``LINGER_BYTES``. Everything else is the
    transport's own."""

    def __init__(self, transport: asyncio.Transport, protocol: HeaderTimeout) -> None:
        self._transport = transport
        self._protocol = protocol
        self.lingering = False
        self._dropped = 0
        self._deadline: asyncio.TimerHandle | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)

    def is_closing(self) -> bool:
        return self.lingering or self._transport.is_closing()

    def close(self) -> None:
        if self.lingering:
            return
        transport = self._transport
        if (
            not self._protocol.unread_body()
            or transport.is_closing()
            or not transport.can_write_eof()
        ):
            transport.close()  # nothing unread (or TLS, which cannot half-close): closed now
            return
        self.lingering = True
        self._transport.write_eof()  # once the answer is written: SHUT_WR
        if not self._transport.is_reading():
            self._transport.resume_reading()
        self._deadline = self._protocol.loop.call_later(LINGER_SECONDS, self.end)

    def dropped(self, data: bytes) -> None:
        """Bytes the client sent while the connection lingers."""
        self._dropped += len(data)
        if self._dropped > LINGER_BYTES:
            self.end()

    def end(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        self._transport.close()


class HeaderTimeout(HttpToolsProtocol):
    """uvicorn's HTTP/1.1 protocol (httptools), with a deadline for each request's headers: the
    configuration's ``header_seconds`` (``ServerConfig``), else FREEHOURS_HEADER_SECONDS; and a
    lingering close (``Lingering``) of a connection whose answer went before its request's
    body was read."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._lingering = Lingering(transport, self)
        super().connection_made(self._lingering)  # type: ignore[arg-type]
        seconds = getattr(self.config, "header_seconds", None)
        self._header_seconds: float = (
            seconds if seconds is not None else get_settings().header_seconds
        )
        self._header_timer: asyncio.TimerHandle | None = None
        self._start_header_timer()

    def unread_body(self) -> bool:
        """Whether the request answered last has a body still coming, unread."""
        cycle = self.cycle
        return cycle is not None and cycle.response_complete and cycle.more_body

    def data_received(self, data: bytes) -> None:
        if self._lingering.lingering:
            self._lingering.dropped(data)
            return
        super().data_received(data)

    def eof_received(self) -> None:
        # The client has sent all it will: a lingering connection ends here (and the transport
        # closes itself after this, as for any connection).
        if self._lingering.lingering:
            self._lingering.end()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._start_header_timer()  # the next request on a kept-alive connection

    def on_headers_complete(self) -> None:
        self._stop_header_timer()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        unread = self.unread_body()
        super().on_response_complete()
        if unread and not self.transport.is_closing():
            # Kept alive, uvicorn would read and drop the whole body: linger instead.
            self._unset_keepalive_if_required()
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_header_timer()
        self._lingering.end()
        super().connection_lost(exc)

    def _start_header_timer(self) -> None:
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self._header_seconds, self._headers_too_slow)

    def _stop_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if not self.transport.is_closing():
            self.transport.close()


class ServerConfig(uvicorn.Config):
    """uvicorn's configuration, carrying the header deadline ``HeaderTimeout`` reads. Picklable
    (no class made on the fly), so that the supervisor can send it to each API process."""

    def __init__(self, app: Any, *, header_seconds: float, **options: Any) -> None:
        super().__init__(app, **options)
        self.header_seconds = header_seconds


def server_config(app: Any, settings: Settings, **options: Any) -> ServerConfig:
    """uvicorn's configuration for the API under ``settings``: the header deadline, who may speak
    for the client's address, the shutdown grace; ``options`` for the supervisor's own."""
    trusted = settings.forwarded_allow_ips
    return ServerConfig(
        app,
        header_seconds=settings.header_seconds,
        http=HeaderTimeout,
        timeout_keep_alive=5,
        proxy_headers=trusted is not None,
        forwarded_allow_ips=trusted if trusted is not None else "",
        timeout_graceful_shutdown=SHUTDOWN_GRACE_SECONDS,
        log_level="warning",
        # uvicorn's own lines go through the root logger, rendered as ours are; the access log
        # is replaced by the canonical request line.
        log_config=None,
        access_log=False,
        lifespan="on",
        **options,
    )


def api_application(settings: Settings, workers: int = 0) -> FastAPI:
    """The API as a process serves it: logging and tracing set up as ``settings`` say, the
    services opened (refusing a database whose schema is behind), ``workers`` job worker
    threads run beside the requests; the services closed when the application's lifespan ends.

    Raises ``ConfigurationError`` (and the database's errors) when the services cannot open.
    """
    from freehours.api.app import create_app  # noqa: PLC0415 - the API is imported by who serves it
    from freehours.api.services import Services  # noqa: PLC0415
    from freehours.observability.logging import configure_logging  # noqa: PLC0415
    from freehours.observability.tracing import configure_tracing  # noqa: PLC0415
    from freehours.operations.runtime import freeze_start_up_heap  # noqa: PLC0415

    configure_logging(settings.log_level)
    configure_tracing(settings.traces, service="freehours-api")
    app = create_app(Services.from_settings(settings), workers=workers, owned=True)
    freeze_start_up_heap()
    return app


@dataclass(frozen=True)
class ApiProcess:
    """An application factory (uvicorn calls it in each process it starts): the API under the
    settings the supervisor read, with ``workers`` job threads. A process whose services cannot
    open logs why (``api_process_failed``) and exits with uvicorn's start-up failure status (3,
    gunicorn's boot error too), so that its supervisor stops rather than restarting it."""

    settings: Settings
    workers: int = 0

    def __call__(self) -> FastAPI:
        try:
            return api_application(self.settings, self.workers)
        except FreehoursError as exc:  # the database refused, say: its message says all
            log.error("api_process_failed", error=str(exc))  # noqa: TRY400
        except Exception:
            log.exception("api_process_failed")
        sys.exit(STARTUP_FAILURE)


def create_app_from_env() -> FastAPI:
    """The API under the settings of the environment (``FREEHOURS_*``), for an application
    server of one's own: ``uvicorn --factory freehours.api.server:create_app_from_env``."""
    return ApiProcess(get_settings())()


def run(app: Any, settings: Settings, *, host: str, port: int) -> None:
    """Serve ``app`` on ``host``:``port`` from this process until SIGINT or SIGTERM.

    Raises ``ConfigurationError`` naming the address when it cannot be listened on (in use, not
    this machine's, a privileged port): the socket is bound here, before the application starts,
    so the command says so in one line rather than uvicorn logging it and exiting.
    """
    with listen(host, port) as listener:
        uvicorn.Server(server_config(app, settings)).run(sockets=[listener])


def serve(
    settings: Settings, *, host: str, port: int, processes: int = 1, workers: int = 0
) -> None:
    """Serve the API on ``host``:``port`` from ``processes`` processes, each running ``workers``
    job worker threads, until SIGINT or SIGTERM (as the module says).

    Raises ``ConfigurationError`` for an address it cannot listen on, a database it cannot use
    (before any API process starts), or an API process that could not start.
    """
    if processes == 1:
        app = api_application(settings, workers)
        try:
            listener = listen(host, port)
        except ConfigurationError:
            app.state.services.store.close()
            raise
        with listener:
            uvicorn.Server(server_config(app, settings)).run(sockets=[listener])
        return
    _check_database(settings)
    with listen(host, port) as listener, metrics_directory() as directory:
        config = server_config(ApiProcess(settings, workers), settings, factory=True)
        supervisor = Supervisor(
            config,
            listener,
            processes,
            stop_seconds=SHUTDOWN_GRACE_SECONDS + settings.worker_grace_seconds + 5,
        )
        log.info(
            "api_processes_starting",
            processes=processes,
            address=f"{host}:{port}",
            metrics_directory=str(directory),
        )
        served = supervisor.run()
    if not served:
        raise ConfigurationError(supervisor.failure or "the API processes stopped")


@contextmanager
def metrics_directory() -> Iterator[Path]:
    """The directory the API processes merge their metrics in: ``PROMETHEUS_MULTIPROC_DIR`` as
    it is set (its operator empties it before a start: systemd's RuntimeDirectory does), else a
    new, empty one of their own, set for them and removed afterwards."""
    given = os.environ.get(MULTIPROC_DIR)
    if given:
        directory = Path(given)
        if not directory.is_dir():
            raise ConfigurationError(f"{MULTIPROC_DIR}={given}: no such directory")
        if any(directory.glob("*.db")):
            log.warning(
                "metrics_directory_not_empty",
                metrics_directory=given,
                note="the values of processes that ran before are counted in",
            )
        yield directory
        return
    made = Path(tempfile.mkdtemp(prefix="freehours-metrics-"))
    os.environ[MULTIPROC_DIR] = str(made)  # inherited by every process started
    try:
        yield made
    finally:
        os.environ.pop(MULTIPROC_DIR, None)
        shutil.rmtree(made, ignore_errors=True)


def _check_database(settings: Settings) -> None:
    """Open the database once before any API process does: a new one is migrated here, once,
    and one that cannot be used (unreachable, schema behind) is one line, not N failures."""
    from freehours.store.database import Store  # noqa: PLC0415 - as api_application's
    from freehours.store.timeouts import Timeouts  # noqa: PLC0415

    Store.open(settings.database_url, Timeouts.from_settings(settings)).close()


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
