"""A worker process for the multi-process tests: ``python -m tests.jobs.worker_process URL``.

Runs a ``Worker`` with the test kinds until SIGTERM, then stops it gracefully and exits 0:

- ``record``: notes the job's id; every execution is noted, so a job run twice shows twice in
  the list the process prints as its last line (JSON, with its pid) when it exits;
- ``work``: prints ``working`` and takes ``payload["seconds"]`` of (simulated) work, for the
  graceful-stop test;
- ``settle``: the real settlement job; with ``--hang-after-claim`` every settlement hangs right
  after its claim is committed (the fault seam), so that the test can kill the process there.

Prints ``ready`` on stdout once the worker runs.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
from datetime import timedelta

from freehours import defaults
from freehours.cache.quota import MemoryQuotaCache
from freehours.clock import SystemClock
from freehours.domain.settlement import Quota
from freehours.jobs.job import Done, Job
from freehours.settlement.model import FaultPoint, SettlementPolicy
from freehours.settlement.service import Settlements
from freehours.store.database import Store
from freehours.workers.settle import KIND, SettleTask
from freehours.workers.worker import Worker, WorkerConfig
from tests.children import child_set_up


class HangAfterClaim:
    """The fault seam: a settlement that has just committed its claim never goes on."""

    def check(self, point: FaultPoint, quota: Quota) -> None:
        if point is FaultPoint.AFTER_CLAIM:
            print(f"hanging {quota.key}", flush=True)
            threading.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--lease", type=float, default=defaults.JOB_LEASE.total_seconds())
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--grace", type=float, default=10.0)
    parser.add_argument("--hang-after-claim", action="store_true")
    args = parser.parse_args()
    stop = child_set_up()
    with Store.open(args.url) as store:
        clock = SystemClock()
        faults = HangAfterClaim() if args.hang_after_claim else None
        # The default lock timeout, as long as the default lease: a killed holder's lock runs
        # out with its job's lease.
        settlements = Settlements(store, MemoryQuotaCache(clock), clock, SettlementPolicy(), faults)

        executed: list[int] = []

        def record(job: Job) -> Done:
            executed.append(job.id)
            return Done("recorded")

        def work(job: Job) -> Done:
            print(f"working {job.key}", flush=True)
            time.sleep(job.payload["seconds"])  # the work itself, not a wait for anything
            return Done("worked")

        worker = Worker(
            store,
            {"record": record, "work": work, KIND: SettleTask(settlements)},
            config=WorkerConfig(
                concurrency=args.concurrency,
                lease=timedelta(seconds=args.lease),
                poll=timedelta(seconds=0.2),
            ),
            clock=clock,
        )
        worker.start()
        print("ready", flush=True)
        while not stop.wait(0.2):
            pass
        worker.stop(args.grace)
    print(json.dumps({"pid": os.getpid(), "executed": executed}), flush=True)


if __name__ == "__main__":
    main()
