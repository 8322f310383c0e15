"""The agent as a process against a real API server process: an outage at start, and a SIGKILL
in the middle of sending. Every read ends up stored exactly once."""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from freehours.domain.time import NEM_TIME
from freehours.meterdata.nem12 import read_days
from freehours.meterdata.writer import write_nem12
from freehours.sim.agent_meters import SimulatedMeters
from freehours.sim.meters import households, meter_days
from freehours.store.tables import idempotency_keys
from tests.agent.conftest import AgentProcess, ApiSite
from tests.metrics import Samples
from tests.servers import free_port
from tests.sim.test_agent_meters import reads_of
from tests.support import eventually

pytestmark = pytest.mark.slow

START = datetime(2026, 7, 1, 0, 0, tzinfo=NEM_TIME)
#: The issue's outage: the API comes up ten seconds after the agent.
OUTAGE_SECONDS = 10.0
BREAKER_FAILURES = 3
BREAKER_RESET_SECONDS = 1.0

StartAgent = Callable[..., AgentProcess]


def saved_answers(site: ApiSite) -> list[tuple[int, dict[str, Any]]]:
    """Every Idempotency-Key the API answered, with its saved answer: one per request it ran."""
    with site.store() as store, store.read() as unit:
        rows = unit.connection.execute(
            sa.select(idempotency_keys.c.status_code, idempotency_keys.c.response_body)
        ).all()
    return [(row.status_code, json.loads(row.response_body)) for row in rows]


def stored_reads(site: ApiSite, nmis: list[str], days: list[date]) -> dict[Any, Decimal]:
    """(nmi, suffix, interval start ISO) -> kWh for every stored interval that has a value."""
    found: dict[Any, Decimal] = {}
    with site.store() as store, store.read() as unit:
        for nmi in nmis:
            for day in unit.meter.days_for(nmi, days):
                for index, value in enumerate(day.values):
                    if value is not None:
                        found[nmi, day.suffix, day.interval_start(index).isoformat()] = value
    return found


def test_an_api_down_for_the_first_ten_seconds_gets_every_read_exactly_once(
    api_site: ApiSite, start_agent: StartAgent, tmp_path: Path
) -> None:
    end = START + timedelta(hours=6)
    metrics_port = free_port()
    agent = start_agent(
        api_site,
        *("--simulate", "3", "--seed", "7", "--start", START.isoformat()),
        *("--duration", "6h", "--speed", "3600"),  # six simulated hours in six seconds
        *("--spool", str(tmp_path / "spool.db"), "--drain-timeout", "60"),
        *("--breaker-failures", str(BREAKER_FAILURES)),
        *("--breaker-reset", str(BREAKER_RESET_SECONDS)),
        *("--metrics-port", str(metrics_port)),
    )

    def logged(event: str, **fields: str) -> Callable[[], bool]:
        return lambda: any(
            line["event"] == event and fields.items() <= line.items() for line in agent.logs()
        )

    # The outage is counted from the agent's start, not its process's: on a loaded machine
    # Python takes a while to import freehours.
    eventually(logged("agent_started"), within=60, what="the agent started", every=0.002)
    started = time.monotonic()
    eventually(
        logged("breaker_state_changed", new="open"),
        within=OUTAGE_SECONDS,
        what="the breaker opened",
        every=0.002,
    )
    metrics = Samples.scrape(metrics_port)
    assert metrics.only("freehours_circuit_breaker_state") >= 1  # open, or half-open for a trial
    assert metrics.value("freehours_agent_breaker_trips_total") >= 1
    assert metrics.value("freehours_agent_spooled") > 0
    time.sleep(max(0.0, started + OUTAGE_SECONDS - time.monotonic()))  # the rest of the outage
    with api_site.serve():
        api_up = time.monotonic()
        assert agent.wait(60) == 0
    summary = agent.summary()

    expected = reads_of(SimulatedMeters(3, 7, START, end).due(end))
    assert len(expected) == 3 * 2 * 12
    assert summary["ending"] == "finished"
    assert summary["pending"] == 0
    assert summary["reads_sent"] == len(expected)
    assert summary["breaker_trips"] >= 1

    # The outage cost a bounded number of attempts: at most three in any breaker window, and in
    # all no more than the first trip's plus one trial per window.
    failed = sorted(
        datetime.fromisoformat(line["timestamp"]).timestamp()
        for line in agent.logs()
        if line["event"] == "attempt_failed"
    )
    outage = api_up - started
    assert failed
    for moment in failed:
        in_window = [t for t in failed if moment <= t < moment + BREAKER_RESET_SECONDS]
        assert len(in_window) <= BREAKER_FAILURES
    assert len(failed) <= BREAKER_FAILURES + math.ceil(outage / BREAKER_RESET_SECONDS) + 1
    assert summary["failed_attempts"] == len(failed)

    # What is stored is what the meters read, and each read was accepted once: the API ran one
    # request per batch, none of them found a read it already had.
    nmis = sorted({nmi for nmi, _, _ in expected})
    assert stored_reads(api_site, nmis, [date(2026, 7, 1)]) == expected
    answers = saved_answers(api_site)
    assert len(answers) == summary["sent"]
    assert {status for status, _ in answers} == {200}
    assert sum(body["accepted"] for _, body in answers) == len(expected)
    assert sum(body["unchanged"] + body["superseded"] for _, body in answers) == 0


