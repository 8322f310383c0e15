"""The outbox, on SQLite and PostgreSQL: a settlement's work does not grow with the number of
webhook endpoints (its transaction writes its event and one fan-out job however many there
are), and a worker that dies between the settlement's commit and the fan-out, or inside the
fan-out after its commit, loses no event and delivers none twice."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from random import Random

import pytest
import sqlalchemy as sa

from freehours.domain.webhooks import DeliveryStatus
from freehours.jobs.job import JobState
from freehours.jobs.retry import RetryPolicy
from freehours.store.database import Store
from freehours.store.tables import jobs, metadata
from freehours.store.webhooks import FANOUT_KIND
from freehours.webhooks.sender import HttpSender
from freehours.webhooks.service import Webhooks
from freehours.workers import rescuer
from freehours.workers.webhook import FanOutTask
from freehours.workers.worker import Worker, WorkerConfig
from tests.invoicing.support import JULY, System, consumption, export
from tests.webhooks.receiver import LOOPBACK, Receiver
from tests.webhooks.test_delivery import LEASE, Death
from tests.webhooks.test_delivery import make as make_webhooks

EVERY = ["quota.completed", "quota.aborted", "quota.revised", "invoice.finalised"]


def rows(store: Store) -> dict[str, int]:
    """Every table's rows (the settlement's statements include prepared ones no SQLAlchemy
    event sees: what it wrote is counted where it lands)."""
    with store.read() as unit:
        return {
            table.name: int(unit.connection.scalar(sa.select(sa.func.count()).select_from(table)))
            for table in metadata.sorted_tables
        }


def written(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """The rows each table gained."""
    return {name: after[name] - count for name, count in before.items() if after[name] != count}


def settle_a_day(system: System, meter: str) -> None:
    """A day's data for ``meter``, filed (outside what is counted) and then settled."""
    system.ingestion.file([consumption(meter, JULY[0]), export(meter, JULY[0])])


def test_a_settlements_work_does_not_grow_with_the_endpoints(store: Store) -> None:
    system = System.on(store)
    hooks = Webhooks(store, system.clock, destinations=LOOPBACK)
    warm, one, fifty = system.customers(3)
    hooks.register("http://127.0.0.1:9/0", EVERY)
    settle_a_day(system, warm)
    system.settle()  # the first settlement: plans and caches loaded

    settle_a_day(system, one)
    before = rows(store)
    system.settle()
    beside_one = written(before, rows(store))
    for n in range(1, 50):
        hooks.register(f"http://127.0.0.1:9/{n}", EVERY)
    settle_a_day(system, fifty)
    before = rows(store)
    system.settle()
    beside_fifty = written(before, rows(store))

    # Its quota version's rows, its ledger entry, its event and its fan-out job: no more.
    assert beside_one["webhook_events"] == 1
    assert beside_fifty == beside_one
    with store.read() as unit:
        # No delivery yet: the fan-out jobs are the webhook worker's, not the settlement's.
        assert unit.webhooks.deliveries() == []
        assert len(unit.webhooks.events()) == 3


class DyingFanOut(Webhooks):
    """Webhooks whose fan-out commits and then its worker dies, before the job is done."""

    def fan_out(self, events: Sequence[str], endpoints: Mapping[str, Sequence[str]]) -> int:
        super().fan_out(events, endpoints)
        raise Death


def test_a_crash_between_the_commit_and_the_fan_out_loses_nothing(
    store: Store, receiver: Receiver
) -> None:
    system = System.on(store)
    hooks, deliverer = make_webhooks(store, system.clock)
    for n in range(3):
        hooks.register(f"{receiver.url}/{n}", EVERY)
    [meter] = system.customers(1)
    # Settled and committed; the worker that would fan the events out is not running (died).
    system.month([meter], JULY[:5])
    with store.read() as unit:
        events = unit.webhooks.events()
        assert unit.webhooks.deliveries() == []
    assert [kind for _, kind, _ in events] == ["quota.completed"] * 5

    # A worker fans them out, commits, and dies before its job is done: rescued, run again.
    dying = DyingFanOut(store, system.clock, send=HttpSender(LOOPBACK), rng=Random(1))
    config = WorkerConfig(concurrency=1, lease=LEASE, listen=False)
    retry = RetryPolicy(system.clock, Random(2))
    crashing = Worker(
        store, {FANOUT_KIND: FanOutTask(dying)}, config=config, clock=system.clock, retry=retry
    )
    with pytest.raises(Death):
        crashing.run_due()
    system.clock.advance(LEASE.total_seconds() + 1)
    assert rescuer.rescue(store, retry)
    system.clock.advance(60)
    while deliverer.run_due():
        pass

    with store.read() as unit:
        found = unit.webhooks.deliveries(limit=100)
        fanouts = set(
            unit.connection.scalars(sa.select(jobs.c.state).where(jobs.c.kind == FANOUT_KIND))
        )
    assert fanouts == {JobState.COMPLETED.value}
    assert len(found) == 5 * 3  # each event to each endpoint, once
    assert {d.status for d in found} == {DeliveryStatus.SUCCEEDED}
    assert sorted(receiver.ids()) == sorted(ident for ident, _, _ in events for _ in range(3))
