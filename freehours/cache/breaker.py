"""Redis, asked only while it answers in time: short timeouts, no retries, and a breaker.

Redis makes freehours faster (the quota cache) and shares its rate limits between processes; it
is never the truth (the database is). So a Redis that is down, hung or slow must cost a request
little, and not on every request: every call has a short connect and socket timeout
(``FREEHOURS_REDIS_TIMEOUT_SECONDS``) and is made once (redis-py retries by default); a call that
fails, or answers slower than ``FREEHOURS_REDIS_SLOW_SECONDS``, opens the process's breaker, and
for ``FREEHOURS_REDIS_RETRY_SECONDS`` nothing asks Redis (the rate limits are counted in this
process, the cache is skipped). Then one call tries again; if it answers in time, Redis is used
again. One breaker per process for every use of one Redis: that Redis is down is one fact, learnt
once.

Calls just under the slow limit would still add up over a request's few calls (two rate limits,
a cache read and write), and the calls in flight when Redis turns slow all pay before the breaker
opens: so an API request also has a budget of Redis time (``FREEHOURS_REDIS_BUDGET_SECONDS``,
``start_request``); once it is spent, the rest of that request does without Redis. A request
waits on Redis at most its budget and one timeout.
"""

from __future__ import annotations

import threading
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import structlog

from freehours.clock import Clock, SystemClock
from freehours.observability.metrics import REDIS_BYPASSED, REDIS_UNAVAILABLE

if TYPE_CHECKING:
    import redis

log = structlog.get_logger("freehours.redis")


#: The Redis time spent by the current request (a one-item list, shared with the threads the
#: request hands work to: they run in a copy of its context); None outside a request.
_SPENT: ContextVar[list[float] | None] = ContextVar("freehours_redis_spent", default=None)


def start_request() -> None:
    """Give the current request (its task and the threads it hands work to) a fresh budget."""
    _SPENT.set([0.0])


class RedisBreaker:
    """Whether Redis is worth asking now. Thread-safe; cheap while closed (no lock taken)."""

    def __init__(
        self,
        *,
        retry_seconds: float,
        slow_seconds: float,
        budget_seconds: float = 0.1,
        clock: Clock | None = None,
    ) -> None:
        self.clock = clock or SystemClock()
        self.retry_seconds = retry_seconds
        self.slow_seconds = slow_seconds
        self.budget_seconds = budget_seconds
        self._lock = threading.Lock()
        self._open_until = 0.0  # 0: closed, Redis is asked
        self._probing = False

    @property
    def is_open(self) -> bool:
        return self._open_until != 0.0

    def allow(self, use: str) -> bool:
        """True when a call for ``use`` may go to Redis now; else it is counted as bypassed.

        While open, nothing is asked until the retry time has passed; then one call (the probe)
        is let through, and the others still bypass Redis until it has answered. A request
        whose Redis budget is spent does without it, whatever the breaker says."""
        spent = _SPENT.get()
        if spent is not None and spent[0] >= self.budget_seconds:
            REDIS_BYPASSED.labels(use).inc()
            return False
        if self._open_until == 0.0:
            return True
        with self._lock:
            if self._open_until == 0.0:
                return True
            if not self._probing and self.clock.monotonic() >= self._open_until:
                self._probing = True
                return True
        REDIS_BYPASSED.labels(use).inc()
        return False

    def answered(self, use: str, seconds: float) -> None:
        """A call answered after ``seconds``: too slow opens the breaker, in time closes it."""
        _spend(seconds)
        if seconds > self.slow_seconds:
            self._open(use, f"answered in {seconds * 1000:.0f} ms")
            return
        if self._open_until == 0.0:
            return
        with self._lock:
            was_open = self._open_until != 0.0
            self._open_until = 0.0
            self._probing = False
        if was_open:
            log.info("redis_available", use=use)

    def failed(self, use: str, error: str, seconds: float = 0.0) -> None:
        """A call failed after ``seconds`` (or was too slow): Redis is left alone for
        ``retry_seconds``."""
        _spend(seconds)
        self._open(use, error)

    def _open(self, use: str, error: str) -> None:
        with self._lock:
            was_closed = self._open_until == 0.0
            self._open_until = self.clock.monotonic() + self.retry_seconds
            self._probing = False
        if was_closed:
            REDIS_UNAVAILABLE.labels(use).inc()
            log.warning(
                "redis_unavailable", use=use, error=error, bypassed_seconds=self.retry_seconds
            )


def _spend(seconds: float) -> None:
    spent = _SPENT.get()
    if spent is not None:
        spent[0] += seconds


def _client_options(timeout: float) -> dict[str, Any]:
    # redis-py is imported where a client is made (a tenth of a second, with the OpenTelemetry
    # SDK it brings): a command that opens no Redis does without it.
    import redis.retry  # noqa: PLC0415 - imported where a client is made
    from redis.backoff import NoBackoff  # noqa: PLC0415

    return {
        "socket_timeout": timeout,
        "socket_connect_timeout": timeout,
        # One try: a retry would double the wait, and the breaker decides when to try again.
        "retry": redis.retry.Retry(NoBackoff(), 0),
    }


def sync_client(url: str, timeout: float) -> redis.Redis:
    """A Redis client whose every call answers or fails within ``timeout`` (connect and read)."""
    import redis  # noqa: PLC0415 - imported where a client is made

    return redis.Redis.from_url(url, **_client_options(timeout))


def async_options(timeout: float) -> dict[str, Any]:
    """The same limits for ``redis.asyncio`` (as keyword arguments of its ``from_url``)."""
    import redis.asyncio.retry  # noqa: PLC0415 - imported where a client is made
    from redis.backoff import NoBackoff  # noqa: PLC0415

    options = _client_options(timeout)
    options["retry"] = redis.asyncio.retry.Retry(NoBackoff(), 0)
    return options
