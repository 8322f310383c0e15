"""``freehours serve`` at its edges, as a real process: a deadline for each request's headers
(slow clients cannot hold connections open), and proxy headers believed only when configured."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest

from tests.servers import FREEHOURS, api_server

pytestmark = pytest.mark.slow

HANG = 10.0  # seconds after which a socket that is still open counts as held open for ever


@pytest.fixture
def server(database: dict[str, str]) -> Iterator[str]:
    with api_server({**database, "FREEHOURS_HEADER_SECONDS": "0.5"}) as url:
        yield url


def connect(url: str) -> socket.socket:
    parts = urlsplit(url)
    sock = socket.create_connection((parts.hostname, parts.port), timeout=HANG)
    sock.settimeout(HANG)
    return sock


def closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closes the connection (rather than answering or holding it)."""
    try:
        return sock.recv(65536) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_a_connection_that_sends_nothing_is_closed(server: str) -> None:
    with connect(server) as sock:
        assert closed_by_server(sock)


def test_headers_sent_too_slowly_are_cut_off(server: str) -> None:
    with connect(server) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: freehours\r\nX-Slow: ")
        assert closed_by_server(sock)
    assert httpx.get(f"{server}/healthz", timeout=HANG).status_code == 200  # others served


def test_the_deadline_applies_to_each_request_of_a_kept_alive_connection(server: str) -> None:
    with connect(server) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: freehours\r\n\r\n")
        first = b""
        while not first.endswith(b'{"status":"ok"}'):
            first += sock.recv(65536)
        assert first.startswith(b"HTTP/1.1 200")
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: freeh")  # the second stalls
        assert closed_by_server(sock)


def unknown_key_answers(url: str, forwarded: list[str], guess: str = "fh_guess") -> list[int]:
    """The answers to a new unknown key from each ``forwarded`` address in turn."""
    path = "/v1/free-energy/settlements/4102000001/2026-07-01"
    with httpx.Client(base_url=url, timeout=HANG) as client:
        return [
            client.get(
                path, headers={"Authorization": f"Bearer {guess}{n}", "X-Forwarded-For": address}
            ).status_code
            for n, address in enumerate(forwarded)
        ]


def test_forwarded_addresses_are_not_believed_by_default(database: dict[str, str]) -> None:
    env = {**database, "FREEHOURS_RATE_LIMIT_UNKNOWN_KEYS": "2/minute"}
    with api_server(env) as url:
        # Each guess claims another address; all count against the real peer's.
        assert unknown_key_answers(url, ["10.0.0.1", "10.0.0.2", "10.0.0.3"]) == [401, 401, 429]


def test_forwarded_addresses_are_believed_from_a_configured_proxy(
    database: dict[str, str],
) -> None:
    env = {
        **database,
        "FREEHOURS_RATE_LIMIT_UNKNOWN_KEYS": "2/minute",
        "FREEHOURS_FORWARDED_ALLOW_IPS": "127.0.0.1",
    }
    with api_server(env) as url:
        assert unknown_key_answers(url, ["10.0.0.1", "10.0.0.2", "10.0.0.3"]) == [401] * 3
        assert unknown_key_answers(url, ["10.0.0.4"] * 3, guess="fh_other") == [401, 401, 429]


@pytest.mark.parametrize("processes", ["1", "2"])
def test_a_port_in_use_is_one_line_naming_the_address(
    database: dict[str, str], processes: str
) -> None:
    # With --processes 2, before any process starts.
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        result = subprocess.run(
            [
                FREEHOURS,
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--processes",
                processes,
            ],
            env={**os.environ, **database},
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    assert result.returncode == 1
    assert (
        result.stderr.strip() == f"error: cannot listen on 127.0.0.1:{port}: Address already in use"
    )


def send_unread_body(url: str, size: int, *, close: bool) -> tuple[bytes, OSError | None]:
    """POST a NEM12 upload of ``size`` bytes with an unknown key from a raw socket that sends its
    whole body, as a simple client does, before it reads: what it then reads up to the end of
    the connection, and the error its sending or reading met (None: none)."""
    connection = "Connection: close\r\n" if close else ""
    with connect(url) as sock:
        sock.sendall(
            b"POST /v1/meter-readings/nem12 HTTP/1.1\r\nHost: freehours\r\n"
            b"Authorization: Bearer fh_guess\r\nContent-Type: text/csv\r\n"
            + f"Content-Length: {size}\r\n{connection}\r\n".encode()
        )
        chunk = b"1" * 65536
        error: OSError | None = None
        try:
            for _ in range(size // len(chunk)):
                sock.sendall(chunk)
        except OSError as exc:
            error = exc
        answer = b""
        try:
            while piece := sock.recv(65536):
                answer += piece
        except OSError as exc:
            error = error or exc
        return answer, error


@pytest.mark.parametrize("close", [True, False], ids=["connection-close", "kept-alive"])
def test_an_early_401_reaches_a_client_still_sending_its_body(server: str, close: bool) -> None:
    # 8 MB: far more than the socket buffers hold, so the 401 is sent while the client is
    # still sending; the server half-closes and drops the rest rather than resetting.
    answer, error = send_unread_body(server, 8 * 1024 * 1024, close=close)
    assert error is None  # every byte sent, the connection ended by an end of file: no reset
    assert answer.startswith(b"HTTP/1.1 401 Unauthorized\r\n")
    assert answer.endswith(b'"unknown or revoked key"}') or b"unknown or revoked key" in answer
    assert httpx.get(f"{server}/healthz", timeout=HANG).status_code == 200


def test_a_served_process_hides_what_start_up_made_from_the_garbage_collector(
    database: dict[str, str],
) -> None:
    """``api_application`` (what each API process serves) freezes its start-up heap: the
    collector no longer walks the modules, the application and the services in every full pass."""
    script = (
        "import gc\n"
        "from freehours.api.server import api_application\n"
        "from freehours.settings import get_settings\n"
        "assert gc.get_freeze_count() == 0\n"
        "app = api_application(get_settings())\n"
        "print(gc.get_freeze_count())\n"
        "app.state.services.store.close()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, **database},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert int(done.stdout.split()[-1]) > 50_000
