"""Quota cache implementations. See the package docstring for the rules they keep."""

from __future__ import annotations

import json
import threading
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Protocol

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

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
    """The shared cache: one Redis hash per quota key, written by a Lua compare-and-set."""

    def __init__(self, client: redis.Redis, prefix: str = "freehours:quota:") -> None:
        self._client = client
        self._prefix = prefix
        self._put = client.register_script(_PUT_SCRIPT)

    def get(self, key: str) -> Quota | None:
        try:
            raw = self._client.hget(self._prefix + key, "q")
        except redis.RedisError as exc:
            raise CacheUnavailable(f"quota cache get {key}: {exc}") from exc
        return None if raw is None else decode(raw)

    def put(self, quota: Quota, ttl_seconds: float) -> bool:
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
            raise CacheUnavailable(f"quota cache put {quota.key}: {exc}") from exc
        return bool(stored)


def open_quota_cache(
    redis_url: str | None, clock: Clock | None = None, prefix: str = "freehours:"
) -> QuotaCache:
    """Redis when a URL is configured, otherwise the in-process cache."""
    if redis_url is None:
        return MemoryQuotaCache(clock)
    # The cache only saves a database round trip: waiting on it longer than half a second would
    # cost more than it saves, so a slow Redis counts as unavailable and the database answers.
    # No client-side retries either (redis-py retries three times by default): one try, then the
    # database.
    return RedisQuotaCache(fail_fast_redis(redis_url), prefix=f"{prefix}quota:")


def fail_fast_redis(url: str) -> redis.Redis:
    """A Redis client that answers or fails within half a second, without retrying."""
    return redis.Redis.from_url(
        url, socket_timeout=0.5, socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0)
    )
