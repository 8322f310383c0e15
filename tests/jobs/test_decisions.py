"""The job table's statements on SQLite and PostgreSQL: enqueue in the caller's transaction, unique
unfinished jobs, claims, fenced results, leases and the rescuer."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from prometheus_client import REGISTRY

from freehours.clock import ManualClock
from freehours.jobs import decisions
from freehours.jobs.decisions import Complete, Finish, Release
from freehours.jobs.job import Job, JobError, JobId, JobState
from freehours.jobs.retry import Discard, DiscardReason, RetryAt, RetryPolicy, SnoozeUntil
from freehours.store.database import Store
from freehours.store.jobs import Jobs, NewJob
from freehours.store.tables import JOB_ERRORS_KEPT
from freehours.workers import rescuer
from tests.jobs.support import postgres_only

NOW = datetime(2026, 7, 1, 4, 15, tzinfo=UTC)
LEASE = timedelta(seconds=30)


def add(store: Store, key: str, *, run_at: datetime = NOW, kind: str = "settle") -> JobId | None:
    with store.write() as unit:
        return unit.jobs.enqueue(kind, key, {"key": key}, run_at=run_at, now=NOW)


def claim(store: Store, limit: int = 10, *, at: datetime = NOW, worker: str = "w1") -> list[Job]:
    with store.write() as unit:
        return unit.jobs.claim(worker, {"settle"}, limit, now=at, lease=LEASE)


def finish(store: Store, *finishes: Finish, at: datetime = NOW) -> set[JobId]:
    with store.write() as unit:
        return unit.jobs.finish(finishes, now=at)


def history(store: Store, key: str) -> list[Job]:
    with store.read() as unit:
        return unit.jobs.history("settle", key)


def only(store: Store, key: str) -> Job:
    (job,) = history(store, key)
    return job


def ingest_that_fails(store: Store) -> None:
    with store.write() as unit:
        assert unit.jobs.enqueue("settle", "a", {}, run_at=NOW, now=NOW) is not None
        raise RuntimeError("ingest failed")


def test_a_job_enqueued_in_a_transaction_that_rolls_back_does_not_exist(store: Store) -> None:
    with pytest.raises(RuntimeError, match="ingest failed"):
        ingest_that_fails(store)
    with store.read() as unit:
        assert sum(unit.jobs.count_by_state().values()) == 0


def test_enqueue_stores_an_available_job_with_default_attempts_and_deadline(store: Store) -> None:
    job_id = add(store, "a")
    job = only(store, "a")
    assert job.id == job_id
    assert (job.state, job.payload, job.run_at) == (JobState.AVAILABLE, {"key": "a"}, NOW)
    assert (job.attempts, job.max_attempts) == (0, decisions.DEFAULT_MAX_ATTEMPTS)
    assert job.deadline == NOW + decisions.DEFAULT_DEADLINE


def test_a_duplicate_of_an_unfinished_job_returns_none_and_adds_nothing(store: Store) -> None:
    assert add(store, "a") is not None
    assert add(store, "a") is None
    assert add(store, "b") is not None
    assert [job.key for job in history(store, "a")] == ["a"]


def test_a_duplicate_brings_a_waiting_job_forward_never_back(store: Store) -> None:
    add(store, "a", run_at=NOW + timedelta(hours=1))
    add(store, "a", run_at=NOW + timedelta(hours=2))
    assert only(store, "a").run_at == NOW + timedelta(hours=1)
    add(store, "a", run_at=NOW + timedelta(minutes=5))
    assert only(store, "a").run_at == NOW + timedelta(minutes=5)


def test_once_a_job_finished_the_same_key_can_be_enqueued_again(store: Store) -> None:
    add(store, "a")
    (job,) = claim(store)
    assert finish(store, Finish(job, Complete("settled"))) == {job.id}
    second = add(store, "a")
    assert second is not None
    assert [(j.state, j.outcome) for j in history(store, "a")] == [
        (JobState.COMPLETED, "settled"),
        (JobState.AVAILABLE, None),
    ]


def test_a_duplicate_of_a_running_job_runs_it_once_more_after_this_run(store: Store) -> None:
    add(store, "a")
    (running,) = claim(store)
    assert add(store, "a", run_at=NOW + timedelta(seconds=5)) is None
    finish(store, Finish(running, Complete("settled")), at=NOW + timedelta(seconds=1))
    again = only(store, "a")
    assert (again.state, again.run_at) == (JobState.AVAILABLE, NOW + timedelta(seconds=5))
    (rerun,) = claim(store, at=NOW + timedelta(seconds=5))
    finish(store, Finish(rerun, Complete("replayed")))
    assert (only(store, "a").state, only(store, "a").runs) == (JobState.COMPLETED, 2)


def test_claim_takes_due_jobs_of_its_kinds_oldest_first_up_to_the_limit(store: Store) -> None:
    add(store, "late", run_at=NOW - timedelta(seconds=1))
    add(store, "early", run_at=NOW - timedelta(seconds=9))
    add(store, "future", run_at=NOW + timedelta(seconds=1))
    add(store, "other", kind="other")
    add(store, "now", run_at=NOW)
    claimed = claim(store, limit=2)
    assert [job.key for job in claimed] == ["early", "late"]
    assert all(job.state is JobState.RUNNING and job.runs == 1 for job in claimed)
    assert all(job.worker == "w1" and job.lease_until == NOW + LEASE for job in claimed)
    assert [job.key for job in claim(store)] == ["now"]
    assert claim(store) == []
    with store.read() as unit:
        assert unit.jobs.next_due({"settle"}) == NOW + timedelta(seconds=1)
        assert unit.jobs.next_due({"absent"}) is None


def test_a_claim_of_several_kinds_takes_the_oldest_of_all_of_them(store: Store) -> None:
    for n in range(6):
        kind = ("invoice", "settle", "webhook")[n % 3]
        add(store, f"{kind}-{n}", run_at=NOW - timedelta(seconds=10 - n), kind=kind)
    add(store, "unwanted", run_at=NOW - timedelta(seconds=60), kind="other")
    with store.write() as unit:
        kinds = {"settle", "invoice", "webhook"}
        claimed = unit.jobs.claim("w1", kinds, 4, now=NOW, lease=LEASE)
    assert [job.key for job in claimed] == ["invoice-0", "settle-1", "webhook-2", "invoice-3"]
    with store.write() as unit:
        rest = unit.jobs.claim("w1", {"settle", "invoice", "webhook"}, 4, now=NOW, lease=LEASE)
    assert [job.key for job in rest] == ["settle-4", "webhook-5"]


@postgres_only
def test_a_claim_reads_its_batch_not_the_whole_backlog(store: Store) -> None:
    # 3,000 due jobs of two kinds: a claim of 10 of both kinds reads about 10 rows of each
    # kind's run of the due index, never every due job to sort them (as one scan of
    # ``kind IN (...)`` did: a settlement burst's backlog paid on every claim).
    with store.write() as unit:
        unit.jobs.enqueue_many(
            [
                NewJob(kind, f"{kind}-{n}", {}, run_at=NOW - timedelta(seconds=n % 97))
                for n in range(1_500)
                for kind in ("invoice", "settle")
            ],
            now=NOW,
        )
    statements: list[tuple[str, Any]] = []

    @sa.event.listens_for(store.engine, "before_cursor_execute")
    def seen(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if statement.lstrip().startswith("WITH"):
            statements.append((statement, parameters))

    with store.write() as unit:
        claimed = unit.jobs.claim("w1", {"invoice", "settle"}, 10, now=NOW, lease=LEASE)
    assert len(claimed) == 10
    assert all(job.run_at == NOW - timedelta(seconds=96) for job in claimed)
    ((statement, parameters),) = statements
    with store.engine.connect() as conn:
        plan = conn.exec_driver_sql(
            f"EXPLAIN (ANALYZE, FORMAT JSON) {statement}", parameters
        ).scalar_one()
        conn.rollback()
    rows_read: dict[str, int] = {}

    def walk(node: dict[str, Any], candidates: str | None) -> None:
        # The scans that find the due jobs (the update then reads the chosen ones by id, by
        # whichever plan the table's size suggests).
        candidates = node.get("Subplan Name", candidates)
        if candidates and node.get("Relation Name") == "jobs_live":
            rows_read[candidates] = node["Actual Rows"] * node.get("Actual Loops", 1)
        for child in node.get("Plans", []):
            walk(child, candidates)

    walk(plan[0]["Plan"], None)
    assert len(rows_read) == 2, plan  # one run of the due index for each kind
    assert all(rows <= 20 for rows in rows_read.values()), rows_read


def test_a_result_with_a_stale_fence_is_not_written(store: Store) -> None:
    add(store, "a")
    (first,) = claim(store)
    finish(store, Finish(first, Release()))
    (second,) = claim(store)
    assert second.runs == first.runs + 1
    assert finish(store, Finish(first, Complete("from the first"))) == set()
    assert finish(store, Finish(second, Complete("from the second"))) == {second.id}
    assert only(store, "a").outcome == "from the second"


def test_each_decision_moves_the_job_to_its_state(store: Store) -> None:
    for key in ("retry", "snooze", "discard", "release"):
        add(store, key)
    jobs = {job.key: job for job in claim(store)}
    later = NOW + timedelta(minutes=1)
    finish(
        store,
        Finish(jobs["retry"], RetryAt(later, 1), "OperationalError: gone"),
        Finish(jobs["snooze"], SnoozeUntil(later), "not_due: quota PENDING"),
        Finish(jobs["discard"], Discard(DiscardReason.ATTEMPTS, 10), "ValueError: never"),
        Finish(jobs["release"], Release()),
    )
    retry, snooze, discard, release = (
        only(store, k) for k in ("retry", "snooze", "discard", "release")
    )
    assert (retry.state, retry.run_at, retry.attempts, retry.error) == (
        JobState.RETRYABLE,
        later,
        1,
        "OperationalError: gone",
    )
    assert (snooze.state, snooze.run_at, snooze.attempts, snooze.snoozes) == (
        JobState.AVAILABLE,
        later,
        0,
        1,
    )
    assert (discard.state, discard.outcome, discard.finalized_at) == (
        JobState.DISCARDED,
        "attempts",
        NOW,
    )
    assert (release.state, release.run_at, release.worker) == (JobState.AVAILABLE, NOW, None)


def test_renew_extends_only_this_workers_leases_and_none_past_the_deadline(
    store: Store,
) -> None:
    add(store, "mine")
    add(store, "theirs")
    (mine,) = claim(store, limit=1, worker="w1")
    claim(store, limit=1, worker="w2")
    later = NOW + timedelta(seconds=20)
    with store.write() as unit:
        assert unit.jobs.renew("w1", now=later, lease=LEASE) == 1
    assert only(store, "mine").lease_until == later + LEASE
    assert only(store, "theirs").lease_until == NOW + LEASE
    with store.write() as unit:
        assert unit.jobs.renew("w1", now=mine.deadline, lease=LEASE) == 0


def _rescued(kind: str) -> float:
    return REGISTRY.get_sample_value("freehours_jobs_rescued_total", {"kind": kind}) or 0.0


def test_the_rescuer_retries_a_job_whose_lease_ran_out_and_counts_it(store: Store) -> None:
    clock = ManualClock(NOW)
    policy = RetryPolicy(clock, random.Random(1))
    add(store, "a")
    add(store, "b")
    (dead,) = claim(store, limit=1, worker="dead")
    claim(store, limit=1, worker="alive")
    with store.write() as unit:
        unit.jobs.renew("alive", now=NOW + timedelta(seconds=20), lease=LEASE)
    before = _rescued("settle")
    clock.advance(30)
    assert rescuer.rescue(store, policy) == []  # the lease ends at +30 s, not before
    clock.advance(1)
    (rescued,) = rescuer.rescue(store, policy)
    assert rescued.job.id == dead.id
    assert _rescued("settle") == before + 1
    job = only(store, "a")
    assert (job.state, job.attempts, job.worker) == (JobState.RETRYABLE, 1, None)
    assert job.error == "lease expired: worker dead stopped renewing it"
    assert job.errors == (JobError(1, clock.now(), job.error),)
    assert only(store, "b").state is JobState.RUNNING
    # The dead worker's result, should it ever arrive, is stale.
    assert finish(store, Finish(dead, Complete("late"))) == set()


def test_a_rescued_job_on_its_last_attempt_is_discarded(store: Store) -> None:
    clock = ManualClock(NOW)
    with store.write() as unit:
        unit.jobs.enqueue("settle", "a", {}, run_at=NOW, max_attempts=1, now=NOW)
    claim(store)
    clock.advance(LEASE.total_seconds() + 1)
    rescuer.rescue(store, RetryPolicy(clock, random.Random(1)))
    job = only(store, "a")
    assert (job.state, job.outcome, job.attempts) == (JobState.DISCARDED, "attempts", 1)


def test_a_job_keeps_the_errors_of_its_last_20_failed_attempts(store: Store) -> None:
    """Each failed attempt appends its error (a snooze appends none); past ``JOB_ERRORS_KEPT``
    the oldest go, and the last attempt's is ``error`` too."""
    with store.write() as unit:
        unit.jobs.enqueue("settle", "a", {}, run_at=NOW, max_attempts=30, now=NOW)
    at = NOW
    for attempt in range(1, 26):
        (held,) = claim(store, at=at)
        if attempt == 3:
            finish(store, Finish(held, SnoozeUntil(at), "not yet"), at=at)
            (held,) = claim(store, at=at)
        at += timedelta(seconds=1)
        failed = Finish(held, RetryAt(at, attempt), f"Boom: attempt {attempt}")
        assert finish(store, failed, at=at) == {held.id}
    job = only(store, "a")
    assert JOB_ERRORS_KEPT == 20
    assert job.errors == tuple(
        JobError(n, NOW + timedelta(seconds=n), f"Boom: attempt {n}") for n in range(6, 26)
    )
    assert (job.attempts, job.error) == (25, "Boom: attempt 25")


