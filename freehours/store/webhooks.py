"""Webhooks: endpoints, the outbox of events, deliveries and their attempts (docs/webhooks.md).

``publish`` is the outbox: the quota and invoice repositories call it in the transaction that
writes the state change an event tells of, so that a rolled-back change has no event and a
committed one cannot lose its event. That transaction writes the events and one
``webhook-fanout`` job (``FANOUT_KIND``) naming them and the endpoints subscribed to each type
then: a fixed number of statements and rows however many endpoints there are, so an endpoint's
mere existence does not slow a settlement. The job (``fan_out``) writes a delivery for each of
those endpoints still registered, each with its ``webhook-delivery`` job (``DELIVERY_KIND``);
run again, it writes only what is missing. An event no enabled endpoint subscribes to is not
stored; the cost to a settlement while no endpoint is registered is one read of this small
table.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from freehours.domain.webhooks import (
    GIVE_UP_AFTER,
    DeliveryStatus,
    payload,
)
from freehours.store.jobs import Jobs, NewJob
from freehours.store.prepared import Prepared
from freehours.store.repository import Repository
from freehours.store.tables import (
    webhook_attempts,
    webhook_deliveries,
    webhook_endpoints,
    webhook_events,
)

#: The job kind that carries out one delivery (``freehours.workers.webhook``).
DELIVERY_KIND = "webhook-delivery"
#: The job kind that writes a publish's deliveries (``Webhooks.fan_out``).
FANOUT_KIND = "webhook-fanout"
#: A delivery job's attempts, a crashed worker's rescue included: far more than the schedule's
#: (``freehours.domain.webhooks.RETRY_SCHEDULE``), whose give-up ends a delivery first.
DELIVERY_MAX_ATTEMPTS = 100
#: The most an attempt's error text keeps.
MAX_ERROR_LENGTH = 1000


@dataclass(frozen=True, slots=True)
class Endpoint:
    id: str
    url: str
    description: str
    events: tuple[str, ...]
    secret: str
    previous_secret: str | None
    previous_until: datetime | None
    enabled: bool
    disabled_at: datetime | None
    disabled_reason: str | None
    failing_since: datetime | None
    final_failures: int
    created_at: datetime
    updated_at: datetime

    def secrets(self, now: datetime) -> list[str]:
        """The secrets that sign now: the current one, and a rotated one in its overlap."""
        valid = [self.secret]
        if self.previous_secret and self.previous_until and now < self.previous_until:
            valid.append(self.previous_secret)
        return valid


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An event to publish: its type, when it happened, and its data."""

    type: str
    at: datetime
    data: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Delivery:
    id: int
    event_id: str
    event_type: str
    endpoint_id: str
    status: DeliveryStatus
    attempts: int
    created_at: datetime
    started_at: datetime
    next_attempt_at: datetime | None
    finished_at: datetime | None
    last_status_code: int | None
    last_error: str | None
    replays: int


@dataclass(frozen=True, slots=True)
class Attempt:
    id: int
    delivery_id: int
    at: datetime
    outcome: str
    status_code: int | None
    latency_ms: int
    error: str | None


@dataclass(frozen=True, slots=True)
class Work:
    """What one attempt of a delivery needs: the delivery, its event's body, its endpoint."""

    delivery: Delivery
    body: str
    endpoint: Endpoint


def event_id() -> str:
    """A new event's id, which receivers deduplicate by: ``msg_`` and 32 hex digits."""
    return "msg_" + uuid.uuid4().hex


def endpoint_id() -> str:
    return "ep_" + uuid.uuid4().hex[:24]


_E = webhook_endpoints.c
_D = webhook_deliveries.c
_A = webhook_attempts.c
_V = webhook_events.c
#: On the settlement's hot path (every quota settled asks it): ``freehours.store.prepared``.
_SUBSCRIBERS = Prepared(sa.select(_E.id, _E.events).where(_E.enabled.is_(True)))
_DELIVERY_COLUMNS = (*webhook_deliveries.c, _V.type)


