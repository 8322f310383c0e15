"""Quotas and the ledger: the rows the settlement state machine moves, and the credits it books.

``Quotas`` runs in its unit of work's transaction; the settlement service decides what to write
with the pure transitions of ``freehours.domain.settlement`` and writes state and ledger entry in
one transaction.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import sqlalchemy as sa
from sqlalchemy.sql.expression import ClauseElement

from freehours.domain.settlement import Quota, QuotaStatus, new_quota
from freehours.store.driver import Driver
from freehours.store.prepared import Prepared
from freehours.store.repository import Repository
from freehours.store.tables import ledger_entries, quotas


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """A booked credit: one version's free energy, less what earlier versions booked."""

    nmi: str
    date: date
    version: int
    kwh: Decimal
    amount: Decimal
    booked_at: datetime


# The statements of the settlement's hot path, prepared once (freehours.store.prepared).
_KEY = (quotas.c.nmi == sa.bindparam("k_nmi"), quotas.c.day == sa.bindparam("k_day"))
_SELECT_LATEST = sa.select(quotas).where(*_KEY).order_by(quotas.c.version.desc()).limit(1)
_LATEST = Prepared(_SELECT_LATEST)
_LATEST_FOR_UPDATE = Prepared(_SELECT_LATEST.with_for_update())
_COLUMNS = [column.name for column in quotas.columns]
_ROW = {name: sa.bindparam(name, type_=quotas.c[name].type) for name in _COLUMNS}
_INSERT = Prepared(quotas.insert().values(_ROW))


def _insert_if_absent(driver: Driver) -> ClauseElement:
    return driver.insert_or_ignore(quotas).values(_ROW).returning(quotas.c.version)


_SAVE_WHERE = (*_KEY, quotas.c.version == sa.bindparam("k_version"))
_SAVE_VALUES = {name: sa.bindparam(name, type_=quotas.c[name].type) for name in _COLUMNS[3:]}
_SAVE = Prepared(quotas.update().where(*_SAVE_WHERE).values(_SAVE_VALUES))
_BOOK = Prepared(
    ledger_entries.insert().values(
        {c.name: sa.bindparam(c.name, type_=c.type) for c in ledger_entries.columns}
    )
)
# Where the database allows it (``Driver.update_and_insert``): a transition and its ledger entry
# in one statement, the entry's key taken from the row the update wrote (no row, no entry).
_SAVED = (
    quotas.update()
    .where(*_SAVE_WHERE)
    .values(_SAVE_VALUES)
    .returning(quotas.c.nmi, quotas.c.day, quotas.c.version)
    .cte("saved")
)
_ENTRY_VALUES = ("kwh", "amount", "booked_at")
_SAVE_AND_BOOK = Prepared(
    ledger_entries.insert()
    .from_select(
        ["nmi", "day", "version", *_ENTRY_VALUES],
        sa.select(
            _SAVED.c.nmi,
            _SAVED.c.day,
            _SAVED.c.version,
            *(sa.bindparam(name, type_=ledger_entries.c[name].type) for name in _ENTRY_VALUES),
        ),
    )
    .returning(ledger_entries.c.version)
)


