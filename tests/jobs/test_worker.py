"""A ``Worker`` on its threads, on SQLite and PostgreSQL: jobs run once, failures end, stopping is
graceful, leases are renewed, and on PostgreSQL an enqueue wakes an idle worker."""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import REGISTRY
from structlog.testing import capture_logs

from freehours.clock import SystemClock
from freehours.jobs.job import Done, Job, JobId, JobState, Snooze, Task
from freehours.jobs.retry import RetryPolicy
from freehours.store.database import Store
from freehours.workers import rescuer
from freehours.workers.worker import Worker, WorkerConfig
from tests.jobs.support import postgres_only
from tests.support import eventually

#: Short enough that a test sees leases renewed and retries run within a second or two.
FAST = WorkerConfig(concurrency=2, lease=timedelta(seconds=1), poll=timedelta(seconds=0.05))
#: How long a test handler blocks at most before it gives up (a safety net, never reached).
BLOCK_SECONDS = 30.0


def enqueue(store: Store, kind: str, *keys: str, **options: object) -> JobId:
    """Jobs due now, in one transaction; the last one's id."""
    with store.write() as unit:
        for key in keys:
            job_id = unit.jobs.enqueue(kind, key, {}, run_at=datetime.now(UTC), **options)  # type: ignore[arg-type]
    assert job_id is not None
    return job_id


def job(store: Store, job_id: int) -> Job:
    with store.read() as unit:
        found = unit.jobs.get(job_id)
    assert found is not None
    return found


def states(store: Store) -> Counter[JobState]:
    with store.read() as unit:
        return Counter({s: n for s, n in unit.jobs.count_by_state().items() if n})


@pytest.fixture
def workers(store: Store) -> Iterator[list[Worker]]:
    """Workers the test starts; each is stopped at the end whatever happened."""
    started: list[Worker] = []
    yield started
    for worker in started:
        worker.stop(grace=5.0)


def start(
    workers: list[Worker],
    store: Store,
    tasks: dict[str, Task],
    *,
    config: WorkerConfig = FAST,
    retry: RetryPolicy | None = None,
) -> Worker:
    worker = Worker(store, tasks, config=config, retry=retry)
    workers.append(worker)
    worker.start()
    return worker


def test_due_jobs_each_run_once_and_complete(store: Store, workers: list[Worker]) -> None:
    ran: list[str] = []
    lock = threading.Lock()

    def record(job: Job) -> Done:
        with lock:
            ran.append(job.key)
        return Done("recorded")

    keys = [f"job-{n}" for n in range(150)]  # more than one batch
    enqueue(store, "record", *keys)
    start(workers, store, {"record": record})
    eventually(lambda: states(store)[JobState.COMPLETED] == len(keys), what="every job completed")
    assert sorted(ran) == sorted(keys)
    assert states(store) == Counter({JobState.COMPLETED: len(keys)})


def _discarded(kind: str, reason: str) -> float:
    sample = REGISTRY.get_sample_value(
        "freehours_jobs_discarded_total", {"kind": kind, "reason": reason}
    )
    return sample or 0.0


def test_a_job_that_always_fails_is_discarded_within_its_deadline_and_the_rest_go_on(
    store: Store, workers: list[Worker]
) -> None:
    def fail(job: Job) -> Done:
        raise ConnectionError("the settlement API is down")

    deadline = datetime.now(UTC) + timedelta(seconds=30)
    doomed = enqueue(store, "fail", "doomed", max_attempts=3, deadline=deadline)
    enqueue(store, "ok", *(f"ok-{n}" for n in range(20)))
    before = _discarded("fail", "attempts")
    quick = RetryPolicy(
        SystemClock(), random.Random(3), base=timedelta(seconds=0.01), cap=timedelta(seconds=0.1)
    )
    with capture_logs() as logs:
        start(workers, store, {"fail": fail, "ok": lambda job: Done()}, retry=quick)
        eventually(lambda: job(store, doomed).state is JobState.DISCARDED, what="the discard")
        eventually(lambda: states(store)[JobState.COMPLETED] == 20, what="the other jobs")
    discarded = job(store, doomed)
    assert (discarded.outcome, discarded.attempts) == ("attempts", 3)
    assert discarded.error == "ConnectionError: the settlement API is down"
    assert [(e.attempt, e.error) for e in discarded.errors] == [
        (n, "ConnectionError: the settlement API is down") for n in (1, 2, 3)
    ]
    assert all(e.at <= discarded.finalized_at for e in discarded.errors)
    assert discarded.finalized_at is not None
    assert discarded.finalized_at <= deadline
    assert _discarded("fail", "attempts") == before + 1
    (line,) = [entry for entry in logs if entry["event"] == "job_discarded"]
    assert (line["log_level"], line["job_id"], line["reason"]) == ("error", doomed, "attempts")


