"""The base of every repository: a connection (one transaction, or autocommit) and its driver.

A repository is made by the unit of work (``freehours.store.database.Unit``) for one connection,
so that the repositories of one unit write in one transaction: the settlement writes its state
and its ledger entry together.
"""

from __future__ import annotations

import sqlalchemy as sa

from freehours.store.driver import Driver


class Repository:
    """Statements about some tables, run on one connection through its dialect's driver."""

    __slots__ = ("_conn", "_driver")

    def __init__(self, conn: sa.Connection, driver: Driver) -> None:
        self._conn = conn
        self._driver = driver
