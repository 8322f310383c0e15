"""``Store``: one database, opened ready to use, and the transactions the rest of freehours runs in.

    store = Store.open(settings.database_url)   # migrates a new database, checks an old one
    with store.write() as conn:                  # BEGIN IMMEDIATE on SQLite
        quota = conn.execute(select(...).with_for_update()).one()
        ...
    with store.read() as conn:
        days = meter.days_for(conn, nmi, dates)

The repositories (``meter``, ``catalog``) are functions of a connection, so that one transaction
can span several of them: the settlement writes its state and its ledger in one.
"""

from __future__ import annotations

from contextlib import AbstractContextManager

import sqlalchemy as sa

from freehours.store import schema
from freehours.store.engine import (
    Timeouts,
    autocommit_connection,
    create_engine,
    read_transaction,
    write_transaction,
)


class Store:
    """A database freehours can use: an engine whose schema is current."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

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
        """``"sqlite"`` or ``"postgresql"``."""
        return self.engine.dialect.name

    def write(self, lock: str | None = None) -> AbstractContextManager[sa.Connection]:
        """A write transaction: ``BEGIN IMMEDIATE`` on SQLite, READ COMMITTED on PostgreSQL,
        holding the named ``lock`` (``freehours.store.locks``) exclusively from its start.

        Committed when the block ends, rolled back when it raises.
        """
        return write_transaction(self.engine, lock)

    def autocommit(self) -> AbstractContextManager[sa.Connection]:
        """A connection whose statements each commit on their own: for a one-statement write
        (and the reads before it) without a transaction's ``BEGIN`` and ``COMMIT``."""
        return autocommit_connection(self.engine)

    def read(self) -> AbstractContextManager[sa.Connection]:
        """A transaction that only reads; on SQLite it never waits for a writer (WAL)."""
        return read_transaction(self.engine)

    def close(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