class Webhooks(Repository):
    """Webhook endpoints, events, deliveries and attempts, in the unit of work's transaction."""

    __slots__ = ()

    # --- the outbox ------------------------------------------------------------------------

    def publish(self, events: Sequence[NewEvent]) -> list[str]:
        """Write each event that an enabled endpoint subscribes to, and one ``webhook-fanout``
        job to deliver them to the endpoints subscribed now, in the caller's transaction: the
        ids of the events written."""
        if not events:
            return []
        subscribers = _SUBSCRIBERS.rows(self._conn, {})
        if not subscribers:
            return []
        by_type: dict[str, list[str]] = {}
        for endpoint, types in subscribers:
            for kind in types.split():
                by_type.setdefault(kind, []).append(endpoint)
        event_rows: list[dict[str, Any]] = [
            {
                "id": event_id(),
                "type": event.type,
                "created_at": event.at,
                "payload": payload(event.type, event.at, event.data),
            }
            for event in events
            if event.type in by_type
        ]
        if not event_rows:
            return []
        self._conn.execute(webhook_events.insert(), event_rows)
        written = [row["id"] for row in event_rows]
        at = min(row["created_at"] for row in event_rows)
        # The endpoints are those subscribed when the events are written: an endpoint
        # registered, subscribed or enabled later gets the events after it.
        kinds = {row["type"] for row in event_rows}
        subscribed = {kind: sorted(by_type[kind]) for kind in sorted(kinds)}
        Jobs(self._conn, self._driver).enqueue_many(
            [
                NewJob(
                    FANOUT_KIND,
                    written[0],
                    {"events": written, "endpoints": subscribed},
                    run_at=at,
                    # A delivery job's: written however late, each delivery is given up on its
                    # own schedule, visibly (and replayable), rather than never written.
                    deadline=_delivery_deadline(at),
                    max_attempts=DELIVERY_MAX_ATTEMPTS,
                )
            ],
            now=at,
        )
        return written

    def fan_out(self, events: Sequence[str], endpoints: Mapping[str, Sequence[str]]) -> int:
        """A ``webhook-fanout`` job's work: a delivery of each of ``events`` (ids, in order) to
        each of ``endpoints[its type]`` still registered and not already delivered to, with its
        job; how many deliveries were written. An event pruned meanwhile has none."""
        found = {
            row.id: row
            for row in self._conn.execute(
                sa.select(_V.id, _V.type, _V.created_at).where(_V.id.in_(list(events)))
            )
        }
        if not found:
            return 0
        wanted = {ident for idents in endpoints.values() for ident in idents}
        present = set(self._conn.scalars(sa.select(_E.id).where(_E.id.in_(sorted(wanted)))))
        done = {
            (row.event_id, row.endpoint_id)
            for row in self._conn.execute(
                sa.select(_D.event_id, _D.endpoint_id).where(_D.event_id.in_(list(found)))
            )
        }
        rows = [
            _new_delivery(ident, endpoint, found[ident].created_at)
            for ident in events
            if ident in found
            for endpoint in endpoints.get(found[ident].type, ())
            if endpoint in present and (ident, endpoint) not in done
        ]
        if rows:
            self._deliver(rows)
        return len(rows)

    def _deliver(self, rows: list[dict[str, Any]]) -> list[int]:
        """Insert deliveries, their ids in the order of ``rows`` (in a few multi-row
        statements), and enqueue their jobs: their ids."""
        insert = webhook_deliveries.insert().returning(_D.id, sort_by_parameter_order=True)
        ids = [int(ident) for ident in self._conn.execute(insert, rows).scalars()]
        Jobs(self._conn, self._driver).enqueue_many(
            [_delivery_job(ident, row["started_at"]) for ident, row in zip(ids, rows, strict=True)],
            now=min(row["started_at"] for row in rows),
        )
        return ids

    def event(self, ident: str) -> tuple[str, str, datetime] | None:
        """An event's type, body and time."""
        row = self._conn.execute(
            sa.select(_V.type, _V.payload, _V.created_at).where(_V.id == ident)
        ).first()
        return None if row is None else (row.type, row.payload, row.created_at)

    def events(self, *, limit: int = 1000) -> list[tuple[str, str, str]]:
        """The newest events' ids, types and bodies, oldest first."""
        rows = self._conn.execute(
            sa.select(_V.id, _V.type, _V.payload).order_by(_V.created_at.desc()).limit(limit)
        ).all()
        return [(r.id, r.type, r.payload) for r in reversed(rows)]

    # --- endpoints ---------------------------------------------------------------------------

    def count_endpoints(self) -> int:
        return int(
            self._conn.scalar(sa.select(sa.func.count()).select_from(webhook_endpoints)) or 0
        )

    def create_endpoint(
        self, *, url: str, description: str, events: Sequence[str], secret: str, now: datetime
    ) -> Endpoint:
        row = {
            "id": endpoint_id(),
            "url": url,
            "description": description,
            "events": " ".join(events),
            "secret": secret,
            "previous_secret": None,
            "previous_until": None,
            "enabled": True,
            "disabled_at": None,
            "disabled_reason": None,
            "failing_since": None,
            "final_failures": 0,
            "created_at": now,
            "updated_at": now,
        }
        self._conn.execute(webhook_endpoints.insert(), row)
        return _endpoint(row)

    def endpoint(self, ident: str, *, for_update: bool = False) -> Endpoint | None:
        statement = sa.select(webhook_endpoints).where(_E.id == ident)
        row = self._conn.execute(statement.with_for_update() if for_update else statement).first()
        return None if row is None else _endpoint(row._asdict())

    def endpoints(self) -> list[Endpoint]:
        rows = self._conn.execute(sa.select(webhook_endpoints).order_by(_E.created_at, _E.id))
        return [_endpoint(row._asdict()) for row in rows]

    def update_endpoint(self, ident: str, *, now: datetime, **values: Any) -> Endpoint | None:
        """Change an endpoint's ``url``, ``description``, ``events`` (a sequence), ``secret``,
        ``previous_secret``, ``previous_until``, or enable it (``enabled=True``, which forgets its
        failures) or disable it (``enabled=False``, ``disabled_reason``)."""
        if "events" in values:
            values["events"] = " ".join(values["events"])
        if values.get("enabled") is True:
            values.update(
                disabled_at=None, disabled_reason=None, failing_since=None, final_failures=0
            )
        elif values.get("enabled") is False:
            values.setdefault("disabled_reason", "disabled through the API")
            values["disabled_at"] = now
        self._conn.execute(
            webhook_endpoints.update().where(_E.id == ident).values(updated_at=now, **values)
        )
        return self.endpoint(ident)

    def delete_endpoint(self, ident: str) -> bool:
        """Delete an endpoint with its deliveries and their attempts (their jobs, when they run,
        find nothing to do)."""
        deliveries = sa.select(_D.id).where(_D.endpoint_id == ident).scalar_subquery()
        self._conn.execute(webhook_attempts.delete().where(_A.delivery_id.in_(deliveries)))
        self._conn.execute(webhook_deliveries.delete().where(_D.endpoint_id == ident))
        deleted = self._conn.execute(webhook_endpoints.delete().where(_E.id == ident))
        return deleted.rowcount > 0

    # --- deliveries --------------------------------------------------------------------------

    def work(self, delivery_id: int, *, for_update: bool = True) -> Work | None:
        """A delivery (locked for the transaction when ``for_update``), its event's body and its
        endpoint, or None when it is gone."""
        statement = (
            sa.select(*_DELIVERY_COLUMNS, _V.payload)
            .join(webhook_events, _V.id == _D.event_id)
            .where(_D.id == delivery_id)
        )
        if for_update:
            statement = statement.with_for_update(of=webhook_deliveries)
        row = self._conn.execute(statement).first()
        if row is None:
            return None
        endpoint = self.endpoint(row.endpoint_id)
        if endpoint is None:
            return None
        return Work(_delivery(row), row.payload, endpoint)

    def delivery(self, delivery_id: int) -> Delivery | None:
        row = self._conn.execute(
            sa.select(*_DELIVERY_COLUMNS)
            .join(webhook_events, _V.id == _D.event_id)
            .where(_D.id == delivery_id)
        ).first()
        return None if row is None else _delivery(row)

    def deliveries(
        self,
        *,
        endpoint_id: str | None = None,
        event_id: str | None = None,
        status: DeliveryStatus | None = None,
        before: int | None = None,
        limit: int = 50,
    ) -> list[Delivery]:
        """Deliveries, newest first."""
        statement = sa.select(*_DELIVERY_COLUMNS).join(webhook_events, _V.id == _D.event_id)
        if endpoint_id is not None:
            statement = statement.where(_D.endpoint_id == endpoint_id)
        if event_id is not None:
            statement = statement.where(_D.event_id == event_id)
        if status is not None:
            statement = statement.where(_D.status == status.value)
        if before is not None:
            statement = statement.where(_D.id < before)
        rows = self._conn.execute(statement.order_by(_D.id.desc()).limit(limit))
        return [_delivery(row) for row in rows]

    def attempts(self, delivery_ids: Sequence[int]) -> dict[int, list[Attempt]]:
        """Each delivery's attempts, oldest first."""
        found: dict[int, list[Attempt]] = {ident: [] for ident in delivery_ids}
        if not delivery_ids:
            return found
        rows = self._conn.execute(
            sa.select(webhook_attempts)
            .where(_A.delivery_id.in_(list(delivery_ids)))
            .order_by(_A.delivery_id, _A.id)
        )
        for r in rows:
            found[r.delivery_id].append(
                Attempt(r.id, r.delivery_id, r.at, r.outcome, r.status_code, r.latency_ms, r.error)
            )
        return found

    def count_by_status(self) -> dict[str, int]:
        rows = self._conn.execute(
            sa.select(_D.status, sa.func.count()).group_by(_D.status).order_by(_D.status)
        )
        return {status: int(count) for status, count in rows}

    def record_attempt(
        self,
        work: Work,
        *,
        at: datetime,
        outcome: str,
        status_code: int | None,
        latency_ms: int,
        error: str | None,
        status: DeliveryStatus,
        next_attempt_at: datetime | None,
    ) -> None:
        """One attempt's answer and the delivery's state after it; the endpoint's run of
        failures (``failing_since``, ``final_failures``) follows: a success ends it."""
        text = None if error is None else error[:MAX_ERROR_LENGTH]
        self._conn.execute(
            webhook_attempts.insert(),
            {
                "delivery_id": work.delivery.id,
                "at": at,
                "outcome": outcome,
                "status_code": status_code,
                "latency_ms": latency_ms,
                "error": text,
            },
        )
        finished = at if status is not DeliveryStatus.PENDING else None
        self._conn.execute(
            webhook_deliveries.update()
            .where(_D.id == work.delivery.id)
            .values(
                status=status.value,
                attempts=_D.attempts + 1,
                next_attempt_at=next_attempt_at,
                finished_at=finished,
                last_status_code=status_code,
                last_error=text,
            )
        )
        endpoint = webhook_endpoints.update().where(_E.id == work.endpoint.id)
        if status is DeliveryStatus.SUCCEEDED:
            self._conn.execute(endpoint.values(failing_since=None, final_failures=0))
        else:
            self._conn.execute(endpoint.where(_E.failing_since.is_(None)).values(failing_since=at))
            if status is DeliveryStatus.FAILED:
                self._conn.execute(endpoint.values(final_failures=_E.final_failures + 1))

    def fail(self, work: Work, *, at: datetime, reason: str) -> None:
        """Fail a delivery without an attempt (its endpoint was disabled)."""
        self._conn.execute(
            webhook_deliveries.update()
            .where(_D.id == work.delivery.id)
            .values(
                status=DeliveryStatus.FAILED.value,
                next_attempt_at=None,
                finished_at=at,
                last_error=reason[:MAX_ERROR_LENGTH],
            )
        )

    def disable(self, ident: str, *, at: datetime, reason: str) -> None:
        self._conn.execute(
            webhook_endpoints.update()
            .where(_E.id == ident, _E.enabled.is_(True))
            .values(enabled=False, disabled_at=at, disabled_reason=reason, updated_at=at)
        )

    def replay(self, delivery_id: int, *, now: datetime) -> Delivery | None:
        """Send a delivery again, with its event's id and body: PENDING from ``now``, tried on
        the schedule from ``now``. Its job is enqueued again; a delivery still pending keeps its
        unfinished job (one waiting to be retried keeps its backoff)."""
        current = self.delivery(delivery_id)
        if current is None:
            return None
        self._conn.execute(
            webhook_deliveries.update()
            .where(_D.id == delivery_id)
            .values(
                status=DeliveryStatus.PENDING.value,
                started_at=now,
                next_attempt_at=now,
                finished_at=None,
                # The schedule starts again (every attempt stays listed).
                attempts=0,
                replays=_D.replays + 1,
            )
        )
        Jobs(self._conn, self._driver).enqueue_many([_delivery_job(delivery_id, now)], now=now)
        return self.delivery(delivery_id)

    def prune(self, *, before: datetime, limit: int) -> int:
        """Delete up to ``limit`` events older than ``before`` none of whose deliveries is
        pending, with their deliveries and attempts; how many events went."""
        pending = sa.select(_D.event_id).where(_D.status == DeliveryStatus.PENDING.value)
        old = list(
            self._conn.scalars(
                sa.select(_V.id)
                .where(_V.created_at < before, _V.id.not_in(pending))
                .order_by(_V.created_at)
                .limit(limit)
            )
        )
        if not old:
            return 0
        deliveries = sa.select(_D.id).where(_D.event_id.in_(old))
        self._conn.execute(webhook_attempts.delete().where(_A.delivery_id.in_(deliveries)))
        self._conn.execute(webhook_deliveries.delete().where(_D.event_id.in_(old)))
        self._conn.execute(webhook_events.delete().where(_V.id.in_(old)))
        return len(old)

    def replay_event(self, ident: str, endpoint: str, *, now: datetime) -> Delivery | None:
        """Replay an event to an endpoint: its delivery again, or a new delivery to an endpoint
        it was not sent to (one subscribed later, say)."""
        found = self.deliveries(endpoint_id=endpoint, event_id=ident, limit=1)
        if found:
            return self.replay(found[0].id, now=now)
        if self.event(ident) is None or self.endpoint(endpoint) is None:
            return None
        (delivery_id,) = self._deliver([_new_delivery(ident, endpoint, now)])
        return self.delivery(delivery_id)


