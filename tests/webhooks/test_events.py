"""Each event type arrives at a real receiver exactly once per state change, on SQLite and
PostgreSQL: quotas settled by the jobs (the batch path) and by a request (the single path),
revised, aborted; invoices finalised and credit notes issued by invoice runs."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from decimal import Decimal
from random import Random

from freehours.cache.quota import MemoryQuotaCache
from freehours.domain.settlement import QuotaStatus
from freehours.settlement.model import FaultPoint, SettlementPolicy
from freehours.settlement.service import Settlements
from freehours.store.database import Store
from freehours.webhooks.sender import HttpSender
from freehours.webhooks.service import Webhooks
from freehours.workers.webhook import webhook_tasks
from freehours.workers.worker import Worker
from tests.invoicing.support import JULY, System, consumption, halved
from tests.support import stored_or_new
from tests.webhooks.receiver import LOOPBACK, Receiver

EVERY = [
    "quota.completed",
    "quota.aborted",
    "quota.revised",
    "invoice.finalised",
    "credit_note.issued",
]


def delivered(receiver: Receiver) -> list[dict[str, object]]:
    return [json.loads(item.body) for item in receiver.received]


def _types(receiver: Receiver) -> Counter[str]:
    return Counter(str(event["type"]) for event in delivered(receiver))


def test_each_state_change_arrives_once(store: Store, receiver: Receiver) -> None:
    system = System.on(store)
    hooks = Webhooks(
        store,
        system.clock,
        send=HttpSender(LOOPBACK, deadline=2),
        destinations=LOOPBACK,
        rng=Random(1),
    )
    hooks.register(receiver.url, EVERY)
    deliverer = Worker(store, webhook_tasks(hooks), clock=system.clock)

    def deliver() -> None:
        while deliverer.run_due():
            pass

    [meter] = system.customers(1)
    system.month([meter])  # settled by the jobs
    deliver()
    assert _types(receiver) == {"quota.completed": len(JULY)}
    first = delivered(receiver)[0]
    assert first["type"] == "quota.completed"
    data = first["data"]
    assert isinstance(data, dict)
    assert set(data) == {
        "nmi",
        "date",
        "version",
        "status",
        "attempts",
        "free_kwh",
        "free_value",
        "completed_at",
    }
    assert data["version"] == 1
    assert data["status"] == "COMPLETED"
    assert isinstance(data["free_kwh"], str)
    Decimal(data["free_kwh"])  # a decimal string, exact

    system.run()
    deliver()
    assert _types(receiver)["invoice.finalised"] == 1
    invoice = delivered(receiver)[-1]
    assert invoice["type"] == "invoice.finalised"
    assert isinstance(invoice["data"], dict)
    assert invoice["data"]["number"] == "INV-00000001"
    assert invoice["data"]["nmi"] == meter

    # The MDP revises 10 July down by half: version 2 completes with less free energy.
    system.clock.advance(3600)
    system.revise(halved(meter))
    deliver()
    counts = _types(receiver)
    assert counts == {
        "quota.completed": len(JULY) + 1,
        "quota.revised": 1,
        "invoice.finalised": 1,
        "credit_note.issued": 1,
    }
    (change,) = [e for e in delivered(receiver) if e["type"] == "quota.revised"]
    data = change["data"]
    assert isinstance(data, dict)
    assert data["version"] == 2
    assert Decimal(data["change_kwh"]) == Decimal("-1.5")  # what the revision booked
    assert Decimal(data["previous_free_kwh"]) + Decimal("-1.5") == Decimal(data["free_kwh"])
    (note,) = [e for e in delivered(receiver) if e["type"] == "credit_note.issued"]
    assert isinstance(note["data"], dict)
    assert note["data"]["number"] == "CN-00000001"
    assert note["data"]["corrects"] == "INV-00000001"
    assert Decimal(note["data"]["total"]) < 0

    # Every event once: distinct webhook-ids, one request each; nothing more on a second pass.
    ids = receiver.ids()
    assert len(ids) == len(set(ids))
    system.clock.advance(7 * 24 * 3600)
    deliver()
    assert receiver.ids() == ids


def test_an_aborted_quota_arrives_once(store: Store, receiver: Receiver) -> None:
    system = System.on(store)
    [meter] = system.customers(1)
    hooks = Webhooks(
        store, system.clock, send=HttpSender(LOOPBACK, deadline=2), destinations=LOOPBACK
    )
    hooks.register(receiver.url, ["quota.aborted"])
    system.ingestion.file([consumption(meter, JULY[0])])
    with store.write() as unit:
        quota = stored_or_new(unit, meter, JULY[0], at=system.clock.now())
        aborted = replace(quota, status=QuotaStatus.ABORTED, reason="gave up after 5 attempts")
        unit.quotas.save([aborted], at=system.clock.now())
    Worker(store, webhook_tasks(hooks), clock=system.clock).run_due()
    (event,) = delivered(receiver)
    assert event["type"] == "quota.aborted"
    assert event["data"] == {
        "nmi": meter,
        "date": JULY[0].isoformat(),
        "version": 1,
        "status": "ABORTED",
        "attempts": 0,
        "reason": "gave up after 5 attempts",
    }


class Boom:
    """Every attempt to complete fails: the settlement aborts after its attempts."""

    def check(self, point: FaultPoint, quota: object) -> None:
        if point is FaultPoint.BEFORE_COMPLETE:
            raise RuntimeError("boom")


def test_a_settlement_that_aborts_and_one_that_completes_by_request(
    store: Store, receiver: Receiver
) -> None:
    system = System.on(store)
    [one, two] = system.customers(2)
    hooks = Webhooks(
        store, system.clock, send=HttpSender(LOOPBACK, deadline=2), destinations=LOOPBACK
    )
    hooks.register(receiver.url, ["quota.completed", "quota.aborted"])
    system.ingestion.file([consumption(one, JULY[0]), consumption(two, JULY[0])])
    policy = SettlementPolicy(max_attempts=2)
    failing = Settlements(store, MemoryQuotaCache(system.clock), system.clock, policy, Boom())
    for _ in range(3):
        failing.settle(one, JULY[0])
    system.settlements.settle(two, JULY[0])
    system.settlements.settle(two, JULY[0])  # a replay: no new event
    Worker(store, webhook_tasks(hooks), clock=system.clock).run_due()
    assert sorted((e["type"], e["data"]["nmi"]) for e in delivered(receiver)) == [  # type: ignore[index]
        ("quota.aborted", one),
        ("quota.completed", two),
    ]
