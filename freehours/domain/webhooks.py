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
import ipaddress
import json
import re
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from email.utils import parsedate_to_datetime
from enum import StrEnum
from typing import Any
from urllib.parse import quote, urlsplit


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
    #: A document's email could not be delivered, for good (a permanent refusal, or out of
    #: attempts): post it, or correct the address and resend it.
    DOCUMENT_DELIVERY_FAILED = "document.delivery_failed"


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


#: Consecutive failed attempts to an endpoint (in one worker process) that open its circuit:
#: five is more than the blips of a receiver restarting, and at the deadline costs a silent
#: receiver's worker threads at most a minute or so before it opens.
BREAKER_FAILURES = 5
#: How long an open circuit postpones its endpoint's deliveries before one trial attempt: a dead
#: receiver costs one attempt's deadline a minute; one back up gets its backlog within a minute.
BREAKER_OPEN = timedelta(seconds=60)
#: Attempts to one endpoint a worker process has in flight at once (one while its circuit is
#: half-open): a slow or silent receiver holds at most this many of the worker's threads.
MAX_IN_FLIGHT = 2
#: How long a delivery waits when its endpoint's attempts are all in flight: an attempt ends by
#: its deadline, so a few seconds picks up a freed slot without spinning on the queue.
IN_FLIGHT_WAIT = timedelta(seconds=5)


