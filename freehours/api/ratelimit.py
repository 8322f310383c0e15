"""Rate limits with the ``limits`` package: in memory, or in Redis shared by every API process.

Checked on the event loop before a request reaches a worker thread (``limits.aio``: Redis through
``redis.asyncio``), so that a limit costs no thread hop and a request over its limit never takes
a thread. The strategy is the sliding window counter: two counters per key, however high the
limit, where a moving window keeps a timestamp per request (a list of up to the limit's size per
key, rewritten on every hit).
"""

from __future__ import annotations

import math
import time

import structlog
from limits import RateLimitItem, parse
from limits.aio.storage import RedisStorage, SlidingWindowCounterSupport, Storage
from limits.aio.strategies import SlidingWindowCounterRateLimiter

from freehours.api.problems import Problem
from freehours.cache.breaker import RedisBreaker, async_options
from freehours.clock import Clock, SystemClock
from freehours.observability.metrics import RATE_LIMIT_ERRORS

log = structlog.get_logger("freehours.api")


class SweptMemoryStorage(Storage, SlidingWindowCounterSupport):
    """Sliding window counters in this process's memory, their expired counters swept at most
    once a second.

    ``limits``' own in-memory storage starts a sweep after every hit once the last has finished:
    a pass over every key (two per NMI seen in the last minutes), on every request. Expiry does
    not depend on it (a counter past its expiry reads as zero and is dropped when read); the
    sweep only frees memory, and once a second frees it soon enough. Written on the library's
    public storage interface (``Storage`` and ``SlidingWindowCounterSupport``), for the one
    strategy the limits use. Used on one event loop, where nothing here waits between reading a
    counter and writing it, so no lock is needed.
    """

    STORAGE_SCHEME = None
    SWEEP_SECONDS = 1.0

    def __init__(self, clock: Clock | None = None) -> None:
        super().__init__()
        self.clock = clock or SystemClock()
        self.counters: dict[str, int] = {}
        #: When each counter expires (``_time()``: seconds since the epoch on the clock).
        self.expirations: dict[str, float] = {}
        self._swept_at = 0.0

    @property
    def base_exceptions(self) -> type[Exception] | tuple[type[Exception], ...]:
        return ValueError

    async def incr(self, key: str, expiry: float, amount: int = 1) -> int:
        return self._incr(key, expiry, amount)

    async def get(self, key: str) -> int:
        return self._get(key)

    async def get_expiry(self, key: str) -> float:
        return self.expirations.get(key, self._time())

    async def check(self) -> bool:
        return True

    async def reset(self) -> int | None:
        count = len(self.counters)
        self.counters.clear()
        self.expirations.clear()
        return count

    async def clear(self, key: str) -> None:
        self.counters.pop(key, None)
        self.expirations.pop(key, None)

    async def acquire_sliding_window_entry(
        self, key: str, limit: int, expiry: int, amount: int = 1
    ) -> bool:
        if amount > limit:
            return False
        now = self._time()
        previous, previous_ttl, current, _ = self._window(key, expiry, now)
        if math.floor(previous * previous_ttl / expiry + current) + amount > limit:
            return False
        # The current window's counter lives two windows: it is the previous one next.
        self._incr(_window_keys(key, expiry, now)[1], 2 * expiry, amount)
        return True

    async def get_sliding_window(self, key: str, expiry: int) -> tuple[int, float, int, float]:
        return self._window(key, expiry, self._time())

    async def clear_sliding_window(self, key: str, expiry: int) -> None:
        for window in _window_keys(key, expiry, self._time()):
            await self.clear(window)

    def _window(self, key: str, expiry: int, now: float) -> tuple[int, float, int, float]:
        """The previous window's count and time to live, the current window's count and time to
        live: what the sliding window counter weighs."""
        previous_key, current_key = _window_keys(key, expiry, now)
        previous = self._get(previous_key)
        current = self._get(current_key)
        previous_ttl = 0.0 if previous == 0 else (1 - (((now - expiry) / expiry) % 1)) * expiry
        current_ttl = (1 - ((now / expiry) % 1)) * expiry + expiry
        return previous, previous_ttl, current, current_ttl

    def _incr(self, key: str, expiry: float, amount: int) -> int:
        self._sweep()
        count = self._get(key) + amount
        self.counters[key] = count
        if count == amount:
            self.expirations[key] = self._time() + expiry
        return count

    def _get(self, key: str) -> int:
        if self.expirations.get(key, 0) <= self._time():
            self.counters.pop(key, None)
            self.expirations.pop(key, None)
        return self.counters.get(key, 0)

    def _time(self) -> float:
        return self.clock.now().timestamp()

    def _sweep(self) -> None:
        now = self.clock.monotonic()
        if now - self._swept_at < self.SWEEP_SECONDS:
            return
        self._swept_at = now
        wall = self._time()
        for key in [key for key, expires in self.expirations.items() if expires <= wall]:
            del self.expirations[key]
            self.counters.pop(key, None)


def _window_keys(key: str, expiry: int, now: float) -> tuple[str, str]:
    """The counters of the previous and the current window of ``expiry`` seconds at ``now``,
    named as ``limits`` names them."""
    return f"{key}/{int((now - expiry) / expiry)}", f"{key}/{int(now / expiry)}"


