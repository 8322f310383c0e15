"""Jobs finishing while the heartbeat and the rescuer lock the live ones (PostgreSQL, where jobs
are partitioned by state): a job that finishes moves to ``jobs_done``, and a statement locking it
meanwhile meets a serialization error, not a row gone. The two run their statement again
(``Jobs._past_moves``) instead of failing a round: with a few thousand short jobs a second,
``make bench``'s workers logged ``worker_keeper_failed`` every few seconds, and renewals that
fail in a row let leases run out under jobs still running."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from freehours.jobs.decisions import Complete, Finish
from freehours.jobs.job import Job
from freehours.store.database import Store
from freehours.store.jobs import NewJob
from tests.jobs.support import postgres_only

NOW = datetime(2026, 7, 1, 4, 15, tzinfo=UTC)
LEASE = timedelta(seconds=30)
JOBS = 200

pytestmark = postgres_only


def _running(store: Store, worker: str) -> list[Job]:
    """``JOBS`` jobs, claimed by ``worker`` at ``NOW``."""
    with store.write() as unit:
        unit.jobs.enqueue_many([NewJob("settle", f"k{n}", {}, NOW) for n in range(JOBS)], now=NOW)
    with store.write() as unit:
        return unit.jobs.claim(worker, {"settle"}, JOBS, now=NOW, lease=LEASE)


def _finishing(store: Store, running: list[Job]) -> threading.Thread:
    """A thread finishing ``running`` a job a transaction, as a worker's dispatcher writes
    results: each one's row moves to ``jobs_done`` as it commits."""

    def finish() -> None:
        for job in running:
            with store.write() as unit:
                unit.jobs.finish([Finish(job, Complete(None))], now=NOW)

    return threading.Thread(target=finish, daemon=True)


def _while(finisher: threading.Thread, work: Callable[[], object]) -> list[object]:
    """``work()`` again and again while ``finisher`` runs; what each returned."""
    answers = []
    finisher.start()
    while finisher.is_alive():
        answers.append(work())
    finisher.join()
    return answers


def test_the_heartbeat_renews_while_the_workers_jobs_finish(store: Store) -> None:
    running = _running(store, "w1")

    def renew() -> int:
        with store.write() as unit:
            return unit.jobs.renew("w1", now=NOW + timedelta(seconds=10), lease=LEASE)

    counts = _while(_finishing(store, running), renew)
    assert len(counts) >= 5  # it ran throughout, never failing
    assert counts[0] > 0
    assert renew() == 0  # every job finished: none left to renew


def test_the_rescuer_finds_expired_leases_while_late_workers_finish(store: Store) -> None:
    """Every lease ran out; their worker, late, finishes the jobs one by one as the rescuer
    looks for expired leases (each look locks them all: the rescuer's statement)."""
    running = _running(store, "late")
    later = NOW + LEASE + timedelta(seconds=1)

    def expired() -> int:
        with store.write() as unit:
            return len(unit.jobs.expired(now=later, limit=JOBS))

    counts = _while(_finishing(store, running), expired)
    assert len(counts) >= 5
    assert counts[0] > 0
    assert expired() == 0