def test_cancel_ends_a_waiting_job_but_not_a_running_one(store: Store) -> None:
    add(store, "waiting", run_at=NOW + timedelta(hours=1))
    add(store, "running")
    claim(store)
    with store.write() as unit:
        assert unit.jobs.cancel("settle", "waiting", now=NOW) is not None
        assert unit.jobs.cancel("settle", "running", now=NOW) is None
    cancelled = only(store, "waiting")
    assert (cancelled.state, cancelled.outcome) == (JobState.CANCELLED, "cancelled")
    assert only(store, "running").state is JobState.RUNNING
    assert add(store, "waiting") is not None  # finished: the key is free again


@postgres_only
def test_concurrent_claims_on_postgresql_skip_each_others_rows_without_waiting(
    store: Store,
) -> None:
    keys = [f"skip-{n}" for n in range(4)]
    for key in keys:
        add(store, key)
    with store.engine.connect() as first, first.begin():
        held = Jobs(first, store.driver).claim("w1", {"settle"}, 2, now=NOW, lease=LEASE)
        # The first claim's transaction is still open, its rows locked: the second claim
        # neither waits for them (it would fail after the lock timeout) nor takes them.
        with store.engine.connect() as second, second.begin():
            second.exec_driver_sql("SET LOCAL lock_timeout = '2s'")
            others = Jobs(second, store.driver).claim("w2", {"settle"}, 10, now=NOW, lease=LEASE)
    assert sorted(job.key for job in held + others) == keys
    assert not {job.id for job in held} & {job.id for job in others}


