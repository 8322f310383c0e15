"""The circuit breaker in front of the API: pybreaker, its state in Redis when there is one.

With ``FREEHOURS_REDIS_URL`` set, every agent using the same breaker name shares one state
(pybreaker's ``CircuitRedisStorage``): when the API is down, one agent's failures open the circuit
for all of them. Without Redis, or when Redis cannot be reached at start-up, the state is the
process's own.

pybreaker decides from the guarded call alone: it returns, a success; it raises, a failure, unless
the exception is excluded, which pybreaker counts as a success. So the sender's guarded call
returns only on a 200; it raises a failure for no answer, 409, 429 and 5xx; and an excluded
exception for a refusal (another 4xx), which is the API up and answering about a batch that is
wrong. The breaker is never told "success" about a call that did not get its answer.

pybreaker holds its lock for the whole guarded call, so calls through one breaker run one at a
time: that suits the sender, which sends one batch at a time, in order. It has no getter for the
time left until half-open; ``half_open_in`` works it out from the storage's ``opened_at``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import pybreaker
import redis
import structlog

from freehours.agent.policy import seconds_until_half_open
from freehours.cache.breaker import sync_client
from freehours.observability.metrics import AGENT_BREAKER_TRIPS, CIRCUIT_BREAKER_STATE

log = structlog.get_logger("freehours.agent")

T = TypeVar("T")

#: The gauge's value for each state: higher is worse.
STATE_VALUES = {pybreaker.STATE_CLOSED: 0, pybreaker.STATE_HALF_OPEN: 1, pybreaker.STATE_OPEN: 2}

#: Redis calls for the breaker's state fail fast: a slow Redis must not hold up sending, and
#: pybreaker falls back to "closed" when it cannot read the state.
REDIS_TIMEOUT_SECONDS = 1.0

CircuitOpen = pybreaker.CircuitBreakerError


@dataclass(frozen=True, slots=True)
class BreakerConfig:
    """When the breaker opens and for how long."""

    #: Five failures in a row: more than one request's three attempts, so a single unlucky batch
    #: does not stop the agent, but an API that is down is left alone within seconds.
    fail_max: int = 5
    #: Thirty seconds open before a trial call: an outage is mostly a restart or a failover.
    reset_timeout: float = 30.0
    #: Agents that use the same name (and Redis) share one breaker.
    name: str = "freehours-api"


class Breaker:
    """A pybreaker ``CircuitBreaker`` with metrics, logs and ``half_open_in``."""

    def __init__(
        self,
        config: BreakerConfig,
        storage: pybreaker.CircuitBreakerStorage,
        *,
        exclude: Sequence[type[BaseException]] = (),
        on_trip: Callable[[], None] = lambda: None,
    ) -> None:
        self.config = config
        self._storage = storage
        self._breaker = pybreaker.CircuitBreaker(
            fail_max=config.fail_max,
            reset_timeout=config.reset_timeout,
            exclude=list(exclude),
            listeners=[_Telemetry(config.name, on_trip)],
            state_storage=storage,
            name=config.name,
        )
        CIRCUIT_BREAKER_STATE.labels(config.name).set(STATE_VALUES[self.state])

    @classmethod
    def open(
        cls,
        config: BreakerConfig,
        *,
        redis_url: str | None,
        redis_prefix: str,
        exclude: Sequence[type[BaseException]] = (),
        on_trip: Callable[[], None] = lambda: None,
    ) -> Breaker:
        """A breaker whose state lives in Redis at ``redis_url`` (None: in this process)."""
        storage: pybreaker.CircuitBreakerStorage = pybreaker.CircuitMemoryStorage(
            pybreaker.STATE_CLOSED
        )
        if redis_url is not None:
            # One try per call (redis-py retries three times by default): a hung Redis costs a
            # state read one timeout, not four.
            client = sync_client(redis_url, REDIS_TIMEOUT_SECONDS)
            try:
                storage = pybreaker.CircuitRedisStorage(
                    pybreaker.STATE_CLOSED, client, namespace=f"{redis_prefix}breaker:{config.name}"
                )
            except redis.RedisError as exc:
                log.warning("breaker_redis_unreachable", redis_url=redis_url, error=str(exc))
        return cls(config, storage, exclude=exclude, on_trip=on_trip)

    @property
    def state(self) -> str:
        """``closed``, ``half-open`` or ``open``, as the (shared) storage says."""
        return str(self._breaker.current_state)

    def call(self, func: Callable[..., T], *args: Any) -> T:
        """``func(*args)`` through the breaker: raises ``CircuitOpen`` while it is open."""
        return self._breaker.call(func, *args)

    def half_open_in(self, now: datetime) -> float | None:
        """Seconds until an open breaker lets a trial call through; None when it is not open."""
        if self.state != pybreaker.STATE_OPEN:
            return None
        return seconds_until_half_open(self._storage.opened_at, self.config.reset_timeout, now)


class _Telemetry(pybreaker.CircuitBreakerListener):
    """Every state change: the gauge, a log line, and each opening counted as a trip."""

    def __init__(self, name: str, on_trip: Callable[[], None]) -> None:
        self._name = name
        self._on_trip = on_trip

    def state_change(
        self,
        cb: pybreaker.CircuitBreaker,
        old_state: pybreaker.CircuitBreakerState | None,
        new_state: pybreaker.CircuitBreakerState,
    ) -> None:
        CIRCUIT_BREAKER_STATE.labels(self._name).set(STATE_VALUES[new_state.name])
        log.warning(
            "breaker_state_changed",
            breaker=self._name,
            old=None if old_state is None else old_state.name,
            new=new_state.name,
        )
        if new_state.name == pybreaker.STATE_OPEN:
            AGENT_BREAKER_TRIPS.inc()
            self._on_trip()