@dataclass(frozen=True, slots=True)
class Circuit:
    """An endpoint's circuit breaker: its failed attempts in a row, and while it is open, until
    when. Past ``open_until`` it is half-open: one trial attempt at a time, whose success closes
    it and whose failure opens it again."""

    failures: int = 0
    open_until: datetime | None = None

    def after(self, *, succeeded: bool, now: datetime) -> Circuit:
        """The circuit after an attempt (an answer of 2xx, or not)."""
        if succeeded:
            return Circuit()
        failures = self.failures + 1
        if failures >= BREAKER_FAILURES:
            return Circuit(failures, now + BREAKER_OPEN)
        return Circuit(failures)

    def postponed(self, *, in_flight: int, now: datetime) -> tuple[str, timedelta] | None:
        """Why an attempt must wait, and how long, or None when it may go: the circuit is
        open, or the endpoint's attempts in flight are at their cap."""
        if self.open_until is not None and now < self.open_until:
            return "circuit_open", self.open_until - now
        half_open = self.failures >= BREAKER_FAILURES
        if in_flight >= (1 if half_open else MAX_IN_FLIGHT):
            # While the trial is out the rest wait as if the circuit were still open: the trial
            # decides, and a backlog of thousands woken every few seconds would cost the
            # webhook queue (and the database under every queue) more than the endpoint does.
            return "in_flight", BREAKER_OPEN if half_open else IN_FLIGHT_WAIT
        return None


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
    """``url`` as every attempt sends it, if an endpoint may be registered at it: http or https,
    a host, no credentials or fragment, bounded. A non-ASCII path or query is percent-encoded, an
    international host name IDNA-encoded, an IPv4 address written as one number or in octal or
    hex (``http://2130706433/``, as the resolver reads it) rewritten as four decimals; what cannot
    be is refused (``InvalidEndpoint``), so that what is stored is what the sender can send."""
    if len(url) > MAX_URL_LENGTH:
        raise InvalidEndpoint("url", f"at most {MAX_URL_LENGTH} characters")
    if any(ord(ch) <= 32 or not ch.isprintable() for ch in url):
        raise InvalidEndpoint("url", "no spaces or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise InvalidEndpoint("url", f"not a URL ({exc})") from None
    if parts.scheme not in ("http", "https"):
        raise InvalidEndpoint("url", "must be http or https")
    if "@" in parts.netloc:
        raise InvalidEndpoint("url", "must not carry credentials")
    if not parts.hostname:
        raise InvalidEndpoint("url", "must name a host")
    if parts.fragment or url.endswith("#"):
        raise InvalidEndpoint("url", "must not have a fragment")
    host = _ascii_host(parts.hostname, bracketed=parts.netloc.startswith("["))
    netloc = host if port is None else f"{host}:{port}"
    path = quote(parts.path, safe=_PATH_SAFE) or "/"
    query = quote(parts.query, safe=_QUERY_SAFE)
    sent = f"{parts.scheme}://{netloc}{path}" + (f"?{query}" if query else "")
    if len(sent) > MAX_URL_LENGTH:
        raise InvalidEndpoint("url", f"at most {MAX_URL_LENGTH} characters once encoded")
    return sent


#: What a path and a query keep as written (RFC 3986's unreserved and sub-delimiters, and a
#: ``%`` already escaping); anything else, non-ASCII included, is percent-encoded as UTF-8.
_PATH_SAFE = "/%:@!$&'()*+,;=-._~"
_QUERY_SAFE = _PATH_SAFE + "?"
#: A host name's label as DNS takes it (and ``_``, which some internal names carry).
_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
MAX_HOST_LENGTH = 253


def _ascii_host(hostname: str, *, bracketed: bool) -> str:
    """The host as the sender writes it: ``[v6]``, a dotted-quad IPv4 address, or an ASCII
    (IDNA) name of valid labels."""
    if bracketed:
        if "%" in hostname:
            raise InvalidEndpoint("url", "an IPv6 address must not name a zone")
        try:
            return f"[{ipaddress.IPv6Address(hostname).compressed}]"
        except ValueError:
            raise InvalidEndpoint("url", f"not an IPv6 address: {hostname!r}") from None
    numeric = legacy_ipv4(hostname)
    if numeric is not None:
        return str(numeric)
    try:
        name = hostname.encode("idna").decode("ascii").lower()
    except UnicodeError as exc:
        raise InvalidEndpoint("url", f"the host is not a valid IDNA name ({exc})") from None
    # IDNA maps some characters to digits (a superscript one, fullwidth digits): a name that
    # becomes an address is that address, so that a private one is seen as such.
    numeric = legacy_ipv4(name)
    if numeric is not None:
        return str(numeric)
    labels = name.removesuffix(".").split(".")
    if len(name) > MAX_HOST_LENGTH or not all(_LABEL.fullmatch(label) for label in labels):
        raise InvalidEndpoint(
            "url", "the host must be a name of letters, digits and hyphens (63 at most a label)"
        )
    return name


#: One part of an IPv4 address as the C resolver's ``inet_aton`` reads it: decimal, octal
#: (a leading 0) or hex (0x).
_NUMBER = re.compile(r"0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*")


def legacy_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """The IPv4 address ``host`` names as ``inet_aton`` (so the resolver) reads it: one to four
    parts, each decimal, octal or hex, the last filling the bytes left (``2130706433``,
    ``0x7f.1``, ``0177.0.0.1`` are all 127.0.0.1); None for a host that is not one, or for an
    out-of-range one, which the resolver refuses too."""
    parts = host.removesuffix(".").split(".")
    if not 1 <= len(parts) <= 4 or not all(_NUMBER.fullmatch(part) for part in parts):
        return None
    *leading, last = [_number(part) for part in parts]
    if any(number > 255 for number in leading) or last >= 256 ** (5 - len(parts)):
        return None
    value = last
    for index, number in enumerate(leading):
        value += number << (8 * (3 - index))
    return ipaddress.IPv4Address(value)


def _number(part: str) -> int:
    if part[:2].lower() == "0x":
        return int(part[2:], 16)
    return int(part, 8) if part.startswith("0") else int(part)


# --- where a delivery may go: the destination policy (docs/security.md) ---

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
#: IPv6's well-known NAT64 prefix (RFC 6052): the IPv4 address in its last 32 bits is the one
#: reached.
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


@dataclass(frozen=True, slots=True)
class Destinations:
    """Which addresses a delivery may be sent to: those on the public Internet, and those in
    ``allowed`` (networks an operator runs receivers on despite their being private)."""

    allowed: tuple[IPNetwork, ...] = ()

    @classmethod
    def parse(cls, networks: str) -> Destinations:
        """From a comma-separated list of CIDRs (``10.1.0.0/16, 127.0.0.1/32, fd00::/8``);
        ``ValueError`` naming one that is not."""
        allowed: list[IPNetwork] = []
        for item in networks.split(","):
            text = item.strip()
            if not text:
                continue
            try:
                allowed.append(ipaddress.ip_network(text, strict=False))
            except ValueError:
                raise ValueError(f"{text!r} is not a network (CIDR)") from None
        return cls(tuple(allowed))

    def refusal(self, address: IPAddress) -> str | None:
        """Why a delivery may not go to ``address``, or None when it may."""
        if any(address in network for network in self.allowed):
            return None
        reached = _embedded_ipv4(address)
        if reached is not address and any(reached in network for network in self.allowed):
            return None
        kind = _special(reached)
        if kind is None:
            return None
        return f"{kind} addresses are refused unless FREEHOURS_WEBHOOK_ALLOWED_NETWORKS allows them"

    def url_refusal(self, url: str) -> str | None:
        """Why an endpoint may not be registered at ``url`` (``check_url``'s answer) when its
        host is an address the policy refuses; a name is checked when an attempt resolves it."""
        hostname = urlsplit(url).hostname or ""
        try:
            address = ipaddress.ip_address(hostname)
        except ValueError:
            return None
        return self.refusal(address)


def _embedded_ipv4(address: IPAddress) -> IPAddress:
    """The IPv4 address an IPv6 one reaches (IPv4-mapped ``::ffff:a.b.c.d``, NAT64), else
    itself."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address in _NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address


def _special(address: IPAddress) -> str | None:
    """What makes ``address`` no public Internet destination, or None when it is one."""
    if address.is_unspecified:
        return "unspecified (0.0.0.0, ::)"
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link-local (the cloud metadata service among them)"
    if address.is_multicast:
        return "multicast"
    if address.is_private:
        return "private"
    if not address.is_global:
        return "non-public (shared or reserved)"
    return None


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
