"""The meter-readings routes record each stored batch or file (``ingestions``), in its own
transaction, and what a meter agent says of itself in its ``Freehours-Agent`` header
(``agents``): throttled, written behind the request, never failing it."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from structlog.testing import capture_logs

from freehours.agent.http import agent_header
from freehours.api.agents import (
    NAME_LENGTH,
    AgentHeader,
    AgentReports,
    agent_version,
    parse_header,
)
from freehours.api.keys import find_key
from freehours.clock import ManualClock
from freehours.store.agents import AgentReport
from freehours.store.database import Store
from tests.api.conftest import START, Api
from tests.api.test_meter_readings import batch, nem12_file, post_nem12

AGENT = {"Freehours-Agent": "name=gw-1; breaker=half-open; trips=2"}


def reads(api: Api, body: object, key: str, headers: dict[str, str] | None = None):
    sent = {**api.auth("ingest"), "Idempotency-Key": key, **(headers or {})}
    return api.client.post("/v1/meter-readings", content=json.dumps(body), headers=sent)


def key_id(api: Api) -> str:
    with api.services.store.read() as unit:
        found = find_key(unit.keys, api.keys["ingest"])
    assert found is not None
    return found.id


def test_a_reads_batch_and_an_upload_are_recorded_with_their_counts(api: Api) -> None:
    body = batch("0.412", "0.300")
    sent = json.dumps(body)
    assert reads(api, body, "r1", AGENT).status_code == 200
    assert reads(api, body, "r1", AGENT).status_code == 200  # a replay: nothing new
    upload = nem12_file("0.250")
    headers = {**api.auth("ingest"), "Idempotency-Key": "f1", "X-Filename": "day.csv"}
    assert api.client.post("/v1/meter-readings/nem12", content=upload, headers=headers).is_success
    assert post_nem12(api, nem12_file("0.250", stamp_hour=13), key="f2").status_code == 200
    with api.services.store.read() as unit:
        unnamed, named, batch_row = unit.ingestions.recent(limit=10)
    me = key_id(api)
    assert (batch_row.source, batch_row.name, batch_row.key_id, batch_row.agent) == (
        "reads",
        None,
        me,
        "gw-1",
    )
    assert (batch_row.bytes, batch_row.accepted, batch_row.received_at) == (len(sent), 2, START)
    assert (named.source, named.name, named.agent, named.bytes) == (
        "nem12",
        "day.csv",
        None,
        len(upload),
    )
    assert (named.accepted, named.superseded, named.unchanged, named.stale) == (0, 1, 0, 0)
    assert (unnamed.name, unnamed.superseded) == (None, 1)


def test_a_refused_batch_or_file_records_nothing(api: Api) -> None:
    assert reads(api, batch(*["0.1"] * 101, start_hour=0), "big").status_code == 413
    broken = nem12_file("0.250").replace(b"\n300,", b"\n300,x", 1)
    refused = post_nem12(api, broken, key="bad")
    assert refused.status_code == 422, refused.text
    assert "IntervalDate" in refused.json()["detail"], refused.json()
    with api.services.store.read() as unit:
        assert unit.ingestions.recent(limit=10) == []


def test_an_agents_header_is_recorded_once_per_10_seconds(api: Api) -> None:
    headers = {**AGENT, "User-Agent": "freehours-agent/0.1.0"}
    assert reads(api, batch("0.4"), "a", headers).status_code == 200
    later = {"Freehours-Agent": "name=gw-1; breaker=closed; trips=2", "User-Agent": "x"}
    assert reads(api, batch("0.5"), "b", later).status_code == 200  # within 10 s: not written
    api.services.agents.flush()
    with api.services.store.read() as unit:
        assert unit.agents.every() == [
            AgentReport("gw-1", "half-open", 2, "0.1.0", "127.0.0.1", START)
        ]
    api.clock.advance(10)
    assert reads(api, batch("0.6"), "c", later).status_code == 200
    api.services.agents.flush()
    with api.services.store.read() as unit:
        assert unit.agents.every() == [
            AgentReport("gw-1", "closed", 2, "unknown", "127.0.0.1", START + timedelta(seconds=10))
        ]


def test_a_malformed_header_is_ignored_and_a_refused_request_still_reports(api: Api) -> None:
    bad = {"Freehours-Agent": "name=gw 1; breaker=shut; trips=-1"}
    assert reads(api, batch("0.4"), "a", bad).status_code == 200
    assert reads(api, batch(*["0.1"] * 101, start_hour=0), "big", AGENT).status_code == 413
    api.services.agents.flush()
    with api.services.store.read() as unit:
        assert [a.name for a in unit.agents.every()] == ["gw-1"]
        (recorded,) = unit.ingestions.recent(limit=10)
        assert recorded.agent is None


def test_a_report_that_cannot_be_written_is_logged_and_fails_nothing(store: Store) -> None:
    reports = AgentReports(store, ManualClock(START))
    with store.write() as unit:
        unit.connection.exec_driver_sql("DROP TABLE agents")
    with capture_logs() as logs:
        reports.heard(AgentHeader("gw-1", "open", 1), user_agent=None, address=None)
        reports.flush()
    reports.close()
    (line,) = [entry for entry in logs if entry["event"] == "agent_report_failed"]
    assert line["agent"] == "gw-1"
    assert "agents" in line["error"]  # no such table, or relation "agents" does not exist
    # Closed, it takes no more, and says nothing of it.
    reports.heard(AgentHeader("gw-2", "open", 1), user_agent=None, address=None)


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("name=gw-1; breaker=closed; trips=0", AgentHeader("gw-1", "closed", 0)),
        ("trips=7;BREAKER=open;name=a.b_c", AgentHeader("a.b_c", "open", 7)),
        ("name=gw-1; breaker=closed", None),
        ("name=gw-1; breaker=closed; trips=2147483648", None),
        ("name=; breaker=closed; trips=0", None),
        (f"name={'a' * (NAME_LENGTH + 1)}; breaker=closed; trips=0", None),
        ("name=a; name=b; breaker=closed; trips=0", None),
        ("name=a; breaker=closed; trips=0; extra=1", None),
        ("garbage", None),
        (None, None),
    ],
)
def test_the_header_parses_leniently(value: str | None, parsed: AgentHeader | None) -> None:
    assert parse_header(value) == parsed


@given(st.text(max_size=400))
def test_any_text_parses_to_none_or_a_bounded_header(value: str) -> None:
    parsed = parse_header(value)
    if parsed is not None:
        assert 1 <= len(parsed.name) <= NAME_LENGTH
        assert parsed.name.isascii()
        assert parsed.breaker in ("closed", "half-open", "open")
        assert 0 <= parsed.trips < 2**31


@given(st.text(max_size=300), st.sampled_from(["closed", "half-open", "open", "?"]), st.integers())
def test_what_the_agent_sends_always_parses(name: str, breaker: str, trips: int) -> None:
    header = agent_header(name, breaker, min(trips, 2**31 - 1))
    parsed = parse_header(header)
    assert parsed is not None
    assert parsed.breaker == (breaker if breaker != "?" else "open")


def test_the_version_is_the_agents_own() -> None:
    assert agent_version("freehours-agent/0.1.0") == "0.1.0"
    assert agent_version("freehours-agent/0.1.0 python-httpx/0.27") == "0.1.0"
    assert agent_version("curl/8") == "unknown"
    assert agent_version(None) == "unknown"
