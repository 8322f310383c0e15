"""Settlements that happen by themselves, on SQLite and PostgreSQL, under a manual clock: ingest
schedules a day's settle job, a worker runs it, and its answer is obeyed. No HTTP anywhere."""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

import pytest
from opentelemetry import context as otel_context
from opentelemetry.trace import format_span_id
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from structlog.contextvars import merge_contextvars
from structlog.testing import capture_logs

from freehours import defaults
from freehours.cache.quota import MemoryQuotaCache
from freehours.clock import ManualClock
from freehours.domain.reads import IntervalDay
from freehours.domain.settlement import Claimed, Quota, QuotaStatus, claim
from freehours.jobs.job import Job, JobState
from freehours.jobs.retry import RetryPolicy
from freehours.observability.logging import add_trace_context
from freehours.settlement.ingest import Ingestion
from freehours.settlement.model import FaultPoint, SettlementPolicy
from freehours.settlement.service import Settlements
from freehours.store import quotas
from freehours.store.database import Store
from freehours.workers import rescuer
from freehours.workers.settle import KIND, SETTLEMENT_JOB_SLACK, SettlementJobs, settlement_tasks
from freehours.workers.worker import Worker
from tests.support import stored_or_new
from tests.test_settlement import DAY, NMI, STAMP, WINDOW_END, add_customer, day_row
from tests.tracing import Spans

#: A data deadline of an hour (not three days) keeps the snoozes of a day waiting for its data few.
POLICY = SettlementPolicy(data_deadline=timedelta(hours=1), data_poll=timedelta(minutes=10))
DUE = WINDOW_END + POLICY.grace
KEY = f"{NMI}:{DAY.isoformat()}"


@dataclass
class AlwaysFailing:
    """The settlement's fault seam: every attempt fails after the claim, and is counted."""

    point: FaultPoint = FaultPoint.BEFORE_COMPLETE
    fired: int = 0

    def check(self, point: FaultPoint, quota: Quota) -> None:
        if point is self.point:
            self.fired += 1
            raise RuntimeError(f"injected fault #{self.fired}")


@dataclass
class System:
    store: Store
    clock: ManualClock
    settlements: Settlements
    ingestion: Ingestion
    worker: Worker

    def ingest(self, *days: IntervalDay) -> None:
        self.ingestion.file(days)

    def new_job(self) -> None:
        """A new settle job for the day, due now, as a client enqueueing one per request would."""
        with self.store.write() as unit:
            job_id = unit.jobs.enqueue(
                KIND, KEY, {"nmi": NMI, "date": DAY.isoformat()}, run_at=self.clock.now()
            )
        assert job_id is not None

    def run_due(self) -> int:
        return self.worker.run_due()

    def jobs(self) -> list[Job]:
        with self.store.read() as unit:
            return unit.jobs.history(KIND, KEY)

    def job(self) -> Job:
        return self.jobs()[-1]

    def quota(self) -> Quota:
        quota = self.settlements.state(NMI, DAY)
        assert quota is not None
        return quota

    def ledger(self) -> list[quotas.LedgerEntry]:
        with self.store.read() as unit:
            return unit.quotas.ledger(NMI)


def system(store: Store, start: datetime, faults: AlwaysFailing | None = None) -> System:
    clock = ManualClock(start)
    add_customer(store, clock.now())
    settlements = Settlements(store, MemoryQuotaCache(clock), clock, POLICY, faults)
    ingestion = Ingestion(store, settlements, clock, schedule=SettlementJobs(settlements))
    worker = Worker(
        store,
        settlement_tasks(settlements),
        clock=clock,
        retry=RetryPolicy(clock, random.Random(5)),
    )
    return System(store, clock, settlements, ingestion, worker)


@pytest.fixture
def due(store: Store) -> System:
    """The system when the day is due: its window ended a grace period ago."""
    return system(store, DUE)


def test_reads_ingested_for_a_past_day_end_in_a_completed_quota_with_no_settle_call(
    store: Store,
) -> None:
    a_week_later = system(store, DUE + timedelta(days=7))
    a_week_later.ingest(day_row("0.500", stamp=STAMP))
    assert a_week_later.run_due() == 1
    assert (a_week_later.quota().status, a_week_later.quota().free_kwh) == (
        QuotaStatus.COMPLETED,
        Decimal("3.000"),
    )
    assert [(e.kwh, e.amount) for e in a_week_later.ledger()] == [
        (Decimal("3.000"), Decimal("0.90"))
    ]
    assert (a_week_later.job().state, a_week_later.job().outcome) == (
        JobState.COMPLETED,
        "settled",
    )


def test_a_days_job_runs_at_the_end_of_its_window_plus_the_grace(store: Store) -> None:
    morning = system(store, WINDOW_END - timedelta(hours=2))
    morning.ingest(day_row("0.500", stamp=STAMP))
    job = morning.job()
    assert (job.state, job.run_at) == (JobState.AVAILABLE, DUE)
    assert job.deadline == WINDOW_END + POLICY.data_deadline + SETTLEMENT_JOB_SLACK
    assert morning.run_due() == 0
    morning.clock.set(DUE)
    assert morning.run_due() == 1
    assert morning.quota().status is QuotaStatus.COMPLETED