def test_stuck_jobs_are_those_due_over_twenty_seconds_and_not_started(store: Store) -> None:
    clock = ManualClock(NOW)
    add(store, "old", run_at=NOW - timedelta(seconds=21))
    add(store, "new", run_at=NOW - timedelta(seconds=19))
    add(store, "unknown kind", run_at=NOW - timedelta(minutes=5), kind="nobody-runs-this")
    assert rescuer.count_stuck(store, clock) == 2
    claim(store)
    assert rescuer.count_stuck(store, clock) == 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kind": ""}, "job kind '' is not 1 to 50 characters"),
        ({"key": "k" * 256}, "is not 1 to 255 characters"),
        ({"deadline": NOW - timedelta(seconds=1)}, "is before run_at"),
        ({"max_attempts": 0}, "max_attempts 0 is less than 1"),
        ({"traceparent": "00-abc"}, "is not W3C version 00"),
    ],
)
def test_enqueue_refuses_a_job_that_could_never_run(
    store: Store, kwargs: dict[str, object], message: str
) -> None:
    arguments: dict[str, object] = {"kind": "settle", "key": "a", "payload": {}, "run_at": NOW}
    with pytest.raises(ValueError, match=message), store.write() as unit:
        unit.jobs.enqueue(**{**arguments, **kwargs})  # type: ignore[arg-type]


def test_prune_deletes_finished_jobs_older_than_the_cutoff_and_nothing_unfinished(
    store: Store,
) -> None:
    add(store, "old")
    add(store, "waiting", run_at=NOW + timedelta(days=30))  # unfinished, whatever its age
    (old,) = claim(store)
    finish(store, Finish(old, Complete("settled")), at=NOW)
    add(store, "recent")
    (recent,) = claim(store, at=NOW + timedelta(days=2))
    finish(store, Finish(recent, Complete("settled")), at=NOW + timedelta(days=2))
    pruned = rescuer.prune(store, NOW + timedelta(days=1))
    assert pruned == 1
    assert history(store, "old") == []
    assert [j.key for j in history(store, "waiting")] == ["waiting"]
    assert [j.key for j in history(store, "recent")] == ["recent"]


def test_store_prune_deletes_a_batch_a_transaction_until_one_deletes_fewer(store: Store) -> None:
    """The one batched prune loop (finished jobs and webhook events both go through it)."""
    limits: list[int] = []

    def delete(unit: object, limit: int) -> int:
        limits.append(limit)
        return [2, 2, 1][len(limits) - 1]

    assert store.prune(delete, batch=2) == 5
    assert limits == [2, 2, 2]