FILES = 24
HOUSEHOLDS = 20


def nem12_files(inbox: Path) -> list[Path]:
    """A metering provider's daily files: one NEM12 file per day, every household in it."""
    meters = households(HOUSEHOLDS, random.Random(3))
    paths = []
    for number in range(FILES):
        day = date(2026, 7, 1) + timedelta(days=number)
        days = [
            read
            for household in meters
            for read in meter_days(household, day, 1, random.Random(f"{number}:{household.nmi}"))
        ]
        path = inbox / f"delivery-{day:%Y%m%d}.csv"
        write_nem12(days, path, created=datetime(2026, 9, 1, tzinfo=NEM_TIME))
        paths.append(path)
    return paths


def test_an_agent_killed_mid_send_and_restarted_stores_every_file_exactly_once(
    api: ApiSite, start_agent: StartAgent, tmp_path: Path
) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    files = nem12_files(inbox)
    expected = {
        (day.nmi, day.suffix, day.day): day.values for path in files for day in read_days(path)
    }
    options = ("--nem12-dir", str(inbox), "--once", "--spool", str(tmp_path / "spool.db"))
    done = inbox / "done"

    def done_count() -> int:
        return len(list(done.iterdir())) if done.exists() else 0

    first = start_agent(api, *options)
    eventually(lambda: done_count() >= 5, within=60, what="the first agent sent five files")
    first.process.kill()  # SIGKILL: no chance to tidy up
    first.process.wait()
    killed_at = done_count()
    assert 5 <= killed_at < FILES, "the agent was not killed in the middle of sending"

    second = start_agent(api, *options)
    assert second.wait(60) == 0
    summary = second.summary()
    assert summary["pending"] == 0
    assert summary["rejected"] == 0
    assert sorted(path.name for path in done.iterdir()) == sorted(path.name for path in files)
    assert sorted(path.name for path in inbox.iterdir()) == ["done"]

    # Every day of every file is stored with exactly the file's values...
    nmis = sorted({nmi for nmi, _, _ in expected})
    days = sorted({day for _, _, day in expected})
    with api.store() as store, store.read() as unit:
        stored = {
            (day.nmi, day.suffix, day.day): day.values
            for nmi in nmis
            for day in unit.meter.days_for(nmi, days)
        }
    assert stored == expected
    assert sum(sum(filter(None, v), Decimal(0)) for v in stored.values()) == sum(
        sum(filter(None, v), Decimal(0)) for v in expected.values()
    )
    # ... and the API ran each file once: one saved answer per file, and no answer found a day
    # it had already stored (a file counted twice would show as "unchanged").
    answers = saved_answers(api)
    assert len(answers) == FILES
    assert {status for status, _ in answers} == {200}
    assert sum(body["channel_days_accepted"] for _, body in answers) == len(expected)
    assert (
        sum(
            body["channel_days_unchanged"]
            + body["channel_days_superseded"]
            + body["channel_days_stale"]
            for _, body in answers
        )
        == 0
    )