def test_a_snoozed_job_runs_again_when_due_without_counting_an_attempt(
    store: Store, workers: list[Worker]
) -> None:
    def later_then_done(job: Job) -> Done | Snooze:
        return Snooze(0.1, "not yet") if job.snoozes == 0 else Done("at last")

    job_id = enqueue(store, "later", "a")
    start(workers, store, {"later": later_then_done})
    done = eventually(
        lambda: (found := job(store, job_id)).state is JobState.COMPLETED and found,
        what="the snoozed job's completion",
    )
    assert (done.outcome, done.snoozes, done.attempts, done.runs) == ("at last", 1, 0, 2)


class Gate:
    """A handler that blocks until the test opens the gate, and says when it has started."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.opened = threading.Event()

    def __call__(self, job: Job) -> Done:
        self.entered.set()
        if not self.opened.wait(BLOCK_SECONDS):
            raise TimeoutError("the test never opened the gate")
        return Done("through the gate")


def running_through_a_gate(store: Store, workers: list[Worker]) -> tuple[Gate, JobId, Worker]:
    """A worker running a job that waits at a gate: the gate, the job's id, the worker."""
    gate = Gate()
    job_id = enqueue(store, "gated", "a")
    worker = start(workers, store, {"gated": gate})
    assert gate.entered.wait(BLOCK_SECONDS)
    return gate, job_id, worker


def test_stop_lets_a_running_job_finish_within_the_grace_period(
    store: Store, workers: list[Worker]
) -> None:
    gate, job_id, worker = running_through_a_gate(store, workers)
    outcome: list[bool] = []
    stopping = threading.Thread(target=lambda: outcome.append(worker.stop(grace=10.0)))
    stopping.start()
    gate.opened.set()
    stopping.join()
    assert outcome == [True]
    assert (job(store, job_id).state, job(store, job_id).outcome) == (
        JobState.COMPLETED,
        "through the gate",
    )


def test_stop_releases_a_job_that_outlasts_the_grace_period(
    store: Store, workers: list[Worker]
) -> None:
    gate, job_id, worker = running_through_a_gate(store, workers)
    with capture_logs() as logs:
        try:
            assert worker.stop(grace=0.1) is False
            released = job(store, job_id)
            assert (released.state, released.worker, released.attempts) == (
                JobState.AVAILABLE,
                None,
                0,
            )
        finally:
            gate.opened.set()
        eventually(
            lambda: any(entry["event"] == "job_finished" for entry in logs),
            what="the cut-short attempt's end",
        )
    # Its late result is not written: the job was given back, for another worker to run.
    assert job(store, job_id).state is JobState.AVAILABLE


def test_a_running_jobs_lease_is_renewed_while_it_runs(store: Store, workers: list[Worker]) -> None:
    gate = Gate()
    job_id = enqueue(store, "gated", "a")
    start(workers, store, {"gated": gate})
    assert gate.entered.wait(BLOCK_SECONDS)
    first = job(store, job_id).lease_until
    assert first is not None
    try:
        renewed = eventually(
            lambda: (lease := job(store, job_id).lease_until) is not None and lease > first,
            what="a renewed lease",
        )
        assert renewed
        assert job(store, job_id).state is JobState.RUNNING  # never rescued meanwhile
    finally:
        gate.opened.set()


