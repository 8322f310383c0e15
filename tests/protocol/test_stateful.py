"""The protocol's invariants held by the real code: randomised rule-based tests (hypothesis's
stateful testing) drive the settlement service, ingestion, the job worker and the rescuer on
SQLite and PostgreSQL, with API requests, revisions, crashes and failures at the fault points,
lost cache writes and the clock moving past locks and leases interleaved, and check after every
step what the model checks (docs/protocol.md):

- never two ledger entries for one version;
- attempts never decrease while a version lives, and a terminal version never changes;
- a terminal answer is only ever given for a version the database holds terminal, and no
  answer names a version newer than the database's newest;
- once quiet (every due job run, every lock and lease expired and rescued), the newest version
  is terminal and, COMPLETED, its free energy is the newest data's and the ledger's sum for the
  day.

One database per test; every example settles an NMI of its own. ``FREEHOURS_STATEFUL_EXAMPLES``
sets the examples (``make verify`` runs more).
"""

from __future__ import annotations

import itertools
import os
import random
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from freehours.cache.quota import MemoryQuotaCache
from freehours.clock import ManualClock
from freehours.domain.reads import IntervalDay
from freehours.domain.settlement import Quota, QuotaStatus
from freehours.domain.time import Region
from freehours.jobs.retry import RetryPolicy
from freehours.settlement.ingest import Ingestion
from freehours.settlement.model import FaultPoint, Outcome, SettlementPolicy
from freehours.settlement.service import Settlements
from freehours.store.database import Store
from freehours.store.quotas import QuotaEvent
from freehours.workers.rescuer import rescue
from freehours.workers.settle import SettlementJobs, settlement_tasks
from freehours.workers.worker import Worker
from tests.test_settlement import DAY, DUE, PLAN, STAMP, Death, Faults

EXAMPLES = int(os.environ.get("FREEHOURS_STATEFUL_EXAMPLES", "12"))
STEPS = int(os.environ.get("FREEHOURS_STATEFUL_STEPS", "20"))
POLICY = SettlementPolicy(max_attempts=3)
TERMINAL_ANSWERS = {Outcome.SETTLED, Outcome.REPLAYED, Outcome.ABORTED}
#: Each example's own NMI (the database is the test's).
_NMIS = itertools.count(1)


def _row(nmi: str, value: Decimal, stamp_hours: int) -> IntervalDay:
    values = (value,) * 48
    return IntervalDay(nmi, "E1", DAY, 30, values, "A" * 48, STAMP + timedelta(hours=stamp_hours))


def _free(value: Decimal) -> Decimal:
    """The window 11:00-14:00 is six half-hours of ``value`` (under the 24 kWh cap)."""
    return value * 6


@dataclass
class Seen:
    attempts: int
    status: QuotaStatus