def test_incomplete_data_snoozes_the_job_until_the_data_deadline_then_it_settles(
    due: System,
) -> None:
    due.ingest(day_row("0.500", stamp=STAMP, missing=range(22, 23)))
    runs = 0
    while due.job().state is not JobState.COMPLETED:
        due.clock.set(max(due.clock.now(), due.job().run_at))
        runs += due.run_due()
    job = due.job()
    # Polled every 10 minutes from the due time until the data deadline, an hour after the
    # window's end: 45 minutes, so 5 snoozes, then settled with what there was.
    assert (job.snoozes, job.attempts, runs) == (5, 0, 6)
    assert due.clock.now() == WINDOW_END + POLICY.data_deadline
    assert due.quota().free_kwh == Decimal("2.500")


def test_data_completed_while_the_job_waits_brings_the_job_forward(due: System) -> None:
    due.ingest(day_row("0.500", stamp=STAMP, missing=range(22, 23)))
    assert due.run_due() == 1
    assert due.job().run_at == DUE + POLICY.data_poll
    due.clock.advance(60)
    due.ingest(day_row("0.500", stamp=STAMP + timedelta(hours=1)))
    assert due.job().run_at == DUE  # due again at once
    assert due.run_due() == 1
    assert (due.quota().status, due.quota().free_kwh) == (QuotaStatus.COMPLETED, Decimal("3.000"))


def test_a_quota_locked_by_another_holder_snoozes_the_job_until_the_lock_expires(
    due: System,
) -> None:
    due.ingest(day_row("0.500", stamp=STAMP))
    with due.store.write() as unit:
        pending = stored_or_new(unit, NMI, DAY, at=DUE)
        held = claim(pending, DUE, POLICY.lock_timeout, POLICY.max_attempts)
        assert isinstance(held, Claimed)
        unit.quotas.save([held.quota], at=DUE)  # another holder: its lock lasts a lock timeout
    assert due.run_due() == 1
    snoozed = due.job()
    assert (snoozed.state, snoozed.run_at, snoozed.attempts) == (
        JobState.AVAILABLE,
        DUE + POLICY.lock_timeout,
        0,
    )
    assert snoozed.outcome == "locked: quota LOCKED"
    due.clock.set(snoozed.run_at)
    assert due.run_due() == 1
    assert (due.quota().status, due.quota().fence, due.quota().attempts) == (
        QuotaStatus.COMPLETED,
        2,
        1,  # the holder whose lock expired counts as a failed attempt
    )


def test_a_quota_that_can_never_be_settled_completes_its_job_with_the_reason(
    due: System,
) -> None:
    with due.store.write() as unit:
        unit.jobs.enqueue(
            KIND,
            "NOBODY0001:2026-07-01",
            {"nmi": "NOBODY0001", "date": "2026-07-01"},
            run_at=DUE,
            now=DUE,
        )
    assert due.run_due() == 1
    with due.store.read() as unit:
        (job,) = unit.jobs.history(KIND, "NOBODY0001:2026-07-01")
    assert (job.state, job.outcome, job.attempts) == (
        JobState.COMPLETED,
        "aborted: unknown NMI NOBODY0001: no customer",
        0,
    )


def test_snoozes_end_at_the_jobs_deadline_with_a_discard(due: System) -> None:
    due.ingest(day_row("0.500", stamp=STAMP, missing=range(22, 23)))
    (job,) = due.jobs()
    with due.store.write() as unit:
        unit.jobs.cancel(KIND, KEY, now=DUE)
        unit.jobs.enqueue(
            KIND,
            KEY,
            dict(job.payload),
            run_at=DUE,
            deadline=DUE + timedelta(minutes=25),
            now=DUE,
        )
    while due.job().state is JobState.AVAILABLE:
        due.clock.set(due.job().run_at)
        due.run_due()
    discarded = due.job()
    assert (discarded.state, discarded.outcome, discarded.snoozes) == (
        JobState.DISCARDED,
        "deadline",
        2,
    )
    assert due.quota().status is QuotaStatus.PENDING  # nothing was settled, nothing faked


