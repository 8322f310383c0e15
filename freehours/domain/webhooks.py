"""Webhooks: the events, their payloads, the Standard Webhooks signature, the retry schedule and
the rules an endpoint is held to. Pure: the standard library only (docs/webhooks.md).

An event is ``{"type": ..., "timestamp": ..., "data": {...}}`` (the Standard Webhooks shape),
its quantities decimal strings. It is signed per https://www.standardwebhooks.com: the headers
``webhook-id`` (the event's id, the same on every retry and replay: receivers deduplicate by
it), ``webhook-timestamp`` (seconds at send time) and ``webhook-signature``: ``v1,<base64 of
HMAC-SHA256(key, f"{id}.{timestamp}.{body}")>`` for every secret the endpoint has valid, space
separated (two while a rotated secret overlaps its successor).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from email.utils import parsedate_to_datetime
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit


class EventType(StrEnum):
    """What an endpoint may subscribe to."""

    #: A quota version was settled: its free energy booked (every version, the first and each
    #: revision's).
    QUOTA_COMPLETED = "quota.completed"
    #: A quota version was aborted (out of attempts): nothing booked for it.
    QUOTA_ABORTED = "quota.aborted"
    #: A revised version (2 or later) of a day whose earlier version had completed has completed
    #: with a different free energy: ``data.change_kwh`` is what the revision booked.
    QUOTA_REVISED = "quota.revised"
    #: An invoice or adjustment invoice was finalised (numbered, immutable).
    INVOICE_FINALISED = "invoice.finalised"
    #: A credit note was issued.
    CREDIT_NOTE_ISSUED = "credit_note.issued"


EVENT_TYPES: tuple[str, ...] = tuple(kind.value for kind in EventType)

#: The prefix of a signing secret (Standard Webhooks'), then base64 of its random bytes.
SECRET_PREFIX = "whsec_"  # noqa: S105 - a prefix, not a secret
SECRET_BYTES = 32
#: Of a URL an endpoint is registered at.
MAX_URL_LENGTH = 2048
MAX_DESCRIPTION_LENGTH = 200
#: Endpoints a deployment holds (enabled or not), and event types one subscribes to.
MAX_ENDPOINTS = 100
MAX_EVENT_TYPES = len(EVENT_TYPES)
#: How long a rotated secret still signs beside its successor.
ROTATION_OVERLAP = timedelta(hours=24)

#: The waits between a delivery's attempts, after the first (which is at once): Standard
#: Webhooks' suggestion stretched to three days. Each wait is drawn from +-20% of its step.
RETRY_SCHEDULE: tuple[timedelta, ...] = (
    timedelta(seconds=5),
    timedelta(minutes=1),
    timedelta(minutes=5),
    timedelta(minutes=30),
    timedelta(hours=1),
    timedelta(hours=2),
    timedelta(hours=4),
    timedelta(hours=8),
    timedelta(hours=12),
    timedelta(hours=12),
    timedelta(hours=12),
    timedelta(hours=12),
    timedelta(hours=12),
)
JITTER = 0.2
#: How long a delivery is tried for before it is failed for good (from its event, or its replay).
GIVE_UP_AFTER = timedelta(days=3)
#: The longest a receiver's ``Retry-After`` is honoured for (a longer one is cut to this).
MAX_RETRY_AFTER = timedelta(hours=12)
#: An endpoint is disabled at a delivery's final failure when it has failed every attempt for
#: this long, or when this many deliveries in a row failed for good.
DISABLE_AFTER = timedelta(days=5)
DISABLE_AFTER_FAILURES = 20
#: How long an event is kept once none of its deliveries is pending (the workers delete it, with
#: its deliveries and attempts, after that).
WEBHOOK_RETENTION = timedelta(days=30)


class DeliveryStatus(StrEnum):
    PENDING = "pending"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class InvalidEndpoint(ValueError):
    """A field of an endpoint that cannot be: ``field`` names it."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def check_url(url: str) -> str:
    """``url`` if an endpoint may be registered at it: http or https, a host, bounded."""
    if len(url) > MAX_URL_LENGTH:
        raise InvalidEndpoint("url", f"at most {MAX_URL_LENGTH} characters")
    if any(ord(ch) <= 32 or ord(ch) == 127 for ch in url):
        raise InvalidEndpoint("url", "no spaces or control characters")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises for a port out of range
    except ValueError as exc:
        raise InvalidEndpoint("url", f"not a URL ({exc})") from None
    if parts.scheme not in ("http", "https"):
        raise InvalidEndpoint("url", "must be http or https")
    if not parts.hostname:
        raise InvalidEndpoint("url", "must name a host")
    if parts.username or parts.password:
        raise InvalidEndpoint("url", "must not carry credentials")
    if parts.fragment:
        raise InvalidEndpoint("url", "must not have a fragment")
    return url


