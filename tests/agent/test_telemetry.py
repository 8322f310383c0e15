"""``freehours agent`` as a process, against a stub API in this one: its --metrics-port moves as
its sends do, and the traceparent each request carries is the span the agent exported for it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.metrics import Samples
from tests.servers import FREEHOURS, JsonHandler, StubServer, free_port, serving
from tests.support import eventually

pytestmark = pytest.mark.slow

BREAKER = "agent-telemetry-test"


class StubApi(StubServer):
    """Takes NEM12 files: the first request is told 409 (Retry-After 1), every other one 200.
    Remembers each request's traceparent and Idempotency-Key."""

    def __init__(self) -> None:
        super().__init__(_Handler)
        self.requests: list[tuple[str, str]] = []


class _Handler(JsonHandler):
    server: StubApi

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        with self.server.lock:
            first = not self.server.requests
            self.server.requests.append(
                (self.headers["traceparent"], self.headers["Idempotency-Key"])
            )
        if first:
            self.answer(409, {"status": "LOCKED"}, {"Retry-After": "1"})
        else:
            self.answer(200, {"accepted": 48})


@pytest.fixture
def stub() -> Iterator[StubApi]:
    with serving(StubApi()) as server:
        yield server


def test_the_agents_metrics_move_with_its_sends_and_its_requests_carry_its_spans(
    stub: StubApi, tmp_path: Path
) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    for name in ("a.csv", "b.csv"):
        (inbox / name).write_bytes(f"100,NEM12,{name}".encode())
    port = free_port()
    stderr = tmp_path / "agent.err"
    env = {name: value for name, value in os.environ.items() if not name.startswith("FREEHOURS_")}
    with stderr.open("wb") as err:
        agent = subprocess.Popen(
            [
                *(FREEHOURS, "agent", "--api", stub.url, "--nem12-dir", str(inbox)),
                *("--spool", str(tmp_path / "spool.db"), "--breaker-name", BREAKER),
                *("--metrics-port", str(port), "--json"),
            ],
            env=env | {"FREEHOURS_API_KEY": "k", "FREEHOURS_TRACES": "console"},
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:

        def both_sent() -> Samples | None:
            assert agent.poll() is None, stderr.read_text()
            samples = Samples.scrape(port)
            sent = samples.count("freehours_agent_sent_total")
            spooled = samples.get(("freehours_agent_spooled", frozenset()))
            return samples if (sent, spooled) == (2, 0) else None

        # Sent at once; the spool's gauge follows on the agent's next look (every 0.2 s).
        samples = eventually(both_sent, within=60, what="two files sent", every=0.05)
    finally:
        agent.send_signal(signal.SIGTERM)
        agent.wait(timeout=30)

    assert samples.value("freehours_agent_attempts_total", result="delivered") == 2
    assert samples.value("freehours_agent_attempts_total", result="retry") == 1
    assert samples.value("freehours_agent_retries_total") == 1
    assert samples.value("freehours_agent_retry_budget_exhausted_total") == 0
    assert samples.value("freehours_agent_rejected_total") == 0
    assert samples.value("freehours_circuit_breaker_state", breaker=BREAKER) == 0
    assert samples.value("freehours_agent_spooled") == 0

    lines: list[dict[str, Any]] = [json.loads(line) for line in stderr.read_text().splitlines()]
    spans = [line for line in lines if "context" in line]
    posts = [span for span in spans if span["kind"] == "SpanKind.CLIENT"]
    sends = {
        span["context"]["span_id"]: span for span in spans if span["name"] == "agent.send_batch"
    }
    # Each request's traceparent names the client span the agent recorded for that attempt.
    assert len(stub.requests) == len(posts) == 3
    for (traceparent, _), post in zip(stub.requests, posts, strict=True):
        _, trace_id, parent_id, flags = traceparent.split("-")
        assert (f"0x{trace_id}", f"0x{parent_id}", flags) == (
            post["context"]["trace_id"],
            post["context"]["span_id"],
            "01",
        )
        assert sends[post["parent_id"]]["context"]["trace_id"] == f"0x{trace_id}"
    # The 409 and the resend of the same file are one trace; the other file is another.
    (first_trace, first_key), (again_trace, again_key), (other_trace, other_key) = [
        (traceparent.split("-")[1], key) for traceparent, key in stub.requests
    ]
    assert (first_trace, first_key) == (again_trace, again_key)
    assert (other_trace, other_key) != (first_trace, first_key)
    (failed,) = [line for line in lines if line.get("event") == "attempt_failed"]
    assert (failed["status"], failed["trace_id"]) == (409, first_trace)
