"""Failures the protocol's model checker and its stateful tests found, kept as tests of the real
code on SQLite and PostgreSQL (docs/protocol.md, "What it found")."""

from __future__ import annotations

import random
from datetime import timedelta
from decimal import Decimal

from freehours.cache.quota import MemoryQuotaCache
from freehours.clock import ManualClock
from freehours.domain.settlement import QuotaStatus
from freehours.jobs.job import JobState
from freehours.jobs.retry import RetryPolicy
from freehours.settlement.ingest import Ingestion
from freehours.settlement.model import FaultPoint, Outcome, SettlementPolicy
from freehours.settlement.service import Settlements
from freehours.store.database import Store
from freehours.workers.settle import KIND, SettlementJobs, settlement_tasks
from freehours.workers.worker import Worker
from tests.test_settlement import DAY, NMI, STAMP, WINDOW_END, Faults, add_customer, day_row

POLICY = SettlementPolicy()
KEY = f"{NMI}:{DAY.isoformat()}"


def test_a_waiting_job_settles_the_version_a_revision_opened_though_the_cache_says_settled(
    store: Store,
) -> None:
    """The model's MUTANT_JOB_TRUSTS_CACHE, as the code was: a client settles version 1 (the
    cache says COMPLETED v1) while the day's job waits; a revision opens version 2, whose job is
    the waiting one (unique per key: its payload still says version 1), and the cache write of
    version 2 is lost. The job must still settle version 2, not replay version 1 from the cache
    and complete with version 2 left PENDING for ever."""
    clock = ManualClock(WINDOW_END - timedelta(minutes=5))
    faults = Faults()
    add_customer(store, clock.now())
    settlements = Settlements(store, MemoryQuotaCache(clock), clock, POLICY, faults)
    ingestion = Ingestion(store, settlements, clock, schedule=SettlementJobs(settlements))
    retry = RetryPolicy(clock, random.Random(1))
    worker = Worker(store, settlement_tasks(settlements), clock=clock, retry=retry)
    ingestion.file([day_row("0.500", stamp=STAMP)])  # the job, due at the window's end + grace
    clock.set(WINDOW_END + POLICY.grace)
    assert settlements.settle(NMI, DAY).outcome is Outcome.SETTLED  # a client, first: v1
    faults.add(FaultPoint.CACHE_WRITE, ConnectionError("redis down"))
    ingestion.file([day_row("0.600", stamp=STAMP + timedelta(hours=1))])  # v2; its write lost
    assert settlements.settle(NMI, DAY).quota.version == 1  # the cache still says v1
    assert worker.run_due() == 1
    quota = settlements.state(NMI, DAY)
    assert quota is not None
    assert (quota.version, quota.status, quota.free_kwh) == (
        2,
        QuotaStatus.COMPLETED,
        Decimal("3.600"),
    )
    with store.read() as unit:
        assert unit.jobs.history(KIND, KEY)[-1].state is JobState.COMPLETED
        assert sum(entry.kwh for entry in unit.quotas.ledger(NMI)) == Decimal("3.600")
