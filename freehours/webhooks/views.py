"""An endpoint and a delivery as JSON: the one writing of each, which the API serves
(``GET /v1/webhook-endpoints`` and ``.../{endpoint_id}/deliveries``: ``WebhookEndpointOut``,
``WebhookDeliveryOut``) and ``freehours webhooks list|deliveries --format json`` prints, so that
the two agree key for key. Times in RFC 3339, UTC, with a ``Z``."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from freehours.domain.webhooks import iso
from freehours.store.webhooks import Attempt, Delivery, Endpoint


def _time(moment: datetime | None) -> str | None:
    return None if moment is None else iso(moment)


def endpoint_view(endpoint: Endpoint) -> dict[str, Any]:
    """An endpoint, never its secret."""
    return {
        "id": endpoint.id,
        "url": endpoint.url,
        "description": endpoint.description,
        "events": list(endpoint.events),
        "enabled": endpoint.enabled,
        "disabled_at": _time(endpoint.disabled_at),
        "disabled_reason": endpoint.disabled_reason,
        "failing_since": _time(endpoint.failing_since),
        "final_failures": endpoint.final_failures,
        "previous_secret_until": _time(endpoint.previous_until),
        "created_at": _time(endpoint.created_at),
        "updated_at": _time(endpoint.updated_at),
    }


def delivery_view(delivery: Delivery, attempts: list[Attempt]) -> dict[str, Any]:
    """A delivery and its attempts, oldest first."""
    return {
        "id": delivery.id,
        "webhook_id": delivery.event_id,
        "event_type": delivery.event_type,
        "endpoint_id": delivery.endpoint_id,
        "status": delivery.status.value,
        "attempts": delivery.attempts,
        "created_at": _time(delivery.created_at),
        "started_at": _time(delivery.started_at),
        "next_attempt_at": _time(delivery.next_attempt_at),
        "finished_at": _time(delivery.finished_at),
        "last_status_code": delivery.last_status_code,
        "last_error": delivery.last_error,
        "replays": delivery.replays,
        "attempt_log": [
            {
                "at": _time(a.at),
                "outcome": a.outcome,
                "status_code": a.status_code,
                "latency_ms": a.latency_ms,
                "error": a.error,
            }
            for a in attempts
        ],
    }
