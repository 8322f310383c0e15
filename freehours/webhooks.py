"""Webhooks: endpoints registered, secrets rotated, and each delivery's attempts
(docs/webhooks.md).

Events are written by the store, in the transaction of the state change (``freehours.store.
webhooks``); each delivery is a ``webhook-delivery`` job whose handler (``freehours.jobs.webhook``)
calls ``Webhooks.attempt``. An attempt reads its delivery, sends it outside any transaction
(short timeouts, a bounded read of the answer), then records the answer and what follows from it:
delivered; tried again after the schedule's wait (or the receiver's ``Retry-After``, if longer);
or, three days on, failed for good, and the endpoint disabled when it keeps failing.

A worker that dies between the send and the record leaves the delivery pending: the rescued job
sends it again, with the same ``webhook-id``. Delivery is at least once; receivers deduplicate by
``webhook-id``.
"""

from __future__ import annotations

import http.client
import random
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol
from urllib.parse import urlsplit

import structlog

from freehours.clock import Clock, SystemClock
from freehours.domain.webhooks import (
    MAX_ENDPOINTS,
    ROTATION_OVERLAP,
    DeliveryStatus,
    InvalidEndpoint,
    check_event_types,
    check_url,
    new_secret,
    next_attempt,
    parse_retry_after,
    should_disable,
    signed_headers,
)
from freehours.observability.metrics import (
    WEBHOOK_ATTEMPT_SECONDS,
    WEBHOOK_ATTEMPTS,
    WEBHOOK_DELIVERIES_FAILED,
    WEBHOOK_ENDPOINTS_DISABLED,
)
from freehours.store.database import Store
from freehours.store.webhooks import Delivery, Endpoint, Work

log = structlog.get_logger("freehours.webhooks")

#: Seconds to connect, and to wait for each read of the answer.
CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 10.0
#: The most of an answer's body read (for a failure's reason); the rest is never read.
MAX_ANSWER_BYTES = 4096
USER_AGENT = "freehours-webhooks/1"


@dataclass(frozen=True, slots=True)
class Answer:
    """What a receiver answered: its status, its ``Retry-After`` and the start of its body; or
    ``error`` when there was no answer (refused, reset, timed out)."""

    status: int | None
    retry_after: str | None = None
    body: bytes = b""
    error: str | None = None


class Sender(Protocol):
    def __call__(self, url: str, body: bytes, headers: dict[str, str]) -> Answer: ...


class HttpSender:
    """POSTs a delivery (http.client: the connect and each read bounded by their timeouts, at
    most ``max_answer`` bytes of the answer read, no redirects followed)."""

    def __init__(
        self,
        connect_timeout: float = CONNECT_TIMEOUT,
        read_timeout: float = READ_TIMEOUT,
        max_answer: int = MAX_ANSWER_BYTES,
    ) -> None:
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.max_answer = max_answer

    def __call__(self, url: str, body: bytes, headers: dict[str, str]) -> Answer:
        parts = urlsplit(url)
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        connection = (
            http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        )
        conn = connection(parts.hostname or "", parts.port, timeout=self.connect_timeout)
        try:
            conn.connect()
            if conn.sock is not None:
                conn.sock.settimeout(self.read_timeout)
            conn.request(
                "POST",
                path,
                body=body,
                headers={**headers, "content-type": "application/json", "user-agent": USER_AGENT},
            )
            response = conn.getresponse()
            return Answer(
                response.status, response.getheader("retry-after"), response.read(self.max_answer)
            )
        except TimeoutError:
            return Answer(None, error="timed out")
        except (OSError, http.client.HTTPException) as exc:
            return Answer(None, error=f"{type(exc).__name__}: {exc}"[:500])
        finally:
            conn.close()


@dataclass(frozen=True, slots=True)
class Registered:
    """An endpoint and its secret, shown this once."""

    endpoint: Endpoint
    secret: str


class NotFound(LookupError):
    pass


class TooManyEndpoints(Exception):
    pass


