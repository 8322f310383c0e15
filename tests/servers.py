"""Real API server processes for end-to-end tests: started, awaited, and stopped; and stub APIs
(stdlib HTTP servers on a thread) for clients tested against scripted answers."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, HTTPServer, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

import httpx

from tests.support import eventually

S = TypeVar("S", bound=HTTPServer)

FREEHOURS = str(Path(sys.executable).with_name("freehours"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def freehours(*args: str, env: dict[str, str]) -> str:
    """Run a freehours command to completion; its stdout, stripped."""
    result = subprocess.run(
        [FREEHOURS, *args], env={**os.environ, **env}, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise AssertionError(f"freehours {' '.join(args)} failed: {result.stderr}")
    return result.stdout.strip()


def wait_until_up(url: str, process: subprocess.Popen[bytes], deadline_s: float = 30.0) -> None:
    """Poll /healthz until it answers; fail if the process exits or the deadline passes."""

    def up() -> bool:
        assert process.poll() is None, f"the API process exited with {process.returncode}"
        try:
            return httpx.get(f"{url}/healthz", timeout=1.0).status_code == 200
        except httpx.TransportError:
            return False

    eventually(up, within=deadline_s, what=f"the API at {url} coming up", every=0.05)


class StubServer(ThreadingHTTPServer):
    """A stub API on 127.0.0.1 (a free port), answering with ``handler``; its handlers share
    ``lock`` for what they record."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class JsonHandler(BaseHTTPRequestHandler):
    """Answers in JSON, and logs nothing (the tests look at what the server recorded)."""

    def answer(self, status: int, body: object, headers: dict[str, str] | None = None) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:
        return None


@contextmanager
def serving(server: S) -> Iterator[S]:
    """A stdlib HTTP server answering on a thread of its own, shut down afterwards."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def api_server(
    env: dict[str, str], port: int | None = None, extra_args: list[str] | None = None
) -> Iterator[str]:
    """A ``freehours serve`` process; yields its base URL and stops it afterwards."""
    with api_process(env, port, extra_args) as (url, _):
        yield url


@contextmanager
def api_process(
    env: dict[str, str],
    port: int | None = None,
    extra_args: list[str] | None = None,
    log: Path | None = None,
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A ``freehours serve`` process, up; yields its base URL and the process, and stops it
    (SIGTERM, then SIGKILL for it and its API processes after 30 s). ``log``: a file for its
    stderr (``ServeLog`` reads it)."""
    port = port or free_port()
    with open(log or os.devnull, "ab") as stderr:
        process = subprocess.Popen(
            [FREEHOURS, "serve", "--host", "127.0.0.1", "--port", str(port), *(extra_args or [])],
            env={**os.environ, **env},
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,  # its own process group: it and its API processes, killable
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(url, process)
        yield url, process
    finally:
        stop(process)


def stop(process: subprocess.Popen[bytes], seconds: float = 30.0) -> int:
    """SIGTERM ``process``; once it has exited (or after ``seconds``, SIGKILL), SIGKILL whatever
    of its process group is left (its API processes). Its exit status."""
    if process.poll() is None:
        process.terminate()
    try:
        process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    return process.returncode


class ServeLog:
    """The JSON lines a ``freehours serve`` wrote to its ``log`` file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def lines(self) -> list[dict[str, Any]]:
        text = self.path.read_text() if self.path.exists() else ""
        found = []
        for line in text.splitlines():
            with contextlib.suppress(ValueError):  # a line being written, or not ours
                found.append(json.loads(line))
        return found

    def events(self, event: str) -> list[dict[str, Any]]:
        return [line for line in self.lines() if line.get("event") == event]

    def pid_of(self, trace_id: str) -> int:
        """The pid of the API process that answered the request of ``trace_id``."""

        def answered() -> int | None:
            for line in self.events("request_finished"):
                if line.get("trace_id") == trace_id:
                    pid: int = line["pid"]
                    return pid
            return None

        return eventually(answered, within=10, what=f"the request line of trace {trace_id}")


def traced() -> tuple[str, dict[str, str]]:
    """A new trace id, and the ``traceparent`` header that puts a request in it."""
    trace_id = secrets.token_hex(16)
    return trace_id, {"traceparent": f"00-{trace_id}-{secrets.token_hex(8)}-01"}
