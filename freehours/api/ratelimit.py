"""Rate limits with the ``limits`` package: in memory, or in Redis shared by every API process."""

from __future__ import annotations

import math
import time

import structlog
from limits import RateLimitItem, parse
from limits.storage import MemoryStorage, RedisStorage, Storage
from limits.strategies import MovingWindowRateLimiter

from freehours.api.problems import Problem
from freehours.observability.metrics import RATE_LIMIT_ERRORS

log = structlog.get_logger("freehours.api")


class RateLimits:
    """Per-client and per-NMI limits. ``check`` raises a 429 problem with Retry-After."""

    def __init__(self, storage: Storage, per_client: str, per_nmi: str) -> None:
        self._limiter = MovingWindowRateLimiter(storage)
        self._per_client: RateLimitItem = parse(per_client)
        self._per_nmi: RateLimitItem = parse(per_nmi)

    @classmethod
    def open(
        cls, redis_url: str | None, per_client: str, per_nmi: str, prefix: str = "freehours:"
    ) -> RateLimits:
        """In memory, or in Redis (keys under ``prefix``) when a URL is configured."""
        storage: Storage = (
            MemoryStorage()
            if redis_url is None
            else RedisStorage(redis_url, key_prefix=f"{prefix}limits")
        )
        return cls(storage, per_client, per_nmi)

    def check_client(self, client_id: str) -> None:
        self._check(self._per_client, "client", client_id)

    def check_nmi(self, nmi: str) -> None:
        self._check(self._per_nmi, "nmi", nmi)

    def _check(self, item: RateLimitItem, scope: str, who: str) -> None:
        try:
            if self._limiter.hit(item, scope, who):
                return
        except Exception as exc:  # noqa: BLE001 - whatever the storage raised
            # Limits protect the service; they are not its correctness. With their storage down,
            # requests go on (the quota's state machine still settles each exactly once).
            RATE_LIMIT_ERRORS.inc()
            log.warning("rate_limit_unavailable", scope=scope, error=str(exc))
            return
        stats = self._limiter.get_window_stats(item, scope, who)
        retry_after = max(1, math.ceil(stats.reset_time - time.time()))
        raise Problem(
            429,
            "rate-limited",
            "Too many requests",
            f"{scope} {who} is over its limit of {item}",
            headers={"Retry-After": str(retry_after)},
        )
