"""The production topology of docs/deployment.md, started from its commands as real processes:
a fresh PostgreSQL database and Redis prefix, ``freehours db upgrade``, ``freehours keys create``,
the API unit's ``freehours serve --processes 2`` and two of the worker unit's ``freehours worker``
(their command lines read from deploy/systemd, on free ports), the example environment file's
settings with this test's database and Redis.

Across both API processes the settlement contract holds: one POST answered 200 COMPLETED, its
retries answered by the other process as replays (``Idempotent-Replayed: true``), one ledger entry.
The workers settle a due quota by themselves; the API's /metrics, from either process, counts
the requests of both. Every process, the database and the Redis keys go afterwards, pass or fail.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path

import httpx
import pytest
import redis

from freehours.domain.time import NEM_TIME
from freehours.observability.exposition import MULTIPROC_DIR
from freehours.store import schema
from freehours.store.database import Store
from tests.databases import fresh_postgres_database
from tests.deploy.units import DEPLOY, INSTALLED, environment_file, exec_start, option, unit
from tests.metrics import Samples
from tests.servers import FREEHOURS, ServeLog, free_port, freehours, stop, traced, wait_until_up
from tests.support import eventually
from tests.test_settlement import PLAN

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis]

NMI = "TOPOLOGY01"
SETTLED_BY_API = date(2026, 7, 1)
SETTLED_BY_WORKERS = date(2026, 7, 2)
SETTLEMENTS = "/v1/free-energy/settlements"


@dataclass
class Topology:
    """The processes of one test, each stopped (and its process group killed) at the end."""

    env: dict[str, str]
    runtime: Path
    started: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start(
        self, argv: list[str], unit_environment: list[str], log: Path
    ) -> subprocess.Popen[bytes]:
        """``argv`` as its unit runs it: this checkout's freehours, the unit's Environment=."""
        assert argv[0] == INSTALLED
        env = {**os.environ, **self.env}
        env.pop(MULTIPROC_DIR, None)
        for assignment in unit_environment:
            name, _, value = assignment.replace("%t", str(self.runtime)).partition("=")
            env[name] = value
        with log.open("ab") as stderr:
            process = subprocess.Popen(
                [FREEHOURS, *argv[1:]],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                start_new_session=True,
            )
        self.started.append(process)
        return process

    def stop_all(self) -> list[int]:
        return [stop(process) for process in self.started]


@pytest.fixture
def database(postgres_admin_url: str) -> Iterator[str]:
    """A new PostgreSQL database, dropped afterwards whatever holds it."""
    with fresh_postgres_database(postgres_admin_url, prefix="freehours_topology") as url:
        yield url


@pytest.fixture
def redis_prefix(redis_url: str) -> Iterator[str]:
    prefix = f"test-topology:{uuid.uuid4().hex[:12]}:"
    yield prefix
    client = redis.Redis.from_url(redis_url)
    keys = list(client.scan_iter(match=f"{prefix}*"))
    if keys:
        client.delete(*keys)
    client.close()


@pytest.fixture
def topology(
    database: str, redis_url: str, redis_prefix: str, tmp_path: Path
) -> Iterator[Topology]:
    settings, _ = environment_file(DEPLOY / "freehours.env.example")
    env = {
        **settings,
        "FREEHOURS_DATABASE_URL": database,
        "FREEHOURS_REDIS_URL": redis_url,
        "FREEHOURS_REDIS_PREFIX": redis_prefix,
        "FREEHOURS_LOG_LEVEL": "debug",  # the scrapes' lines too: which process answered
        "FREEHOURS_JOB_POLL_SECONDS": "0.2",
    }
    runtime = tmp_path / "run"
    (runtime / "freehours-api").mkdir(parents=True)  # the unit's RuntimeDirectory, empty
    running = Topology(env, runtime)
    try:
        yield running
    finally:
        running.stop_all()


def reads(day: date) -> dict[str, object]:
    first = datetime(day.year, day.month, day.day, tzinfo=NEM_TIME)
    values = [
        {"start": (first + timedelta(minutes=30 * n)).isoformat(), "kwh": "0.250"}
        for n in range(48)
    ]
    return {"nmi": NMI, "suffix": "E1", "interval_minutes": 30, "reads": values}


def settle(url: str, key: str, day: date) -> tuple[httpx.Response, str]:
    """POST the settlement of ``day`` on a new connection; the answer and its trace id."""
    trace_id, headers = traced()
    body = {"nmi": NMI, "date": day.isoformat()}
    headers = {**headers, "Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=url, timeout=20) as client:
        return client.post(SETTLEMENTS, json=body, headers=headers), trace_id


def test_two_api_processes_and_two_workers_hold_the_settlement_contract(
    topology: Topology, database: str, tmp_path: Path
) -> None:
    env = topology.env
    upgraded = " ".join(freehours("db", "upgrade", env=env).split())  # however it is wrapped
    assert upgraded.endswith(f" is at schema revision {schema.head_revision()}")
    admin = freehours("keys", "create", "--scope", "admin", "--name", "ops", env=env)
    auth = {"Authorization": f"Bearer {admin}"}

    port = free_port()
    api_argv = exec_start("freehours-api.service")
    api_argv[api_argv.index("--port") + 1] = str(port)
    assert option(api_argv, "--processes") == "4"
    api_argv[api_argv.index("--processes") + 1] = "2"
    log = ServeLog(tmp_path / "api.log")
    api_unit = unit(DEPLOY / "systemd" / "freehours-api.service")["Service"]
    serve = topology.start(api_argv, api_unit["Environment"], log.path)
    url = f"http://127.0.0.1:{port}"
    wait_until_up(url, serve, deadline_s=60)
    (starting,) = log.events("api_processes_starting")
    assert starting["metrics_directory"] == str(topology.runtime / "freehours-api")

    with httpx.Client(base_url=url, timeout=20, headers=auth) as api:
        assert api.put("/v1/plans/test-nsw", json=PLAN).status_code == 200
        customer = {"plan_id": "test-nsw", "region": "NSW"}
        assert api.put(f"/v1/customers/{NMI}", json=customer).status_code == 200
        posted = api.post(
            "/v1/meter-readings",
            json=reads(SETTLED_BY_API),
            headers={"Idempotency-Key": f"reads-{SETTLED_BY_API}"},
        )
        assert posted.json() == {"accepted": 48, "superseded": 0, "unchanged": 0}

    # Settled once by one API process, before any worker runs ...
    first, first_trace = settle(url, admin, SETTLED_BY_API)
    assert first.status_code == 200
    assert first.json()["status"] == "COMPLETED"
    assert first.json()["free_kwh"] == "1.500"  # six half-hours of 0.25 kWh in 11:00-14:00
    assert "Idempotent-Replayed" not in first.headers
    settled_by = log.pid_of(first_trace)
    # ... and the same answer, as a replay, from the other (new connections until it answers).
    replays: list[httpx.Response] = []
    replayed_by: set[int] = set()
    for _ in range(40):
        again, trace_id = settle(url, admin, SETTLED_BY_API)
        replays.append(again)
        replayed_by.add(log.pid_of(trace_id))
        if replayed_by - {settled_by}:
            break
    assert replayed_by - {settled_by}, f"every replay was answered by {settled_by}"
    for again in replays:
        assert again.status_code == 200
        assert again.headers["Idempotent-Replayed"] == "true"
        assert again.json() == first.json()
    answered_by = {settled_by} | replayed_by
    assert len(answered_by) == 2
    assert serve.pid not in answered_by

    # The workers, as their unit runs them, each on a metrics port of its own.
    worker_ports = [free_port(), free_port()]
    for n, worker_port in enumerate(worker_ports):
        argv = exec_start("freehours-worker@.service", str(worker_port))
        topology.start(argv, [], tmp_path / f"worker-{n}.log")
    with httpx.Client(base_url=url, timeout=20, headers=auth) as api:
        posted = api.post(
            "/v1/meter-readings",
            json=reads(SETTLED_BY_WORKERS),
            headers={"Idempotency-Key": f"reads-{SETTLED_BY_WORKERS}"},
        )
        assert posted.status_code == 200

        def settled_by_workers() -> dict[str, object] | None:
            answer = api.get(f"{SETTLEMENTS}/{NMI}/{SETTLED_BY_WORKERS}")
            state: dict[str, object] = answer.json() if answer.status_code == 200 else {}
            return state if state.get("status") == "COMPLETED" else None

        state = eventually(settled_by_workers, within=40, what="the workers settling the day")
    assert state["free_kwh"] == "1.500"

    def completed_by_workers() -> float:
        # Each worker serves its own counts (they are not merged): their sum.
        return sum(
            Samples.scrape(worker_port).count(
                "freehours_job_attempts_total", kind="settle", outcome="completed"
            )
            for worker_port in worker_ports
        )

    # Both days' jobs: the one the API settled first (found COMPLETED) and the other.
    eventually(lambda: completed_by_workers() == 2, within=20, what="two settlement jobs run")

    # Whichever API process a scrape reaches, it counts the requests both answered.
    posts = 1 + len(replays)
    scraped_by: set[int] = set()
    for _ in range(40):
        trace_id, headers = traced()
        samples = Samples.of(httpx.get(f"{url}/metrics", headers=headers, timeout=20).text)
        assert (
            samples.value(
                "freehours_http_requests_total", method="POST", route=SETTLEMENTS, status="200"
            )
            == posts
        )
        completed = {"status": "COMPLETED"}
        assert (
            samples.value("freehours_settlement_outcomes_total", **completed, replayed="false") == 1
        )
        assert (
            samples.value("freehours_settlement_outcomes_total", **completed, replayed="true")
            == posts - 1
        )
        assert samples.value("freehours_jobs_stuck") == 0
        scraped_by.add(log.pid_of(trace_id))
        if scraped_by == answered_by:
            break
    assert scraped_by == answered_by

    # Once each, whoever asked: one ledger entry per quota.
    with Store.open(database) as store, store.read() as unit_of_work:
        ledger = unit_of_work.quotas.ledger(NMI)
    assert sorted(entry.date for entry in ledger) == [SETTLED_BY_API, SETTLED_BY_WORKERS]

    # SIGTERM: the API (its processes drained, then the supervisor) and the workers exit 0.
    assert topology.stop_all() == [0, 0, 0]