def test_a_slow_upkeep_delays_no_renewal_and_no_rescue(
    store: Store, workers: list[Worker], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The upkeep (pruning, partitions) runs on a thread of its own: one that hangs leaves the
    keeper renewing leases, so a running job outlives many leases and is never rescued."""
    stuck = threading.Event()
    released = threading.Event()

    def hanging_prune(_store: Store, _before: datetime) -> int:
        stuck.set()
        released.wait(BLOCK_SECONDS)
        return 0

    monkeypatch.setattr(rescuer, "prune", hanging_prune)
    gate = Gate()
    job_id = enqueue(store, "gated", "a")
    start(workers, store, {"gated": gate})
    try:
        assert gate.entered.wait(BLOCK_SECONDS)
        assert stuck.wait(BLOCK_SECONDS), "the upkeep never ran"
        first = job(store, job_id).lease_until
        assert first is not None
        # Three leases (of FAST's 1 s) later, still held and renewed by the live worker.
        eventually(
            lambda: (
                (lease := job(store, job_id).lease_until) is not None
                and lease > first + 3 * FAST.lease
            ),
            what="leases renewed while the upkeep hangs",
        )
        assert (job(store, job_id).state, job(store, job_id).runs) == (JobState.RUNNING, 1)
    finally:
        gate.opened.set()
        released.set()
    eventually(lambda: job(store, job_id).state is JobState.COMPLETED, what="the job done")
    assert job(store, job_id).runs == 1  # never rescued


@postgres_only
def test_on_postgresql_an_enqueue_wakes_an_idle_worker_at_once(
    store: Store, workers: list[Worker]
) -> None:
    slow_poll = WorkerConfig(concurrency=1, poll=timedelta(seconds=60))
    start(workers, store, {"record": lambda job: Done()}, config=slow_poll)
    with store.read() as unit:
        assert unit.jobs.next_due({"record"}) is None  # the worker now waits up to 60 s
    job_id = enqueue(store, "record", "a")
    eventually(
        lambda: job(store, job_id).state is JobState.COMPLETED,
        within=5.0,
        what="the notified worker's run",
    )


class HeldGate(Gate):
    """A gated handler whose kind a worker holds one job of at a time."""

    hold = 1


def test_a_task_with_a_hold_is_claimed_one_job_per_worker_and_the_rest_wait_for_any_worker(
    store: Store, workers: list[Worker]
) -> None:
    gate = HeldGate()
    keys = [f"batch-{n}" for n in range(6)]
    enqueue(store, "held", *keys)
    ran: list[str] = []
    enqueue(store, "free", *(f"free-{n}" for n in range(3)))
    tasks: dict[str, Task] = {"held": gate, "free": lambda job: Done(ran.append(job.key))}
    first = start(workers, store, tasks)
    second = start(workers, store, tasks)
    # Each worker holds one gated job, though it has room for 66 more; the other kind still runs.
    eventually(lambda: len(ran) == 3, what="the jobs of the kind without a hold")

    def held() -> list[Job]:
        with store.read() as unit:
            return [unit.jobs.history("held", key)[-1] for key in keys]

    def running() -> list[Job]:  # a free job running as well would not be counted here
        return [found for found in held() if found.state is JobState.RUNNING]

    eventually(lambda: len(running()) == 2, what="a gated job on each worker")
    assert sorted(found.worker or "" for found in running()) == sorted([first.name, second.name])
    assert sum(found.state is JobState.AVAILABLE for found in held()) == 4
    gate.opened.set()
    eventually(lambda: states(store)[JobState.COMPLETED] == 9, what="every job completed")


def test_a_hold_that_is_not_a_positive_int_is_refused(store: Store) -> None:
    class Bad(Gate):
        hold = 0

    with pytest.raises(ValueError, match="hold must be a positive int, not 0"):
        Worker(store, {"bad": Bad()})
