"""``Jobs.enqueue_many`` against the same enqueues one by one, on SQLite and PostgreSQL: the same
jobs stored and told, the same answers, whatever the mix of new jobs, duplicates of stored ones
(waiting, running, finished) and duplicates within the batch; small batches (one by one) and
large ones (through the staging table) alike."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from freehours.jobs.decisions import Complete, Finish
from freehours.jobs.job import JobState
from freehours.store import jobs as store_jobs
from freehours.store.database import Store
from freehours.store.jobs import NewJob

NOW = datetime(2026, 7, 1, 4, 15, tzinfo=UTC)
LEASE = timedelta(seconds=30)


def scenario(seed: int, size: int) -> tuple[list[tuple[str, datetime, str]], list[NewJob]]:
    """Jobs stored first (key, run_at, what becomes of them: waiting, running or finished), then
    a batch to enqueue, drawn from the keys stored and new ones, with duplicates."""
    rng = random.Random(seed)
    keys = [f"k{index}" for index in range(size)]
    stored = [
        (
            key,
            NOW + timedelta(minutes=rng.randint(-5, 60)),
            rng.choice(["waiting", "running", "done"]),
        )
        for key in rng.sample(keys, size // 2)
    ]
    batch = []
    for _ in range(size):
        run_at = NOW + timedelta(minutes=rng.randint(-10, 90))
        deadline = (
            run_at + timedelta(minutes=rng.choice([0, 30, 600])) if rng.random() < 0.7 else None
        )
        batch.append(
            NewJob(
                "",
                rng.choice(keys),
                {"n": rng.randint(0, 9)},
                run_at=run_at,
                deadline=deadline,
                max_attempts=rng.choice([None, 3]),
            )
        )
    return stored, batch


def prepare(store: Store, kind: str, stored: list[tuple[str, datetime, str]]) -> None:
    with store.write() as unit:
        for key, run_at, _ in stored:
            unit.jobs.enqueue(kind, key, {"stored": key}, run_at=run_at, now=NOW)
    # Everything due is claimed by then; the claimed jobs of "done" keys finish.
    with store.write() as unit:
        claimed = unit.jobs.claim("w", {kind}, 10_000, now=NOW + timedelta(hours=2), lease=LEASE)
    fate = {key: what for key, _, what in stored}
    with store.write() as unit:
        unit.jobs.finish(
            [Finish(job, Complete("ok")) for job in claimed if fate[job.key] == "done"],
            now=NOW + timedelta(hours=2),
        )
        # The "waiting" ones are released again, as a snooze would leave them.
    with store.write() as unit:
        waiting = [job for job in claimed if fate[job.key] == "waiting"]
        for job in waiting:
            unit.connection.execute(
                store_jobs.jobs.update()
                .where(store_jobs.jobs.c.id == job.id)
                .values(state=JobState.AVAILABLE.value, worker=None, lease_until=None)
            )


def table(store: Store, kind: str) -> list[tuple[Any, ...]]:
    """Every job of ``kind``, as stored (ids aside), sorted."""
    c = store_jobs.jobs.c
    columns = [c.key, c.state, c.payload, c.run_at, c.rerun_at, c.deadline, c.max_attempts, c.runs]
    with store.read() as unit:
        rows = unit.connection.execute(sa.select(*columns).where(c.kind == kind))
        return sorted(tuple(row) for row in rows)


@pytest.mark.parametrize("size", [6, 80])
@pytest.mark.parametrize("seed", range(4))
def test_enqueue_many_is_the_same_enqueues_one_by_one(store: Store, seed: int, size: int) -> None:
    stored, batch = scenario(seed, size)
    prepare(store, "one", stored)
    prepare(store, "many", stored)
    with store.write() as unit:
        singly = [
            unit.jobs.enqueue(
                "one",
                job.key,
                job.payload,
                run_at=job.run_at,
                deadline=job.deadline,
                max_attempts=job.max_attempts,
                now=NOW,
            )
            for job in batch
        ]
    with store.write() as unit:
        together = unit.jobs.enqueue_many(
            [NewJob("many", j.key, j.payload, j.run_at, j.deadline, j.max_attempts) for j in batch],
            now=NOW,
        )
    assert [answer is None for answer in together] == [answer is None for answer in singly]
    assert any(answer is None for answer in together)  # duplicates were met
    assert any(answer is not None for answer in together)
    assert table(store, "many") == table(store, "one")
    with store.read() as unit:
        ids = {job.id: job.key for job in unit.jobs.every() if job.kind == "many"}
    assert all(
        ids[answer] == job.key
        for answer, job in zip(together, batch, strict=True)
        if answer is not None
    )


def test_enqueue_many_checks_every_job_before_writing_any(store: Store) -> None:
    good = [NewJob("settle", f"k{n}", {}, run_at=NOW) for n in range(30)]
    bad = NewJob("settle", "late", {}, run_at=NOW, deadline=NOW - timedelta(seconds=1))
    with pytest.raises(ValueError, match="deadline"), store.write() as unit:
        unit.jobs.enqueue_many([*good, bad], now=NOW)
    with store.read() as unit:
        assert unit.jobs.every() == []


def test_enqueue_many_of_nothing_writes_nothing(store: Store) -> None:
    with store.write() as unit:
        assert unit.jobs.enqueue_many([], now=NOW) == []
        assert unit.jobs.every() == []
