"""The base of every repository: a connection (one transaction, or autocommit) and its driver.

A repository is made by the unit of work (``freehours.store.database.Unit``) for one connection,
so that the repositories of one unit write in one transaction: the settlement writes its state
and its ledger entry together.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import sqlalchemy as sa

from freehours.store.driver import Driver, each_key


class Repository:
    """Statements about some tables, run on one connection through its dialect's driver."""

    __slots__ = ("_conn", "_driver")

    def __init__(self, conn: sa.Connection, driver: Driver) -> None:
        self._conn = conn
        self._driver = driver

    def _each_nmi(
        self,
        query: sa.Select[Any],
        column: sa.ColumnElement[str],
        nmis: Collection[str],
        order_by: Sequence[str],
        *,
        for_update: bool = False,
    ) -> Sequence[Any]:
        """``query``'s rows whose ``column`` is one of ``nmis``, ordered by ``order_by`` (names
        of its columns), locked in that order when ``for_update``. Where the database takes
        arrays, one look-up per NMI (``each_key``): a batch reads its own customers' rows
        whatever the planner knows of the table (a partition or a table filling up with no
        statistics yet was scanned whole for every batch, so a run's cost per account grew
        with the number of accounts); elsewhere, and for one NMI (a customer's page, its usage),
        a plain ``IN`` list: one key is an index look-up whatever the planner knows, and the
        per-key statement costs more to build than the look-up takes."""
        wanted = sorted(set(nmis))
        if not wanted:
            return []
        if self._driver.takes_arrays and len(wanted) > 1:
            statement = each_key(query, (column,), ("k_nmi",), order_by, for_update=for_update)
            return self._conn.execute(statement, {"k_nmi": wanted}).all()
        listed = query.where(column.in_(wanted)).order_by(
            *(query.selected_columns[name] for name in order_by)
        )
        return self._conn.execute(listed.with_for_update() if for_update else listed).all()