class Webhooks:
    """Endpoints and deliveries over a store."""

    def __init__(
        self,
        store: Store,
        clock: Clock | None = None,
        *,
        send: Sender | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.store = store
        self.clock = clock or SystemClock()
        self.send = send or HttpSender()
        self.rng = rng or random.Random()

    # --- endpoints ---------------------------------------------------------------------------

    def register(self, url: str, events: list[str], description: str = "") -> Registered:
        """A new endpoint, enabled, with a new secret. ``InvalidEndpoint`` for a field that
        cannot be; ``TooManyEndpoints`` past ``MAX_ENDPOINTS``."""
        url = check_url(url)
        types = check_event_types(events)
        secret = new_secret()
        now = self.clock.now()
        with self.store.write() as unit:
            if unit.webhooks.count_endpoints() >= MAX_ENDPOINTS:
                raise TooManyEndpoints(f"at most {MAX_ENDPOINTS} webhook endpoints")
            endpoint = unit.webhooks.create_endpoint(
                url=url, description=description, events=types, secret=secret, now=now
            )
        log.info("webhook_endpoint_registered", endpoint=endpoint.id, url=url, events=types)
        return Registered(endpoint, secret)

    def update(
        self,
        ident: str,
        *,
        url: str | None = None,
        events: list[str] | None = None,
        description: str | None = None,
        enabled: bool | None = None,
    ) -> Endpoint:
        values: dict[str, object] = {}
        if url is not None:
            values["url"] = check_url(url)
        if events is not None:
            values["events"] = check_event_types(events)
        if description is not None:
            values["description"] = description
        if enabled is not None:
            values["enabled"] = enabled
        with self.store.write() as unit:
            if unit.webhooks.endpoint(ident, for_update=True) is None:
                raise NotFound(ident)
            endpoint = unit.webhooks.update_endpoint(ident, now=self.clock.now(), **values)
        assert endpoint is not None
        log.info("webhook_endpoint_updated", endpoint=ident, fields=sorted(values))
        return endpoint

    def rotate(self, ident: str, overlap: timedelta = ROTATION_OVERLAP) -> Registered:
        """A new secret for an endpoint; the one it replaces still signs for ``overlap``."""
        now = self.clock.now()
        secret = new_secret()
        with self.store.write() as unit:
            current = unit.webhooks.endpoint(ident, for_update=True)
            if current is None:
                raise NotFound(ident)
            endpoint = unit.webhooks.update_endpoint(
                ident,
                now=now,
                secret=secret,
                previous_secret=current.secret,
                previous_until=now + overlap,
            )
        assert endpoint is not None
        log.info("webhook_secret_rotated", endpoint=ident, previous_until=now + overlap)
        return Registered(endpoint, secret)

    def delete(self, ident: str) -> None:
        with self.store.write() as unit:
            if not unit.webhooks.delete_endpoint(ident):
                raise NotFound(ident)
        log.info("webhook_endpoint_deleted", endpoint=ident)

    def replay(self, delivery_id: int) -> Delivery:
        """Send a delivery again with its event's id and body (``webhook-id`` unchanged)."""
        with self.store.write() as unit:
            delivery = unit.webhooks.replay(delivery_id, now=self.clock.now())
        if delivery is None:
            raise NotFound(str(delivery_id))
        log.info("webhook_replayed", delivery=delivery_id, webhook_id=delivery.event_id)
        return delivery

    # --- one attempt (the webhook-delivery job) ----------------------------------------------

    def attempt(self, delivery_id: int) -> tuple[str, timedelta | None]:
        """Attempt a delivery: what became of it (``delivered``, ``retry``, ``failed``, or why
        nothing was sent) and, to retry, how long to wait."""
        with self.store.read() as unit:
            work = unit.webhooks.work(delivery_id, for_update=False)
        if work is None:
            return "gone", None
        if work.delivery.status is not DeliveryStatus.PENDING:
            return f"{work.delivery.status.value} before", None
        now = self.clock.now()
        if not work.endpoint.enabled:
            with self.store.write() as unit:
                unit.webhooks.fail(work, at=now, reason="endpoint disabled")
            WEBHOOK_DELIVERIES_FAILED.labels(work.endpoint.id).inc()
            log.warning("webhook_delivery_failed", **_fields(work), reason="endpoint disabled")
            return "failed: endpoint disabled", None
        body = work.body.encode()
        stamp = int(now.timestamp())
        headers = signed_headers(work.endpoint.secrets(now), work.delivery.event_id, stamp, body)
        started = time.perf_counter()
        answer = self.send(work.endpoint.url, body, headers)
        latency = time.perf_counter() - started
        return self._record(work, answer, latency)

    def _record(self, work: Work, answer: Answer, latency: float) -> tuple[str, timedelta | None]:
        now = self.clock.now()
        ok = answer.status is not None and 200 <= answer.status < 300
        outcome = "succeeded" if ok else ("error" if answer.status is None else "failed")
        error = None if ok else _reason(answer)
        wait: timedelta | None = None
        disabled = False
        with self.store.write() as unit:
            current = unit.webhooks.work(work.delivery.id)
            if current is None or current.delivery.status is not DeliveryStatus.PENDING:
                return "recorded before", None
            if ok:
                status = DeliveryStatus.SUCCEEDED
            else:
                wait = next_attempt(
                    current.delivery.attempts + 1,
                    started=current.delivery.started_at,
                    now=now,
                    retry_after=parse_retry_after(answer.retry_after, now),
                    draw=self.rng.random(),
                )
                status = DeliveryStatus.PENDING if wait is not None else DeliveryStatus.FAILED
            unit.webhooks.record_attempt(
                current,
                at=now,
                outcome=outcome,
                status_code=answer.status,
                latency_ms=round(latency * 1000),
                error=error if status is not DeliveryStatus.FAILED else f"gave up: {error}",
                status=status,
                next_attempt_at=None if wait is None else now + wait,
            )
            if status is DeliveryStatus.FAILED:
                endpoint = unit.webhooks.endpoint(current.endpoint.id)
                if (
                    endpoint is not None
                    and endpoint.enabled
                    and should_disable(
                        failing_since=endpoint.failing_since,
                        final_failures=endpoint.final_failures,
                        now=now,
                    )
                ):
                    reason = (
                        f"deliveries failing since {endpoint.failing_since}"
                        f" ({endpoint.final_failures} failed for good in a row)"
                    )
                    unit.webhooks.disable(endpoint.id, at=now, reason=reason)
                    disabled = True
        fields = _fields(work)
        WEBHOOK_ATTEMPTS.labels(work.endpoint.id, outcome).inc()
        WEBHOOK_ATTEMPT_SECONDS.labels(work.endpoint.id).observe(latency)
        log.info(
            "webhook_attempt",
            **fields,
            outcome=outcome,
            status_code=answer.status,
            latency_ms=round(latency * 1000),
            error=error,
            attempt=work.delivery.attempts + 1,
            retry_in=None if wait is None else wait.total_seconds(),
        )
        if ok:
            return "delivered", None
        if wait is not None:
            return "retry", wait
        WEBHOOK_DELIVERIES_FAILED.labels(work.endpoint.id).inc()
        log.error("webhook_delivery_failed", **fields, reason=error)
        if disabled:
            WEBHOOK_ENDPOINTS_DISABLED.inc()
            log.error("webhook_endpoint_disabled", endpoint=work.endpoint.id, url=work.endpoint.url)
        return f"failed: {error}", None


#: Events deleted per transaction by ``prune``.
PRUNE_BATCH = 1000


def prune(store: Store, before: datetime) -> int:
    """Delete the events older than ``before`` that nothing is still trying to deliver, with
    their deliveries and attempts (the worker's retention, ``WEBHOOK_RETENTION``)."""
    pruned = 0
    while True:
        with store.write() as unit:
            deleted = unit.webhooks.prune(before=before, limit=PRUNE_BATCH)
        pruned += deleted
        if deleted < PRUNE_BATCH:
            if pruned:
                log.info("webhook_events_pruned", count=pruned)
            return pruned


def _fields(work: Work) -> dict[str, object]:
    return {
        "endpoint": work.endpoint.id,
        "delivery": work.delivery.id,
        "webhook_id": work.delivery.event_id,
        "event_type": work.delivery.event_type,
    }


def _reason(answer: Answer) -> str:
    if answer.status is None:
        return answer.error or "no answer"
    text = answer.body.decode("utf-8", "replace").strip()
    return f"HTTP {answer.status}" + (f": {text[:500]}" if text else "")


__all__ = [
    "Answer",
    "HttpSender",
    "InvalidEndpoint",
    "NotFound",
    "Registered",
    "TooManyEndpoints",
    "Webhooks",
]