class Quotas(Repository):
    """The quota versions and the ledger, in the unit of work's transaction."""

    __slots__ = ()

    def latest(self, nmi: str, day: date, *, for_update: bool = False) -> Quota | None:
        """The quota's newest version, locked for the transaction when ``for_update``."""
        statement = _LATEST_FOR_UPDATE if for_update else _LATEST
        row = statement.first(self._conn, {"k_nmi": nmi, "k_day": day})
        return None if row is None else _quota(row)

    def insert_if_absent(self, quota: Quota) -> bool:
        """Insert ``quota`` unless its (nmi, date, version) exists; whether it was inserted.

        Two transactions inserting the same key at once: the key keeps one, the other waits for
        it and inserts nothing.
        """
        return bool(self._driver.prepared(_insert_if_absent).rows(self._conn, _values(quota)))

    def latest_or_new(self, nmi: str, day: date) -> Quota:
        """The newest version locked for this transaction, creating version 1 when there is
        none: two statements whatever there was."""
        self.insert_if_absent(new_quota(nmi, day))
        quota = self.latest(nmi, day, for_update=True)
        assert quota is not None, "version 1 was just inserted or already existed"
        return quota

    def insert(self, quota: Quota) -> None:
        _INSERT.rows(self._conn, _values(quota))

    def save(self, quota: Quota) -> None:
        """Write a transition of an existing row (same nmi, date and version)."""
        _SAVE.rows(self._conn, _save_params(quota))

    def save_and_book(self, quota: Quota, entry: LedgerEntry) -> None:
        """Write a transition of an existing row and book its ledger entry (of the same nmi,
        date and version): one statement where the database allows it (PostgreSQL), two where
        its ``WITH`` takes no update (SQLite)."""
        assert (entry.nmi, entry.date, entry.version) == (quota.nmi, quota.date, quota.version)
        params = {**_save_params(quota), **_entry_params(entry)}
        booked = self._driver.update_and_insert(
            self._conn, params, together=_SAVE_AND_BOOK, update=_SAVE, insert=_BOOK
        )
        assert booked, f"quota {quota.key} version {quota.version} is not there to save"

    def book(self, entry: LedgerEntry) -> None:
        """Book a credit. The ledger's key (nmi, date, version) refuses a second one for a
        version."""
        _BOOK.rows(self._conn, _entry_params(entry))

    def booked_before(self, nmi: str, day: date, version: int) -> tuple[Decimal, Decimal]:
        """kWh and amount booked by the versions before ``version``: what an adjustment nets
        off."""
        if version == 1:
            return Decimal(0), Decimal(0)
        row = self._conn.execute(
            sa.select(ledger_entries.c.kwh, ledger_entries.c.amount).where(
                ledger_entries.c.nmi == nmi,
                ledger_entries.c.day == day,
                ledger_entries.c.version < version,
            )
        ).all()
        return (
            sum((r.kwh for r in row), Decimal(0)),
            sum((r.amount for r in row), Decimal(0)),
        )

    def ledger(self, nmi: str, day: date | None = None) -> list[LedgerEntry]:
        """The NMI's booked credits, oldest first."""
        q = sa.select(ledger_entries).where(ledger_entries.c.nmi == nmi)
        if day is not None:
            q = q.where(ledger_entries.c.day == day)
        rows = self._conn.execute(q.order_by(ledger_entries.c.day, ledger_entries.c.version))
        return [LedgerEntry(r.nmi, r.day, r.version, r.kwh, r.amount, r.booked_at) for r in rows]

    def reopen_if_settled(self, nmi: str, day: date) -> Quota | None:
        """After new meter data for a settled day: the next version, PENDING, or None.

        Only a COMPLETED newest version is reopened; a PENDING or LOCKED one will read the new
        data when it settles (the holder re-reads under the row lock before completing), and an
        ABORTED one stays aborted.
        """
        quota = self.latest(nmi, day, for_update=True)
        if quota is None or quota.status is not QuotaStatus.COMPLETED:
            return None
        successor = new_quota(nmi, day, version=quota.version + 1)
        self.insert(successor)
        return successor

    def every_credit(self) -> list[LedgerEntry]:
        """Every booked credit, by NMI, date and version."""
        t = ledger_entries.c
        rows = self._conn.execute(sa.select(ledger_entries).order_by(t.nmi, t.day, t.version))
        return [LedgerEntry(r.nmi, r.day, r.version, r.kwh, r.amount, r.booked_at) for r in rows]

    def duplicate_credits(self) -> int:
        """Credits beyond the first booked for one version of a quota: the ledger's key makes
        this 0, which is what a run that checks its invariants asserts."""
        t = ledger_entries.c
        repeated = self._conn.execute(
            sa.select(sa.func.count())
            .select_from(ledger_entries)
            .group_by(t.nmi, t.day, t.version)
            .having(sa.func.count() > 1)
        ).scalars()
        return sum(count - 1 for count in repeated)

    def count_versions(self) -> int:
        """How many quota versions are stored, of every quota."""
        return int(self._conn.scalar(sa.select(sa.func.count()).select_from(quotas)) or 0)

    def sum_attempts(self) -> int:
        """Failed settlement attempts, summed over every quota version."""
        return int(self._conn.scalar(sa.select(sa.func.sum(quotas.c.attempts))) or 0)

    def first_versions_completed_at(self) -> list[datetime]:
        """When each quota's first version was completed (those completed)."""
        c = quotas.c
        return list(
            self._conn.scalars(
                sa.select(c.completed_at).where(
                    c.version == 1, c.status == QuotaStatus.COMPLETED.value
                )
            )
        )


def _entry_params(entry: LedgerEntry) -> dict[str, object]:
    return {
        "nmi": entry.nmi,
        "day": entry.date,
        "version": entry.version,
        "kwh": entry.kwh,
        "amount": entry.amount,
        "booked_at": entry.booked_at,
    }


def _save_params(quota: Quota) -> dict[str, object]:
    return {**_values(quota), "k_nmi": quota.nmi, "k_day": quota.date, "k_version": quota.version}


def _values(quota: Quota) -> dict[str, object]:
    return {
        "nmi": quota.nmi,
        "day": quota.date,
        "version": quota.version,
        "status": quota.status.value,
        "fence": quota.fence,
        "attempts": quota.attempts,
        "locked_until": quota.locked_until,
        "free_kwh": quota.free_kwh,
        "free_value": quota.free_value,
        "completed_at": quota.completed_at,
        "reason": quota.reason,
        "revision": quota.revision,
    }


# ``_quota`` reads rows positionally: the table's columns are the quota's fields, in order.
assert [c.name.replace("day", "date") for c in quotas.columns] == [f.name for f in fields(Quota)], (
    "quotas columns and Quota fields differ"
)


def _quota(row: tuple[Any, ...]) -> Quota:
    """A quota from a row of ``quotas`` in its column order (that of ``Quota``'s fields)."""
    nmi, day, version, status, *rest = row
    return Quota(nmi, day, version, QuotaStatus(status), *rest)
