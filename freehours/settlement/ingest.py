"""Meter data in: the one path the API and the command line share.

Within one transaction: the day rows are stored under the revision rule, every settled quota whose
window the changed consumption rows touch opens its next version, and each affected day's
settlement job is scheduled; and, when the caller says where the data came from (an
``Arrival``), the arrival is recorded with its counts (``unit.ingestions``). After the commit, the
reopened quotas are written to the cache, and the interval values counted
(``freehours_ingested_values_total``). Nothing of a batch is stored, reopened, scheduled or
recorded unless all of it is.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Literal, Protocol

from freehours.clock import Clock
from freehours.domain.reads import EARLIEST_DATE, IntervalDay, IntervalRead, latest_read_date
from freehours.domain.settlement import Quota
from freehours.domain.time import NEM_TIME
from freehours.observability.metrics import INGESTED_VALUES
from freehours.observability.trace_ids import current_trace_id
from freehours.settlement.model import AffectedDays
from freehours.settlement.service import Settlements
from freehours.store.catalog import UnknownCustomer
from freehours.store.database import Store, Unit
from freehours.store.meter import IngestCounts

#: Customers whose days one transaction of ``Ingestion.schedule_unsettled`` schedules. Jobs are
#: enqueued some 2,900 a second (160,365 days of 20,001 customers in 55 s, PostgreSQL on the
#: loaded 2-core machine): a hundred customers' year is 36,600 jobs at most, some 12 s, and a run
#: over every customer holds no transaction longer than that.
CUSTOMERS_PER_TRANSACTION = 100


class SettlementScheduler(Protocol):
    """Schedules the settlement of the affected days (``Settlements.affected_days`` of the
    changed rows), in the caller's transaction."""

    def __call__(
        self, unit: Unit, affected: Sequence[AffectedDays], reopened: list[Quota]
    ) -> None: ...


@dataclass(frozen=True, slots=True)
class Arrival:
    """Where a batch of meter data came from, recorded with it: an upload (``nem12``), a JSON
    batch (``reads``) or a file of ``freehours nem12 import`` (``import``); its size in bytes as
    received; the file's name, the API key's id and the meter agent's name, where known."""

    source: Literal["nem12", "reads", "import"]
    size: int
    name: str | None = None
    key_id: str | None = None
    agent: str | None = None


