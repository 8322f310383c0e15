"""Quotas and the ledger: the rows the settlement state machine moves, and the credits it books.

Every function takes the caller's connection and runs inside the caller's transaction; the
settlement service decides what to write with the pure transitions of
``freehours.domain.settlement`` and writes state and ledger entry in one transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from freehours.domain.settlement import Quota, QuotaStatus, new_quota
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


# The statements of the settlement's hot path, built once: each execution then skips SQLAlchemy's
# statement construction and finds its compiled form in the cache.
_KEY = (quotas.c.nmi == sa.bindparam("k_nmi"), quotas.c.day == sa.bindparam("k_day"))
_LATEST = sa.select(quotas).where(*_KEY).order_by(quotas.c.version.desc()).limit(1)
_LATEST_FOR_UPDATE = _LATEST.with_for_update()
_COLUMNS = [column.name for column in quotas.columns]
_ROW = {name: sa.bindparam(name, type_=quotas.c[name].type) for name in _COLUMNS}
_INSERT = quotas.insert().values(_ROW)
_INSERT_IF_ABSENT = {
    "postgresql": postgresql.insert(quotas).values(_ROW).on_conflict_do_nothing(),
    "sqlite": sqlite.insert(quotas).values(_ROW).on_conflict_do_nothing(),
}
_SAVE = (
    quotas.update()
    .where(*_KEY, quotas.c.version == sa.bindparam("k_version"))
    .values({name: sa.bindparam(name, type_=quotas.c[name].type) for name in _COLUMNS[3:]})
)


def latest(conn: sa.Connection, nmi: str, day: date, *, for_update: bool = False) -> Quota | None:
    """The quota's newest version, locked for the transaction when ``for_update``."""
    statement = _LATEST_FOR_UPDATE if for_update else _LATEST
    row = conn.execute(statement, {"k_nmi": nmi, "k_day": day}).first()
    return None if row is None else _quota(row)


def latest_or_new(conn: sa.Connection, nmi: str, day: date) -> Quota:
    """The newest version locked for this transaction, creating version 1 when there is none.

    Version 1 is inserted unless it exists (two transactions creating it at once: the key keeps
    one), then the newest version is read and locked: two statements whatever there was.
    """
    conn.execute(_INSERT_IF_ABSENT[conn.dialect.name], _values(new_quota(nmi, day)))
    quota = latest(conn, nmi, day, for_update=True)
    assert quota is not None, "version 1 was just inserted or already existed"
    return quota


def insert(conn: sa.Connection, quota: Quota) -> None:
    conn.execute(_INSERT, _values(quota))


def save(conn: sa.Connection, quota: Quota) -> None:
    """Write a transition of an existing row (same nmi, date and version)."""
    conn.execute(
        _SAVE,
        {**_values(quota), "k_nmi": quota.nmi, "k_day": quota.date, "k_version": quota.version},
    )


_BOOK = ledger_entries.insert().values(
    {c.name: sa.bindparam(c.name, type_=c.type) for c in ledger_entries.columns}
)


def book(conn: sa.Connection, entry: LedgerEntry) -> None:
    """Book a credit. The ledger's key (nmi, date, version) refuses a second one for a version."""
    conn.execute(
        _BOOK,
        {
            "nmi": entry.nmi,
            "day": entry.date,
            "version": entry.version,
            "kwh": entry.kwh,
            "amount": entry.amount,
            "booked_at": entry.booked_at,
        },
    )


def booked_before(
    conn: sa.Connection, nmi: str, day: date, version: int
) -> tuple[Decimal, Decimal]:
    """kWh and amount booked by the versions before ``version``: what an adjustment nets off."""
    if version == 1:
        return Decimal(0), Decimal(0)
    row = conn.execute(
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


def ledger(conn: sa.Connection, nmi: str, day: date | None = None) -> list[LedgerEntry]:
    """The NMI's booked credits, oldest first."""
    q = sa.select(ledger_entries).where(ledger_entries.c.nmi == nmi)
    if day is not None:
        q = q.where(ledger_entries.c.day == day)
    rows = conn.execute(q.order_by(ledger_entries.c.day, ledger_entries.c.version))
    return [LedgerEntry(r.nmi, r.day, r.version, r.kwh, r.amount, r.booked_at) for r in rows]


def reopen_if_settled(conn: sa.Connection, nmi: str, day: date) -> Quota | None:
    """After new meter data for a settled day: the next version, PENDING, or None.

    Only a COMPLETED newest version is reopened; a PENDING or LOCKED one will read the new data
    when it settles (the holder re-reads under the row lock before completing), and an ABORTED
    one stays aborted.
    """
    quota = latest(conn, nmi, day, for_update=True)
    if quota is None or quota.status is not QuotaStatus.COMPLETED:
        return None
    successor = new_quota(nmi, day, version=quota.version + 1)
    insert(conn, successor)
    return successor


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


def _quota(row: sa.Row[tuple[object, ...]]) -> Quota:
    m = row._mapping
    return Quota(
        nmi=m["nmi"],
        date=m["day"],
        version=m["version"],
        status=QuotaStatus(m["status"]),
        fence=m["fence"],
        attempts=m["attempts"],
        locked_until=m["locked_until"],
        free_kwh=m["free_kwh"],
        free_value=m["free_value"],
        completed_at=m["completed_at"],
        reason=m["reason"],
        revision=m["revision"],
    )