class RateLimits:
    """Per-client and per-NMI limits, and webhook replays'. ``check`` raises a 429 problem with
    Retry-After.

    With a ``breaker`` (limits kept in Redis), a Redis that fails or is slow is left alone for a
    while and the limits are counted in this process meanwhile (each process then allows the
    limit on its own): a limit protects the service, it is not its correctness."""

    def __init__(
        self,
        storage: Storage,
        per_client: str,
        per_nmi: str,
        unknown_keys: str = "30/minute",
        breaker: RedisBreaker | None = None,
        *,
        replays: str = "5/minute",
        pages: str = "60/minute",
        clock: Clock | None = None,
    ) -> None:
        self.clock = clock or SystemClock()
        self._pages: RateLimitItem = parse(pages)
        self._limiter = SlidingWindowCounterRateLimiter(storage)
        self._per_client: RateLimitItem = parse(per_client)
        self._per_nmi: RateLimitItem = parse(per_nmi)
        self._unknown_keys: RateLimitItem = parse(unknown_keys)
        self._replays: RateLimitItem = parse(replays)
        self._breaker = breaker
        self._fallback = SlidingWindowCounterRateLimiter(SweptMemoryStorage(self.clock))

    @classmethod
    def open(
        cls,
        redis_url: str | None,
        per_client: str,
        per_nmi: str,
        prefix: str = "freehours:",
        unknown_keys: str = "30/minute",
        *,
        timeout: float = 0.1,
        breaker: RedisBreaker | None = None,
        replays: str = "5/minute",
        pages: str = "60/minute",
        clock: Clock | None = None,
    ) -> RateLimits:
        """In memory, or in Redis (keys under ``prefix``) when a URL is configured, every call
        answered or failed within ``timeout``, and bypassed while ``breaker`` is open; counted
        in memory on ``clock`` (the system's by default)."""
        if redis_url is None:
            return cls(
                SweptMemoryStorage(clock),
                per_client,
                per_nmi,
                unknown_keys,
                replays=replays,
                pages=pages,
                clock=clock,
            )
        storage = RedisStorage(
            f"async+{redis_url}",
            implementation="redispy",
            key_prefix=f"{prefix}limits",
            **async_options(timeout),
        )
        return cls(
            storage,
            per_client,
            per_nmi,
            unknown_keys,
            breaker,
            replays=replays,
            pages=pages,
            clock=clock,
        )

    async def ping(self) -> str:
        """``"ok"`` when the limits' Redis answers in time, ``"unavailable"`` when it does not or
        is being bypassed (in fixed words: /readyz says this, never the client's error)."""
        breaker = self._breaker
        if breaker is None:
            return "ok"
        if not breaker.allow("readiness"):
            return "unavailable"
        started = self.clock.monotonic()
        try:
            answered = await self._limiter.storage.check()
        except Exception as exc:  # noqa: BLE001 - any failure means unavailable
            breaker.failed(
                "readiness", f"{type(exc).__name__}: {exc}", self.clock.monotonic() - started
            )
            return "unavailable"
        if not answered:
            breaker.failed("readiness", "no answer to PING")
            return "unavailable"
        breaker.answered("readiness", self.clock.monotonic() - started)
        return "ok" if not breaker.is_open else "unavailable"

    async def check_client(self, client_id: str) -> None:
        await self._check(self._per_client, "client", client_id)

    async def check_nmi(self, nmi: str) -> None:
        await self._check(self._per_nmi, "nmi", nmi)

    async def check_replay(self, endpoint_id: str, key_id: str) -> None:
        """429 for a webhook replay past the limit of the endpoint's, or of the admin key's
        (each replay sends the event again: a loop of them would flood a receiver)."""
        await self._check(self._replays, "webhook-endpoint", endpoint_id)
        await self._check(self._replays, "key", key_id)

    async def check_page(self, address: str) -> None:
        """429 for a client address past its requests to customers' pages (a link is a
        secret: guessing one is what this slows)."""
        await self._check(self._pages, "page-address", address)

    async def check_unknown_keys(self, address: str) -> None:
        """429 for a client address that sent too many unknown keys lately (not counted here:
        only an unknown key counts, ``count_unknown_key``)."""
        await self._check(self._unknown_keys, "address", address, count=False)

    async def count_unknown_key(self, address: str) -> None:
        """Count an unknown key against its client address."""
        await self._check(self._unknown_keys, "address", address, refuse=False)

    async def _check(
        self, item: RateLimitItem, scope: str, who: str, *, count: bool = True, refuse: bool = True
    ) -> None:
        breaker = self._breaker
        limiter = self._limiter
        if breaker is not None and not breaker.allow(_USE):
            limiter = self._fallback
        started = self.clock.monotonic()
        try:
            allowed = await (limiter.hit if count else limiter.test)(item, scope, who)
            stats = (
                None if allowed or not refuse else await limiter.get_window_stats(item, scope, who)
            )
        except Exception as exc:  # noqa: BLE001 - whatever the storage raised
            # Limits protect the service; they are not its correctness. With their storage down,
            # requests go on (the quota's state machine still settles each exactly once).
            RATE_LIMIT_ERRORS.inc()
            if breaker is not None:
                breaker.failed(
                    _USE, f"{type(exc).__name__}: {exc}", self.clock.monotonic() - started
                )
            else:
                log.warning("rate_limit_unavailable", scope=scope, error=str(exc))
            return
        if breaker is not None and limiter is self._limiter:
            breaker.answered(_USE, self.clock.monotonic() - started)
        if stats is None:
            return
        # ``limits`` adds the window's time left to its own reading of ``time.time()``: taken off
        # again on the same clock, what is left is the storage's, on ours.
        retry_after = max(1, math.ceil(stats.reset_time - time.time()))
        raise Problem(
            429,
            "rate-limited",
            "Too many requests",
            f"{scope} {who} is over its limit of {item}",
            headers={"Retry-After": str(retry_after)},
        )


_USE = "rate_limit"
