"""What a receiver cannot do to the workers, against real receivers on SQLite and PostgreSQL: a
trickling or silent one is cut off at the attempt's deadline with a recorded failed attempt; an
endpoint that keeps failing opens its circuit (its deliveries postponed without an attempt, none
lost, delivered once it answers); at most ``MAX_IN_FLIGHT`` attempts to one endpoint at once; a
sender that raises is a recorded failed attempt; a name that resolves to loopback is refused at
connect time unless allowed."""

from __future__ import annotations

import ssl
import threading
import time

import pytest
from prometheus_client import REGISTRY

from freehours.clock import ManualClock
from freehours.domain.webhooks import (
    BREAKER_FAILURES,
    BREAKER_OPEN,
    MAX_IN_FLIGHT,
    DeliveryStatus,
    Destinations,
)
from freehours.jobs.job import JobState
from freehours.store.database import Store
from freehours.store.webhooks import DELIVERY_KIND, Delivery, NewEvent
from freehours.webhooks.sender import Answer, HttpSender
from freehours.webhooks.service import Webhooks
from freehours.workers.worker import Worker
from tests.webhooks.receiver import (
    CERTIFICATE,
    LOOPBACK,
    Receiver,
    Reply,
    hostile,
    receiving_tls,
)
from tests.webhooks.test_delivery import fan_out
from tests.webhooks.test_delivery import make as make_webhooks

DEADLINE = 1.0


def make(
    store: Store, clock: ManualClock, send: object = None, destinations: Destinations = LOOPBACK
) -> tuple[Webhooks, Worker]:
    return make_webhooks(store, clock, send, deadline=DEADLINE, destinations=destinations)


def publish(store: Store, clock: ManualClock, count: int = 1) -> list[str]:
    """Publish ``count`` events and fan them out: their deliveries written."""
    with store.write() as unit:
        written = unit.webhooks.publish(
            [NewEvent("quota.completed", clock.now(), {"n": n}) for n in range(count)]
        )
    assert fan_out(store, clock) == 1
    return written


def deliveries(store: Store) -> list[Delivery]:
    with store.read() as unit:
        return sorted(unit.webhooks.deliveries(), key=lambda d: d.id)


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.mark.parametrize("trickle", [0.2, None], ids=["trickling", "silent"])
def test_a_trickling_or_silent_receiver_is_cut_off_at_the_deadline(
    store: Store, clock: ManualClock, trickle: float | None
) -> None:
    with hostile(trickle) as receiver:
        hooks, worker = make(store, clock)
        endpoint = hooks.register(receiver.url, ["quota.completed"]).endpoint
        publish(store, clock)
        started = time.monotonic()
        assert worker.run_due() == 1
        took = time.monotonic() - started
    # Bounded by the deadline, not by a read timeout per byte (a byte every 0.2 s would hold a
    # per-read timeout of any length forever): the send itself within the deadline and a margin
    # (its recorded latency, below), the whole attempt, its database writes included, within a
    # margin a loaded 2-core machine keeps (3.35 s was seen while other suites ran beside it).
    assert DEADLINE <= took < DEADLINE + 10
    (delivery,) = deliveries(store)
    assert delivery.status is DeliveryStatus.PENDING
    assert delivery.attempts == 1
    assert delivery.last_error == "timed out (the 1 s deadline)"
    with store.read() as unit:
        (attempt,) = unit.webhooks.attempts([delivery.id])[delivery.id]
        failing = unit.webhooks.endpoint(endpoint.id)
    assert attempt.outcome == "error"
    assert DEADLINE * 1000 <= attempt.latency_ms < (DEADLINE + 1.5) * 1000
    assert failing is not None
    assert failing.failing_since is not None


