"""Quota cache implementations. See the package docstring for the rules they keep."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from datetime import date, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from freehours.cache.breaker import RedisBreaker, sync_client
from freehours.clock import Clock, SystemClock
from freehours.domain.settlement import Quota, QuotaStatus
from freehours.errors import FreehoursError

if TYPE_CHECKING:
    import redis

#: The in-process cache's bound, in quotas: about 650 bytes each (measured with tracemalloc), so
#: some 65 MB at most. A worker settling 1,500 quotas a second writes 450,000 in the five minutes
#: a terminal entry lives; the database answers for the ones evicted early.
MEMORY_CACHE_ENTRIES = 100_000


class CacheUnavailable(FreehoursError):
    """The cache could not be reached. Callers log, count and carry on with the database."""


class QuotaCache(Protocol):
    """Latest known state per quota key ``"{nmi}:{date}"``."""

    def get(self, key: str) -> Quota | None:
        """The cached quota, or None. Raises CacheUnavailable."""
        ...

    def put(self, quota: Quota, ttl_seconds: float) -> bool:
        """Store ``quota`` unless a newer (version, revision) is cached; True when stored.
        Raises CacheUnavailable."""
        ...


def encode(quota: Quota) -> str:
    """A quota as compact JSON (decimals and times as strings)."""
    return json.dumps(
        [
            quota.nmi,
            quota.date.isoformat(),
            quota.version,
            quota.status.value,
            quota.fence,
            quota.attempts,
            _iso(quota.locked_until),
            _str(quota.free_kwh),
            _str(quota.free_value),
            _iso(quota.completed_at),
            quota.reason,
            quota.revision,
        ],
        separators=(",", ":"),
    )


def decode(text: str | bytes) -> Quota:
    """The inverse of ``encode``."""
    f: list[Any] = json.loads(text)
    return Quota(
        nmi=f[0],
        date=date.fromisoformat(f[1]),
        version=f[2],
        status=QuotaStatus(f[3]),
        fence=f[4],
        attempts=f[5],
        locked_until=None if f[6] is None else datetime.fromisoformat(f[6]),
        free_kwh=None if f[7] is None else Decimal(f[7]),
        free_value=None if f[8] is None else Decimal(f[8]),
        completed_at=None if f[9] is None else datetime.fromisoformat(f[9]),
        reason=f[10],
        revision=f[11],
    )


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def _str(value: Decimal | None) -> str | None:
    return None if value is None else str(value)


class MemoryQuotaCache:
    """The in-process cache: one dict, one lock, expiry on the injected clock, at most
    ``max_entries`` quotas.

    An entry goes when it is read after its time to live; and when a put finds the cache full,
    every expired entry goes, then, if that freed less than a tenth of it, the entries written
    longest ago (the dict keeps them in the order written) until a tenth is free: a worker that
    settles a million quotas, none of them read again, holds at most ``max_entries``. A quota
    evicted early is a lost cache write, which the cache's rules already allow for: the database
    answers, and a job told a newer version never trusts an older cached one.
    """

    def __init__(self, clock: Clock | None = None, max_entries: int = MEMORY_CACHE_ENTRIES) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be at least 1, not {max_entries}")
        self._clock = clock or SystemClock()
        self._entries: dict[str, tuple[float, Quota]] = {}
        self._lock = threading.Lock()
        self._max = max_entries

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> Quota | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            expires, quota = entry
            if expires <= self._clock.monotonic():
                del self._entries[key]
                return None
            return quota

    def put(self, quota: Quota, ttl_seconds: float) -> bool:
        now = self._clock.monotonic()
        key = quota.key
        with self._lock:
            entry = self._entries.pop(key, None)
            if entry is not None and entry[0] > now:
                held = entry[1]
                if (quota.version, quota.revision) <= (held.version, held.revision):
                    self._entries[key] = entry  # kept, now as the latest written
                    return False
            if len(self._entries) >= self._max:
                self._make_room(now)
            self._entries[key] = (now + ttl_seconds, quota)
            return True

    def _make_room(self, now: float) -> None:
        """Under the lock, the cache full: the expired entries out, then the oldest written
        until a tenth of the cache is free."""
        entries = self._entries
        for key in [key for key, (expires, _) in entries.items() if expires <= now]:
            del entries[key]
        target = self._max - max(1, self._max // 10)
        if len(entries) > target:
            oldest = iter(list(entries))
            while len(entries) > target:
                del entries[next(oldest)]


# Compare-and-set on (version, revision), then store with its time to live: one atomic step.
_PUT_SCRIPT = """
local held = redis.call('HMGET', KEYS[1], 'v', 'r')
if held[1] then
  local v, r = tonumber(held[1]), tonumber(held[2])
  local nv, nr = tonumber(ARGV[1]), tonumber(ARGV[2])
  if nv < v or (nv == v and nr <= r) then return 0 end
end
redis.call('HSET', KEYS[1], 'v', ARGV[1], 'r', ARGV[2], 'q', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
"""


_T = TypeVar("_T")


class RedisQuotaCache:
    """The shared cache: one Redis hash per quota key, written by a Lua compare-and-set.

    Asked only while ``breaker`` lets it (``freehours.cache.breaker``): while Redis is bypassed,
    a get finds nothing and a put stores nothing, and the database answers."""

    def __init__(
        self,
        client: redis.Redis,
        prefix: str = "freehours:quota:",
        breaker: RedisBreaker | None = None,
    ) -> None:
        import redis  # noqa: PLC0415 - imported where a client is made

        self._client = client
        self._errors = redis.RedisError
        self._prefix = prefix
        self._put = client.register_script(_PUT_SCRIPT)
        self._breaker = breaker

    def get(self, key: str) -> Quota | None:
        raw = self._asked(f"get {key}", lambda: self._client.hget(self._prefix + key, "q"))
        return None if raw is None else decode(raw)

    def put(self, quota: Quota, ttl_seconds: float) -> bool:
        stored = self._asked(
            f"put {quota.key}",
            lambda: self._put(
                keys=[self._prefix + quota.key],
                args=[
                    quota.version,
                    quota.revision,
                    encode(quota),
                    max(1, int(ttl_seconds * 1000)),
                ],
            ),
        )
        return bool(stored)

    def _asked(self, what: str, call: Callable[[], _T]) -> _T | None:
        """``call``'s answer, timed into the breaker; None where the breaker lets no call
        through now (a get finds nothing, a put stores nothing); ``CacheUnavailable`` naming
        ``what`` where Redis fails."""
        breaker = self._breaker
        if breaker is not None and not breaker.allow(_USE):
            return None
        started = time.perf_counter()
        try:
            answer = call()
        except self._errors as exc:
            if breaker is not None:
                breaker.failed(_USE, str(exc), time.perf_counter() - started)
            raise CacheUnavailable(f"quota cache {what}: {exc}") from exc
        if breaker is not None:
            breaker.answered(_USE, time.perf_counter() - started)
        return answer


_USE = "quota_cache"


def open_quota_cache(
    redis_url: str | None,
    clock: Clock | None = None,
    prefix: str = "freehours:",
    *,
    timeout: float = 0.1,
    breaker: RedisBreaker | None = None,
) -> QuotaCache:
    """Redis when a URL is configured, otherwise the in-process cache.

    The cache only saves a database round trip: a Redis that does not answer within ``timeout``
    (one try, no retries) counts as unavailable and the database answers; ``breaker`` (shared
    with the rate limits) then keeps the cache from asking it again for a while."""
    if redis_url is None:
        return MemoryQuotaCache(clock)
    return RedisQuotaCache(sync_client(redis_url, timeout), f"{prefix}quota:", breaker)
