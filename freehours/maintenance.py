"""Retention: what the database keeps only for a while, deleted on one schedule.

Finished jobs are kept for ``FREEHOURS_JOB_RETENTION_HOURS`` and Idempotency-Keys for
``FREEHOURS_IDEMPOTENCY_RETENTION_HOURS``. Each is an ``Expiry`` (what, kept how long, how it
is deleted), and each long-running process runs a ``Retention`` over those it is answerable for:
every worker its finished jobs (in its keeper thread, ``run_if_due``), every API process the
Idempotency-Keys (in its lifespan, ``keep_running``), so that a deployment that runs only the
API still purges its keys. A deletion scans its table, so it runs once an hour: a day's rows wait
an hour more at no cost.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import anyio
import structlog

from freehours.clock import Clock
from freehours.store.database import Store

log = structlog.get_logger("freehours.maintenance")

HOURLY = timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class Expiry:
    """Rows kept for ``keep``: ``delete(store, before)`` deletes those older than ``before``
    and says how many went."""

    name: str
    keep: timedelta
    delete: Callable[[Store, datetime], int]


class Retention:
    """``expiries`` run together, every ``every``: the first time as soon as asked."""

    def __init__(
        self, store: Store, clock: Clock, expiries: Sequence[Expiry], every: timedelta = HOURLY
    ) -> None:
        self.store = store
        self.clock = clock
        self.expiries = tuple(expiries)
        self.every = every
        self._due = clock.monotonic()

    def run(self) -> dict[str, int]:
        """Delete what has expired now; how many rows of each."""
        now = self.clock.now()
        return {
            expiry.name: expiry.delete(self.store, now - expiry.keep) for expiry in self.expiries
        }

    def run_if_due(self) -> None:
        """``run`` when ``every`` has passed since the last time, for a loop that wakes more
        often (a worker's keeper)."""
        now = self.clock.monotonic()
        if now < self._due:
            return
        self._due = now + self.every.total_seconds()
        self.run()

    async def keep_running(self) -> None:
        """``run`` now and then every ``every``, in a worker thread (the event loop never waits
        on the database), until cancelled. A failure is logged and the next time tries again."""
        while True:
            try:
                await anyio.to_thread.run_sync(self.run)
            except Exception as exc:  # noqa: BLE001 - the next time tries again
                log.warning("retention_failed", error=f"{type(exc).__name__}: {exc}"[:500])
            await asyncio.sleep(self.every.total_seconds())
