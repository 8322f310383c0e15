"""Against a tiny real HTTP server that answers 409 and 429 with Retry-After, and 422, on demand:
the agent waits at least as long as it is told, on the real clock, and never resends a 422."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path

import pytest

from freehours.agent.meter_agent import AgentConfig, Ending, MeterAgent, Simulation
from freehours.domain.time import NEM_TIME
from freehours.sim.agent_meters import SimulatedMeters
from tests.servers import JsonHandler, StubServer, serving

START = datetime(2026, 7, 1, 0, 0, tzinfo=NEM_TIME)


class StubApi(StubServer):
    """Answers ``POST /v1/meter-readings`` from a script keyed by the read's suffix: E1 batches
    get 409 (Retry-After 1), then 429 (Retry-After 2), then 200; B1 batches get 422."""

    def __init__(self) -> None:
        super().__init__(_Handler)
        self.arrivals: list[tuple[float, str, str]] = []  # (monotonic, suffix, idempotency key)
        self.e1_script = [(409, "1"), (429, "2")]


class _Handler(JsonHandler):
    server: StubApi

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.server.lock:
            self.server.arrivals.append(
                (time.monotonic(), body["suffix"], self.headers["Idempotency-Key"])
            )
            e1_script = self.server.e1_script if body["suffix"] == "E1" else []
            scripted = e1_script.pop(0) if e1_script else None
        if body["suffix"] == "B1":
            self.answer(422, {"type": "invalid-input", "detail": "reads: refused"})
        elif scripted is not None:
            status, retry_after = scripted
            self.answer(status, {"type": "busy"}, {"Retry-After": retry_after})
        else:
            self.answer(200, {"accepted": 1, "superseded": 0, "unchanged": 0})


@pytest.fixture
def stub() -> Iterator[StubApi]:
    with serving(StubApi()) as server:
        yield server


class NoJitter:
    def uniform(self, a: float, b: float) -> float:
        return a


def test_the_agent_waits_out_retry_after_and_never_resends_a_422(
    stub: StubApi, tmp_path: Path
) -> None:
    config = AgentConfig(
        api_url=stub.url,
        api_key="secret",
        spool_path=tmp_path / "spool.db",
        # One meter, one half-hour: one E1 batch and one B1 batch.
        simulation=Simulation(
            partial(SimulatedMeters, 1, 1), START, timedelta(minutes=30), speed=1e6
        ),
        drain_timeout=30,
    )
    summary = MeterAgent(config, rng=NoJitter()).run()
    assert summary.ending is Ending.FINISHED
    assert (summary.counts.sent, summary.counts.rejected) == (1, 1)

    e1 = [at for at, suffix, _ in stub.arrivals if suffix == "E1"]
    b1 = [key for _, suffix, key in stub.arrivals if suffix == "B1"]
    assert len(e1) == 3
    assert e1[1] - e1[0] >= 1.0  # told 409, Retry-After: 1
    assert e1[2] - e1[1] >= 2.0  # told 429, Retry-After: 2
    assert len({key for _, suffix, key in stub.arrivals if suffix == "E1"}) == 1
    assert len(b1) == 1  # the 422: asked once, set aside
