"""A whole run of the agent in this process, against scripted answers: spooled through an
outage, sent in order afterwards, refusals set aside, files moved."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
import structlog

from freehours.agent.breaker import BreakerConfig
from freehours.agent.meter_agent import AgentConfig, Ending, MeterAgent, RunSummary, Simulation
from freehours.agent.sender import KeyRefused
from freehours.agent.spool import Spool, SpoolOwned
from freehours.domain.time import NEM_TIME
from freehours.errors import ConfigurationError
from freehours.sim.agent_meters import SimulatedMeters

START = datetime(2026, 7, 1, 0, 0, tzinfo=NEM_TIME)
# A simulation over within milliseconds: 2 meters x 2 channels x 4 half-hours = 16 reads.
SIMULATION = Simulation(
    partial(SimulatedMeters, 2, 1), start=START, duration=timedelta(hours=2), speed=1e6
)


class NoJitter:
    def uniform(self, a: float, b: float) -> float:
        return a


class Recorder:
    """The API: answers with ``answer(request)``, remembers every request."""

    def __init__(self, answer: Callable[[httpx.Request], httpx.Response]) -> None:
        self.answer = answer
        self.requests: list[httpx.Request] = []
        self._lock = threading.Lock()

    def handle(self, request: httpx.Request) -> httpx.Response:
        with self._lock:
            self.requests.append(request)
        return self.answer(request)


def down(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("connection refused", request=request)


def up(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, json={"accepted": 1, "superseded": 0, "unchanged": 0})


def run(config: AgentConfig, api: Recorder) -> RunSummary:
    return MeterAgent(config, rng=NoJitter(), transport=httpx.MockTransport(api.handle)).run()


def config(tmp_path: Path, **changes: Any) -> AgentConfig:
    base = AgentConfig(
        api_url="http://api.test",
        api_key="secret",
        spool_path=tmp_path / "spool.db",
        simulation=SIMULATION,
        breaker=BreakerConfig(fail_max=3, reset_timeout=60.0, name="test"),
        drain_timeout=0.5,
    )
    return replace(base, **changes)


def test_reads_spooled_through_an_outage_are_sent_in_order_by_the_next_run(
    tmp_path: Path,
) -> None:
    outage = Recorder(down)
    first = run(config(tmp_path), outage)
    assert first.ending is Ending.DRAIN_TIMEOUT
    assert first.counts.spooled == first.pending
    assert first.counts.breaker_trips == 1
    assert len(outage.requests) == 3  # then the breaker stayed open

    # The agent starts again over the same hours: the meters' batches are the ones it has.
    recovered = Recorder(up)
    second = run(config(tmp_path), recovered)
    assert second.ending is Ending.FINISHED
    assert second.counts.spooled == 0
    assert second.pending == 0
    assert second.counts.sent == first.pending == 16
    assert second.counts.reads_sent == 16
    # The batch the outage saw first goes out first, under the same key; and every channel's
    # reads go out in time order, each once.
    first_key = outage.requests[0].headers["Idempotency-Key"]
    assert recovered.requests[0].headers["Idempotency-Key"] == first_key
    starts: dict[tuple[str, str], list[str]] = {}
    for request in recovered.requests:
        body = json.loads(request.content)
        channel = starts.setdefault((body["nmi"], body["suffix"]), [])
        channel.extend(read["start"] for read in body["reads"])
    assert len(starts) == 4
    for channel_starts in starts.values():
        assert channel_starts == sorted(set(channel_starts))
        assert len(channel_starts) == 4


def test_a_refused_batch_is_set_aside_and_the_rest_delivered(tmp_path: Path) -> None:
    def refuse_b1(request: httpx.Request) -> httpx.Response:
        if json.loads(request.content)["suffix"] == "B1":
            return httpx.Response(422, json={"type": "invalid-input", "detail": "reads: no"})
        return up(request)

    api = Recorder(refuse_b1)
    summary = run(config(tmp_path), api)
    assert summary.ending is Ending.FINISHED
    assert summary.counts.sent == summary.counts.rejected == summary.counts.spooled // 2
    assert len(api.requests) == summary.counts.spooled  # not one resend
    rejected = Spool.open(tmp_path / "spool.db").rejected()
    assert len(rejected) == summary.counts.rejected
    assert {entry.status_code for entry in rejected} == {422}
    assert json.loads(rejected[0].problem)["detail"] == "reads: no"

    # The next run does not resend them, and says they are there.
    nothing_new = tmp_path / "empty-inbox"
    nothing_new.mkdir()
    with structlog.testing.capture_logs() as logs:
        again = run(config(tmp_path, simulation=None, nem12_dir=nothing_new, once=True), api)
    assert again.counts.attempts == 0
    assert len(api.requests) == summary.counts.spooled
    (warning,) = [line for line in logs if line["event"] == "spool_holds_rejected_batches"]
    assert warning["count"] == summary.counts.rejected


def test_nem12_files_move_to_done_or_rejected(tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "good.csv").write_bytes(b"100,NEM12,good")
    (inbox / "bad.csv").write_bytes(b"100,NEM12,bad")

    def answer(request: httpx.Request) -> httpx.Response:
        if request.headers["X-Filename"] == "bad.csv":
            return httpx.Response(422, json={"detail": "bad.csv:1: no 900 record"})
        return httpx.Response(200, json={"accepted": 1})

    api = Recorder(answer)
    summary = run(config(tmp_path, simulation=None, nem12_dir=inbox, once=True), api)
    assert summary.ending is Ending.FINISHED
    assert (summary.counts.files_done, summary.counts.rejected) == (1, 1)
    assert sorted(p.name for p in inbox.iterdir()) == ["done", "rejected"]
    assert (inbox / "done" / "good.csv").read_bytes() == b"100,NEM12,good"
    assert (inbox / "rejected" / "bad.csv").exists()
    problem = json.loads((inbox / "rejected" / "bad.csv.problem.json").read_text())
    assert problem["detail"] == "bad.csv:1: no 900 record"
    assert Spool.open(tmp_path / "spool.db").pending() == 0


def test_a_refused_key_ends_the_run_and_keeps_every_batch(tmp_path: Path) -> None:
    api = Recorder(lambda request: httpx.Response(401, json={"type": "unauthorized"}))
    agent = MeterAgent(config(tmp_path), rng=NoJitter(), transport=httpx.MockTransport(api.handle))
    with pytest.raises(KeyRefused):
        agent.run()
    assert len(api.requests) == 1
    assert Spool.open(tmp_path / "spool.db").pending() == agent.tally.counts().spooled


def test_an_agent_needs_a_source(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="NEM12 directory or a simulation"):
        MeterAgent(config(tmp_path, simulation=None))


def test_the_spool_may_not_sit_in_the_nem12_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="not in --nem12-dir"):
        MeterAgent(config(tmp_path, simulation=None, nem12_dir=tmp_path))


def test_a_poison_batch_is_set_aside_and_the_batches_behind_it_are_sent(tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    spool_path = tmp_path / "spool.db"
    for number, name in enumerate(["poison.csv", "gone.csv", "good-1.csv", "good-2.csv"]):
        (inbox / name).write_bytes(f"100,NEM12,{name}".encode())
        os.utime(inbox / name, (1e9 + number, 1e9 + number))  # long finished, in this order

    def answer(request: httpx.Request) -> httpx.Response:
        name = request.headers["X-Filename"]
        if name == "gone.csv":
            (inbox / name).unlink()  # a person took it away meanwhile: its batch is kept
        if name in ("poison.csv", "gone.csv"):
            return httpx.Response(413, json={"type": "too-large", "detail": "over the limit"})
        return httpx.Response(200, json={"accepted": 1})

    api = Recorder(answer)
    summary = run(config(tmp_path, simulation=None, nem12_dir=inbox, once=True), api)
    assert summary.ending is Ending.FINISHED
    assert [r.headers["X-Filename"] for r in api.requests] == [
        "poison.csv",
        "gone.csv",
        "good-1.csv",
        "good-2.csv",
    ]
    assert (summary.counts.rejected, summary.counts.files_done) == (2, 2)
    assert summary.counts.breaker_trips == 0
    assert sorted(p.name for p in (inbox / "rejected").iterdir()) == [
        "poison.csv",
        "poison.csv.problem.json",
        "poison.csv.reason.txt",
    ]
    # The file whose own copy is gone is kept in the spool, set aside, never sent again.
    with Spool.open(spool_path) as spool:
        assert spool.pending() == 0
        (kept,) = spool.rejected()
    assert (Path(kept.source).name, kept.status_code) == ("gone.csv", 413)
    assert json.loads(kept.problem)["detail"] == "over the limit"


def test_an_agent_for_another_api_does_not_start_on_a_spool_and_says_why(tmp_path: Path) -> None:
    first = run(config(tmp_path), Recorder(down))
    assert first.pending == 16
    other = Recorder(up)
    with structlog.testing.capture_logs() as logs, pytest.raises(SpoolOwned) as refused:
        MeterAgent(
            config(tmp_path, api_url="http://other.test"),
            transport=httpx.MockTransport(other.handle),
        )
    assert "belongs to the API at http://api.test" in str(refused.value)
    assert "16 batches wait in it" in str(refused.value)
    (line,) = [line for line in logs if line["event"] == "spool_belongs_to_another_api"]
    assert (line["spool_api"], line["pending"], line["api"]) == (
        "http://api.test",
        16,
        "http://other.test",
    )
    assert other.requests == []
    with Spool.open(tmp_path / "spool.db") as spool:
        assert spool.pending() == 16


def test_with_once_a_file_still_being_written_is_left_for_the_next_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "finished.csv").write_bytes(b"100,NEM12,finished")
    os.utime(inbox / "finished.csv", (1e9, 1e9))
    (inbox / "growing.csv").write_bytes(b"100,NEM12,half")  # written just now
    monkeypatch.setattr("freehours.agent.meter_agent.ONCE_SETTLE_WAIT", 0.0)  # do not wait
    api = Recorder(up)
    with structlog.testing.capture_logs() as logs:
        summary = run(
            config(tmp_path, simulation=None, nem12_dir=inbox, once=True, settle_seconds=60.0),
            api,
        )
    assert summary.ending is Ending.FINISHED
    assert [r.headers["X-Filename"] for r in api.requests] == ["finished.csv"]
    assert (inbox / "growing.csv").read_bytes() == b"100,NEM12,half"
    assert not (inbox / "rejected").exists()
    (line,) = [line for line in logs if line["event"] == "files_still_being_written"]
    assert line["files"] == ["growing.csv"]


def test_every_request_says_who_sent_it_and_its_breakers_state(tmp_path: Path) -> None:
    """Closed with no trips at first; after three failures the breaker opens (a trip) and
    sends nothing until its trial call, which says half-open; then closed again."""
    failures = 3

    def flaky(request: httpx.Request) -> httpx.Response:
        if len(api.requests) <= failures:
            return down(request)
        return up(request)

    api = Recorder(flaky)
    breaker = BreakerConfig(fail_max=failures, reset_timeout=0.05, name="test")
    summary = run(config(tmp_path, breaker=breaker, name="gw 1/β", drain_timeout=5.0), api)
    assert summary.ending is Ending.FINISHED
    said = [request.headers["Freehours-Agent"] for request in api.requests]
    assert said[:failures] == ["name=gw-1--; breaker=closed; trips=0"] * failures
    assert said[failures] == "name=gw-1--; breaker=half-open; trips=1"
    assert set(said[failures + 1 :]) == {"name=gw-1--; breaker=closed; trips=1"}
    assert all(r.headers["User-Agent"].startswith("freehours-agent/") for r in api.requests)
