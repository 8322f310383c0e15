"""Worker queues on real threads, on SQLite and PostgreSQL: while every runner of the webhook
queue is blocked on a receiver that never answers, settlements and invoicing run on their own
runners, within a bound; and the kinds of freehours' own tasks are each in their queue."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
from prometheus_client import REGISTRY

from freehours import defaults
from freehours.invoicing.model import BATCH_KIND, PLAN_KIND
from freehours.jobs.job import DEFAULT_QUEUE, Done, Job, JobState, Task, queue_name
from freehours.store.database import Store
from freehours.store.webhooks import DELIVERY_KIND
from freehours.workers import invoice, settle, webhook
from freehours.workers.worker import Worker, WorkerConfig
from tests.jobs.test_worker import BLOCK_SECONDS, enqueue, states
from tests.support import eventually

#: Two runners in each queue but the webhook queue's three: fewer than the deliveries waiting.
CONFIG = WorkerConfig(
    concurrency=2,
    queues={defaults.WEBHOOK_QUEUE: 3},
    lease=timedelta(seconds=5),
    poll=timedelta(seconds=0.05),
)
#: Settle and invoice jobs finish this soon with blocked webhook runners, on a loaded 2-core
#: machine: each does nothing, so any wait is for a runner. Blocked until the test ends (30 s)
#: instead, they would be seen to miss it.
BOUND_SECONDS = 10.0


class Receiver:
    """A webhook delivery's handler whose receiver never answers: it blocks until opened."""

    queue = defaults.WEBHOOK_QUEUE

    def __init__(self) -> None:
        self.waiting = 0
        self.lock = threading.Lock()
        self.answers = threading.Event()

    def __call__(self, job: Job) -> Done:
        with self.lock:
            self.waiting += 1
        assert self.answers.wait(BLOCK_SECONDS), "the test never let the receiver answer"
        return Done("delivered")


class Quick:
    """A handler of another queue that returns at once."""

    def __init__(self, queue: str) -> None:
        self.queue = queue

    def __call__(self, job: Job) -> Done:
        return Done("done")


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    opened = Receiver()
    yield opened
    opened.answers.set()  # whatever happened, the worker can stop


def _gauge(name: str, queue: str) -> float:
    return REGISTRY.get_sample_value(name, {"queue": queue}) or 0.0


def test_settlements_and_invoicing_run_while_every_webhook_runner_is_blocked(
    store: Store, receiver: Receiver
) -> None:
    tasks: dict[str, Task] = {
        DELIVERY_KIND: receiver,
        "settle": Quick(defaults.SETTLE_QUEUE),
        PLAN_KIND: Quick(defaults.INVOICE_QUEUE),
        BATCH_KIND: Quick(defaults.INVOICE_QUEUE),
    }
    busy_before = _gauge("freehours_worker_runners_busy", defaults.WEBHOOK_QUEUE)
    waiting_before = _gauge("freehours_worker_jobs_waiting", defaults.WEBHOOK_QUEUE)
    enqueue(store, DELIVERY_KIND, *(f"delivery-{n}" for n in range(8)))
    worker = Worker(store, tasks, config=CONFIG)
    worker.start()
    try:
        eventually(lambda: receiver.waiting == 3, what="every webhook runner blocked")
        # The five deliveries left are claimed, and wait for a webhook runner.
        assert eventually(
            lambda: (
                _gauge("freehours_worker_jobs_waiting", defaults.WEBHOOK_QUEUE) - waiting_before
                == 5
            ),
            what="the deliveries waiting",
        )
        assert _gauge("freehours_worker_runners_busy", defaults.WEBHOOK_QUEUE) - busy_before == 3
        started = time.monotonic()
        enqueue(store, "settle", *(f"nmi-{n}:2026-07-01" for n in range(40)))
        enqueue(store, PLAN_KIND, "run-1")
        enqueue(store, BATCH_KIND, *(f"run-1:{n}" for n in range(6)))
        eventually(
            lambda: states(store)[JobState.COMPLETED] == 47,
            within=BOUND_SECONDS,
            what="the settle and invoice jobs completed",
        )
        took = time.monotonic() - started
        assert receiver.waiting == 3, "a webhook runner was freed meanwhile"
        assert states(store)[JobState.RUNNING] == 8  # three delivering, five waiting
        assert took < BOUND_SECONDS
        receiver.answers.set()
        eventually(lambda: states(store)[JobState.COMPLETED] == 55, what="every job completed")
    finally:
        receiver.answers.set()
        assert worker.stop(grace=5.0)
    assert _gauge("freehours_worker_runners_busy", defaults.WEBHOOK_QUEUE) == busy_before
    assert _gauge("freehours_worker_jobs_waiting", defaults.WEBHOOK_QUEUE) == waiting_before


