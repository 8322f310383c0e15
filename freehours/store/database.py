"""``Store``: one database, opened ready to use, and the units of work the rest of freehours runs.

    store = Store.open(settings.database_url)   # migrates a new database, checks an old one
    with store.write() as unit:                  # BEGIN IMMEDIATE on SQLite
        quota = unit.quotas.latest(nmi, day, for_update=True)
        unit.quotas.save_and_book([(done, entry)])
    with store.read() as unit:
        days = unit.meter.days_for(nmi, dates)

A ``Unit`` is one transaction (or one autocommit connection) and the repositories bound to it,
so that the repositories a caller uses together write together: the settlement writes its state
and its ledger in one transaction. Outside ``freehours.store`` nobody sees a connection or SQL;
what the two databases do differently is their driver's (``freehours.store.driver``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from functools import cached_property
from types import TracebackType

import sqlalchemy as sa

from freehours.store import locks, schema
from freehours.store.agents import Agents
from freehours.store.audit import Audit
from freehours.store.catalog import Catalog
from freehours.store.console import Console
from freehours.store.driver import Driver, Notifications
from freehours.store.engine import create_engine, driver_of
from freehours.store.errors import DatabaseError
from freehours.store.idempotency import Idempotency
from freehours.store.ingestions import Ingestions
from freehours.store.invoices import Invoices
from freehours.store.jobs import Jobs
from freehours.store.keys import Keys
from freehours.store.mail import Mail
from freehours.store.meter import Meter
from freehours.store.pages import Pages
from freehours.store.partitions import Partitions
from freehours.store.quotas import Quotas
from freehours.store.sessions import Sessions
from freehours.store.timeouts import Timeouts
from freehours.store.webhooks import Webhooks

#: Rows ``Store.prune`` deletes per transaction: keeps each one short however many have aged out.
PRUNE_BATCH = 1000


class Unit:
    """One transaction's repositories; each made when first used, all on one connection."""

    def __init__(self, connection: sa.Connection, driver: Driver) -> None:
        #: For freehours.store and its tests only: everything else goes through a repository.
        self.connection = connection
        self._driver = driver

    @cached_property
    def quotas(self) -> Quotas:
        return Quotas(self.connection, self._driver)

    @cached_property
    def meter(self) -> Meter:
        return Meter(self.connection, self._driver)

    @cached_property
    def catalog(self) -> Catalog:
        return Catalog(self.connection, self._driver)

    @cached_property
    def jobs(self) -> Jobs:
        return Jobs(self.connection, self._driver)

    @cached_property
    def invoices(self) -> Invoices:
        return Invoices(self.connection, self._driver)

    @cached_property
    def console(self) -> Console:
        return Console(self.connection, self._driver)

    @cached_property
    def audit(self) -> Audit:
        return Audit(self.connection, self._driver)

    @cached_property
    def sessions(self) -> Sessions:
        return Sessions(self.connection, self._driver)

    @cached_property
    def keys(self) -> Keys:
        return Keys(self.connection, self._driver)

    @cached_property
    def idempotency(self) -> Idempotency:
        return Idempotency(self.connection, self._driver)

    @cached_property
    def ingestions(self) -> Ingestions:
        return Ingestions(self.connection, self._driver)

    @cached_property
    def agents(self) -> Agents:
        return Agents(self.connection, self._driver)

    @cached_property
    def partitions(self) -> Partitions:
        return Partitions(self.connection, self._driver)

    @cached_property
    def webhooks(self) -> Webhooks:
        return Webhooks(self.connection, self._driver)

    @cached_property
    def mail(self) -> Mail:
        return Mail(self.connection, self._driver)

    @cached_property
    def pages(self) -> Pages:
        return Pages(self.connection, self._driver)

    def hold_shared(self, names: Iterable[str]) -> None:
        """Hold the named locks (``freehours.store.locks``) shared until the transaction ends
        (in key order, one statement); waits while a transaction holds one exclusively."""
        self._driver.hold_shared(self.connection, sorted({locks.key(name) for name in names}))

    def try_hold_exclusive(self, names: Iterable[str]) -> set[str]:
        """Take those of the named locks that no transaction holds, exclusively until this one
        ends, without waiting (in key order, one statement): the names taken. For a transaction
        that needs many: waiting for none, it can never wait in a cycle."""
        by_key = {locks.key(name): name for name in names}
        taken = self._driver.try_hold_exclusive(self.connection, sorted(by_key))
        return {by_key[key] for key in taken}

    def ping(self) -> None:
        """One round trip to the database: raises when it cannot be reached."""
        self.connection.exec_driver_sql("SELECT 1")


