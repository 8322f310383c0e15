"""The quota cache keeps the newest state per key, on both implementations behind one interface."""

from __future__ import annotations

import contextvars
import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
import redis

from freehours.cache.breaker import RedisBreaker, start_request, sync_client
from freehours.cache.quota import (
    CacheUnavailable,
    MemoryQuotaCache,
    QuotaCache,
    RedisQuotaCache,
    decode,
    encode,
)
from freehours.clock import ManualClock
from freehours.domain.settlement import Claimed, QuotaStatus, claim, complete, new_quota

NOW = datetime(2026, 7, 1, 5, tzinfo=UTC)


@pytest.fixture(params=["memory", "redis"])
def cache(request: pytest.FixtureRequest) -> Iterator[QuotaCache]:
    if request.param == "memory":
        yield MemoryQuotaCache(ManualClock(NOW))
        return
    url = request.getfixturevalue("redis_url")
    client = redis.Redis.from_url(url)
    prefix = f"test:{uuid.uuid4().hex}:"
    yield RedisQuotaCache(client, prefix=prefix)
    for key in client.scan_iter(f"{prefix}*"):
        client.delete(key)
    client.close()


def _states():
    pending = new_quota("4102000001", date(2026, 7, 1))
    decision = claim(pending, NOW, timedelta(seconds=30), 5)
    assert isinstance(decision, Claimed)
    locked = decision.quota
    done = complete(locked, locked.fence, Decimal("7.125"), Decimal("2.14"), NOW)
    return pending, locked, done


def test_encode_decode_round_trips_every_field() -> None:
    _, locked, done = _states()
    assert decode(encode(locked)) == locked
    assert decode(encode(done)) == done


def test_get_of_an_unknown_key_is_none(cache: QuotaCache) -> None:
    assert cache.get("nobody:2026-07-01") is None


def test_newer_revision_replaces_older(cache: QuotaCache) -> None:
    _, locked, done = _states()
    assert cache.put(locked, 30)
    assert cache.put(done, 300)
    assert cache.get(done.key) == done


def test_older_revision_never_overwrites_newer(cache: QuotaCache) -> None:
    _, locked, done = _states()
    assert cache.put(done, 300)
    assert not cache.put(locked, 30)
    got = cache.get(done.key)
    assert got is not None
    assert got.status is QuotaStatus.COMPLETED


def test_same_revision_is_not_written_twice(cache: QuotaCache) -> None:
    _, _, done = _states()
    assert cache.put(done, 300)
    assert not cache.put(done, 300)


def test_a_new_version_replaces_a_completed_older_version(cache: QuotaCache) -> None:
    _, _, done = _states()
    cache.put(done, 300)
    next_version = new_quota(done.nmi, done.date, version=2)
    assert cache.put(next_version, 30)
    got = cache.get(done.key)
    assert got is not None
    assert (got.version, got.status) == (2, QuotaStatus.PENDING)


def test_memory_entries_expire_on_the_injected_clock() -> None:
    clock = ManualClock(NOW)
    cache = MemoryQuotaCache(clock)
    _, locked, _ = _states()
    cache.put(locked, 30)
    clock.advance(29.9)
    assert cache.get(locked.key) == locked
    clock.advance(0.1)
    assert cache.get(locked.key) is None
    # An expired entry no longer blocks an older state from being cached.
    assert cache.put(replace(locked, revision=0), 30)


def test_memory_cache_holds_at_most_its_bound_of_quotas_never_read_again() -> None:
    # A worker settling a day of quotas, none read again: the cache stays within its bound,
    # the expired entries going first, then the ones written longest ago.
    clock = ManualClock(NOW)
    cache = MemoryQuotaCache(clock, max_entries=100)
    _, _, done = _states()
    for n in range(1_000):
        cache.put(replace(done, nmi=f"41020{n:05d}"), 300)
        clock.advance(1)
        assert len(cache) <= 100
    # The newest written are still there, the oldest gone.
    assert cache.get(replace(done, nmi="4102000999").key) is not None
    assert cache.get(replace(done, nmi="4102000000").key) is None
    # Entries past their time to live go before any live one does: the oldest written live
    # ones (999, written at 999 s, expiring at 1,299 s) stay.
    clock.advance(295)  # now 1,295 s: every entry written before 995 s has expired
    for n in range(1_000, 1_020):
        cache.put(replace(done, nmi=f"41020{n:05d}"), 300)
    assert len(cache) == 24
    assert cache.get(replace(done, nmi="4102000999").key) is not None


