"""What the agent decides about sending, as pure functions and objects that never sleep.

- ``verdict``: what an HTTP status means for a batch (delivered, retry, rejected, key refused).
- ``retry_after_seconds``: a ``Retry-After`` header as seconds, capped.
- ``Backoff``: full jitter (``freehours.backoff``), ``uniform(0, min(cap, base * 2**attempt))``,
  never below a server's ``Retry-After``.
- ``RetryBudget``: a token bucket that lets retries through only while they stay within a tenth
  of the agent's recent requests.
- ``seconds_until_half_open``: when an open circuit breaker lets a trial call through (pybreaker
  has no getter for it; its ``opened_at`` plus ``reset_timeout`` gives it).

The time comes from an injected clock and the jitter from an injected random source, so tests pin
both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from email.utils import parsedate_to_datetime
from enum import StrEnum

from freehours.backoff import RandomSource, full_jitter
from freehours.clock import Clock

#: A server's ``Retry-After`` is obeyed up to a minute: past that the agent asks again, so a
#: misconfigured or hostile header cannot park a meter's reads for hours.
RETRY_AFTER_CAP = 60.0

#: Ten tenths of a token add up to a hair under one in floating point: a retry funded by ten
#: requests must still go through.
_TOKEN_EPSILON = 1e-9


class Verdict(StrEnum):
    """What an answer means for the batch that got it."""

    DELIVERED = "delivered"  # 200: the API has the batch; it leaves the spool
    RETRY = "retry"  # 408, 409, 429, 5xx: the API cannot take it now; try again, keep it spooled
    REJECTED = "rejected"  # any other 4xx: the API refuses this batch for good; set it aside
    KEY_REFUSED = "key_refused"  # 401, 403: the agent's key is wrong; stop, the batch is fine


def verdict(status: int) -> Verdict:
    """The verdict on an HTTP answer with ``status``."""
    if status == 200:
        return Verdict.DELIVERED
    if status in (401, 403):
        return Verdict.KEY_REFUSED
    # 408: the server (or a proxy) gave up waiting for the request; the batch itself is fine.
    if status in (408, 409, 429) or status >= 500:
        return Verdict.RETRY
    # Other 2xx and 3xx are not answers this API gives to an ingest: something between the agent
    # and the API is wrong, and resending the same batch will not fix it.
    return Verdict.REJECTED


def retry_after_seconds(value: str | None, now: datetime) -> float | None:
    """A ``Retry-After`` header (delay-seconds or an HTTP-date) as seconds from ``now``, at most
    ``RETRY_AFTER_CAP``; None when absent or unreadable."""
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        seconds = float(text)
    else:
        try:
            moment = parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
        if moment.tzinfo is None:
            return None
        seconds = max(0.0, (moment - now).total_seconds())
    return min(seconds, RETRY_AFTER_CAP)


@dataclass(frozen=True, slots=True)
class Backoff:
    """How long to wait before the next attempt."""

    random: RandomSource
    #: The first retry waits up to a second: long enough for a blip (a dropped connection, a
    #: restart behind a load balancer) to pass, short enough that nobody notices one.
    base: float = 1.0
    #: Half a minute at most between the agent's own tries: an outage long enough to need more
    #: is the circuit breaker's business, and a recovered API is used again within 30 s.
    cap: float = 30.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (0 for the first): full
        jitter, and never less than ``retry_after``."""
        return max(full_jitter(attempt, self.base, self.cap, self.random), retry_after or 0.0)


@dataclass(slots=True)
class RetryBudget:
    """A token bucket of retries: each request earns ``ratio`` of a retry, each retry spends one.

    So retries stop while they exceed ``ratio`` (10 %) of recent requests, "recent" being what the
    bucket's ``capacity`` can remember: ten retries' worth, the last hundred requests. Tokens also
    accrue with time at ``allowance_per_second``, so that an agent sending little can still retry
    a blip; the bucket starts full, as if the agent had been idle that long.
    """

    clock: Clock
    #: A tenth of a retry per request: DESIGN.md's limit on a client's retries.
    ratio: float = 0.1
    #: At most ten retries saved up, so a long quiet spell cannot fund a retry storm.
    capacity: float = 10.0
    #: One retry every ten seconds whatever the traffic.
    allowance_per_second: float = 0.1
    _balance: float = field(init=False)
    _as_of: float = field(init=False)

    def __post_init__(self) -> None:
        self._balance = self.capacity
        self._as_of = self.clock.monotonic()

    @property
    def balance(self) -> float:
        """Retries the bucket would allow now (a fraction means: not even one)."""
        self._accrue()
        return self._balance

    def record_request(self) -> None:
        """A first attempt went out: it earns ``ratio`` of a retry."""
        self._accrue()
        self._balance = min(self.capacity, self._balance + self.ratio)

    def try_retry(self) -> bool:
        """Spend a token on a retry if there is one; False means: do not retry now."""
        self._accrue()
        if self._balance < 1.0 - _TOKEN_EPSILON:
            return False
        self._balance = max(0.0, self._balance - 1.0)
        return True

    def _accrue(self) -> None:
        now = self.clock.monotonic()
        elapsed = max(0.0, now - self._as_of)
        self._as_of = now
        self._balance = min(self.capacity, self._balance + elapsed * self.allowance_per_second)


def seconds_until_half_open(
    opened_at: datetime | None, reset_timeout: float, now: datetime
) -> float:
    """Seconds until a breaker opened at ``opened_at`` lets a trial call through (0: now)."""
    if opened_at is None:
        return 0.0
    return max(0.0, reset_timeout - (now - opened_at).total_seconds())


def pause_after_deferral(
    backoff: Backoff,
    deferrals: int,
    *,
    retry_after: float | None,
    half_open_in: float | None,
) -> float:
    """Seconds the sender waits before it offers a deferred batch again.

    ``deferrals`` counts the batches deferred in a row (1 for the first). With the breaker open
    (``half_open_in`` given) it waits for the trial call; otherwise a backoff that grows with the
    deferrals, as if each were a further failed attempt. Never less than ``retry_after``.
    """
    if half_open_in is not None:
        return max(half_open_in, retry_after or 0.0)
    return backoff.delay(deferrals + 1, retry_after)
