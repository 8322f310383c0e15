"""What the API runs on, built once at start-up and kept in the application's state
(``app.state.services``), where every route finds it (``services_of``, the ``AppServices``
parameter): the runtime (store, settlements, ingestion, clock), the rate limits, the key cache,
and the slots that bound how much of each kind of work runs at once."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Annotated, cast

import anyio
from fastapi import Depends, Request

from freehours.api import idempotency
from freehours.api.agents import AgentReports
from freehours.api.batching import SettleQueue
from freehours.api.keycache import KeyCache
from freehours.api.ratelimit import RateLimits
from freehours.clock import Clock
from freehours.domain.time import NEM_TIME
from freehours.meterdata.nem12 import ReadLimits
from freehours.operations.actions import Actions
from freehours.operations.runtime import Runtime
from freehours.settings import Settings
from freehours.settlement.service import Settlements
from freehours.store.database import Store

#: Threads that /readyz's database checks may hold at once (a black-holed database holds each
#: until the database timeouts end it).
READINESS_THREADS = 2


@dataclass
class Services:
    """What the API runs on: built once at start-up, shared by every request."""

    runtime: Runtime
    limits: RateLimits
    #: Idempotency-Keys whose requests this process is running, their leases renewed.
    in_flight: idempotency.InFlight = field(default_factory=idempotency.InFlight)
    #: The keys of recent requests, so that a known key costs no database round trip.
    keys: KeyCache = field(init=False)
    #: Settlement requests, settled in batches on a few threads of their own: requests that
    #: arrive while every thread is busy are settled together by the next one free.
    settle_queue: SettleQueue = field(init=False)
    #: NEM12 uploads read and checked at once: each holds its body and a CPU; past it, 503.
    uploads: anyio.CapacityLimiter = field(init=False)
    readiness: anyio.CapacityLimiter = field(init=False)
    #: The NEM12 reader's limits for an upload.
    nem12_limits: ReadLimits = field(init=False)
    #: What an operator may do through the console, each in the audit log.
    actions: Actions = field(init=False)
    #: What meter agents say of themselves (their ``Freehours-Agent`` header), written behind.
    agents: AgentReports = field(init=False)

    def __post_init__(self) -> None:
        settings = self.settings
        self.keys = KeyCache(
            self.store,
            self.clock,
            ttl=settings.api_key_cache_seconds,
            size=settings.api_key_cache_size,
        )
        self.settle_queue = SettleQueue(self.settlements, self.settle_threads)
        self.uploads = anyio.CapacityLimiter(settings.upload_concurrency)
        self.readiness = anyio.CapacityLimiter(READINESS_THREADS)
        self.nem12_limits = settings.nem12_limits()
        self.actions = Actions(self.store, self.clock, self.settlements)
        self.agents = AgentReports(self.store, self.clock)

    @classmethod
    def from_settings(cls, settings: Settings, clock: Clock | None = None) -> Services:
        """Open the runtime (refusing an out-of-date database) and the rate limits."""
        runtime = Runtime.open(settings, clock, long_running=True)
        limits = RateLimits.open(
            settings.redis_url,
            settings.rate_limit_per_client,
            settings.rate_limit_per_nmi,
            settings.redis_prefix,
            settings.rate_limit_unknown_keys,
            timeout=settings.redis_timeout_seconds,
            breaker=runtime.redis_breaker,
            replays=settings.rate_limit_webhook_replays,
            pages=settings.rate_limit_pages,
            clock=runtime.clock,
        )
        return cls(runtime, limits)

    @property
    def settings(self) -> Settings:
        return self.runtime.settings

    @property
    def store(self) -> Store:
        return self.runtime.store

    @property
    def clock(self) -> Clock:
        return self.runtime.clock

    @property
    def settlements(self) -> Settlements:
        return self.runtime.settlements

    @property
    def settle_threads(self) -> int:
        """How many settlement batches this process runs at once (``SettleQueue``):
        ``FREEHOURS_SETTLE_THREADS``, else what measured best (``make bench``): 4 on PostgreSQL,
        whose round trips leave the interpreter to another thread; 1 on SQLite, whose writers
        take turns anyway (a second thread only made the batches smaller, and slower)."""
        configured = self.settings.settle_threads
        if configured is not None:
            return configured
        return 4 if self.store.parallel_writers else 1

    def nem_today(self) -> date:
        """Today's NEM date on the clock: what reads and settlements are dated against."""
        return self.clock.now().astimezone(NEM_TIME).date()


def services_of(request: Request) -> Services:
    """The services of the application serving ``request`` (``create_app`` put them there)."""
    return cast(Services, request.app.state.services)


#: A route parameter for the services (no part of the OpenAPI description).
AppServices = Annotated[Services, Depends(services_of)]