def machine(store: Store) -> type[RuleBasedStateMachine]:
    class Protocol(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.nmi = f"49{next(_NMIS):08d}"
            self.clock = ManualClock(DUE)
            self.faults = Faults()
            with store.write() as unit:
                unit.catalog.put_plan("test-nsw", PLAN, updated_at=self.clock.now())
                unit.catalog.put_customer(
                    self.nmi, plan_id="test-nsw", region=Region.NSW, updated_at=self.clock.now()
                )
            self.settlements = Settlements(
                store, MemoryQuotaCache(self.clock), self.clock, POLICY, self.faults
            )
            self.ingestion = Ingestion(
                store, self.settlements, self.clock, schedule=SettlementJobs(self.settlements)
            )
            self.retry = RetryPolicy(self.clock, random.Random(7))
            self.worker = Worker(
                store, settlement_tasks(self.settlements), clock=self.clock, retry=self.retry
            )
            self.data = Decimal("0.500")
            self.revisions = 0
            self.ingestion.file([_row(self.nmi, self.data, 0)])
            self.seen: dict[int, Seen] = {}
            #: The newest version answered terminal from the database (no cache write lost).
            self.answered = 0

        # --- actors ---------------------------------------------------------------------

        @rule()
        def api_settles(self) -> None:
            try:
                answer = self.settlements.settle(self.nmi, DAY)
            except Death:
                return  # the request's process died where the fault was injected
            newest = self._newest()
            assert newest is not None
            assert answer.quota.version <= newest.version, "an answer from the future"
            if answer.outcome in TERMINAL_ANSWERS and answer.quota.revision > 0:
                stored = self._version(answer.quota.version)
                assert stored.status.is_terminal, f"terminal answer for {stored.status}"
                assert stored.status is answer.quota.status
                assert answer.quota.version >= self.answered, "an older version answered"
                self.answered = answer.quota.version

        @rule()
        def worker_runs_due_jobs(self) -> None:
            self.worker.run_due()

        @rule()
        def rescuer_runs(self) -> None:
            rescue(store, self.retry)

        @rule(value=st.sampled_from(["0.100", "0.500", "0.600", "1.250"]))
        def revision_arrives(self, value: str) -> None:
            self.revisions += 1
            self.data = Decimal(value)
            self.ingestion.file([_row(self.nmi, self.data, self.revisions)])

        @rule(
            point=st.sampled_from([FaultPoint.AFTER_CLAIM, FaultPoint.BEFORE_COMPLETE]),
            dies=st.booleans(),
        )
        def next_attempt_fails(self, point: FaultPoint, dies: bool) -> None:
            # A death (BaseException) only where an API request runs it: the request's process
            # dies; a failure (Exception) wherever: the attempt is released.
            self.faults.add(point, Death() if dies else RuntimeError("injected"))
            if dies:
                self.api_settles()
                self.faults.queued.clear()

        @rule()
        def next_cache_write_is_lost(self) -> None:
            self.faults.add(FaultPoint.CACHE_WRITE, ConnectionError("cache down"))

        @rule(seconds=st.sampled_from([1, 31, 61, 600]))
        def time_passes(self, seconds: int) -> None:
            self.clock.advance(seconds)

        # --- invariants, after every step -----------------------------------------------

        @invariant()
        def one_ledger_entry_per_version(self) -> None:
            with store.read() as unit:
                versions = [entry.version for entry in unit.quotas.ledger(self.nmi, DAY)]
            assert len(versions) == len(set(versions)), versions

        @invariant()
        def attempts_never_decrease_and_terminal_versions_never_change(self) -> None:
            newest = self._newest()
            if newest is None:
                return
            for version in range(1, newest.version + 1):
                quota = self._version(version)
                before = self.seen.get(version)
                if before is not None:
                    assert quota.attempts >= before.attempts, "attempts decreased"
                    if before.status.is_terminal:
                        assert quota.status is before.status, "a terminal version changed"
                self.seen[version] = Seen(quota.attempts, quota.status)

        def teardown(self) -> None:
            """Quiet: run every job, past every lock and lease, until nothing is left."""
            self.faults.queued.clear()
            for _ in range(60):
                self.clock.advance(120)
                rescue(store, self.retry)
                self.worker.run_due()
                with store.read() as unit:
                    jobs = unit.jobs.history("settle", f"{self.nmi}:{DAY.isoformat()}")
                if all(job.state.is_finished for job in jobs):
                    break
            newest = self._newest()
            assert newest is not None
            assert newest.status.is_terminal, f"quiet, and the newest version is {newest}"
            with store.read() as unit:
                ledger = sum((e.kwh for e in unit.quotas.ledger(self.nmi, DAY)), Decimal(0))
            if newest.status is QuotaStatus.COMPLETED:
                assert newest.free_kwh == _free(self.data)
                assert ledger == newest.free_kwh

        # --- helpers --------------------------------------------------------------------

        def _newest(self) -> Quota | None:
            return self.settlements.state(self.nmi, DAY)

        def _version(self, version: int) -> QuotaEvent:
            """The version as it stands: the last state its events recorded."""
            with store.read() as unit:
                events = unit.quotas.events(self.nmi, DAY)
            return [event for event in events if event.version == version][-1]

    return Protocol


def test_the_protocols_invariants_hold_for_the_real_code(store: Store) -> None:
    run_state_machine_as_test(
        machine(store),
        settings=settings(
            max_examples=EXAMPLES,
            stateful_step_count=STEPS,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=False,
        ),
    )
