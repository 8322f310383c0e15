"""Webhooks: endpoints registered, secrets rotated, and each delivery's attempts
(docs/webhooks.md).

Events are written by the store, in the transaction of the state change (``freehours.store.
webhooks``), with a ``webhook-fanout`` job whose handler calls ``Webhooks.fan_out`` to write their
deliveries; each delivery is a ``webhook-delivery`` job whose handler
(``freehours.workers.webhook``) calls ``Webhooks.attempt``. An attempt reads its delivery, sends it
outside any transaction (within one deadline for the whole attempt, only to an address the
destination policy allows), then records the answer and what follows from it: delivered; tried
again after the schedule's wait (or the receiver's ``Retry-After``, if longer); or, three days on,
failed for good, and the endpoint disabled when it keeps failing. Whatever the sender raises is a
failed attempt too. An endpoint whose circuit is open, or whose attempts in flight are at their cap
(``EndpointGate``), has its delivery postponed instead: no attempt, nothing recorded.

A worker that dies between the send and the record leaves the delivery pending: the rescued job
sends it again, with the same ``webhook-id``. Delivery is at least once; receivers deduplicate by
``webhook-id``.
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import structlog

from freehours.clock import Clock, SystemClock
from freehours.domain.webhooks import (
    GIVE_UP_AFTER,
    JITTER,
    MAX_ENDPOINTS,
    ROTATION_OVERLAP,
    DeliveryStatus,
    Destinations,
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
    WEBHOOK_ATTEMPTS_POSTPONED,
    WEBHOOK_DELIVERIES_FAILED,
    WEBHOOK_DESTINATIONS_REFUSED,
    WEBHOOK_ENDPOINTS_DISABLED,
)
from freehours.store.database import Store
from freehours.store.webhooks import Delivery, Endpoint, Work
from freehours.webhooks.gate import (
    EndpointGate,
)
from freehours.webhooks.sender import (
    Answer,
    HttpSender,
    Sender,
)

log = structlog.get_logger("freehours.webhooks")


#: The most of a non-2xx answer's body kept as its reason (what an admin reads back): enough
#: for a receiver's one-line error, too little to read a service out through it.
MAX_EXCERPT = 200


@dataclass(frozen=True, slots=True)
class Registered:
    """An endpoint and its secret, shown this once."""

    endpoint: Endpoint
    secret: str


class NotFound(LookupError):
    """No such webhook endpoint (HTTP 404)."""


class TooManyEndpoints(Exception):
    """As many webhook endpoints are registered as may be (HTTP 422)."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What became of a delivery's turn: ``what`` (``delivered``, ``retry``, ``failed: ...``,
    ``postponed: ...``, or why nothing was sent); a failed attempt's ``retry_in`` (the
    schedule's wait); or, with no attempt made, ``postponed``: how long to wait before asking
    again (not a failure)."""

    what: str
    retry_in: timedelta | None = None
    postponed: timedelta | None = None


class Webhooks:
    """Endpoints and deliveries over a store. ``destinations``: where a delivery may go (the
    destination policy, checked at registration for a literal address and by the default
    sender at every connect)."""

    def __init__(
        self,
        store: Store,
        clock: Clock | None = None,
        *,
        send: Sender | None = None,
        rng: random.Random | None = None,
        destinations: Destinations | None = None,
    ) -> None:
        self.store = store
        self.clock = clock or SystemClock()
        self.destinations = destinations or Destinations()
        self.send = send or HttpSender(self.destinations)
        self.rng = rng or random.Random()
        self.gate = EndpointGate(self.clock)

    # --- endpoints ---------------------------------------------------------------------------

    def check_url(self, url: str) -> str:
        """``url`` as it is stored and sent (``check_url``), if the destination policy does not
        refuse its host's literal address; else ``InvalidEndpoint``."""
        sent = check_url(url)
        refusal = self.destinations.url_refusal(sent)
        if refusal is not None:
            raise InvalidEndpoint("url", refusal)
        return sent

    def register(self, url: str, events: list[str], description: str = "") -> Registered:
        """A new endpoint, enabled, with a new secret. ``InvalidEndpoint`` for a field that
        cannot be; ``TooManyEndpoints`` past ``MAX_ENDPOINTS``."""
        url = self.check_url(url)
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
            values["url"] = self.check_url(url)
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

    # --- the fan-out (the webhook-fanout job) -----------------------------------------------

    def fan_out(self, events: Sequence[str], endpoints: Mapping[str, Sequence[str]]) -> int:
        """Write the deliveries of ``events`` to ``endpoints`` (each type's, those subscribed
        when the events were written), those not written already: how many."""
        with self.store.write() as unit:
            written = unit.webhooks.fan_out(events, endpoints)
        log.info("webhook_fanned_out", events=len(events), deliveries=written)
        return written

    # --- one attempt (the webhook-delivery job) ----------------------------------------------

    def attempt(self, delivery_id: int) -> Outcome:
        """Attempt a delivery, unless its endpoint's circuit is open or its attempts in flight
        are at their cap (then it is postponed, no attempt made or counted)."""
        with self.store.read() as unit:
            work = unit.webhooks.work(delivery_id, for_update=False)
        if work is None:
            return Outcome("gone")
        if work.delivery.status is not DeliveryStatus.PENDING:
            return Outcome(f"{work.delivery.status.value} before")
        now = self.clock.now()
        if not work.endpoint.enabled:
            return self._fail_unsent(work, "endpoint disabled")
        endpoint = work.endpoint.id
        postponed = self.gate.enter(endpoint)
        if postponed is not None:
            return self._postpone(work, *postponed)
        body = work.body.encode()
        stamp = int(now.timestamp())
        headers = signed_headers(work.endpoint.secrets(now), work.delivery.event_id, stamp, body)
        started = time.perf_counter()
        answer = Answer(None, error="the attempt did not finish")
        try:
            answer = self.send(work.endpoint.url, body, headers)
        except Exception as exc:  # noqa: BLE001 - any sender's failure is a failed attempt
            answer = Answer(None, error=f"{type(exc).__name__}: {exc}"[:500])
        finally:
            self.gate.leave(endpoint, succeeded=_succeeded(answer))
        latency = time.perf_counter() - started
        if answer.refused:
            WEBHOOK_DESTINATIONS_REFUSED.labels(endpoint).inc()
        return self._record(work, answer, latency)

    def _postpone(self, work: Work, reason: str, wait: timedelta) -> Outcome:
        """No attempt now: ask again after ``wait`` (spread by up to ``JITTER`` of it, so that a
        backlog does not come back at once), or, past the delivery's give-up, fail it, unsent
        (not counted against the endpoint: its own attempts are)."""
        now = self.clock.now()
        WEBHOOK_ATTEMPTS_POSTPONED.labels(work.endpoint.id, reason).inc()
        give_up = work.delivery.started_at + GIVE_UP_AFTER
        if now >= give_up:
            return self._fail_unsent(work, f"gave up: postponed ({reason}) past its three days")
        wait = min(wait * (1 + JITTER * self.rng.random()), give_up - now)
        log.info(
            "webhook_postponed",
            **_fields(work),
            reason=reason,
            retry_in=wait.total_seconds(),
        )
        return Outcome(f"postponed: {reason}", postponed=wait)

    def _fail_unsent(self, work: Work, reason: str) -> Outcome:
        with self.store.write() as unit:
            unit.webhooks.fail(work, at=self.clock.now(), reason=reason)
        WEBHOOK_DELIVERIES_FAILED.labels(work.endpoint.id).inc()
        log.warning("webhook_delivery_failed", **_fields(work), reason=reason)
        return Outcome(f"failed: {reason}")

    def _record(self, work: Work, answer: Answer, latency: float) -> Outcome:
        now = self.clock.now()
        ok = _succeeded(answer)
        outcome = "succeeded" if ok else ("error" if answer.status is None else "failed")
        error = None if ok else _reason(answer)
        wait: timedelta | None = None
        disabled = False
        with self.store.write() as unit:
            current = unit.webhooks.work(work.delivery.id)
            if current is None or current.delivery.status is not DeliveryStatus.PENDING:
                return Outcome("recorded before")
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
            return Outcome("delivered")
        if wait is not None:
            return Outcome("retry", retry_in=wait)
        WEBHOOK_DELIVERIES_FAILED.labels(work.endpoint.id).inc()
        log.error("webhook_delivery_failed", **fields, reason=error)
        if disabled:
            WEBHOOK_ENDPOINTS_DISABLED.inc()
            log.error("webhook_endpoint_disabled", endpoint=work.endpoint.id, url=work.endpoint.url)
        return Outcome(f"failed: {error}")


def prune(store: Store, before: datetime) -> int:
    """Delete the events older than ``before`` that nothing is still trying to deliver, with
    their deliveries and attempts (the worker's retention, ``WEBHOOK_RETENTION``), a batch a
    transaction."""
    pruned = store.prune(lambda unit, limit: unit.webhooks.prune(before=before, limit=limit))
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


def _succeeded(answer: Answer) -> bool:
    return answer.status is not None and 200 <= answer.status < 300


def _reason(answer: Answer) -> str:
    """A failed attempt's reason as an admin reads it: the error, or the status and a short
    excerpt of the body (printable characters only). Only a destination the policy allowed
    answers at all; a refused one's reason names the policy, never what is there."""
    if answer.status is None:
        return answer.error or "no answer"
    text = answer.body.decode("utf-8", "replace")
    excerpt = " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())
    if len(excerpt) > MAX_EXCERPT:
        excerpt = excerpt[: MAX_EXCERPT - 1] + "…"
    return f"HTTP {answer.status}" + (f": {excerpt}" if excerpt else "")


__all__ = [
    "InvalidEndpoint",
    "NotFound",
    "Outcome",
    "Registered",
    "TooManyEndpoints",
    "Webhooks",
]
