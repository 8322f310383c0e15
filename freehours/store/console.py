"""What the operations console reads (``freehours.api.console``): each page's statements, by the
indexes they walk (migration 0005; docs/console.md#speed).

A page of a list is read by keyset, never by offset: the next page starts after the last row
shown, so page 1,000 costs what page 1 does. A quota list shows each (NMI, date)'s newest version
only; the quota's own page shows every version.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import sqlalchemy as sa

from freehours.store.repository import Repository
from freehours.store.tables import (
    customers,
    quota_events,
    quotas,
)

#: The most recent settlements whose latency the overview reports.
LATENCY_SAMPLE = 2_000


@dataclass(frozen=True, slots=True)
class QuotaRow:
    """A quota version with its customer's region (None when the customer is gone)."""

    nmi: str
    day: date
    version: int
    status: str
    fence: int
    attempts: int
    locked_until: datetime | None
    free_kwh: Decimal | None
    free_value: Decimal | None
    completed_at: datetime | None
    reason: str | None
    region: str | None


@dataclass(frozen=True, slots=True)
class QuotaFilter:
    """The quota list's filters: each None when not asked for."""

    status: str | None = None
    day: date | None = None
    region: str | None = None
    nmi: str | None = None


@dataclass(frozen=True, slots=True)
class RegionDay:
    """A region's quotas of one day: how many in each state (newest versions), and the free
    energy and its value of those COMPLETED."""

    region: str
    states: dict[str, int]
    free_kwh: Decimal
    free_value: Decimal


