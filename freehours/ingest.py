"""Meter data in: the one path the API and the command line share.

Within one transaction: the day rows are stored under the revision rule, every settled quota whose
window the changed consumption rows touch opens its next version, and each affected day's
settlement job is scheduled. After the commit, the reopened quotas are written to the cache.
Nothing of a batch is stored, reopened or scheduled unless all of it is.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

import sqlalchemy as sa

from freehours.clock import Clock
from freehours.domain.settlement import Quota
from freehours.meterdata.records import IntervalDay, IntervalRead
from freehours.settlement import Settlements
from freehours.store import meter
from freehours.store.database import Store
from freehours.store.meter import DayKey, IngestCounts


class SettlementScheduler(Protocol):
    """Schedules the settlement of the days that changed rows touch, in the caller's transaction."""

    def __call__(
        self, conn: sa.Connection, changed: frozenset[DayKey], reopened: list[Quota]
    ) -> None: ...


@dataclass(frozen=True, slots=True)
class Ingested:
    """What one ingest stored and which quotas it reopened."""

    counts: IngestCounts
    reopened: list[Quota] = field(default_factory=list)


class Ingestion:
    """Stores meter data and keeps settlement in step with it."""

    def __init__(
        self,
        store: Store,
        settlements: Settlements,
        clock: Clock,
        schedule: SettlementScheduler | None = None,
    ) -> None:
        self.store = store
        self.settlements = settlements
        self.clock = clock
        self.schedule = schedule

    def days(self, conn: sa.Connection, days: Iterable[IntervalDay]) -> Ingested:
        """NEM12 day rows, in the caller's transaction. Call ``committed`` after the commit."""
        counts = meter.ingest_days(conn, days, received_at=self.clock.now())
        return self._follow(conn, counts)

    def reads(self, conn: sa.Connection, reads: Iterable[IntervalRead]) -> Ingested:
        """Interval reads, in the caller's transaction. Call ``committed`` after the commit."""
        counts = meter.ingest_reads(conn, reads, received_at=self.clock.now())
        return self._follow(conn, counts)

    def file(self, days: Iterable[IntervalDay]) -> Ingested:
        """A whole NEM12 file in a transaction of its own: all of it, or nothing."""
        with self.store.write() as conn:
            ingested = self.days(conn, days)
        self.committed(ingested)
        return ingested

    def committed(self, ingested: Ingested) -> None:
        """After the commit: the cache learns of the reopened quotas."""
        self.settlements.publish(ingested.reopened)

    def _follow(self, conn: sa.Connection, counts: IngestCounts) -> Ingested:
        if not counts.changed:
            return Ingested(counts)
        reopened = self.settlements.reopen(conn, counts.changed)
        if self.schedule is not None:
            self.schedule(conn, counts.changed, reopened)
        return Ingested(counts, reopened)
