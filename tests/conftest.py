"""Shared fixtures: the real services (PostgreSQL, Redis) and the real NEM12 example files.

A test that needs PostgreSQL or Redis asks for ``postgres_url`` or ``redis_url``. Where the service
is not reachable the test is skipped with one line saying so, unless FREEHOURS_REQUIRE_SERVICES is
set (``make ci``), where it fails instead. So does a test of the NEM12 reader's C part
(``compiled_rows``), which an install without a C compiler leaves out.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
import redis
import sqlalchemy as sa
import structlog

from tests.databases import fresh_postgres_database

# ``store`` and ``store_url``: a database on each backend (SQLite, PostgreSQL), isolated per test;
# ``spans``: the spans a test finished (the OpenTelemetry SDK, in memory).
pytest_plugins = ["tests.store.fixtures", "tests.tracing"]

#: Real NEM12 files (nem-reader's examples, MIT), kept in the repository with their licence.
NEM12_EXAMPLES = Path(__file__).resolve().parent / "data" / "nem12-examples"
DEFAULT_POSTGRES = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
DEFAULT_REDIS = "redis://127.0.0.1:6379/0"


def _unavailable(what: str, detail: str, *, missing: str = "not reachable") -> None:
    if os.environ.get("FREEHOURS_REQUIRE_SERVICES"):
        pytest.fail(f"{what} is required here (FREEHOURS_REQUIRE_SERVICES) but {detail}")
    pytest.skip(f"{what} {missing} ({detail}); its tests are skipped")


@pytest.fixture(autouse=True)
def _logging_as_it_was() -> Iterator[None]:
    """Logging as it was before each test, and no context bound: a command run in the test's
    process (``CliRunner``) configures logging at ``warning`` for good, so a later test in the
    same process capturing ``info`` lines (``capture_logs`` keeps the level filter) saw none; a
    handler a test added to the root logger printed every later line twice; a job run in the
    test's thread left its NMI and date bound to every later line."""
    saved = structlog.get_config()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    structlog.contextvars.clear_contextvars()
    yield
    structlog.contextvars.clear_contextvars()
    for handler in [h for h in root.handlers if h not in handlers]:
        root.removeHandler(handler)
    root.setLevel(level)
    structlog.configure(**saved)


@pytest.fixture(scope="session")
def compiled_rows() -> ModuleType:
    """``freehours.meterdata.nem12._rows``, the NEM12 reader's C part, built at install."""
    try:
        from freehours.meterdata.nem12 import _rows  # noqa: PLC0415 - only where it is built
    except ImportError as exc:
        _unavailable(
            "the NEM12 reader's C part (_rows.c)",
            f"{exc}: no C compiler or Python headers at install",
            missing="not built",
        )
    return _rows


@pytest.fixture(scope="session")
def nem12_examples() -> Path:
    """tests/data/nem12-examples: real NEM12 files (see its README)."""
    return NEM12_EXAMPLES


@pytest.fixture(scope="session")
def postgres_admin_url() -> str:
    """URL of a reachable PostgreSQL database from which test databases are created."""
    url = os.environ.get("FREEHOURS_TEST_DATABASE_URL", DEFAULT_POSTGRES)
    try:
        engine = sa.create_engine(url, connect_args={"connect_timeout": 3})
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
        engine.dispose()
    except Exception as exc:  # noqa: BLE001 - any failure to connect means "not reachable"
        _unavailable("PostgreSQL", f"{url}: {type(exc).__name__}")
    return url


@pytest.fixture(scope="session")
def postgres_url(postgres_admin_url: str) -> Iterator[str]:
    """A fresh, empty PostgreSQL database for this test session, dropped afterwards."""
    with fresh_postgres_database(postgres_admin_url) as url:
        yield url


@pytest.fixture(scope="session")
def redis_url() -> str:
    """URL of a reachable Redis; tests use their own key prefix and clean up after themselves."""
    url = os.environ.get("FREEHOURS_TEST_REDIS_URL", DEFAULT_REDIS)
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=3)
        client.ping()
        client.close()
    except Exception as exc:  # noqa: BLE001 - any failure to connect means "not reachable"
        _unavailable("Redis", f"{url}: {type(exc).__name__}")
    return url


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slow tests first, each in the order collected, then the rest: under pytest-xdist a
    worker handed a 40 s test last would leave the other core idle until it ends. (``make test``
    hands them out one at a time, so that both workers share them: the Makefile says why.)"""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line per reason tests were skipped (a service not reachable), instead of one line
    per test."""
    reasons: dict[str, int] = {}
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        reason = reason.removeprefix("Skipped: ")
        reasons[reason] = reasons.get(reason, 0) + 1
    for reason, count in sorted(reasons.items()):
        terminalreporter.write_line(f"SKIPPED {count} tests: {reason}", yellow=True)
    # What a test measured for people to read (tests/cluster: the time each fault cost), from its
    # report's user properties: they reach this process from xdist's workers too.
    for outcome in ("passed", "failed"):
        for report in terminalreporter.stats.get(outcome, []):
            for name, text in getattr(report, "user_properties", []):
                if name == "fault timings" and report.when == "call":
                    terminalreporter.write_sep("-", f"fault timings ({report.nodeid}, {outcome})")
                    for line in str(text).splitlines():
                        terminalreporter.write_line(line)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No FREEHOURS_* of the developer's leaks into the settings."""
    for name in [name for name in os.environ if name.startswith("FREEHOURS_")]:
        monkeypatch.delenv(name)
    return monkeypatch


@pytest.fixture
def database_url(store_url: str, clean_env: pytest.MonkeyPatch) -> Iterator[str]:
    """A migrated database on each backend, as FREEHOURS_DATABASE_URL: for the commands."""
    from freehours.settings import get_settings  # noqa: PLC0415 - no freehours module at load

    clean_env.setenv("FREEHOURS_DATABASE_URL", store_url)
    get_settings.cache_clear()
    yield store_url
    get_settings.cache_clear()
