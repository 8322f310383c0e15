"""A worker process for the invoicing process tests: ``python -m tests.invoicing.invoice_worker
URL [--hang-at POINT] [--lease SECONDS]``.

Runs the invoice-run and invoice-batch jobs (and the settlements) of the database at ``URL`` until
SIGTERM. With ``--hang-at numbered`` the first batch hangs inside its finalising transaction, its
numbers taken and its period rows locked; with ``--hang-at committed`` just after that
transaction commits, before its job is marked done: the test kills the process there. Prints
``ready`` once the worker runs, and ``hanging`` when it hangs.
"""

from __future__ import annotations

import argparse
import threading
from datetime import timedelta

from freehours.clock import SystemClock
from freehours.invoicing.model import InvoicingFaultPoint, InvoicingPolicy
from freehours.invoicing.service import Invoicing
from freehours.store.database import Store
from freehours.workers.invoice import invoicing_tasks
from freehours.workers.worker import Worker, WorkerConfig
from tests.children import child_set_up
from tests.invoicing.support import DEADLINE


class HangAt:
    """The first batch to reach ``point`` hangs there; from then on every other batch hangs at
    the next point it reaches, so that none finalises while the test kills the worker (its
    other thread would otherwise commit a second batch in the meantime)."""

    def __init__(self, point: InvoicingFaultPoint | None) -> None:
        self.point = point
        self.hanging = threading.Event()

    def check(self, point: InvoicingFaultPoint, batch: str) -> None:
        if self.hanging.is_set() or point is self.point:
            if not self.hanging.is_set():
                self.hanging.set()
                print("hanging", flush=True)
            threading.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--hang-at", default=None)
    parser.add_argument("--lease", type=float, default=30.0)
    args = parser.parse_args()
    stop = child_set_up()
    with Store.open(args.url) as store:
        clock = SystemClock()
        policy = InvoicingPolicy(data_deadline=DEADLINE, batch_size=5)
        invoicing = Invoicing(
            store,
            clock,
            policy,
            HangAt(InvoicingFaultPoint(args.hang_at) if args.hang_at else None),
        )
        config = WorkerConfig(
            concurrency=2, lease=timedelta(seconds=args.lease), poll=timedelta(seconds=0.2)
        )
        worker = Worker(store, invoicing_tasks(invoicing), config=config, clock=clock)
        worker.start()
        print("ready", flush=True)
        stop.wait()
        worker.stop(grace=5.0)


if __name__ == "__main__":
    main()