def check_event_types(types: Iterable[str]) -> tuple[str, ...]:
    """The distinct known event types of ``types``, in the order of ``EVENT_TYPES``; at least
    one."""
    wanted = list(types)
    if len(wanted) > 2 * MAX_EVENT_TYPES:
        raise InvalidEndpoint("events", f"at most {MAX_EVENT_TYPES} event types")
    unknown = sorted(set(wanted) - set(EVENT_TYPES))
    if unknown:
        raise InvalidEndpoint(
            "events", f"unknown event type {unknown[0]!r}; known: {', '.join(EVENT_TYPES)}"
        )
    if not wanted:
        raise InvalidEndpoint("events", "at least one event type")
    return tuple(kind for kind in EVENT_TYPES if kind in wanted)


def new_secret(token: bytes | None = None) -> str:
    """A signing secret: ``whsec_`` and base64 of 32 random bytes."""
    raw = secrets.token_bytes(SECRET_BYTES) if token is None else token
    return SECRET_PREFIX + base64.b64encode(raw).decode("ascii")


def secret_key(secret: str) -> bytes:
    """The HMAC key of a ``whsec_`` secret: its base64 decoded."""
    return base64.b64decode(secret.removeprefix(SECRET_PREFIX))


def signature(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """One ``v1,<base64>`` signature of ``body`` as Standard Webhooks signs it."""
    signed = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(secret_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


def signed_headers(
    secrets_valid: Sequence[str], msg_id: str, timestamp: int, body: bytes
) -> dict[str, str]:
    """The three Standard Webhooks headers, one signature per valid secret."""
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": " ".join(
            signature(secret, msg_id, timestamp, body) for secret in secrets_valid
        ),
    }


def verify(
    secret: str, headers: Mapping[str, str], body: bytes, *, now: int, tolerance: int = 300
) -> bool:
    """Whether ``headers`` sign ``body`` with ``secret`` within ``tolerance`` seconds of ``now``
    (the receiver's side, as docs/webhooks.md shows it)."""
    msg_id, stamp = headers["webhook-id"], headers["webhook-timestamp"]
    if not stamp.isdigit() or abs(now - int(stamp)) > tolerance:
        return False
    expected = signature(secret, msg_id, int(stamp), body).partition(",")[2]
    for candidate in headers["webhook-signature"].split():
        version, _, value = candidate.partition(",")
        if version == "v1" and hmac.compare_digest(value, expected):
            return True
    return False


def _json_value(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, datetime):
        return iso(value)
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {key: _json_value(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_json_value(item) for item in value]
    return value


def iso(moment: datetime) -> str:
    """An aware time as RFC 3339 in UTC with a ``Z``."""
    return moment.isoformat().replace("+00:00", "Z")


def payload(event_type: str, at: datetime, data: Mapping[str, Any]) -> str:
    """The JSON body of an event (decimals as strings, times in RFC 3339), compact and with its
    keys in order: the exact bytes every attempt sends and signs."""
    body = {"type": event_type, "timestamp": iso(at), "data": _json_value(data)}
    return json.dumps(body, separators=(",", ":"), sort_keys=True)


@dataclass(frozen=True, slots=True)
class Verdict:
    """What became of one attempt: whether it succeeded, and if not, when to try again (None: it
    failed for good, ``reason`` why)."""

    succeeded: bool
    retry_in: timedelta | None
    reason: str | None


def next_attempt(
    failed_attempts: int,
    *,
    started: datetime,
    now: datetime,
    retry_after: float | None,
    draw: float = 0.5,
) -> timedelta | None:
    """How long to wait after the ``failed_attempts``-th failed attempt (1 for the first) of a
    delivery tried since ``started``: the schedule's step (+-``JITTER``, ``draw`` in [0, 1]), or
    the receiver's ``Retry-After`` when longer (at most ``MAX_RETRY_AFTER``); past the last step,
    the last step again. None: the next attempt would come after ``GIVE_UP_AFTER``, give up."""
    step = RETRY_SCHEDULE[min(failed_attempts, len(RETRY_SCHEDULE)) - 1]
    wait = step * (1 - JITTER + 2 * JITTER * min(1.0, max(0.0, draw)))
    if retry_after is not None and retry_after > 0:
        wait = max(wait, min(timedelta(seconds=retry_after), MAX_RETRY_AFTER))
    if now + wait > started + GIVE_UP_AFTER:
        return None
    return wait


def parse_retry_after(value: str | None, now: datetime) -> float | None:
    """Seconds a ``Retry-After`` header asks for (delta-seconds or an HTTP date), or None."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(min(int(value), 10**7))
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, (when - now).total_seconds())


def should_disable(*, failing_since: datetime | None, final_failures: int, now: datetime) -> bool:
    """Whether an endpoint is disabled at a delivery's final failure: every attempt has failed
    for ``DISABLE_AFTER``, or ``DISABLE_AFTER_FAILURES`` deliveries in a row failed for good."""
    if final_failures >= DISABLE_AFTER_FAILURES:
        return True
    return failing_since is not None and now - failing_since >= DISABLE_AFTER
