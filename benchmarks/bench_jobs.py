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

Then settlements (``python -m benchmarks.bench_jobs settlements`` runs this part alone): for 1
and 2 worker processes, ``SETTLE_QUOTAS`` customers with a day's meter data each (as
``bench_api.prepare`` makes them) in a fresh database, and their ``settle`` jobs enqueued due at
once (one statement, as ``schedule_settlements`` would write them); then ``freehours worker``
processes as deployed (default settings, JSON log lines on stderr, to /dev/null here; the quota
cache in Redis under a prefix of the run's own) settle them. The rate is the quotas over the
time from the first job's claim to the last one's completion, both as the job table recorded
them; the run fails unless every job completed ``settled`` at its first attempt with exactly one
ledger entry per quota. Goal (issue 18): a day of 1,000,000 customers settled within 10 minutes,
1,700 settlements/s. ``FREEHOURS_BENCH_FREEHOURS`` names another ``freehours`` executable to run
as the workers (another checkout's, to compare).
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
from collections.abc import Iterable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from types import FrameType
from typing import Any

import redis
import sqlalchemy as sa
import structlog
from rich.progress import Progress

from benchmarks.bench_api import prepare, quotas
from benchmarks.scale import size
from freehours.jobs import decisions
from freehours.jobs.job import Done, Job, JobState
from freehours.store.database import Store
from freehours.store.jobs import NOTIFY_CHANNEL, NewJob, new_job_row
from freehours.store.tables import jobs, ledger_entries
from freehours.workers import settle
from freehours.workers.worker import Worker
from tests.databases import fresh_postgres_database

DEFAULT_ADMIN_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
PROCESSES = size((1, 2, 4), (1,))
JOBS = size(10_000, 200)
DELAYED = size(1_000, 20)
DELAY_SPAN = timedelta(seconds=4)
GOAL_RATE = 1_000  # jobs/s
GOAL_P99 = 1.0  # seconds
KIND = "noop"
#: Long enough for a worker process to start on a loaded 2-core machine.
READY_TIMEOUT = 60.0
#: A run that has not finished in this long is broken, not slow.
RUN_TIMEOUT = 300.0
SETTLE_QUOTAS = size(20_000, 200)
SETTLE_PROCESSES = size((1, 2), (1,))
SETTLE_GOAL = 1_700  # settlements/s: 1,000,000 in 10 minutes
SETTLE_TIMEOUT = 600.0
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
_FINISHED = [state.value for state in JobState if state.is_finished]


def run() -> None:
    admin_url = os.environ.get("FREEHOURS_BENCH_DATABASE_URL", DEFAULT_ADMIN_URL)
    with (
        fresh_postgres_database(admin_url, prefix="freehours_bench") as url,
        Store.open(url) as store,
    ):
        for processes in PROCESSES:
            _measure(store, url, processes)
    run_settlements()


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
        delays = _stop_workers(workers)
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
            "deadline": run_at + decisions.DEFAULT_DEADLINE,
            "attempts": 0,
            "max_attempts": decisions.DEFAULT_MAX_ATTEMPTS,
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


def _stop_workers(workers: list[subprocess.Popen[str]]) -> list[float]:
    """Stop every worker process (each one, whatever another one did), then the start delays
    each printed: its last line of output (a line before it would be a "ready" never read)."""
    for worker in workers:
        worker.send_signal(signal.SIGTERM)
    outs = []
    for worker in workers:
        try:
            out, _ = worker.communicate(timeout=READY_TIMEOUT)
        except subprocess.TimeoutExpired:
            worker.kill()
            out, _ = worker.communicate()
        outs.append(out)
    delays: list[float] = []
    for worker, out in zip(workers, outs, strict=True):
        if worker.returncode != 0:
            raise RuntimeError(f"worker process exited with {worker.returncode}")
        delays += json.loads(out.splitlines()[-1])
    return delays


def _percentile(values: list[float], percent: int) -> float:
    if len(values) < 2:
        return values[0] if values else 0.0
    return statistics.quantiles(values, n=100, method="inclusive")[percent - 1]


def worker_main(url: str) -> None:
    """A worker process: run ``noop`` jobs until SIGTERM, then print the start delays seen."""
    # Its warnings on stderr, which the bench passes through: stdout carries "ready" and then
    # the delays, as JSON (a warning there, under load, once made the delays unreadable).
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )
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


def run_settlements() -> None:
    server = os.environ.get("FREEHOURS_BENCH_DATABASE_URL", DEFAULT_ADMIN_URL)
    for processes in SETTLE_PROCESSES:
        with fresh_postgres_database(server, prefix="freehours_bench") as url:
            _measure_settlements(url, processes)


def settle_job_rows(due: Iterable[tuple[str, date]], now: datetime) -> list[dict[str, Any]]:
    """Settle jobs of the quotas ``due``, each due ``now``, as rows of the jobs table: loaded in
    one statement, as a day's scheduler would have staged them."""
    return [
        new_job_row(
            NewJob(
                settle.KIND,
                f"{nmi}:{day.isoformat()}",
                {"nmi": nmi, "date": day.isoformat(), "version": 1},
                now,
            ),
            now,
        )
        for nmi, day in due
    ]


def _measure_settlements(url: str, processes: int) -> None:
    prepare(url, nmis=SETTLE_QUOTAS, days=1)
    due = quotas(SETTLE_QUOTAS, 1)
    now = datetime.now(UTC)
    rows = settle_job_rows(due, now)
    prefix = f"freehours-bench-{uuid.uuid4().hex[:8]}:"
    redis_url = os.environ.get("FREEHOURS_BENCH_REDIS_URL", DEFAULT_REDIS_URL)
    freehours = os.environ.get(
        "FREEHOURS_BENCH_FREEHOURS", str(Path(sys.executable).with_name("freehours"))
    )
    env = {
        **os.environ,
        "FREEHOURS_DATABASE_URL": url,
        "FREEHOURS_REDIS_URL": redis_url,
        "FREEHOURS_REDIS_PREFIX": prefix,
    }
    with Store.open(url) as store:
        with store.write() as unit:
            unit.connection.execute(jobs.insert(), rows)
            unit.connection.execute(sa.text("ANALYZE"))
        workers = [
            subprocess.Popen([freehours, "worker"], env=env, stderr=subprocess.DEVNULL)
            for _ in range(processes)
        ]
        try:
            _await_settled(store, len(rows), processes)
        finally:
            for worker in workers:
                worker.send_signal(signal.SIGTERM)
            for worker in workers:
                worker.wait(timeout=READY_TIMEOUT)
            client = redis.Redis.from_url(redis_url)
            for key in client.scan_iter(match=f"{prefix}*", count=1000):
                client.delete(key)
            client.close()
        with store.read() as unit:
            conn = unit.connection
            first, last = conn.execute(
                sa.select(sa.func.min(jobs.c.attempted_at), sa.func.max(jobs.c.finalized_at))
            ).one()
            settled_once = conn.scalar(
                sa.select(sa.func.count()).where(
                    jobs.c.state == JobState.COMPLETED.value,
                    jobs.c.outcome == "settled",
                    jobs.c.runs == 1,
                )
            )
            entries = conn.scalar(sa.select(sa.func.count()).select_from(ledger_entries))
            duplicates = unit.quotas.duplicate_credits()
    if (settled_once, entries, duplicates) != (len(rows), len(rows), 0):
        raise SystemExit(
            f"settlements: {settled_once} of {len(rows)} jobs settled at their first attempt, "
            f"{entries} ledger entries, {duplicates} duplicate credits"
        )
    rate = len(rows) / (last - first).total_seconds()
    plural = "process" if processes == 1 else "processes"
    print(
        f"jobs postgres settlements, {len(rows):,} quotas due at once, {processes} worker "
        f"{plural}: {rate:,.0f} settlements/s (goal >= {SETTLE_GOAL:,}, a day of 1,000,000 "
        f"quotas in 10 minutes): {rate / SETTLE_GOAL:.2f}x"
    )


def _await_settled(store: Store, total: int, processes: int) -> None:
    deadline = time.monotonic() + SETTLE_TIMEOUT
    finished = sa.select(sa.func.count()).where(jobs.c.state.in_(_FINISHED))
    with Progress(transient=True) as progress:
        task = progress.add_task(f"settling with {processes} worker(s)", total=total)
        while time.monotonic() < deadline:
            with store.read() as unit:
                done = unit.connection.scalar(finished) or 0
            progress.update(task, completed=done)
            if done == total:
                return
            time.sleep(0.25)
    raise RuntimeError(f"only {done} of {total} settlement jobs finished in {SETTLE_TIMEOUT:g} s")


def main(argv: list[str]) -> Any:
    if argv[:1] == ["worker"]:
        return worker_main(argv[1])
    if argv[:1] == ["settlements"]:
        return run_settlements()
    return run()


if __name__ == "__main__":
    main(sys.argv[1:])
