"""How long freehours waits on the database, and how many connections it keeps: ``Timeouts``,
which every driver applies to the engines it makes (``freehours.store.engine``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from freehours.settings import Settings


#: Connections opened past ``Timeouts.pool_size`` for a burst, each closed when it is returned.
POOL_BURST = 8


@dataclass(frozen=True, slots=True)
class Timeouts:
    """How long freehours waits on the database before it says it is unavailable (503).

    A database that is down answers at once (connection refused); one that is black-holed (a
    dead host, a partition, a hung proxy) answers never, and without these limits every request
    that touches it would wait for ever, each holding a thread and a pooled connection. The
    defaults are those of the ``FREEHOURS_DATABASE_*_SECONDS`` settings."""

    #: A new connection (libpq ``connect_timeout``, whole seconds, at least 2).
    connect: int = 5
    #: One statement, on the server (``statement_timeout``); the client waits one second more
    #: for any answer, so that a server which cannot cancel (black-holed) is given up on too.
    #: Bulk ingest lifts both for its own statements
    #: (``Driver.without_statement_timeout``).
    statement: float = 15.0
    #: A free connection from the pool.
    pool: float = 5.0
    #: Unacknowledged data or keepalives on a connection (``tcp_user_timeout``).
    tcp: int = 15
    #: Connections a PostgreSQL engine keeps open; ``POOL_BURST`` more are opened past it, and
    #: closed when they come back. Past what a process uses at once, connections would be opened
    #: and closed all the time (measured: a third of an API's requests at 50 users with 5).
    pool_size: int = 16

    @classmethod
    def from_settings(cls, settings: Settings) -> Timeouts:
        return cls(
            connect=settings.database_connect_timeout_seconds,
            statement=settings.database_statement_timeout_seconds,
            pool=settings.database_pool_timeout_seconds,
            tcp=settings.database_tcp_timeout_seconds,
            pool_size=settings.database_pool_size,
        )

    @property
    def answer(self) -> float:
        """How long the client waits for any answer to a statement."""
        return self.statement + 1.0
