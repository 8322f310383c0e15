"""Jobs: trivial jobs per second with 1, 2 and 4 worker processes on PostgreSQL, and the delay
from a job falling due to its start.

A fresh database is created for the run and dropped after it (``FREEHOURS_BENCH_DATABASE_URL``,
default the local PostgreSQL). For each number of processes:

- throughput: ``JOBS`` jobs, all due now, enqueued in one transaction while the workers wait;
  the time until every one is COMPLETED.
- start delay: ``DELAYED`` jobs due one after another over ``DELAY_SPAN`` (far below the
  throughput, so what is measured is how late an idle worker notices a due job, not a queue);
  each handler notes how long after ``run_at`` it started.

The workers are ``python -m benchmarks.bench_jobs worker URL`` processes: a ``Worker`` with
default settings (concurrency 4, batches of 64) whose one task does nothing, logging at warning
level (a line per job would measure the log sink).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from types import FrameType
from typing import Any

import sqlalchemy as sa
import structlog

from freehours.jobs import queue
from freehours.jobs.job import Done, Job, JobState
from freehours.jobs.worker import Worker
from freehours.store.database import Store
from freehours.store.jobs import NOTIFY_CHANNEL
from freehours.store.tables import jobs

DEFAULT_ADMIN_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
PROCESSES = (1, 2, 4)
JOBS = 10_000
DELAYED = 1_000
DELAY_SPAN = timedelta(seconds=4)
GOAL_RATE = 1_000  # jobs/s
GOAL_P99 = 1.0  # seconds
KIND = "noop"
#: Long enough for a worker process to start on a loaded 2-core machine.
READY_TIMEOUT = 60.0
#: A run that has not finished in this long is broken, not slow.
RUN_TIMEOUT = 300.0


def run() -> None:
    admin_url = os.environ.get("FREEHOURS_BENCH_DATABASE_URL", DEFAULT_ADMIN_URL)
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    name = f"freehours_bench_jobs_{uuid.uuid4().hex[:8]}"
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    url = sa.make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    try:
        with Store.open(url) as store:
            for processes in PROCESSES:
                _measure(store, url, processes)
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def _measure(store: Store, url: str, processes: int) -> None:
    with store.write() as unit:
        unit.connection.execute(jobs.delete())
    workers = [_start_worker(url) for _ in range(processes)]
    try:
        for worker in workers:
            _await_ready(worker)
        now = datetime.now(UTC)
        started = time.perf_counter()
        _enqueue(store, [now] * JOBS, phase="throughput")
        _await_completed(store, JOBS)
        rate = JOBS / (time.perf_counter() - started)
        first = datetime.now(UTC) + timedelta(seconds=1)
        step = DELAY_SPAN / DELAYED
        _enqueue(store, [first + step * n for n in range(DELAYED)], phase="delay")
        _await_completed(store, JOBS + DELAYED)
    finally:
        delays = [delay for worker in workers for delay in _stop_worker(worker)]
    p50, p99 = _percentile(delays, 50), _percentile(delays, 99)
    plural = "process" if processes == 1 else "processes"
    print(
        f"jobs postgres {processes} worker {plural}: {rate:,.0f} jobs/s "
        f"(goal >= {GOAL_RATE:,}): {rate / GOAL_RATE:.2f}x; "
        f"start delay p50 {p50 * 1000:,.0f} ms p99 {p99 * 1000:,.0f} ms "
        f"(goal < {GOAL_P99:g} s): {GOAL_P99 / max(p99, 1e-6):.2f}x"
    )


def _enqueue(store: Store, due: list[datetime], *, phase: str) -> None:
    """Insert jobs in bulk (one statement, not ``queue.enqueue`` per job: the bench measures the
    workers), and NOTIFY as ``enqueue`` does."""
    now = datetime.now(UTC)
    rows = [
        {
            "kind": KIND,
            "key": f"{phase}-{n}",
            "payload": json.dumps({"phase": phase}),
            "state": JobState.AVAILABLE.value,
            "run_at": run_at,
            "deadline": run_at + queue.DEFAULT_DEADLINE,
            "attempts": 0,
            "max_attempts": queue.DEFAULT_MAX_ATTEMPTS,
            "snoozes": 0,
            "runs": 0,
            "created_at": now,
        }
        for n, run_at in enumerate(due)
    ]
    with store.write() as unit:
        unit.connection.execute(jobs.insert(), rows)
        store.driver.notify(unit.connection, NOTIFY_CHANNEL)


def _await_completed(store: Store, total: int) -> None:
    deadline = time.monotonic() + RUN_TIMEOUT
    while time.monotonic() < deadline:
        with store.read() as unit:
            completed = unit.connection.scalar(
                sa.select(sa.func.count()).where(jobs.c.state == JobState.COMPLETED.value)
            )
        if completed == total:
            return
        time.sleep(0.02)
    raise RuntimeError(f"only {completed} of {total} jobs completed in {RUN_TIMEOUT:g} s")


def _start_worker(url: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "benchmarks.bench_jobs", "worker", url],
        stdout=subprocess.PIPE,
        text=True,
    )


def _await_ready(worker: subprocess.Popen[str]) -> None:
    assert worker.stdout is not None
    line = worker.stdout.readline()
    if line.strip() != "ready":
        raise RuntimeError(f"worker process said {line!r} instead of 'ready'")


def _stop_worker(worker: subprocess.Popen[str]) -> list[float]:
    worker.send_signal(signal.SIGTERM)
    out, _ = worker.communicate(timeout=READY_TIMEOUT)
    if worker.returncode != 0:
        raise RuntimeError(f"worker process exited with {worker.returncode}")
    delays: list[float] = json.loads(out)
    return delays


def _percentile(values: list[float], percent: int) -> float:
    if len(values) < 2:
        return values[0] if values else 0.0
    return statistics.quantiles(values, n=100, method="inclusive")[percent - 1]


def worker_main(url: str) -> None:
    """A worker process: run ``noop`` jobs until SIGTERM, then print the start delays seen."""
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    delays: list[float] = []

    def noop(job: Job) -> Done:
        if job.payload["phase"] == "delay":
            delays.append((datetime.now(UTC) - job.run_at).total_seconds())
        return Done()

    stop = threading.Event()

    def request_stop(_signal: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    with Store.open(url) as store:
        worker = Worker(store, {KIND: noop})
        worker.start()
        print("ready", flush=True)
        while not stop.wait(0.5):
            pass
        worker.stop(grace=5.0)
    print(json.dumps(delays), flush=True)


def main(argv: list[str]) -> Any:
    if argv[:1] == ["worker"]:
        return worker_main(argv[1])
    return run()


if __name__ == "__main__":
    main(sys.argv[1:])