def test_an_open_circuit_postpones_without_attempts_and_loses_nothing(
    store: Store, clock: ManualClock, receiver: Receiver
) -> None:
    hooks, worker = make(store, clock)
    endpoint = hooks.register(receiver.url, ["quota.completed"]).endpoint.id
    receiver.default = Reply(503)
    postponed_before = sample(
        "freehours_webhook_attempts_postponed_total", endpoint=endpoint, reason="circuit_open"
    )
    events = publish(store, clock, count=BREAKER_FAILURES + 7)
    while worker.run_due():
        pass
    # The first BREAKER_FAILURES attempts failed and opened the circuit; the rest were postponed
    # without an attempt, their jobs snoozed (no job attempt spent).
    assert len(receiver.received) == BREAKER_FAILURES
    assert hooks.gate.circuit(endpoint).open_until == clock.now() + BREAKER_OPEN
    found = deliveries(store)
    assert sum(d.attempts for d in found) == BREAKER_FAILURES
    assert all(d.status is DeliveryStatus.PENDING for d in found)
    assert (
        sample(
            "freehours_webhook_attempts_postponed_total", endpoint=endpoint, reason="circuit_open"
        )
        == postponed_before + 7
    )
    with store.read() as unit:
        jobs = [unit.jobs.history(DELIVERY_KIND, str(d.id))[0] for d in found]
        stored = unit.webhooks.endpoint(endpoint)
    assert sum(job.attempts for job in jobs) == BREAKER_FAILURES
    assert stored is not None
    assert stored.final_failures == 0  # a postponement is no failure of the endpoint's

    # Half-open: one trial attempt, which fails and opens it again.
    clock.advance(BREAKER_OPEN.total_seconds() * 1.3)
    while worker.run_due():
        pass
    assert len(receiver.received) == BREAKER_FAILURES + 1
    # The receiver answers again: the trial closes the circuit and every event arrives.
    receiver.default = Reply(200)
    deadline = clock.now() + BREAKER_OPEN * 10
    while clock.now() < deadline and any(
        d.status is DeliveryStatus.PENDING for d in deliveries(store)
    ):
        clock.advance(30)
        while worker.run_due():
            pass
    assert all(d.status is DeliveryStatus.SUCCEEDED for d in deliveries(store))
    assert set(receiver.ids()) == set(events)
    with store.read() as unit:
        states = {unit.jobs.history(DELIVERY_KIND, str(d.id))[0].state for d in found}
    assert states == {JobState.COMPLETED}


def test_at_most_max_in_flight_attempts_to_one_endpoint(
    store: Store, clock: ManualClock, receiver: Receiver
) -> None:
    hooks, _ = make(store, clock)
    endpoint = hooks.register(receiver.url, ["quota.completed"]).endpoint.id
    receiver.default = Reply(200, delay=0.5)
    publish(store, clock, count=MAX_IN_FLIGHT + 3)
    outcomes: list[str] = []
    start = threading.Barrier(MAX_IN_FLIGHT + 3)

    def attempt(delivery_id: int) -> None:
        start.wait()
        outcomes.append(hooks.attempt(delivery_id).what)

    threads = [
        threading.Thread(target=attempt, args=(d.id,)) for d in deliveries(store)
    ]  # a worker's threads, all at once
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["delivered"] * MAX_IN_FLIGHT + ["postponed: in_flight"] * 3
    assert len(receiver.received) == MAX_IN_FLIGHT
    # The slots are given back: the postponed ones go next.
    postponed = [d for d in deliveries(store) if d.status is DeliveryStatus.PENDING]
    assert [hooks.attempt(d.id).what for d in postponed] == ["delivered"] * 3
    assert hooks.gate.circuit(endpoint).failures == 0