def test_freehours_own_kinds_each_run_in_their_queue() -> None:
    assert queue_name(settle.SettleTask) == defaults.SETTLE_QUEUE  # type: ignore[arg-type]
    assert queue_name(invoice.PlanTask) == defaults.INVOICE_QUEUE  # type: ignore[arg-type]
    assert queue_name(invoice.BatchTask) == defaults.INVOICE_QUEUE  # type: ignore[arg-type]
    assert queue_name(webhook.DeliveryTask) == defaults.WEBHOOK_QUEUE  # type: ignore[arg-type]
    assert queue_name(lambda job: Done(None)) == DEFAULT_QUEUE


def test_a_queue_name_or_size_that_is_not_one_is_refused(store: Store) -> None:
    with pytest.raises(ValueError, match="queue must be a non-empty str, not ''"):
        Worker(store, {"bad": Quick("")})
    with pytest.raises(ValueError, match="a worker's webhook must be a positive int, not 0"):
        WorkerConfig(queues={"webhook": 0})


class Held:
    """A settle job's handler that runs until the test lets it finish."""

    queue = defaults.SETTLE_QUEUE

    def __init__(self) -> None:
        self.running = threading.Event()
        self.release = threading.Event()

    def __call__(self, job: Job) -> Done:
        self.running.set()
        assert self.release.wait(BLOCK_SECONDS), "the test never let the settlement finish"
        return Done("settled")


class Counting:
    """A webhook delivery's handler that returns at once, counting its calls."""

    queue = defaults.WEBHOOK_QUEUE

    def __init__(self) -> None:
        self.calls = 0
        self.lock = threading.Lock()

    def __call__(self, job: Job) -> Done:
        with self.lock:
            self.calls += 1
        return Done("delivered")


@pytest.mark.parametrize("every", [60.0, 0.3])
def test_the_webhook_queue_yields_to_a_settlement_and_is_never_starved(
    store: Store, every: float
) -> None:
    """While a settle job runs, the webhook queue claims a job per runner once every
    ``background_every``: once in a minute, three deliveries (its runners) of the twenty due,
    the rest when the settlement ends; every 0.3 s, all twenty while it still runs."""
    held, deliveries = Held(), Counting()
    config = WorkerConfig(
        concurrency=2,
        queues={defaults.WEBHOOK_QUEUE: 3},
        lease=timedelta(seconds=5),
        poll=timedelta(seconds=0.05),
        background_every=timedelta(seconds=every),
    )
    worker = Worker(store, {"settle": held, DELIVERY_KIND: deliveries}, config=config)
    worker.start()
    try:
        enqueue(store, "settle", "nmi-1:2026-07-01")
        assert held.running.wait(BOUND_SECONDS)
        enqueue(store, DELIVERY_KIND, *(f"delivery-{n}" for n in range(20)))
        if every > 1:
            eventually(lambda: deliveries.calls == 3, what="one claim's deliveries")
            time.sleep(1.0)  # twenty cycles of the dispatcher at its poll
            assert deliveries.calls == 3, "the webhook queue claimed beside the settlement"
            held.release.set()
        eventually(lambda: deliveries.calls == 20, within=BOUND_SECONDS, what="every delivery")
        assert held.release.is_set() == (every > 1), "the deliveries waited for the settlement"
        held.release.set()
        eventually(lambda: states(store)[JobState.COMPLETED] == 21, what="every job completed")
    finally:
        held.release.set()
        assert worker.stop(grace=5.0)
