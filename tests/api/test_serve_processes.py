"""``freehours serve --processes N`` as real processes (SQLite here; PostgreSQL and Redis in
tests/deploy): N API processes answering on one port under one supervisor, their metrics merged
in a directory of their own, a process that dies replaced, one that cannot start stopping them
all, and SIGTERM letting the requests in flight finish."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from freehours.api.supervisor import MAX_QUICK_DEATHS
from freehours.observability.exposition import MULTIPROC_DIR
from tests.metrics import Samples
from tests.servers import (
    FREEHOURS,
    ServeLog,
    api_process,
    free_port,
    freehours,
    stop,
    traced,
    wait_until_up,
)
from tests.support import eventually

pytestmark = pytest.mark.slow

#: A GET that every process logs at info (a probe would be at debug): a quota nobody has.
PROBE = "/v1/free-energy/settlements/NOBODY0001/2026-07-01"
PROBE_ROUTE = "/v1/free-energy/settlements/{nmi}/{day}"


@pytest.fixture
def key(database: dict[str, str]) -> str:
    return freehours("keys", "create", "--scope", "read", env=database)


def answered_by(url: str, key: str, log: ServeLog) -> int:
    """The pid of the API process that answers a request on a new connection."""
    trace_id, headers = traced()
    with httpx.Client(base_url=url, timeout=10) as client:
        answer = client.get(PROBE, headers={**headers, "Authorization": f"Bearer {key}"})
    assert answer.status_code < 500, answer.text
    return log.pid_of(trace_id)


def probes_counted(url: str, headers: dict[str, str] | None = None) -> float:
    """The probes answered, as the merged /metrics of whichever process answers count them."""
    text = httpx.get(f"{url}/metrics", headers=headers, timeout=10).text
    return sum(
        value
        for (name, labels), value in Samples.of(text).items()
        if name == "freehours_http_requests_total" and ("route", PROBE_ROUTE) in labels
    )


def answering(url: str, key: str, log: ServeLog, connections: int = 60) -> set[int]:
    """New connections until two processes have answered (the kernel hands each connection to
    one of them), or ``connections`` were made; the pids that answered."""
    pids: set[int] = set()
    for _ in range(connections):
        pids.add(answered_by(url, key, log))
        if len(pids) == 2:
            break
    return pids


def both_answer(url: str, key: str, log: ServeLog) -> set[int]:
    pids = answering(url, key, log)
    if len(pids) < 2:
        pytest.fail(f"60 connections, all answered by {pids}")
    return pids


@pytest.fixture
def serving(
    database: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, subprocess.Popen[bytes], ServeLog]]:
    monkeypatch.delenv(MULTIPROC_DIR, raising=False)  # serve makes a directory of its own
    log = ServeLog(tmp_path / "serve.log")
    env = {**database, "FREEHOURS_LOG_LEVEL": "debug"}  # scrapes' lines too: who answered
    with api_process(env, extra_args=["--processes", "2"], log=log.path) as (url, process):
        yield url, process, log


def test_two_processes_answer_on_one_port_and_each_serves_the_metrics_of_both(
    serving: tuple[str, subprocess.Popen[bytes], ServeLog], key: str
) -> None:
    url, process, log = serving
    (starting,) = log.events("api_processes_starting")
    assert starting["processes"] == 2
    assert starting["pid"] == process.pid
    directory = Path(starting["metrics_directory"])
    assert directory.is_dir()

    pids = both_answer(url, key, log)
    assert process.pid not in pids  # the supervisor serves nothing itself
    probes = [line for line in log.events("request_finished") if line["route"] == PROBE_ROUTE]
    assert {line["pid"] for line in probes} == pids
    # Whichever process a scrape reaches, it counts the requests of both.
    scraped_by: set[int] = set()
    for _ in range(60):  # new connections, until each process has answered a scrape
        trace_id, headers = traced()
        assert probes_counted(url, headers) == len(probes)
        scraped_by.add(log.pid_of(trace_id))
        if scraped_by == pids:
            break
    assert scraped_by == pids

    assert stop(process) == 0  # SIGTERM: each process drains and exits, then the supervisor
    assert not directory.exists()  # its own directory, removed once they have stopped


def test_a_process_that_dies_is_replaced_and_its_counts_stay_in_the_sum(
    serving: tuple[str, subprocess.Popen[bytes], ServeLog], key: str
) -> None:
    url, process, log = serving
    victim, survivor = sorted(both_answer(url, key, log))
    os.kill(victim, signal.SIGKILL)

    (replaced,) = eventually(
        lambda: log.events("api_process_replaced"), within=30, what="the replacement"
    )
    assert (replaced["process_pid"], replaced["exit_code"]) == (victim, -signal.SIGKILL)
    assert replaced["pid"] == process.pid
    successor = eventually(
        # Until the new process listens, every connection reaches the survivor.
        lambda: next(iter(answering(url, key, log, connections=10) - {survivor}), None),
        within=60,
        what="the new process answering",
    )
    assert successor not in (victim, survivor)
    # The dead process's requests are still counted (its files stay): a counter never goes back.
    probes = [line for line in log.events("request_finished") if line["route"] == PROBE_ROUTE]
    assert victim in {line["pid"] for line in probes}
    assert probes_counted(url) == len(probes)
    assert process.poll() is None


def test_a_process_that_keeps_dying_is_restarted_ever_later_then_given_up_on(
    serving: tuple[str, subprocess.Popen[bytes], ServeLog],
) -> None:
    # Every API process is killed as soon as it is there, as one that crashes at its first
    # request would die: no restart loop, but waits that double, then exit 1 saying so.
    _, process, log = serving
    killed: set[int] = set()
    deadline = time.monotonic() + 90
    while process.poll() is None and time.monotonic() < deadline:
        for child in psutil.Process(process.pid).children():
            with contextlib.suppress(psutil.NoSuchProcess):
                if child.pid not in killed and "spawn_main" in " ".join(child.cmdline()):
                    child.kill()
                    killed.add(child.pid)
        time.sleep(0.05)
    assert process.wait(timeout=30) == 1
    replaced = log.events("api_process_replaced")
    waits = sorted({line["after_seconds"] for line in replaced if line["quick_deaths"]})
    assert waits == [0.5, 1.0, 2.0, 4.0]  # after the 1st to 4th quick death of a slot
    assert len(replaced) <= 2 * (MAX_QUICK_DEATHS - 1)  # two slots, each given up at the 5th
    assert len(killed) <= 2 * MAX_QUICK_DEATHS
    assert log.path.read_text().strip().splitlines()[-1] == (
        f"error: an API process died {MAX_QUICK_DEATHS} times in a row within 10 s of starting"
        " (its api_process_replaced lines say how); the others were stopped"
    )


def test_sigterm_lets_a_request_in_flight_finish(
    serving: tuple[str, subprocess.Popen[bytes], ServeLog], database: dict[str, str]
) -> None:
    url, process, _ = serving
    ingest = freehours("keys", "create", "--scope", "ingest", env=database)
    reads = ",".join(
        f'{{"start": "2026-07-01T{hour:02d}:{minute:02d}:00+10:00", "kwh": "0.100"}}'
        for hour in range(24)
        for minute in (0, 30)
    )
    body = f'{{"nmi": "SERVE00002", "suffix": "E1", "interval_minutes": 30, "reads": [{reads}]}}'
    sent = threading.Event()

    def slowly() -> Iterator[bytes]:
        half = len(body) // 2
        yield body[:half].encode()
        sent.set()
        time.sleep(2.0)  # SIGTERM arrives meanwhile
        yield body[half:].encode()

    answers: list[httpx.Response] = []

    def post() -> None:
        headers = {
            "Authorization": f"Bearer {ingest}",
            "Idempotency-Key": "in-flight",
            "Content-Type": "application/json",
        }
        answers.append(
            httpx.post(f"{url}/v1/meter-readings", content=slowly(), headers=headers, timeout=30)
        )

    client = threading.Thread(target=post)
    client.start()
    assert sent.wait(10)
    time.sleep(0.3)  # the first half is at the server
    process.send_signal(signal.SIGTERM)
    client.join(30)
    assert [answer.status_code for answer in answers] == [200]
    assert answers[0].json() == {"accepted": 48, "superseded": 0, "unchanged": 0}
    assert process.wait(timeout=60) == 0
    with pytest.raises(httpx.TransportError):  # and nothing listens any more
        httpx.get(f"{url}/healthz", timeout=2)


def test_a_process_that_cannot_start_stops_the_serve_with_one_line(
    database: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The database opens (the supervisor checks it first); each API process then fails to open
    # its Redis client (a URL of the right scheme whose port is not a number).
    monkeypatch.delenv(MULTIPROC_DIR, raising=False)
    result = subprocess.run(
        [FREEHOURS, "serve", "--port", str(free_port()), "--processes", "2"],
        env={**os.environ, **database, "FREEHOURS_REDIS_URL": "redis://nowhere:notaport"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last == (
        "error: an API process could not start (its api_process_failed line says why); "
        "the others were stopped"
    )
    assert '"event": "api_process_failed"' in result.stderr
    assert "Port could not be cast to integer value" in result.stderr  # the reason, logged


def test_an_application_server_of_ones_own_can_name_the_factory(
    database: dict[str, str], key: str
) -> None:
    port = free_port()
    command = [
        *(sys.executable, "-m", "uvicorn", "--factory"),
        "freehours.api.server:create_app_from_env",
        *("--http", "freehours.api.server:HeaderTimeout"),
        *("--port", str(port), "--workers", "2"),
    ]
    env = {**os.environ, **database, "FREEHOURS_HEADER_SECONDS": "0.5"}
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(url, process)
        answer = httpx.get(f"{url}{PROBE}", headers={"Authorization": f"Bearer {key}"})
        assert answer.status_code < 500
        # The header deadline of FREEHOURS_HEADER_SECONDS, read by the protocol it was named.
        with socket.create_connection(("127.0.0.1", port), timeout=10) as silent:
            began = time.monotonic()
            assert silent.recv(1) == b""
            assert time.monotonic() - began < 5
    finally:
        process.terminate()
        assert process.wait(timeout=60) == 0