def _new_delivery(ident: str, endpoint: str, at: datetime) -> dict[str, Any]:
    return {
        "event_id": ident,
        "endpoint_id": endpoint,
        "status": DeliveryStatus.PENDING.value,
        "attempts": 0,
        "created_at": at,
        "started_at": at,
        "next_attempt_at": at,
        "finished_at": None,
        "last_status_code": None,
        "last_error": None,
        "replays": 0,
    }


def _delivery_job(delivery_id: int, at: datetime) -> NewJob:
    return NewJob(
        DELIVERY_KIND,
        str(delivery_id),
        {"delivery_id": delivery_id},
        run_at=at,
        deadline=_delivery_deadline(at),
        max_attempts=DELIVERY_MAX_ATTEMPTS,
    )


def _delivery_deadline(at: datetime) -> datetime:
    """The schedule gives up after GIVE_UP_AFTER; a day more for the job to say so."""
    return at + GIVE_UP_AFTER + GIVE_UP_AFTER / 3


def _endpoint(row: dict[str, Any]) -> Endpoint:
    return Endpoint(
        id=row["id"],
        url=row["url"],
        description=row["description"],
        events=tuple(row["events"].split()),
        secret=row["secret"],
        previous_secret=row["previous_secret"],
        previous_until=row["previous_until"],
        enabled=bool(row["enabled"]),
        disabled_at=row["disabled_at"],
        disabled_reason=row["disabled_reason"],
        failing_since=row["failing_since"],
        final_failures=int(row["final_failures"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def _delivery(row: Any) -> Delivery:
    return Delivery(
        id=int(row.id),
        event_id=row.event_id,
        event_type=row.type,
        endpoint_id=row.endpoint_id,
        status=DeliveryStatus(row.status),
        attempts=int(row.attempts),
        created_at=row.created_at,
        started_at=row.started_at,
        next_attempt_at=row.next_attempt_at,
        finished_at=row.finished_at,
        last_status_code=row.last_status_code,
        last_error=row.last_error,
        replays=int(row.replays),
    )
