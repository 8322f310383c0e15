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

A failure stops nothing else: each expiry, and each step of each table's partitions, is tried on
its own (a transaction of its own), and one that fails is logged (``upkeep_failed``: the table
and the error's class), counted (``freehours_upkeep_failures_total``) and tried again the next
time; ``freehours_upkeep_last_success_timestamp_seconds`` says when each table's last went
through.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta

import structlog

from freehours.clock import Clock
from freehours.observability import metrics
from freehours.store.database import Store, Unit
from freehours.store.partitions import CREATION, HISTORY, JOBS, Layout, add_months, month_of

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


def upkeep_failed(table: str, exc: Exception) -> None:
    """Log and count a failed step of ``table``'s upkeep: the error's class (and the database
    driver's, under it), never its message, which can name a row's key (a NMI)."""
    cause = exc.__cause__
    error = type(exc).__name__ + (f"({type(cause).__name__})" if cause is not None else "")
    log.error("upkeep_failed", table=table, error=error)
    metrics.UPKEEP_FAILURES.labels(table).inc()


@contextlib.contextmanager
def _step(store: Store, table: str, failed: set[str]) -> Iterator[Unit]:
    """One step of ``table``'s upkeep, in a transaction of its own: a failure is rolled back,
    logged, counted and added to ``failed``, and the next step goes on."""
    try:
        with store.write(lock=PARTITIONS_LOCK) as unit:
            yield unit
    except Exception as exc:  # noqa: BLE001 - one table's failure never stops another's upkeep
        failed.add(table)
        upkeep_failed(table, exc)


def partitions(name: str, layouts: Sequence[Layout], keep: timedelta, ahead: int) -> Expiry:
    """The upkeep of ``layouts``' partitions as an ``Expiry``: months wholly older than ``keep``
    detached, the current month and ``ahead`` more created; how many partitions it detached."""
    for layout in layouts:
        metrics.UPKEEP_FAILURES.labels(layout.parent)  # at 0, as ``Retention`` does its expiries'

    def upkeep(store: Store, before: datetime) -> int:
        # Each step of each table in a transaction of its own: one table's failure (a lock not
        # had in time, a move PostgreSQL refuses) never stops another's, nor its own other
        # steps; the months ahead, which keep new rows out of the defaults, come first. One
        # transaction that held several tables' locks while it waited for another's could
        # also deadlock with the requests that read them (a request locks a parent before its
        # partitions, so one table's step cannot). A foreign key's referenced table is locked
        # too; the upkeep's short lock timeout (``Partitions``) gives up before PostgreSQL's
        # deadlock detection would choose a request as its victim, and the next round tries
        # again.
        now = before + keep
        months = [add_months(month_of(now), n) for n in range(ahead + 1)]
        cutoff = month_of(before)  # months before this one ended before ``before``
        failed: set[str] = set()
        created: list[str] = []
        creating = [layout for layout in CREATION if layout in layouts] + [
            layout for layout in layouts if layout not in CREATION
        ]
        for layout in creating:
            with _step(store, layout.parent, failed) as unit:
                created += unit.partitions.create(layout, months)
        for layout in creating:
            # Rows that found no partition (they came before theirs was made): their months
            # are made now, each in its own step, the rows moved in.
            strays: list[date] = []
            with _step(store, layout.parent, failed) as unit:
                strays = unit.partitions.strays(layout, since=cutoff)
            for month in strays:
                with _step(store, layout.parent, failed) as unit:
                    created += unit.partitions.create(layout, [month])
        detached: list[str] = []
        for layout in layouts:
            with _step(store, layout.parent, failed) as unit:
                detached += unit.partitions.detach(layout, before=cutoff)
        for action, names in (("created", created), ("detached", detached)):
            for partition in names:
                metrics.PARTITIONS.labels(partition.rsplit("_", 2)[0], action).inc()
            if names:
                log.info(f"partitions_{action}", partitions=names)
        for layout in layouts:
            with _step(store, layout.parent, failed) as unit:
                rows = unit.partitions.in_default(layout)
                metrics.PARTITION_DEFAULT_ROWS.labels(layout.parent).set(rows)
                if rows:
                    log.warning("partition_default_rows", table=layout.parent, rows=rows)
            if layout.parent not in failed:
                metrics.UPKEEP_SUCCEEDED.labels(layout.parent).set(now.timestamp())
        return len(detached)

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
        for expiry in self.expiries:
            # A series at 0 from the start: a rate or increase counts its first failure.
            metrics.UPKEEP_FAILURES.labels(expiry.name)

    def run(self) -> dict[str, int]:
        """Delete what has expired now; how many rows of each. An expiry that fails is logged
        and counted (``upkeep_failed``, under its name), left out of the answer, and tried
        again the next time; the others go on."""
        now = self.clock.now()
        done = {}
        for expiry in self.expiries:
            try:
                done[expiry.name] = expiry.delete(self.store, now - expiry.keep)
            except Exception as exc:  # noqa: BLE001 - one expiry's failure never stops another
                upkeep_failed(expiry.name, exc)
                continue
            metrics.UPKEEP_SUCCEEDED.labels(expiry.name).set(now.timestamp())
        return done

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
        on the database), until cancelled. A failure is ``run``'s to log; the next time tries
        again."""
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
            await asyncio.sleep(self.every.total_seconds())
