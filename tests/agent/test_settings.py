"""The agent's settings: FREEHOURS_AGENT_* read, mapped onto the agent's parts, overridden by
the command line's options."""

from __future__ import annotations

from pathlib import Path

import pytest

from freehours.agent.breaker import BreakerConfig
from freehours.agent.http import Timeouts
from freehours.agent.meter_agent import AgentConfig
from freehours.agent.settings import AgentSettings
from tests.support import run_command


def test_the_defaults_are_those_of_the_parts(clean_env: pytest.MonkeyPatch) -> None:
    settings = AgentSettings()
    assert settings.breaker() == BreakerConfig()
    assert settings.timeouts() == Timeouts()
    config = settings.agent_config(
        api_url="http://api.test",
        api_key="k",
        spool_path=Path("spool.db"),
        nem12_dir=None,
        once=False,
        simulation=None,
        redis_url=None,
        redis_prefix="freehours:",
    )
    assert config == AgentConfig("http://api.test", "k", Path("spool.db"))


def test_the_variables_reach_the_agent(clean_env: pytest.MonkeyPatch) -> None:
    for name, value in {
        "BREAKER_FAILURES": "2",
        "BREAKER_RESET": "4.5",
        "BREAKER_NAME": "north",
        "CONNECT_TIMEOUT": "1",
        "READ_TIMEOUT": "2",
        "DEADLINE": "3",
        "DRAIN_TIMEOUT": "7",
        "MAX_FILE_BYTES": "1024",
        "SETTLE_SECONDS": "0.5",
    }.items():
        clean_env.setenv(f"FREEHOURS_AGENT_{name}", value)
    settings = AgentSettings()
    assert settings.breaker() == BreakerConfig(fail_max=2, reset_timeout=4.5, name="north")
    assert settings.timeouts() == Timeouts(connect=1, read=2, total=3)
    assert (settings.drain_timeout, settings.max_file_bytes, settings.settle_seconds) == (
        7,
        1024,
        0.5,
    )


def test_a_bad_variable_is_named(
    clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clean_env.setenv("FREEHOURS_AGENT_BREAKER_FAILURES", "0")
    assert run_command(clean_env, "agent", "--api", "http://x", "--api-key", "k") == 1
    err = capsys.readouterr().err
    assert err.startswith(
        "error: settings: FREEHOURS_AGENT_BREAKER_FAILURES='0': Input should be greater than or"
        " equal to 1"
    )


def test_an_option_given_overrides_the_variable(
    clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clean_env.setenv("FREEHOURS_AGENT_BREAKER_FAILURES", "0")
    args = ("agent", "--api", "http://x", "--api-key", "k", "--breaker-failures", "3")
    # Past the settings (the variable's bad value is not read), to the missing source.
    assert run_command(clean_env, *args) == 2
    assert "--nem12-dir DIR, --simulate N, or both" in capsys.readouterr().err
