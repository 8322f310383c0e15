"""Settings: each default written once, and mapped onto the policies it configures in one place."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from freehours.clock import ManualClock
from freehours.domain.webhooks import Destinations
from freehours.errors import ConfigurationError
from freehours.jobs.retry import RetryPolicy
from freehours.operations.runtime import retry_policy, settlement_policy, worker_config
from freehours.settings import Settings, get_settings
from freehours.settlement.model import SettlementPolicy
from freehours.workers.worker import WorkerConfig
from tests.support import run_command


@pytest.fixture
def fresh_settings(clean_env: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """``clean_env``, with ``get_settings`` reading it afresh in the test (its cache cleared
    before, and again after, for the tests that follow)."""
    get_settings.cache_clear()
    yield clean_env
    get_settings.cache_clear()


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


def test_worker_queues_size_the_queues_they_name_and_the_concurrency_the_rest(
    clean_env: pytest.MonkeyPatch,
) -> None:
    clean_env.setenv("FREEHOURS_WORKER_CONCURRENCY", "3")
    clean_env.setenv("FREEHOURS_WORKER_QUEUES", " settle=8, webhook = 16 ,")
    config = worker_config(Settings())
    assert config.queues == {"settle": 8, "webhook": 16}
    assert [config.runners(queue) for queue in ("settle", "invoice", "webhook")] == [8, 3, 16]
    # A command's --queues replaces the setting; its --concurrency sizes the rest.
    given = worker_config(Settings(), concurrency=2, queues={"invoice": 1})
    assert [given.runners(queue) for queue in ("settle", "invoice", "webhook")] == [2, 1, 2]
    assert worker_config(Settings(), queues={}).queues == {}


def test_no_worker_queues_leave_every_queue_the_concurrency(clean_env: pytest.MonkeyPatch) -> None:
    config = worker_config(Settings())
    assert config.queues == {}
    assert [config.runners(queue) for queue in ("settle", "invoice", "webhook")] == [4, 4, 4]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("settle", "'settle' is not QUEUE=RUNNERS"),
        (
            "settle=4,post=2",
            "'post=2': 'post' is not a queue (the queues: settle, invoice, webhook, mail)",
        ),
        ("webhook=4,webhook=8", "'webhook=8': the queue webhook is sized twice"),
        ("invoice=0", "'invoice=0': runners must be a whole number from 1"),
        ("invoice=-1", "'invoice=-1': runners must be a whole number from 1"),
        ("invoice=2.5", "'invoice=2.5': runners must be a whole number from 1"),
        ("invoice=", "'invoice=': runners must be a whole number from 1"),
    ],
)
def test_worker_queues_that_are_not_one_are_an_error_naming_the_setting_and_the_part(
    fresh_settings: pytest.MonkeyPatch, spec: str, message: str
) -> None:
    fresh_settings.setenv("FREEHOURS_WORKER_QUEUES", spec)
    with pytest.raises(ConfigurationError) as raised:
        get_settings()
    assert str(raised.value) == f"settings: FREEHOURS_WORKER_QUEUES={spec!r}: {message}"


def test_the_worker_commands_queues_option_names_the_bad_part_and_exits_2(
    fresh_settings: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fresh_settings.setenv("FREEHOURS_DATABASE_URL", f"sqlite:///{tmp_path / 'x.db'}")
    assert run_command(fresh_settings, "worker", "--queues", "settle=4,post=2") == 2
    err = " ".join(capsys.readouterr().err.replace("│", " ").split())
    assert "Invalid value for '--queues': 'post=2': 'post' is not a queue" in err


def test_the_documented_defaults_hold(clean_env: pytest.MonkeyPatch) -> None:
    """The values the README's table and docs/jobs.md state."""
    settings = Settings()
    assert (
        settings.lock_timeout_seconds,
        settings.settlement_max_attempts,
        settings.settlement_grace_seconds,
        settings.data_deadline_hours,
    ) == (3, 5, 900, 72)
    assert (
        settings.worker_concurrency,
        settings.job_lease_seconds,
        settings.job_poll_seconds,
        settings.job_retry_base_seconds,
        settings.job_retry_cap_seconds,
        settings.job_retention_hours,
    ) == (4, 3, 1, 1, 600, 168)
    assert settings.worker_queues is None
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
    fresh_settings: pytest.MonkeyPatch, variable: str, value: str, message: str
) -> None:
    fresh_settings.setenv(variable, value)
    with pytest.raises(ConfigurationError) as raised:
        get_settings()
    assert str(raised.value).startswith(f"settings: {message}")


def test_a_command_given_a_bad_setting_says_which_in_one_line_and_exits_1(
    fresh_settings: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fresh_settings.setenv("FREEHOURS_DATABASE_URL", f"sqlite:///{tmp_path / 'x.db'}")
    fresh_settings.setenv("FREEHOURS_REDIS_URL", "nonsense://x")
    assert run_command(fresh_settings, "worker") == 1
    err = capsys.readouterr().err
    assert err.startswith("error: settings: FREEHOURS_REDIS_URL='nonsense://x': not a Redis URL")
    assert "Traceback" not in err
    assert not (tmp_path / "x.db").exists()  # refused before anything was opened