def test_memory_cache_refusing_an_older_state_keeps_the_newer_as_latest_written() -> None:
    clock = ManualClock(NOW)
    cache = MemoryQuotaCache(clock, max_entries=2)
    _, locked, done = _states()
    assert cache.put(done, 300)
    other = replace(done, nmi="4102000002")
    assert cache.put(other, 300)
    assert not cache.put(locked, 300)  # older: refused, and done is now the latest written
    cache.put(replace(done, nmi="4102000003"), 300)  # full: the oldest written goes
    assert cache.get(done.key) == done
    assert cache.get(other.key) is None
    with pytest.raises(ValueError, match="max_entries"):
        MemoryQuotaCache(clock, max_entries=0)


def test_redis_entries_carry_their_time_to_live(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    prefix = f"test:{uuid.uuid4().hex}:"
    cache = RedisQuotaCache(client, prefix=prefix)
    _, locked, _ = _states()
    cache.put(locked, 30)
    ttl = client.pttl(prefix + locked.key)
    client.delete(prefix + locked.key)
    assert 29_000 < ttl <= 30_000


def test_unreachable_redis_raises_cache_unavailable() -> None:
    cache = RedisQuotaCache(sync_client("redis://127.0.0.1:1/0", 0.1))
    _, locked, _ = _states()
    with pytest.raises(CacheUnavailable):
        cache.get(locked.key)
    with pytest.raises(CacheUnavailable):
        cache.put(locked, 30)


class CountingRedis:
    """A client that counts the calls that reach it and fails each one, as a dead Redis does."""

    def __init__(self) -> None:
        self.calls = 0

    def register_script(self, script: str) -> object:
        def run(**_: object) -> object:
            self.calls += 1
            raise redis.ConnectionError("refused")

        return run

    def hget(self, *_: object) -> object:
        self.calls += 1
        raise redis.ConnectionError("refused")


def test_a_failed_redis_is_bypassed_until_its_retry_time() -> None:
    client = CountingRedis()
    breaker = RedisBreaker(retry_seconds=3600, slow_seconds=1)
    cache = RedisQuotaCache(client, breaker=breaker)  # type: ignore[arg-type]
    _, locked, _ = _states()
    with pytest.raises(CacheUnavailable):
        cache.get(locked.key)
    # Open: nothing more reaches Redis; a get finds nothing, a put stores nothing.
    assert [cache.get(locked.key) for _ in range(100)] == [None] * 100
    assert cache.put(locked, 30) is False
    assert client.calls == 1
    assert breaker.is_open


def test_a_bypassed_redis_is_tried_by_one_call_and_used_again_once_it_answers(
    redis_url: str,
) -> None:
    clock = ManualClock(datetime(2026, 7, 1, tzinfo=UTC))
    breaker = RedisBreaker(retry_seconds=30, slow_seconds=1, clock=clock)
    breaker.failed("test", "as if it had failed")
    prefix = f"test:{uuid.uuid4().hex}:"
    client = sync_client(redis_url, 0.5)
    cache = RedisQuotaCache(client, prefix=prefix, breaker=breaker)
    _, locked, _ = _states()
    clock.advance(29.9)
    assert cache.put(locked, 30) is False  # before the retry time: bypassed
    clock.advance(0.1)
    assert cache.put(locked, 30) is True  # the probe, at the retry time: answered
    assert not breaker.is_open
    assert cache.get(locked.key) == locked
    client.delete(prefix + locked.key)


def test_a_redis_slower_than_its_limit_opens_the_breaker(redis_url: str) -> None:
    breaker = RedisBreaker(retry_seconds=3600, slow_seconds=0.000001)  # every call is too slow
    cache = RedisQuotaCache(sync_client(redis_url, 0.5), prefix="test:slow:", breaker=breaker)
    _, locked, _ = _states()
    assert cache.get(locked.key) is None  # answered, but too late to be worth it
    assert breaker.is_open


def test_a_request_past_its_redis_budget_does_without_redis(redis_url: str) -> None:
    breaker = RedisBreaker(retry_seconds=3600, slow_seconds=1, budget_seconds=0.05)
    prefix = f"test:{uuid.uuid4().hex}:"
    client = sync_client(redis_url, 0.5)
    cache = RedisQuotaCache(client, prefix=prefix, breaker=breaker)
    _, locked, _ = _states()

    def one_request() -> list[bool]:
        start_request()
        breaker.answered("test", 0.03)  # two calls just under the slow limit...
        breaker.answered("test", 0.03)
        return [cache.put(locked, 30)]  # ...spend the budget: this one is not made

    assert contextvars.copy_context().run(one_request) == [False]
    assert not breaker.is_open  # Redis is fine: the next request uses it
    assert contextvars.copy_context().run(lambda: (start_request(), cache.put(locked, 30))[1])
    client.delete(prefix + locked.key)