class _Opening:
    """The driver's transaction, entered as a ``Unit``: a class, not a generator, since every
    settlement enters two."""

    __slots__ = ("_connection", "_driver")

    def __init__(self, connection: AbstractContextManager[sa.Connection], driver: Driver) -> None:
        self._connection = connection
        self._driver = driver

    def __enter__(self) -> Unit:
        return Unit(self._connection.__enter__(), self._driver)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        return self._connection.__exit__(kind, error, traceback)


class Store:
    """A database freehours can use: an engine whose schema is current, and its driver."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine
        self.driver = driver_of(engine)

    @classmethod
    def open(cls, url: str, timeouts: Timeouts | None = None) -> Store:
        """Connect to ``url``; migrate the database if it is new, else require it current.
        ``timeouts``: how long to wait on PostgreSQL (default: the settings' defaults).

        Raises ``ConfigurationError`` for a URL freehours cannot use, or a database whose schema
        is behind (run ``freehours db upgrade``) or ahead of this freehours.
        """
        engine = create_engine(url, timeouts)
        try:
            schema.prepare(engine)
        except BaseException:
            engine.dispose()
            raise
        return cls(engine)

    @property
    def dialect(self) -> str:
        """``"sqlite"`` or ``"postgresql"``: for messages, labels and tuning, not for SQL."""
        return self.driver.name

    def write(self, lock: str | None = None) -> AbstractContextManager[Unit]:
        """A write transaction: ``BEGIN IMMEDIATE`` on SQLite, READ COMMITTED on PostgreSQL,
        holding the named ``lock`` (``freehours.store.locks``) exclusively from its start.

        Anything that reads in order to write belongs here: the settlement's claim (which also
        selects ``FOR UPDATE``, a no-op on SQLite, where the whole database is locked already),
        ingestion, migrations. Committed when the block ends, rolled back when it raises.
        """
        return self._unit(self.driver.write(self.engine, lock))

    def autocommit(self) -> AbstractContextManager[Unit]:
        """A connection whose statements each commit on their own: for a one-statement write
        (and the reads before it) without a transaction's ``BEGIN`` and ``COMMIT``. Nothing is
        rolled back on an exception, so two writes that must stand or fall together belong in
        ``write``. On SQLite it holds this process's writer lock, as ``write`` does."""
        return self._unit(self.driver.autocommit(self.engine))

    def read(self) -> AbstractContextManager[Unit]:
        """A transaction that only reads; on SQLite it never waits for a writer (WAL)."""
        return self._unit(self.driver.read(self.engine))

    def prune(self, delete: Callable[[Unit, int], int], *, batch: int = PRUNE_BATCH) -> int:
        """Delete aged-out rows in write transactions of at most ``batch`` each, until one
        deletes fewer: ``delete(unit, limit)`` deletes at most ``limit`` and says how many went.
        How many went in all."""
        pruned = 0
        while True:
            with self.write() as unit:
                deleted = delete(unit, batch)
            pruned += deleted
            if deleted < batch:
                return pruned

    def listen(self, channel: str) -> AbstractContextManager[Notifications]:
        """A connection of its own listening on ``channel`` (where ``listens``)."""
        return self.driver.listen(self.engine, channel)

    @property
    def errors(self) -> tuple[type[Exception], ...]:
        """What a failure of this database raises: SQLAlchemy's errors, and those of its driver
        on a connection of its own (``listen``)."""
        return (DatabaseError, *self.driver.errors)

    @property
    def parallel_writers(self) -> bool:
        """Whether writers run side by side (PostgreSQL), or take turns (SQLite)."""
        return self.driver.parallel_writers

    @property
    def listens(self) -> bool:
        """Whether ``listen`` is there to wake workers (PostgreSQL), or they must poll."""
        return self.driver.listens

    def _unit(self, connection: AbstractContextManager[sa.Connection]) -> _Opening:
        return _Opening(connection, self.driver)

    def close(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
