"""The breaker's state in Redis: one agent's failures open the circuit for every agent."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import pybreaker
import pytest
import redis

from freehours.agent.breaker import Breaker, BreakerConfig, CircuitOpen

pytestmark = pytest.mark.redis


@pytest.fixture
def prefix(redis_url: str) -> Iterator[str]:
    prefix = f"test:{uuid.uuid4().hex[:10]}:"
    yield prefix
    client = redis.Redis.from_url(redis_url)
    keys = list(client.scan_iter(f"{prefix}*"))
    if keys:
        client.delete(*keys)
    client.close()


def failing() -> None:
    raise ConnectionError("the API is down")


def test_failures_through_one_agent_open_the_breaker_for_another(
    redis_url: str, prefix: str
) -> None:
    config = BreakerConfig(fail_max=2, reset_timeout=30.0, name="shared")
    one = Breaker.open(config, redis_url=redis_url, redis_prefix=prefix)
    other = Breaker.open(config, redis_url=redis_url, redis_prefix=prefix)
    with pytest.raises(ConnectionError):
        one.call(failing)
    with pytest.raises(CircuitOpen):
        one.call(failing)
    assert other.state == pybreaker.STATE_OPEN
    calls: list[str] = []
    with pytest.raises(CircuitOpen):
        other.call(lambda: calls.append("sent"))
    assert calls == []
    half_open_in = other.half_open_in(datetime.now(UTC))
    assert half_open_in is not None
    assert 28.0 <= half_open_in <= 30.0


def test_a_redis_that_cannot_be_reached_leaves_the_breaker_in_process(prefix: str) -> None:
    breaker = Breaker.open(
        BreakerConfig(fail_max=1), redis_url="redis://127.0.0.1:1/0", redis_prefix=prefix
    )
    with pytest.raises(CircuitOpen):
        breaker.call(failing)
    assert breaker.state == pybreaker.STATE_OPEN
