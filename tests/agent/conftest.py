"""A real API server process for the agent to talk to, and the agent as a process of its own.

``api_site`` is everything but the running server: a SQLite database in ``tmp_path``, an API key
(``freehours keys create --scope ingest --scope read``) and a free port, so that a test can start
the server when it likes (after an outage). ``api`` is the same with the server running.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from freehours.store.database import Store
from tests.servers import FREEHOURS, api_server, free_port, freehours


@dataclass
class ApiSite:
    """Where the API runs (or will): its database, its port, an ingest key."""

    database_url: str
    port: int
    key: str
    env: dict[str, str]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def serve(self) -> AbstractContextManager[str]:
        """``freehours serve`` on the port, up once /healthz answers; stopped on exit."""
        return api_server(self.env, self.port)

    def store(self) -> Store:
        return Store.open(self.database_url)


@pytest.fixture(scope="session")
def api_template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A database with its schema and an ingest key, made once: each test serves a copy (making
    it takes two process starts, and the key is the same in every copy)."""
    path = tmp_path_factory.mktemp("api-template") / "api.db"
    env = _clean_env() | {"FREEHOURS_DATABASE_URL": f"sqlite:///{path}"}
    key = freehours("keys", "create", "--scope", "ingest", "--scope", "read", env=env)
    return path, key


@pytest.fixture
def api_site(api_template: tuple[Path, str], tmp_path: Path) -> ApiSite:
    return _site(api_template, tmp_path / "api.db")


@pytest.fixture
def other_api_site(api_template: tuple[Path, str], tmp_path: Path) -> ApiSite:
    """A second API, with a database (and port) of its own."""
    return _site(api_template, tmp_path / "other-api.db")


def _site(api_template: tuple[Path, str], copy: Path) -> ApiSite:
    template, key = api_template
    with sqlite3.connect(template) as source, sqlite3.connect(copy) as target:
        source.backup(target)
    database_url = f"sqlite:///{copy}"
    env = _clean_env() | {"FREEHOURS_DATABASE_URL": database_url}
    return ApiSite(database_url, free_port(), key, env)


@pytest.fixture
def api(api_site: ApiSite) -> Iterator[ApiSite]:
    with api_site.serve():
        yield api_site


@dataclass
class AgentProcess:
    """``freehours agent`` running; its stdout and stderr go to files, read when asked."""

    process: subprocess.Popen[bytes]
    stdout: Path
    stderr: Path

    def logs(self) -> list[dict[str, Any]]:
        """The JSON log lines written so far."""
        lines = self.stderr.read_text().splitlines()
        return [json.loads(line) for line in lines if line.startswith("{")]

    def wait(self, deadline_s: float) -> int:
        """Its exit status, once it exits within ``deadline_s``."""
        try:
            return self.process.wait(timeout=deadline_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            log = self.stderr.read_text()
            raise AssertionError(f"the agent ran past {deadline_s} s; its stderr:\n{log}") from None

    def summary(self) -> dict[str, Any]:
        summary: dict[str, Any] = json.loads(self.stdout.read_text())
        return summary


@pytest.fixture
def start_agent(tmp_path: Path) -> Iterator[Any]:
    """Start ``freehours agent`` with the given options; every one started is gone afterwards."""
    started: list[AgentProcess] = []

    def start(
        site: ApiSite,
        *options: str,
        prefix: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
    ) -> AgentProcess:
        """``prefix``: a command the agent runs under; ``env``: added to its environment."""
        number = len(started)
        stdout, stderr = tmp_path / f"agent{number}.out", tmp_path / f"agent{number}.err"
        with stdout.open("wb") as out, stderr.open("wb") as err:
            process = subprocess.Popen(
                [*prefix, FREEHOURS, "agent", "--api", site.url, "--json", *options],
                env=_clean_env() | {"FREEHOURS_API_KEY": site.key} | dict(env or {}),
                stdout=out,
                stderr=err,
            )
        agent = AgentProcess(process, stdout, stderr)
        started.append(agent)
        return agent

    yield start
    for agent in started:
        if agent.process.poll() is None:
            agent.process.kill()
            agent.process.wait()


def _clean_env() -> dict[str, str]:
    """This environment without freehours settings, so a developer's own do not leak in."""
    return {name: value for name, value in os.environ.items() if not name.startswith("FREEHOURS_")}
