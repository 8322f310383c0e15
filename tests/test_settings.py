"""Settings: each default written once, and mapped onto the policies it configures in one place."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from freehours.clock import ManualClock
from freehours.domain.webhooks import Destinations
from freehours.errors import ConfigurationError
from freehours.jobs.retry import RetryPolicy
from freehours.jobs.worker import WorkerConfig
from freehours.runtime import retry_policy, settlement_policy, worker_config
from freehours.settings import Settings, get_settings
from freehours.settlement import SettlementPolicy
from tests.support import run_command


def test_the_default_settings_make_the_default_policies(clean_env: pytest.MonkeyPatch) -> None:
    settings = Settings()
    clock = ManualClock(datetime(2026, 7, 1, tzinfo=UTC))
    jitter = random.Random(1)
    assert settlement_policy(settings) == SettlementPolicy()
    assert worker_config(settings) == WorkerConfig()
    assert retry_policy(settings, clock, jitter) == RetryPolicy(clock, jitter)


def test_the_variables_reach_the_policies(clean_env: pytest.MonkeyPatch) -> None:
    for name, value in {
        "LOCK_TIMEOUT_SECONDS": "12",
        "SETTLEMENT_MAX_ATTEMPTS": "3",
        "SETTLEMENT_GRACE_SECONDS": "60",
        "DATA_DEADLINE_HOURS": "1.5",
        "WORKER_CONCURRENCY": "7",
        "JOB_LEASE_SECONDS": "9",
        "JOB_POLL_SECONDS": "0.25",
        "JOB_RETENTION_HOURS": "2",
        "JOB_RETRY_BASE_SECONDS": "0.5",
        "JOB_RETRY_CAP_SECONDS": "20",
    }.items():
        clean_env.setenv(f"FREEHOURS_{name}", value)
    settings = Settings()
    clock = ManualClock(datetime(2026, 7, 1, tzinfo=UTC))
    assert settlement_policy(settings) == SettlementPolicy(
        lock_timeout=timedelta(seconds=12),
        max_attempts=3,
        grace=timedelta(minutes=1),
        data_deadline=timedelta(minutes=90),
    )
    assert worker_config(settings) == WorkerConfig(
        concurrency=7,
        lease=timedelta(seconds=9),
        poll=timedelta(seconds=0.25),
        retention=timedelta(hours=2),
    )
    retry = retry_policy(settings, clock)
    assert (retry.base, retry.cap) == (timedelta(seconds=0.5), timedelta(seconds=20))


def test_a_commands_concurrency_overrides_the_setting(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("FREEHOURS_WORKER_CONCURRENCY", "7")
    assert worker_config(Settings(), concurrency=2).concurrency == 2
    assert worker_config(Settings()).concurrency == 7


def test_the_documented_defaults_hold(clean_env: pytest.MonkeyPatch) -> None:
    """The values the README's table and docs/jobs.md state."""
    settings = Settings()
    assert (
        settings.lock_timeout_seconds,
        settings.settlement_max_attempts,
        settings.settlement_grace_seconds,
        settings.data_deadline_hours,
    ) == (30, 5, 900, 72)
    assert (
        settings.worker_concurrency,
        settings.job_lease_seconds,
        settings.job_poll_seconds,
        settings.job_retry_base_seconds,
        settings.job_retry_cap_seconds,
        settings.job_retention_hours,
    ) == (4, 30, 1, 1, 600, 168)
    assert (settings.max_upload_bytes, settings.redis_prefix) == (100 * 1024 * 1024, "freehours:")
    assert (
        settings.webhook_deadline_seconds,
        settings.webhook_allowed_networks,
        settings.rate_limit_webhook_replays,
    ) == (15, "", "5/minute")
    assert settings.webhook_destinations() == Destinations()


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        (
            "FREEHOURS_WORKER_CONCURRENCY",
            "abc",
            "FREEHOURS_WORKER_CONCURRENCY='abc': Input should be a valid integer",
        ),
        (
            "FREEHOURS_REDIS_URL",
            "localhost:6379",
            "FREEHOURS_REDIS_URL='localhost:6379': not a Redis URL: its scheme must be one of"
            " redis, rediss, unix",
        ),
        ("FREEHOURS_LOG_LEVEL", "loud", "FREEHOURS_LOG_LEVEL='loud': Input should be 'debug'"),
        (
            "FREEHOURS_WEBHOOK_ALLOWED_NETWORKS",
            "10.0.0.0/8,intranet",
            "FREEHOURS_WEBHOOK_ALLOWED_NETWORKS='10.0.0.0/8,intranet': 'intranet' is not a network"
            " (CIDR)",
        ),
    ],
)
def test_a_setting_that_is_not_one_is_an_error_naming_its_variable(
    clean_env: pytest.MonkeyPatch, variable: str, value: str, message: str
) -> None:
    clean_env.setenv(variable, value)
    get_settings.cache_clear()
    try:
        with pytest.raises(ConfigurationError) as raised:
            get_settings()
    finally:
        get_settings.cache_clear()
    assert str(raised.value).startswith(f"settings: {message}")


def test_a_command_given_a_bad_setting_says_which_in_one_line_and_exits_1(
    clean_env: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clean_env.setenv("FREEHOURS_DATABASE_URL", f"sqlite:///{tmp_path / 'x.db'}")
    clean_env.setenv("FREEHOURS_REDIS_URL", "nonsense://x")
    get_settings.cache_clear()
    try:
        assert run_command(clean_env, "worker") == 1
    finally:
        get_settings.cache_clear()
    err = capsys.readouterr().err
    assert err.startswith("error: settings: FREEHOURS_REDIS_URL='nonsense://x': not a Redis URL")
    assert "Traceback" not in err
    assert not (tmp_path / "x.db").exists()  # refused before anything was opened
