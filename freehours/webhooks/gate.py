"""``EndpointGate``: each endpoint's circuit breaker and attempts in flight, in one worker process;
the decisions are ``freehours.domain.webhooks.Circuit``'s."""

from __future__ import annotations

import threading
from datetime import timedelta

import structlog

from freehours.clock import Clock
from freehours.domain.webhooks import (
    BREAKER_FAILURES,
    Circuit,
)

log = structlog.get_logger("freehours.webhooks")


class EndpointGate:
    """Each endpoint's circuit and its attempts in flight, in this process (shared by a
    worker's threads; each worker process keeps its own): the decisions are
    ``freehours.domain.webhooks.Circuit``'s."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._circuits: dict[str, Circuit] = {}
        self._in_flight: dict[str, int] = {}

    def enter(self, endpoint: str) -> tuple[str, timedelta] | None:
        """Take one of ``endpoint``'s slots for an attempt (None), or why not and how long to
        wait."""
        with self._lock:
            circuit = self._circuits.get(endpoint, _CLOSED)
            in_flight = self._in_flight.get(endpoint, 0)
            postponed = circuit.postponed(in_flight=in_flight, now=self.clock.now())
            if postponed is None:
                self._in_flight[endpoint] = in_flight + 1
            return postponed

    def leave(self, endpoint: str, *, succeeded: bool) -> None:
        """Give the slot back, the attempt's answer counted in the endpoint's circuit."""
        with self._lock:
            left = self._in_flight.pop(endpoint, 1) - 1
            if left:
                self._in_flight[endpoint] = left
            was = self._circuits.get(endpoint, _CLOSED)
            circuit = was.after(succeeded=succeeded, now=self.clock.now())
            if circuit == _CLOSED:
                self._circuits.pop(endpoint, None)
            else:
                self._circuits[endpoint] = circuit
        if circuit.open_until is not None and was.open_until != circuit.open_until:
            log.warning(
                "webhook_circuit_opened",
                endpoint=endpoint,
                failures=circuit.failures,
                until=circuit.open_until,
            )
        elif was.failures >= BREAKER_FAILURES and circuit == _CLOSED:
            log.info("webhook_circuit_closed", endpoint=endpoint)

    def circuit(self, endpoint: str) -> Circuit:
        with self._lock:
            return self._circuits.get(endpoint, _CLOSED)


_CLOSED = Circuit()
