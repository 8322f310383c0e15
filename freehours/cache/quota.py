"""Quota cache implementations. See the package docstring for the rules they keep."""

from __future__ import annotations

import json
import threading
import time
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Protocol

import redis

from freehours.cache.breaker import RedisBreaker, sync_client
from freehours.clock import Clock, SystemClock
from freehours.domain.settlement import Quota, QuotaStatus
from freehours.errors import FreehoursError


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
    """The in-process cache: one dict, one lock, expiry on the injected clock."""

    def __init__(self, clock: Clock | None = None) -> None:
        self._clock = clock or SystemClock()
        self._entries: dict[str, tuple[float, Quota]] = {}
        self._lock = threading.Lock()

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
        with self._lock:
            entry = self._entries.get(quota.key)
            if entry is not None and entry[0] > now:
                held = entry[1]
                if (quota.version, quota.revision) <= (held.version, held.revision):
                    return False
            self._entries[quota.key] = (now + ttl_seconds, quota)
            return True


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
        self._client = client
        self._prefix = prefix
        self._put = client.register_script(_PUT_SCRIPT)
        self._breaker = breaker

    def get(self, key: str) -> Quota | None:
        breaker = self._breaker
        if breaker is not None and not breaker.allow(_USE):
            return None
        started = time.perf_counter()
        try:
            raw = self._client.hget(self._prefix + key, "q")
        except redis.RedisError as exc:
            if breaker is not None:
                breaker.failed(_USE, str(exc), time.perf_counter() - started)
            raise CacheUnavailable(f"quota cache get {key}: {exc}") from exc
        if breaker is not None:
            breaker.answered(_USE, time.perf_counter() - started)
        return None if raw is None else decode(raw)

    def put(self, quota: Quota, ttl_seconds: float) -> bool:
        breaker = self._breaker
        if breaker is not None and not breaker.allow(_USE):
            return False
        started = time.perf_counter()
        try:
            stored = self._put(
                keys=[self._prefix + quota.key],
                args=[
                    quota.version,
                    quota.revision,
                    encode(quota),
                    max(1, int(ttl_seconds * 1000)),
                ],
            )
        except redis.RedisError as exc:
            if breaker is not None:
                breaker.failed(_USE, str(exc), time.perf_counter() - started)
            raise CacheUnavailable(f"quota cache put {quota.key}: {exc}") from exc
        if breaker is not None:
            breaker.answered(_USE, time.perf_counter() - started)
        return bool(stored)


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
