"""Retention: what the database keeps only for a while, deleted on one schedule.

Finished jobs are kept for ``FREEHOURS_JOB_RETENTION_HOURS`` and Idempotency-Keys for
``FREEHOURS_IDEMPOTENCY_RETENTION_HOURS``. Each is an ``Expiry`` (what, kept how long, how it
is deleted), and each long-running process runs a ``Retention`` over those it is answerable for:
every worker its finished jobs (in its keeper thread, ``run_if_due``), every API process the
Idempotency-Keys (in its lifespan, ``keep_running``), so that a deployment that runs only the
API still purges its keys. A deletion scans its table, so it runs once an hour: a day's rows wait
an hour more at no cost.

On PostgreSQL the history and the finished jobs are partitioned by month
(``freehours.store.partitions``), and their upkeep is an ``Expiry`` too (``partitions``): it
creates this month's partitions and ``FREEHOURS_PARTITIONS_AHEAD_MONTHS`` more, and detaches the
months that ended before what is kept: billing history ``FREEHOURS_HISTORY_RETENTION_MONTHS``
(detached months stay as tables, to archive), finished jobs ``FREEHOURS_JOB_RETENTION_HOURS``
(dropped: what the rows' deletion leaves of them). Every API process and every worker runs the
history's, every worker the jobs'; on SQLite it does nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import structlog

from freehours.clock import Clock
from freehours.observability import metrics
from freehours.store.database import Store
from freehours.store.partitions import HISTORY, JOBS, Layout, Upkept

log = structlog.get_logger("freehours.maintenance")

HOURLY = timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class Expiry:
    """Rows kept for ``keep``: ``delete(store, before)`` deletes those older than ``before``
    and says how many went."""

    name: str
    keep: timedelta
    delete: Callable[[Store, datetime], int]


#: Held while partitions are created or detached, so that processes take turns.
PARTITIONS_LOCK = "partitions"


def partitions(name: str, layouts: Sequence[Layout], keep: timedelta, ahead: int) -> Expiry:
    """The upkeep of ``layouts``' partitions as an ``Expiry``: months wholly older than ``keep``
    detached, the current month and ``ahead`` more created; how many partitions it detached."""

    def upkeep(store: Store, before: datetime) -> int:
        # A table at a time, each in a transaction of its own: one that held the locks of
        # several tables while it waited for another's could deadlock with the requests that
        # read them (a request locks a parent before its partitions, so one table's upkeep
        # cannot). A foreign key's referenced table is locked too; the upkeep's short lock
        # timeout (``Partitions.upkeep``) gives up before PostgreSQL's deadlock detection
        # would choose a request as its victim, and the next round tries again.
        done = Upkept()
        for layout in layouts:
            with store.write(lock=PARTITIONS_LOCK) as unit:
                one = unit.partitions.upkeep(
                    [layout], now=before + keep, ahead=ahead, before=before
                )
            done.created += one.created
            done.detached += one.detached
            done.in_default.update(one.in_default)
        for action, names in (("created", done.created), ("detached", done.detached)):
            for partition in names:
                metrics.PARTITIONS.labels(partition.rsplit("_", 2)[0], action).inc()
            if names:
                log.info(f"partitions_{action}", partitions=names)
        for table, rows in done.in_default.items():
            metrics.PARTITION_DEFAULT_ROWS.labels(table).set(rows)
            if rows:
                log.warning("partition_default_rows", table=table, rows=rows)
        return len(done.detached)

    return Expiry(name, keep, upkeep)


def history_partitions(months: int, ahead: int) -> Expiry:
    """The billing history's partitions, ``months`` of them kept (a month as 31 days: a month
    is detached only once all of it is older than ``months`` months)."""
    return partitions("history_partitions", HISTORY, timedelta(days=31 * months), ahead)


def job_partitions(keep: timedelta, ahead: int) -> Expiry:
    """The finished jobs' partitions, dropped once the last of their month is ``keep`` old."""
    return partitions("job_partitions", JOBS, keep, ahead)


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
            running = asyncio.ensure_future(asyncio.to_thread(self.run))
            try:
                await asyncio.shield(running)
            except asyncio.CancelledError:
                # The round in hand finishes first: its thread would otherwise go on with a
                # connection of a store its owner is about to close, and keep it open.
                with contextlib.suppress(Exception):
                    await running
                raise
            except Exception as exc:  # noqa: BLE001 - the next time tries again
                log.warning("retention_failed", error=f"{type(exc).__name__}: {exc}"[:500])
            await asyncio.sleep(self.every.total_seconds())