def test_a_silent_endpoint_holds_at_most_max_in_flight_threads(
    store: Store, clock: ManualClock
) -> None:
    with hostile(None) as silent:
        hooks, _ = make(store, clock)
        hooks.register(silent.url, ["quota.completed"])
        publish(store, clock, count=8)
        outcomes: list[str] = []
        waited: list[float] = []
        sent: list[float] = []
        send = hooks.send

        def timed(url: str, body: bytes, headers: dict[str, str]) -> Answer:
            started = time.monotonic()
            try:
                return send(url, body, headers)
            finally:
                sent.append(time.monotonic() - started)

        hooks.send = timed

        def attempt(delivery_id: int) -> None:
            started = time.monotonic()
            outcomes.append(hooks.attempt(delivery_id).what)
            waited.append(time.monotonic() - started)

        threads = [threading.Thread(target=attempt, args=(d.id,)) for d in deliveries(store)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert silent.most_open <= MAX_IN_FLIGHT
    # Two threads held until the deadline; the other six let go at once, their deliveries
    # postponed (a worker's other jobs run meanwhile).
    assert sorted(outcomes).count("postponed: in_flight") == 8 - MAX_IN_FLIGHT
    assert sorted(waited)[: 8 - MAX_IN_FLIGHT][-1] < DEADLINE / 2
    # The send is what the deadline bounds; the attempt's record after it is a database write,
    # which a loaded machine may slow (seen: 2.7 s for a whole attempt with a 1 s deadline).
    assert len(sent) == MAX_IN_FLIGHT
    assert DEADLINE - 0.1 < max(sent) < DEADLINE + 0.5
    assert max(waited) < DEADLINE + 10


def test_a_sender_that_raises_is_a_recorded_failed_attempt(
    store: Store, clock: ManualClock
) -> None:
    def broken(url: str, body: bytes, headers: dict[str, str]) -> Answer:
        raise UnicodeError("label too long")

    hooks, worker = make(store, clock, send=broken)
    endpoint = hooks.register("https://hooks.example/x", ["quota.completed"]).endpoint.id
    publish(store, clock)
    assert worker.run_due() == 1
    (delivery,) = deliveries(store)
    assert delivery.status is DeliveryStatus.PENDING
    assert delivery.attempts == 1
    assert delivery.last_error == "UnicodeError: label too long"
    with store.read() as unit:
        stored = unit.webhooks.endpoint(endpoint)
    assert stored is not None
    assert stored.failing_since is not None


def test_a_url_stored_before_the_checks_fails_as_an_attempt(
    store: Store, clock: ManualClock
) -> None:
    """An endpoint registered before URLs were encoded at registration: the sender cannot
    encode it, and says so as a failed attempt."""
    hooks, worker = make(store, clock)
    endpoint = hooks.register("https://hooks.example/x", ["quota.completed"]).endpoint.id
    with store.write() as unit:
        unit.webhooks.update_endpoint(
            endpoint, now=clock.now(), url="http://" + "a" * 64 + ".example/päth"
        )
    publish(store, clock)
    assert worker.run_due() == 1
    (delivery,) = deliveries(store)
    assert delivery.attempts == 1
    assert delivery.last_error is not None
    assert delivery.last_error.startswith("UnicodeError")


def test_a_name_resolving_to_loopback_is_refused_at_connect_unless_allowed(
    store: Store, clock: ManualClock, receiver: Receiver
) -> None:
    url = f"http://localhost:{receiver.port}/hooks"
    hooks, worker = make(store, clock, destinations=Destinations())
    endpoint = hooks.register(url, ["quota.completed"]).endpoint.id  # a name: checked at connect
    refused_before = sample("freehours_webhook_destinations_refused_total", endpoint=endpoint)
    (ident,) = publish(store, clock)
    assert worker.run_due() == 1
    (delivery,) = deliveries(store)
    assert delivery.status is DeliveryStatus.PENDING
    assert delivery.last_error == (
        "refused by the destination policy: localhost: loopback addresses are refused unless"
        " FREEHOURS_WEBHOOK_ALLOWED_NETWORKS allows them"
    )
    assert receiver.received == []  # nothing was sent
    assert (
        sample("freehours_webhook_destinations_refused_total", endpoint=endpoint)
        == refused_before + 1
    )

    _, worker = make(store, clock, destinations=Destinations.parse("127.0.0.0/8,::1/128"))
    clock.advance(60)
    assert worker.run_due() == 1
    assert receiver.ids() == [ident]
    assert deliveries(store)[0].status is DeliveryStatus.SUCCEEDED
    assert receiver.received[0].headers["host"] == f"localhost:{receiver.port}"


def test_tls_is_verified_by_the_name_while_the_checked_address_is_connected_to(
    store: Store, clock: ManualClock
) -> None:
    trusted = ssl.create_default_context(cafile=str(CERTIFICATE))
    sender = HttpSender(LOOPBACK, deadline=DEADLINE, tls=trusted)
    hooks, worker = make(store, clock, send=sender)
    with receiving_tls() as (receiver, names):
        by_name = f"https://localhost:{receiver.port}/hooks"
        by_address = f"https://127.0.0.1:{receiver.port}/hooks"
        hooks.register(by_name, ["quota.completed"])
        hooks.register(by_address, ["quota.completed"])
        publish(store, clock)
        assert worker.run_due() == 2
    # By its name: resolved, checked, connected to 127.0.0.1, verified as localhost.
    assert len(receiver.received) == 1
    assert receiver.received[0].headers["host"] == f"localhost:{receiver.port}"
    assert "localhost" in names
    # By its address: the certificate names no address, so the attempt fails, recorded.
    statuses = sorted((d.status.value, d.last_error or "") for d in deliveries(store))
    assert statuses[0][0] == "pending"
    assert "SSLCertVerificationError" in statuses[0][1]
    assert statuses[1] == ("succeeded", "")