@dataclass(frozen=True, slots=True)
class Ingested:
    """What one ingest stored and which quotas it reopened; how many interval values it took,
    and by which path (the ``path`` label of ``freehours_ingested_values_total``)."""

    counts: IngestCounts
    reopened: list[Quota] = field(default_factory=list)
    values: int = 0
    path: Literal["reads", "nem12"] = "reads"


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

    def days(
        self, unit: Unit, days: Iterable[IntervalDay], arrival: Arrival | None = None
    ) -> Ingested:
        """NEM12 day rows, in the caller's transaction, recorded as ``arrival`` (if given). Call
        ``committed`` after the commit."""
        values = 0

        def counted(days: Iterable[IntervalDay]) -> Iterator[IntervalDay]:
            nonlocal values
            for day in days:
                values += len(day.values)
                yield day

        received_at = self.clock.now()
        counts = unit.meter.ingest_days(counted(days), received_at=received_at)
        _record(unit, arrival, counts, received_at)
        return self._follow(unit, counts, "nem12", values)

    def reads(
        self, unit: Unit, reads: Iterable[IntervalRead], arrival: Arrival | None = None
    ) -> Ingested:
        """Interval reads, in the caller's transaction, recorded as ``arrival`` (if given). Call
        ``committed`` after the commit."""
        received_at = self.clock.now()
        counts = unit.meter.ingest_reads(reads, received_at=received_at)
        _record(unit, arrival, counts, received_at)
        # Reads count in intervals: every interval the batch named once.
        return self._follow(unit, counts, "reads", counts.total)

    def file(self, days: Iterable[IntervalDay], arrival: Arrival | None = None) -> Ingested:
        """A whole NEM12 file in a transaction of its own, recorded as ``arrival`` (if given):
        all of it, or nothing."""
        with self.store.write() as unit:
            ingested = self.days(unit, days, arrival)
        self.committed(ingested)
        return ingested

    def customer_changed(self, unit: Unit, nmi: str) -> None:
        """After a customer is created or moved to another plan, in that transaction: schedule
        the settlement of every day of its reads without a final quota, however old (one past
        the data deadline settles at once with what there is). A second call schedules nothing
        new: a day's job is unique by its key while unfinished, and a settled day is left out."""
        self.customers_changed(unit, [nmi])

    def customers_changed(self, unit: Unit, nmis: Sequence[str]) -> None:
        """``customer_changed`` for each of ``nmis``, ``CUSTOMERS_PER_TRANSACTION`` a query."""
        if self.schedule is None:
            return
        # Up to the last day a read may have: a row dated later, stored before the reader refused
        # such dates (9999-12-31, say), is no day to settle, and would overflow the date arithmetic.
        last = latest_read_date(self.clock.now().astimezone(NEM_TIME).date())
        for start in range(0, len(nmis), CUSTOMERS_PER_TRANSACTION):
            some = list(nmis[start : start + CUSTOMERS_PER_TRANSACTION])
            unsettled = self.settlements.unsettled_days(unit, some, EARLIEST_DATE, last)
            if unsettled:
                self.schedule(unit, unsettled, [])

    def schedule_unsettled(self, nmi: str | None, first: date, last: date) -> int:
        """What an operator names (``freehours settlements schedule``, ``POST
        /v1/settlements/schedule``): the settlement of every day from ``first`` to ``last``
        (local dates) with reads and no final quota, of the customer of ``nmi`` (``UnknownCustomer``
        without one) or of every customer, scheduled as ``customer_changed`` does;
        ``CUSTOMERS_PER_TRANSACTION`` customers a transaction. How many days were scheduled
        (each a job enqueued, or one waiting already told it is wanted)."""
        if self.schedule is None:
            return 0
        if nmi is not None:
            with self.store.write() as unit:
                if unit.catalog.get_customer(nmi) is None:
                    raise UnknownCustomer(f"nmi: no customer {nmi}")
                return self._schedule_of(unit, [nmi], first, last)
        scheduled = 0
        after: str | None = None
        while True:
            with self.store.write() as unit:
                nmis = unit.catalog.customer_nmis(after=after, limit=CUSTOMERS_PER_TRANSACTION)
                if not nmis:
                    return scheduled
                scheduled += self._schedule_of(unit, nmis, first, last)
            after = nmis[-1]

    def _schedule_of(self, unit: Unit, nmis: list[str], first: date, last: date) -> int:
        assert self.schedule is not None
        unsettled = self.settlements.unsettled_days(unit, nmis, first, last)
        if unsettled:
            self.schedule(unit, unsettled, [])
        return sum(len(item.days) for item in unsettled)

    def committed(self, ingested: Ingested) -> None:
        """After the commit: the cache learns of the reopened quotas; the values are counted."""
        INGESTED_VALUES.labels(ingested.path).inc(ingested.values)
        self.settlements.publish(ingested.reopened)

    def _follow(
        self,
        unit: Unit,
        counts: IngestCounts,
        path: Literal["reads", "nem12"],
        values: int,
    ) -> Ingested:
        if not counts.changed:
            return Ingested(counts, values=values, path=path)
        # The customers and plans of the changed rows, looked up once for both.
        affected = self.settlements.affected_days(unit, counts.changed)
        reopened = self.settlements.reopen(unit, affected)
        if self.schedule is not None:
            self.schedule(unit, affected, reopened)
        return Ingested(counts, reopened, values, path)


def _record(
    unit: Unit, arrival: Arrival | None, counts: IngestCounts, received_at: datetime
) -> None:
    if arrival is None:
        return
    unit.ingestions.record(
        received_at=received_at,
        source=arrival.source,
        size=arrival.size,
        counts=counts,
        name=arrival.name,
        key_id=arrival.key_id,
        agent=arrival.agent,
        trace_id=current_trace_id(),
    )