def test_however_many_jobs_a_failing_quota_gets_its_attempts_never_reset_and_work_is_bounded(
    store: Store,
) -> None:
    """The incident: every new job for a stuck quota started its retry count from zero, so it
    retried forever. Here each of 50 jobs in a row makes one attempt that fails (an injected
    fault), and is then cancelled, as a fresh job per request would be."""
    faults = AlwaysFailing()
    failing = system(store, DUE, faults)
    failing.ingest(day_row("0.500", stamp=STAMP))
    with store.write() as unit:
        unit.jobs.cancel(KIND, KEY, now=DUE)  # the ingest's own job: the loop makes its own
    attempts = []
    for _ in range(50):
        failing.new_job()
        assert failing.run_due() == 1
        with store.write() as unit:
            unit.jobs.cancel(KIND, KEY, now=failing.clock.now())
        attempts.append(failing.quota().attempts)
        failing.clock.advance(60)
    max_attempts = POLICY.max_attempts
    assert attempts == [*range(1, max_attempts + 1), *[max_attempts] * (50 - max_attempts)]
    assert faults.fired == max_attempts  # the total work: five settlement attempts, not fifty
    assert failing.quota().status is QuotaStatus.ABORTED
    jobs = failing.jobs()[1:]
    assert [job.state for job in jobs[: max_attempts - 1]] == [JobState.CANCELLED] * 4
    later = jobs[max_attempts - 1 :]
    assert all(job.state is JobState.COMPLETED and job.runs == 1 for job in later)
    assert all(
        job.outcome is not None and job.outcome.startswith("aborted: gave up after 5 attempts")
        for job in later
    )
    assert failing.ledger() == []


class PausedAfterClaim:
    """The settlement's fault seam: the holder stops right after its claim is committed, as a
    whole worker stops in a long GC pause or on a stalled connection, until ``resume``."""

    def __init__(self) -> None:
        self.paused = threading.Event()
        self.resume = threading.Event()

    def check(self, point: FaultPoint, quota: Quota) -> None:
        if point is FaultPoint.AFTER_CLAIM and quota.fence == 1:
            self.paused.set()
            self.resume.wait(timeout=60)


def test_a_worker_paused_past_its_lease_loses_job_and_quota_and_its_late_writes_are_refused(
    due: System,
) -> None:
    """Leases are short (``defaults.JOB_LEASE``), so a live worker that stops longer than one
    (its keeper stopped with it: nothing renews) has its job rescued and run again while it may
    still write: the quota's fence refuses its completion and the job's fence its result."""
    due.ingest(day_row("0.500", stamp=STAMP))
    pause = PausedAfterClaim()
    paused = Worker(
        due.store,
        settlement_tasks(
            Settlements(due.store, MemoryQuotaCache(due.clock), due.clock, POLICY, pause)
        ),
        clock=due.clock,
        retry=RetryPolicy(due.clock, random.Random(5)),
        name="paused",
    )
    ran = []
    running = threading.Thread(target=lambda: ran.append(paused.run_due()))
    running.start()
    try:
        assert pause.paused.wait(timeout=20), "the paused worker never claimed the quota"
        assert (due.job().state, due.job().worker, due.quota().fence) == (
            JobState.RUNNING,
            "paused",
            1,
        )
        # Past the lease and the quota's lock (as long), the rescuer finds the job.
        due.clock.advance(defaults.JOB_LEASE.total_seconds() + 0.1)
        assert [item.job.worker for item in rescuer.rescue(due.store, due.worker.retry)] == [
            "paused"
        ]
        assert due.run_due() == 1  # another worker: takes the quota over with the next fence
        assert (due.quota().status, due.quota().fence, due.quota().attempts) == (
            QuotaStatus.COMPLETED,
            2,
            1,  # the paused holder's attempt, counted when its lock was taken over
        )
    finally:
        pause.resume.set()
        running.join(timeout=20)
    assert ran == [1]  # the paused worker went on, and its writes came too late
    assert len(due.ledger()) == 1
    rerun = due.job()
    assert (rerun.state, rerun.runs, rerun.attempts, rerun.outcome) == (
        JobState.COMPLETED,
        2,
        1,
        "settled",  # the successor's result; the paused worker's was refused at its fence
    )


TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_a_settle_job_carries_the_trace_of_the_ingest_that_scheduled_it(
    due: System, spans: Spans
) -> None:
    request = TraceContextTextMapPropagator().extract({"traceparent": TRACEPARENT})
    token = otel_context.attach(request)  # as the API's request span would be
    try:
        due.ingest(day_row("0.500", stamp=STAMP))
    finally:
        otel_context.detach(token)
    assert due.job().traceparent == TRACEPARENT
    with capture_logs(processors=[merge_contextvars, add_trace_context]) as logs:
        assert due.run_due() == 1
    job_span = spans.one("job settle")
    assert job_span.parent is not None
    assert format_span_id(job_span.parent.span_id) == "00f067aa0ba902b7"
    (line,) = [entry for entry in logs if entry["event"] == "job_finished"]
    assert {
        name: line[name]
        for name in ("trace_id", "span_id", "job_id", "idempotency_key", "attempt", "outcome")
    } == {
        "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
        "span_id": format_span_id(job_span.context.span_id),
        "job_id": due.job().id,
        "idempotency_key": KEY,
        "attempt": 1,
        "outcome": "completed",
    }
    assert (line["quota_state"], line["nmi"], line["date"]) == ("COMPLETED", NMI, DAY.isoformat())
