"""Invoice runs against a real PostgreSQL under races and crashes: 50 runs at once, a worker
killed inside its finalising transaction and one killed after it committed. Each run ends with
one invoice per account and period, and numbers without a gap."""

from __future__ import annotations

import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from freehours.clock import SystemClock
from freehours.domain.invoicing import DocumentType, Series
from freehours.invoicing.model import BATCH_KIND
from freehours.invoicing.service import Invoicing
from freehours.store.database import Store
from freehours.store.timeouts import Timeouts
from freehours.workers.invoice import invoicing_tasks
from freehours.workers.worker import Worker, WorkerConfig
from tests.children import Children
from tests.invoicing.support import AFTER_JULY, System
from tests.jobs.support import postgres_only
from tests.support import eventually

pytestmark = [pytest.mark.slow, postgres_only]

ROOT = Path(__file__).resolve().parents[2]
ACCOUNTS = 20


def check_exactly_once(store: Store, accounts: int) -> None:
    with store.read() as unit:
        documents = unit.invoices.list_documents(limit=10_000)
        serials = unit.invoices.serials(Series.INVOICE)
    invoices = [d for d in documents if d.document_type is DocumentType.INVOICE]
    assert len(invoices) == accounts
    assert len({(d.nmi, d.period_start) for d in invoices}) == accounts
    assert serials == list(range(1, accounts + 1))


@pytest.fixture
def system(store: Store, store_url: str) -> Iterator[System]:
    # Fifty runs at once share 15 pooled connections: each waits its turn for one, as long as
    # it takes (the default 5 s is an API request's limit).
    with Store.open(store_url, Timeouts(pool=300.0)) as patient:
        system = System.on(patient, batch_size=3)
        system.month(system.customers(ACCOUNTS))
        yield system


def test_fifty_runs_at_once_make_each_invoice_once(system: System) -> None:
    barrier = threading.Barrier(50)
    failures: list[BaseException] = []

    def run() -> None:
        try:
            barrier.wait()
            system.invoicing.run_once()
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    threads = [threading.Thread(target=run) for _ in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    check_exactly_once(system.store, ACCOUNTS)
    with system.store.read() as unit:
        runs = unit.invoices.list_runs(limit=100)
    assert len(runs) == 50
    assert sum(run.counts.invoices for run in runs) == ACCOUNTS
    assert all(run.finished for run in runs)


def test_fifty_runs_as_jobs_over_four_workers_make_each_invoice_once(system: System) -> None:
    barrier = threading.Barrier(50)

    def start() -> None:
        barrier.wait()
        system.invoicing.start_run()

    threads = [threading.Thread(target=start) for _ in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    tasks = invoicing_tasks(system.invoicing)
    workers = [
        Worker(system.store, tasks, config=WorkerConfig(concurrency=2), clock=system.clock)
        for _ in range(4)
    ]
    for worker in workers:
        worker.start()
    try:

        def finished() -> bool:
            with system.store.read() as unit:
                return all(run.finished for run in unit.invoices.list_runs(limit=100))

        eventually(finished, within=120.0, what="50 finished runs")
    finally:
        for worker in workers:
            worker.stop(grace=5.0)
    check_exactly_once(system.store, ACCOUNTS)


class WorkerProcess(Children):
    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url

    def start(self, *options: str) -> subprocess.Popen[str]:
        return self.start_module("tests.invoicing.invoice_worker", self.url, *options)


@pytest.fixture
def processes(store_url: str) -> Iterator[WorkerProcess]:
    running = WorkerProcess(store_url)
    yield running
    running.close()


@pytest.mark.parametrize("point", ["numbered", "committed"])
def test_a_worker_killed_mid_run_loses_no_invoice_and_makes_none_twice(
    system: System, processes: WorkerProcess, point: str
) -> None:
    # Started on the real clock, as the workers run on it (a manual clock's jobs would be past
    # their deadlines for them).
    run = Invoicing(system.store, SystemClock(), system.invoicing.policy).start_run(
        as_of=AFTER_JULY
    )
    doomed = processes.start("--hang-at", point, "--lease", "1")
    processes.wait_for(doomed, "hanging")
    doomed.send_signal(signal.SIGKILL)
    assert doomed.wait() == -signal.SIGKILL
    with system.store.read() as unit:
        before = unit.invoices.serials(Series.INVOICE)
    # Killed inside the transaction: nothing of it stayed. After it: its batch stayed, whole.
    assert before == ([] if point == "numbered" else [1, 2, 3, 4, 5])
    rescuer = processes.start("--lease", "1")
    processes.wait_for(rescuer, "ready")

    def finished() -> bool:
        with system.store.read() as unit:
            done = unit.invoices.get_run(run.run_id)
        return done is not None and done.finished

    eventually(finished, within=90.0, what="the run finished after the kill")
    check_exactly_once(system.store, ACCOUNTS)
    with system.store.read() as unit:
        done = unit.invoices.get_run(run.run_id)
        batches = [job for job in unit.jobs.every() if job.kind == BATCH_KIND and job.attempts]
    assert done is not None
    assert done.counts.invoices == ACCOUNTS
    assert done.batches_done == done.batches == 4  # 20 accounts, 5 a batch in the worker
    # The killed worker's batches (the one it hung in, and those it held waiting) were
    # attempted again once their leases ran out.
    assert batches
    assert all(job.error is not None and job.error.startswith("lease expired") for job in batches)
