"""Issue 32's webhook attacks on a real worker (SQLite, four threads, the system clock), each
figure printed beside its goal:

- a receiver that answers a byte every 3 s: its attempt ends at the deadline (15 s), where a
  timeout per read held the thread for 120 s;
- a receiver that accepts and never answers, 12 events queued for it: an unrelated batch of jobs
  (40 of 0.1 s, 1 s on four threads alone) on the same worker takes at most twice as long, where
  it took 50 times as long; at most ``MAX_IN_FLIGHT`` attempts are open at the receiver at once.

The run takes about 40 s.
"""

from __future__ import annotations

import logging
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import structlog

from benchmarks.scale import size
from freehours import defaults
from freehours.clock import SystemClock
from freehours.domain.webhooks import MAX_IN_FLIGHT, Destinations
from freehours.jobs.job import Done, Job
from freehours.store.database import Store
from freehours.store.jobs import NewJob
from freehours.store.webhooks import NewEvent
from freehours.webhooks.sender import HttpSender
from freehours.webhooks.service import Webhooks
from freehours.workers.webhook import webhook_tasks
from freehours.workers.worker import Worker, WorkerConfig
from tests.webhooks.receiver import Hostile, hostile

#: Seconds between the trickling receiver's bytes, and a webhook attempt's deadline: the default
#: (15 s), or 2 s in a smoke run (``benchmarks.scale``), which would otherwise wait it out.
TRICKLE = size(3.0, 0.5)
DEADLINE = size(defaults.WEBHOOK_DEADLINE.total_seconds(), 2.0)
QUEUED = size(12, 3)  # events queued for the silent receiver
UNRELATED = size(40, 5)  # the unrelated jobs, each of
UNRELATED_SECONDS = 0.1
SLOWDOWN_GOAL = 2.5  # the unrelated batch beside a silent receiver, over it alone
RUN_TIMEOUT = 120.0
KIND = "unrelated"
LOOPBACK = Destinations.parse("127.0.0.1/32")


def run() -> None:
    # Warnings only: a line per attempt and postponement would measure the log sink.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    with tempfile.TemporaryDirectory() as scratch:
        _trickling(Path(scratch) / "trickling.db")
        _silent(Path(scratch) / "silent.db")


#: The unrelated jobs finished, by batch (the part of their key before ``-``).
_FINISHED: Counter[str] = Counter()
_LOCK = threading.Lock()


def _worker(store: Store) -> tuple[Webhooks, Worker]:
    hooks = Webhooks(
        store, SystemClock(), send=HttpSender(LOOPBACK, deadline=DEADLINE), destinations=LOOPBACK
    )

    def unrelated(job: Job) -> Done:
        time.sleep(UNRELATED_SECONDS)
        with _LOCK:
            _FINISHED[job.key.partition("-")[0]] += 1
        return Done("done")

    config = WorkerConfig(concurrency=4, poll=timedelta(milliseconds=50), listen=False)
    return hooks, Worker(store, {**webhook_tasks(hooks), KIND: unrelated}, config=config)


def _publish(store: Store, count: int) -> None:
    with store.write() as unit:
        unit.webhooks.publish(
            [NewEvent("quota.completed", datetime.now(UTC), {"n": n}) for n in range(count)]
        )


def _trickling(path: Path) -> None:
    store = Store.open(f"sqlite:///{path}")
    hooks, worker = _worker(store)
    with hostile(TRICKLE) as receiver:
        hooks.register(receiver.url, ["quota.completed"])
        _publish(store, 1)
        started = time.monotonic()
        worker.start()
        try:
            _until(lambda: _attempts(store) >= 1)
        finally:
            worker.stop(grace=DEADLINE)
    took = time.monotonic() - started
    print(
        f"webhooks: a receiver trickling a byte every {TRICKLE:g} s held a thread {took:.1f} s"
        f" (goal: the {DEADLINE:g} s deadline; a timeout per read held it 120 s)"
    )
    store.close()


def _silent(path: Path) -> None:
    store = Store.open(f"sqlite:///{path}")
    hooks, worker = _worker(store)
    worker.start()
    try:
        alone = _unrelated_batch(store)
        with hostile(None) as receiver:
            hooks.register(receiver.url, ["quota.completed"])
            _publish(store, QUEUED)
            _until(lambda: receiver.requests >= 1)
            beside = _unrelated_batch(store)
            most_open = _most_open(receiver)
    finally:
        worker.stop(grace=DEADLINE)
    print(
        f"webhooks: {UNRELATED} unrelated jobs took {alone:.2f} s alone, {beside:.2f} s beside a"
        f" silent receiver with {QUEUED} events queued ({beside / alone:.1f}x, goal at most"
        f" {SLOWDOWN_GOAL:g}x; it was 50x); at most {most_open} attempts open at once"
        f" (goal {MAX_IN_FLIGHT})"
    )
    store.close()


def _unrelated_batch(store: Store) -> float:
    """Seconds from enqueueing ``UNRELATED`` unrelated jobs to the last one's completion."""
    batch = uuid.uuid4().hex
    now = datetime.now(UTC)
    with store.write() as unit:
        unit.jobs.enqueue_many(
            [NewJob(KIND, f"{batch}-{n}", {}, run_at=now) for n in range(UNRELATED)], now=now
        )
    started = time.monotonic()
    _until(lambda: _finished(batch) == UNRELATED)
    return time.monotonic() - started


def _most_open(receiver: Hostile) -> int:
    with receiver.lock:
        return receiver.most_open


def _attempts(store: Store) -> int:
    with store.read() as unit:
        return sum(d.attempts for d in unit.webhooks.deliveries())


def _finished(batch: str) -> int:
    with _LOCK:
        return _FINISHED[batch]


def _until(done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + RUN_TIMEOUT
    while not done():
        if time.monotonic() > deadline:
            raise SystemExit("webhooks: the run did not finish")
        time.sleep(0.02)


if __name__ == "__main__":
    run()