class Console(Repository):
    """The console's reads, in the unit of work's transaction."""

    __slots__ = ()

    # --- the overview --------------------------------------------------------------------------

    def latest_day(self, on_or_before: date) -> date | None:
        """The latest day with a quota, up to ``on_or_before`` (today: a quota of a later day
        would be a simulation's or a test's); None when there is none. One probe of
        ``ix_quotas_day_nmi``."""
        q = quotas.c
        found = self._conn.execute(sa.select(sa.func.max(q.day)).where(q.day <= on_or_before))
        day = found.scalar()
        if day is None or isinstance(day, date):
            return day
        return date.fromisoformat(str(day))

    def regions_of_day(self, day: date) -> list[RegionDay]:
        """Each region's quotas of ``day`` (newest versions), by region: their counts by state
        and, where SQL sums exactly, their free energy in the same pass."""
        q, c = quotas.c, customers.c
        region = sa.func.coalesce(c.region, "")
        columns: list[sa.ColumnElement[Any]] = [region, q.status, sa.func.count()]
        if self._driver.sums_decimals:
            columns += [
                sa.func.sum(sa.cast(q.free_kwh, sa.Numeric)),
                sa.func.sum(sa.cast(q.free_value, sa.Numeric)),
            ]
        of_day = (
            sa.select(*columns)
            .select_from(quotas.outerjoin(customers, c.nmi == q.nmi))
            .where(q.day == day, _latest(q))
        )
        states: dict[str, dict[str, int]] = {}
        sums: dict[str, tuple[Decimal, Decimal]] = {}
        for name, status, count, *summed in self._conn.execute(of_day.group_by(region, q.status)):
            states.setdefault(name, {})[status] = count
            if status == "COMPLETED" and summed:
                sums[name] = (Decimal(summed[0] or 0), Decimal(summed[1] or 0))
        if not self._driver.sums_decimals:
            # SQLite's sums are floats: the completed quotas' figures are added up here.
            completed = sa.select(region, q.free_kwh, q.free_value).select_from(
                quotas.outerjoin(customers, c.nmi == q.nmi)
            )
            for name, kwh, value in self._conn.execute(
                completed.where(q.day == day, q.status == "COMPLETED", _latest(q))
            ):
                got = sums.get(name, (Decimal(0), Decimal(0)))
                sums[name] = (got[0] + Decimal(kwh or 0), got[1] + Decimal(value or 0))
        return [
            RegionDay(name, states[name], *sums.get(name, (Decimal(0), Decimal(0))))
            for name in sorted(states)
        ]

    def events_per_bucket(
        self, start: datetime, end: datetime, *, seconds: int, retries: bool
    ) -> dict[int, int]:
        """Quota events between ``start`` and ``end`` by bucket (``seconds`` long, numbered from
        ``start``): completions, or with ``retries`` the claims after a failed attempt."""
        e = quota_events.c
        bucket = sa.func.floor(
            (self._driver.epoch_seconds(e.at) - start.timestamp()) / seconds
        ).label("bucket")
        which = (
            sa.and_(e.status == "LOCKED", e.attempts > 0) if retries else e.status == "COMPLETED"
        )
        rows = self._conn.execute(
            sa.select(bucket, sa.func.count())
            .where(e.at >= start, e.at < end, which)
            .group_by(bucket)
        )
        return {int(number): count for number, count in rows}

    def latencies(self, start: datetime, end: datetime) -> list[float]:
        """Seconds from each version's first claim to its completion, of the latest
        ``LATENCY_SAMPLE`` settlements completed between ``start`` and ``end``."""
        e = quota_events.c
        first = quota_events.alias("first")
        f = first.c
        claimed = (
            sa.select(sa.func.min(f.at))
            .where(f.nmi == e.nmi, f.day == e.day, f.version == e.version, f.status == "LOCKED")
            .scalar_subquery()
        )
        rows = self._conn.execute(
            sa.select(e.at, claimed)
            .where(e.status == "COMPLETED", e.at >= start, e.at < end)
            .order_by(e.at.desc())
            .limit(LATENCY_SAMPLE)
        )
        return [(done - began).total_seconds() for done, began in rows if began is not None]

    # --- quotas --------------------------------------------------------------------------------

    def quotas(
        self, where: QuotaFilter, *, limit: int, after: tuple[date, str] | None = None
    ) -> list[QuotaRow]:
        """Up to ``limit`` quotas (newest versions) matching ``where``, by date then NMI, both
        descending, after the (date, NMI) ``after``."""
        q, c = quotas.c, customers.c
        query = (
            sa.select(*_QUOTA_COLUMNS, c.region)
            .select_from(quotas.outerjoin(customers, c.nmi == q.nmi))
            .where(_latest(q))
            .order_by(q.day.desc(), q.nmi.desc())
            .limit(limit)
        )
        if where.status is not None:
            query = query.where(q.status == where.status)
        if where.day is not None:
            query = query.where(q.day == where.day)
        if where.region is not None:
            query = query.where(c.region == where.region)
        if where.nmi is not None:
            query = query.where(q.nmi == where.nmi)
        if after is not None:
            query = query.where(sa.tuple_(q.day, q.nmi) < sa.tuple_(*after))
        return [_quota_row(row) for row in self._conn.execute(query)]

    def versions(self, nmi: str, day: date) -> list[QuotaRow]:
        """Every version of a quota, oldest first."""
        q, c = quotas.c, customers.c
        rows = self._conn.execute(
            sa.select(*_QUOTA_COLUMNS, c.region)
            .select_from(quotas.outerjoin(customers, c.nmi == q.nmi))
            .where(q.nmi == nmi, q.day == day)
            .order_by(q.version)
        )
        return [_quota_row(row) for row in rows]


_QUOTA_COLUMNS = (
    quotas.c.nmi,
    quotas.c.day,
    quotas.c.version,
    quotas.c.status,
    quotas.c.fence,
    quotas.c.attempts,
    quotas.c.locked_until,
    quotas.c.free_kwh,
    quotas.c.free_value,
    quotas.c.completed_at,
    quotas.c.reason,
)


def _latest(q: sa.ColumnCollection[str, Any]) -> sa.ColumnElement[bool]:
    """The row is its (NMI, date)'s newest version: no later one exists (a primary-key probe)."""
    newer = quotas.alias("newer")
    n = newer.c
    return ~sa.exists().where(n.nmi == q.nmi, n.day == q.day, n.version > q.version)


def _quota_row(row: Iterable[Any]) -> QuotaRow:
    return QuotaRow(*row)
