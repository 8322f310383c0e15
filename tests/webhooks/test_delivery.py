"""Webhook deliveries end to end, on SQLite and PostgreSQL: events written in the state change's
transaction, delivered by the durable job to a real HTTP receiver, signed (checked with the
Standard Webhooks reference library), retried on the schedule (the clock driven through its
seam), given up after three days, the endpoint disabled, replayed with the same webhook-id."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from random import Random

import pytest
from prometheus_client import REGISTRY
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from freehours.clock import ManualClock
from freehours.domain.webhooks import GIVE_UP_AFTER, DeliveryStatus, Destinations
from freehours.jobs.job import JobState
from freehours.jobs.retry import RetryPolicy
from freehours.store.database import Store
from freehours.store.webhooks import DELIVERY_KIND, FANOUT_KIND, NewEvent
from freehours.webhooks.sender import Answer, HttpSender
from freehours.webhooks.service import Webhooks
from freehours.workers import rescuer
from freehours.workers.webhook import FanOutTask, webhook_tasks
from freehours.workers.worker import Worker, WorkerConfig
from tests.webhooks.receiver import LOOPBACK, Receiver, Reply

LEASE = timedelta(minutes=1)


class Death(BaseException):
    """A worker process dying mid-delivery: nothing catches it."""


def make(
    store: Store,
    clock: ManualClock,
    send: object = None,
    *,
    deadline: float = 0.5,
    destinations: Destinations = LOOPBACK,
) -> tuple[Webhooks, Worker]:
    """Webhooks over ``store`` (sending to what ``destinations`` allows, each attempt within
    ``deadline``, unless ``send`` stands in for the sender) and a worker of one thread."""
    hooks = Webhooks(
        store,
        clock,
        send=send or HttpSender(destinations, connect_timeout=1, deadline=deadline),  # type: ignore[arg-type]
        rng=Random(1),
        destinations=destinations,
    )
    worker = Worker(
        store,
        webhook_tasks(hooks),
        config=WorkerConfig(concurrency=1, lease=LEASE, listen=False),
        clock=clock,
        retry=RetryPolicy(clock, Random(2), base=timedelta(seconds=1), cap=timedelta(seconds=2)),
    )
    return hooks, worker


def fan_out(store: Store, clock: ManualClock) -> int:
    """Run the due ``webhook-fanout`` jobs, as a worker would: how many ran (their deliveries
    written, each with its job)."""
    hooks = Webhooks(store, clock)
    return Worker(
        store, {FANOUT_KIND: FanOutTask(hooks)}, config=WorkerConfig(listen=False), clock=clock
    ).run_due()


def publish(store: Store, clock: ManualClock, kind: str = "quota.completed", **data: object) -> str:
    """Publish an event and fan it out: its deliveries written."""
    with store.write() as unit:
        (ident,) = unit.webhooks.publish(
            [NewEvent(kind, clock.now(), {"nmi": "4102000001", **data})]
        )
    assert fan_out(store, clock) == 1
    return ident


def deliveries(store: Store) -> list[object]:
    with store.read() as unit:
        return list(unit.webhooks.deliveries())


def test_an_event_arrives_once_signed_and_verifies(
    store: Store, clock: ManualClock, receiver: Receiver
) -> None:
    start = clock.now()
    hooks, worker = make(store, clock)
    registered = hooks.register(receiver.url, ["quota.completed"], "test")
    ident = publish(store, clock, free_kwh="3.250")
    assert worker.run_due() == 1
    assert receiver.ids() == [ident]
    got = receiver.received[0]
    assert Webhook(registered.secret).verify(got.body, got.headers) == {
        "type": "quota.completed",
        "timestamp": start.isoformat().replace("+00:00", "Z"),
        "data": {"nmi": "4102000001", "free_kwh": "3.250"},
    }
    with pytest.raises(WebhookVerificationError):
        Webhook(registered.secret).verify(got.body + b" ", got.headers)
    (delivery,) = deliveries(store)
    assert delivery.status is DeliveryStatus.SUCCEEDED
    assert delivery.event_id == ident
    # Done: nothing more runs, however long the clock goes on.
    clock.advance(GIVE_UP_AFTER.total_seconds())
    assert worker.run_due() == 0
    assert receiver.ids() == [ident]


def test_only_subscribed_enabled_endpoints_get_an_event(
    store: Store, clock: ManualClock, receiver: Receiver
) -> None:
    hooks, worker = make(store, clock)
    hooks.register(receiver.url, ["invoice.finalised"])
    with store.write() as unit:
        assert unit.webhooks.publish([NewEvent("quota.completed", clock.now(), {})]) == []
    other = hooks.register(receiver.url + "/2", ["quota.completed"])
    hooks.update(other.endpoint.id, enabled=False)
    with store.write() as unit:
        assert unit.webhooks.publish([NewEvent("quota.completed", clock.now(), {})]) == []
    assert worker.run_due() == 0
    assert receiver.received == []


def test_a_rolled_back_transaction_writes_no_event(
    store: Store, clock: ManualClock, receiver: Receiver
) -> None:
    hooks, worker = make(store, clock)
    hooks.register(receiver.url, ["quota.completed"])
    with pytest.raises(RuntimeError), store.write() as unit:  # noqa: PT012 - the point
        unit.webhooks.publish([NewEvent("quota.completed", clock.now(), {})])
        raise RuntimeError("the state change fails after its event")
    with store.read() as unit:
        assert unit.webhooks.events() == []
        assert unit.webhooks.deliveries() == []
        assert DELIVERY_KIND not in unit.jobs.kinds()
        assert FANOUT_KIND not in unit.jobs.kinds()
    assert worker.run_due() == 0
    assert receiver.received == []


def test_500_then_200_is_retried_after_the_schedule(
    store: Store, clock: ManualClock, receiver: Receiver
) -> None:
    start = clock.now()
    hooks, worker = make(store, clock)
    endpoint = hooks.register(receiver.url, ["quota.completed"]).endpoint.id
    receiver.script = [Reply(500, body=b"database on fire"), Reply(500)]
    ident = publish(store, clock)
    assert worker.run_due() == 1
    (delivery,) = deliveries(store)
    assert delivery.status is DeliveryStatus.PENDING
    assert delivery.last_error == "HTTP 500: database on fire"
    wait = delivery.next_attempt_at - start
    assert timedelta(seconds=4) <= wait <= timedelta(seconds=6)  # 5 s +- 20%
    assert worker.run_due() == 0  # not before its time
    clock.advance(6)
    assert worker.run_due() == 1  # the second 500
    clock.advance(72)  # a minute +- 20% later
    assert worker.run_due() == 1
    assert receiver.ids() == [ident] * 3
    (delivery,) = deliveries(store)
    assert delivery.status is DeliveryStatus.SUCCEEDED
    with store.read() as unit:
        attempts = unit.webhooks.attempts([delivery.id])[delivery.id]
    assert [(a.outcome, a.status_code) for a in attempts] == [
        ("failed", 500),
        ("failed", 500),
        ("succeeded", 200),
    ]
    # Counted by endpoint and outcome, each attempt's latency observed.
    labels = {"endpoint": endpoint}
    attempts_total = "freehours_webhook_attempts_total"
    assert REGISTRY.get_sample_value(attempts_total, {**labels, "outcome": "failed"}) == 2
    assert REGISTRY.get_sample_value(attempts_total, {**labels, "outcome": "succeeded"}) == 1
    assert REGISTRY.get_sample_value("freehours_webhook_attempt_seconds_count", labels) == 3


def test_a_429s_retry_after_is_honoured(
    store: Store, clock: ManualClock, receiver: Receiver
) -> None:
    start = clock.now()
    hooks, worker = make(store, clock)
    hooks.register(receiver.url, ["quota.completed"])
    receiver.script = [Reply(429, {"Retry-After": "600"})]
    publish(store, clock)
    worker.run_due()
    (delivery,) = deliveries(store)
    assert delivery.next_attempt_at == start + timedelta(seconds=600)
    clock.advance(599)
    assert worker.run_due() == 0
    clock.advance(1)
    assert worker.run_due() == 1
    assert deliveries(store)[0].status is DeliveryStatus.SUCCEEDED


def test_a_receiver_that_times_out_is_retried(
    store: Store, clock: ManualClock, receiver: Receiver
) -> None:
    hooks, worker = make(store, clock)
    hooks.register(receiver.url, ["quota.completed"])
    receiver.script = [Reply(200, delay=2.0)]  # past the sender's 0.5 s deadline
    ident = publish(store, clock)
    worker.run_due()
    (delivery,) = deliveries(store)
    assert delivery.status is DeliveryStatus.PENDING
    assert delivery.last_error == "timed out (the 0.5 s deadline)"
    clock.advance(10)
    worker.run_due()
    assert deliveries(store)[0].status is DeliveryStatus.SUCCEEDED
    # The receiver saw the event twice (it answered the first too late), by one webhook-id.
    assert set(receiver.ids()) == {ident}


def test_a_receiver_down_for_a_while(store: Store, clock: ManualClock) -> None:
    receiver = Receiver()
    receiver.start()
    hooks, worker = make(store, clock)
    hooks.register(receiver.url, ["quota.completed"])
    receiver.stop()
    ident = publish(store, clock)
    for _ in range(4):  # down: refused, four times (5 s, 1 min, 5 min, 30 min)
        worker.run_due()
        clock.advance(40 * 60)
    (delivery,) = deliveries(store)
    assert delivery.status is DeliveryStatus.PENDING
    assert delivery.attempts == 4
    assert "ConnectionRefusedError" in (delivery.last_error or "")
    receiver.start()  # back, on the same port
    try:
        clock.advance(2 * 3600)
        worker.run_due()
        assert receiver.ids() == [ident]
        assert deliveries(store)[0].status is DeliveryStatus.SUCCEEDED
    finally:
        receiver.stop()


def test_a_worker_dying_mid_delivery_sends_the_same_webhook_id_again(
    store: Store, clock: ManualClock, receiver: Receiver
) -> None:
    sender = HttpSender(LOOPBACK, connect_timeout=1, deadline=1)
    dying = {"once": True}

    def send(url: str, body: bytes, headers: dict[str, str]) -> Answer:
        answer = sender(url, body, headers)
        if dying.pop("once", False):
            raise Death  # after the receiver got it, before the answer is recorded
        return answer

    hooks, worker = make(store, clock, send)
    hooks.register(receiver.url, ["quota.completed"])
    ident = publish(store, clock)
    with pytest.raises(Death):
        worker.run_due()
    clock.advance(LEASE.total_seconds() + 1)
    assert len(rescuer.rescue(store, worker.retry)) == 1
    clock.advance(10)
    assert worker.run_due() == 1
    assert receiver.ids() == [ident, ident]  # at least once: duplicates share the webhook-id
    (delivery,) = deliveries(store)
    assert delivery.status is DeliveryStatus.SUCCEEDED
    with store.read() as unit:
        (job,) = unit.jobs.history(DELIVERY_KIND, str(delivery.id))
    assert job.state is JobState.COMPLETED
    clock.advance(GIVE_UP_AFTER.total_seconds())
    assert worker.run_due() == 0


def test_gives_up_after_three_days_with_the_reason_then_disables_the_endpoint(
    store: Store, clock: ManualClock, receiver: Receiver
) -> None:
    start = clock.now()
    hooks, worker = make(store, clock)
    endpoint = hooks.register(receiver.url, ["quota.completed"]).endpoint
    receiver.default = Reply(503, body=b"x" * 100_000)
    disabled_before = REGISTRY.get_sample_value("freehours_webhook_endpoints_disabled_total") or 0
    first = publish(store, clock)
    second_at = start + timedelta(days=2, hours=12)
    second = None
    while clock.now() < start + timedelta(days=7):
        worker.run_due()
        if second is None and clock.now() >= second_at:
            second = publish(store, clock)
        clock.advance(3600)
    by_event = {d.event_id: d for d in deliveries(store)}
    one = by_event[first]
    assert one.status is DeliveryStatus.FAILED
    assert one.last_error is not None
    assert one.last_error.startswith("gave up: HTTP 503: xxx")
    assert len(one.last_error) < 1000  # the answer's body is read only so far
    assert start + timedelta(days=2) < one.finished_at <= start + GIVE_UP_AFTER
    assert 10 <= one.attempts <= 16
    assert second is not None
    assert by_event[second].status is DeliveryStatus.FAILED
    with store.read() as unit:
        stored = unit.webhooks.endpoint(endpoint.id)
    assert stored is not None
    assert not stored.enabled  # every attempt failed for five days
    assert stored.disabled_reason is not None
    assert "deliveries failing since" in stored.disabled_reason
    assert REGISTRY.get_sample_value("freehours_webhook_endpoints_disabled_total") == (
        disabled_before + 1
    )
    # Disabled: new events are not sent to it; enabled again, they are.
    with store.write() as unit:
        assert unit.webhooks.publish([NewEvent("quota.completed", clock.now(), {})]) == []
    hooks.update(endpoint.id, enabled=True)
    receiver.default = Reply(200)
    third = publish(store, clock)
    worker.run_due()
    assert receiver.ids()[-1] == third


def test_replay_delivers_the_same_webhook_id(
    store: Store, clock: ManualClock, receiver: Receiver
) -> None:
    hooks, worker = make(store, clock)
    registered = hooks.register(receiver.url, ["quota.completed"])
    ident = publish(store, clock)
    worker.run_due()
    (delivery,) = deliveries(store)
    replayed = hooks.replay(delivery.id)
    assert replayed.status is DeliveryStatus.PENDING
    assert replayed.replays == 1
    worker.run_due()
    assert receiver.ids() == [ident, ident]
    first, again = receiver.received
    assert first.body == again.body
    Webhook(registered.secret).verify(again.body, again.headers)
    assert deliveries(store)[0].status is DeliveryStatus.SUCCEEDED


def test_rotation_signs_with_both_secrets_for_the_overlap(
    store: Store, clock: ManualClock, receiver: Receiver
) -> None:
    hooks, worker = make(store, clock)
    old = hooks.register(receiver.url, ["quota.completed"]).secret
    new = hooks.rotate(_only_endpoint(store)).secret
    assert new != old
    assert new.startswith("whsec_")
    publish(store, clock)
    worker.run_due()
    got = receiver.received[-1]
    assert len(got.headers["webhook-signature"].split()) == 2
    Webhook(old).verify(got.body, got.headers)
    Webhook(new).verify(got.body, got.headers)
    # After the overlap only the new secret signs.
    clock.advance(timedelta(hours=24, seconds=1).total_seconds())
    publish(store, clock)
    worker.run_due()
    late = receiver.received[-1]
    assert len(late.headers["webhook-signature"].split()) == 1
    stamp = datetime.fromtimestamp(int(late.headers["webhook-timestamp"]), UTC)
    expected = Webhook(new).sign(late.webhook_id, stamp, late.body)
    assert late.headers["webhook-signature"] == expected
    assert Webhook(old).sign(late.webhook_id, stamp, late.body) != expected


def test_a_deleted_endpoint_gets_nothing_more(
    store: Store, clock: ManualClock, receiver: Receiver
) -> None:
    hooks, worker = make(store, clock)
    endpoint = hooks.register(receiver.url, ["quota.completed"]).endpoint
    publish(store, clock)
    hooks.delete(endpoint.id)
    assert worker.run_due() == 1  # the job finds its delivery gone
    assert receiver.received == []


def _only_endpoint(store: Store) -> str:
    with store.read() as unit:
        (endpoint,) = unit.webhooks.endpoints()
    return endpoint.id
