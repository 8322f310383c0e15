"""Prepared statements: the same values, types and errors as ``Connection.execute``, on both
backends."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal

import pytest
import sqlalchemy as sa

from freehours.domain.settlement import QuotaStatus, new_quota
from freehours.store import quotas
from freehours.store.database import Store
from freehours.store.prepared import Prepared
from freehours.store.tables import ledger_entries
from freehours.store.tables import quotas as quotas_table

DAY = date(2026, 7, 1)
BOOKED = datetime(2026, 7, 2, 1, 30, tzinfo=timezone(timedelta(hours=10)))

_ENTRY = {
    "nmi": "NMI0000001",
    "day": DAY,
    "version": 1,
    "kwh": Decimal("1.2340"),
    "amount": Decimal("0.37"),
    "booked_at": BOOKED,
}
_INSERT = Prepared(
    ledger_entries.insert().values(
        {c.name: sa.bindparam(c.name, type_=c.type) for c in ledger_entries.columns}
    )
)
_SELECT = Prepared(
    sa.select(ledger_entries.c.day, ledger_entries.c.kwh, ledger_entries.c.booked_at)
    .where(ledger_entries.c.nmi == sa.bindparam("nmi"))
    .order_by(ledger_entries.c.version)
    .limit(1)
)


def _book(store: Store) -> None:
    """The ledger entry, after the quota its key refers to."""
    with store.write() as unit:
        unit.quotas.insert_if_absent([new_quota("NMI0000001", DAY)], at=BOOKED)
        assert _INSERT.rows(unit.connection, _ENTRY) == []


def test_values_go_through_the_column_types_both_ways(store: Store) -> None:
    _book(store)
    with store.read() as unit:
        prepared = _SELECT.first(unit.connection, {"nmi": "NMI0000001"})
        executed = unit.connection.execute(_SELECT.statement, {"nmi": "NMI0000001"}).first()
    # Exact decimal, date, and the aware time in UTC: what execute gives, a LIMIT bound for us.
    assert prepared == (DAY, Decimal("1.2340"), BOOKED.astimezone(UTC))
    assert executed is not None
    assert prepared == tuple(executed)


def test_a_missing_row_is_none(store: Store) -> None:
    with store.read() as unit:
        assert _SELECT.first(unit.connection, {"nmi": "NOBODY0001"}) is None


def test_driver_errors_are_sqlalchemy_errors_and_the_transaction_rolls_back(store: Store) -> None:
    _book(store)

    def book_version_2_then_version_1_again() -> None:
        with store.write() as unit:
            unit.quotas.insert(new_quota("NMI0000001", DAY, version=2), at=BOOKED)
            _INSERT.rows(unit.connection, {**_ENTRY, "version": 2})
            _INSERT.rows(unit.connection, _ENTRY)  # the key of the first entry again

    with pytest.raises(sa.exc.IntegrityError):
        book_version_2_then_version_1_again()
    with store.read() as unit:
        assert (
            unit.connection.execute(sa.select(sa.func.count()).select_from(ledger_entries)).scalar()
            == 1
        )
        assert unit.quotas.latest("NMI0000001", DAY) == new_quota("NMI0000001", DAY)


def test_a_type_rule_refuses_as_it_does_through_execute(store: Store) -> None:
    naive = {**_ENTRY, "booked_at": datetime(2026, 7, 2, 1, 30)}
    with store.write() as unit, pytest.raises(ValueError, match="naive datetime"):
        _INSERT.rows(unit.connection, naive)


def test_insert_if_absent_says_whether_it_inserted(store: Store) -> None:
    first = new_quota("NMI0000001", DAY)
    with store.write() as unit:
        assert unit.quotas.insert_if_absent([first], at=BOOKED)
        assert not unit.quotas.insert_if_absent([first], at=BOOKED)
        stored = unit.quotas.latest("NMI0000001", DAY, for_update=True)
    assert stored == first
    assert stored.status is QuotaStatus.PENDING
    with store.read() as unit:
        rows = unit.connection.execute(
            sa.select(sa.func.count()).select_from(quotas_table)
        ).scalar()
    assert rows == 1


def test_autocommit_commits_each_statement_on_its_own(store: Store) -> None:
    """What the claim relies on: a one-statement write stands once it has run, with no
    ``COMMIT`` (and stays when a later statement fails: nothing is rolled back)."""

    def insert_then_insert_again() -> None:
        with store.autocommit() as unit:
            assert unit.quotas.insert_if_absent([new_quota("NMI0000001", DAY)], at=BOOKED)
            with store.read() as other:  # another connection sees it before the block ends
                assert other.quotas.latest("NMI0000001", DAY) == new_quota("NMI0000001", DAY)
            unit.quotas.insert(new_quota("NMI0000001", DAY), at=BOOKED)  # its key again

    with pytest.raises(sa.exc.IntegrityError):
        insert_then_insert_again()
    with store.read() as unit:
        assert unit.quotas.latest("NMI0000001", DAY) == new_quota("NMI0000001", DAY)


def test_a_connection_back_from_autocommit_is_transactional_again(store: Store) -> None:
    with store.autocommit() as unit:
        unit.quotas.insert_if_absent([new_quota("NMI0000001", DAY)], at=BOOKED)
    # The pool hands the same connection out again (one is enough): a write transaction on it
    # still rolls back as a whole.

    def version_2_booked_twice() -> None:
        with store.write() as unit:
            unit.quotas.insert(new_quota("NMI0000001", DAY, version=2), at=BOOKED)
            _INSERT.rows(unit.connection, {**_ENTRY, "version": 2})
            _INSERT.rows(unit.connection, {**_ENTRY, "version": 2})

    with pytest.raises(sa.exc.IntegrityError):
        version_2_booked_twice()
    with store.read() as unit:
        assert unit.quotas.latest("NMI0000001", DAY) == new_quota("NMI0000001", DAY)
        assert (
            unit.connection.execute(sa.select(sa.func.count()).select_from(ledger_entries)).scalar()
            == 0
        )


def test_save_and_book_writes_the_transition_and_its_entry_together(store: Store) -> None:
    """One statement on PostgreSQL, two on SQLite: the same rows either way."""
    with store.write() as unit:
        unit.quotas.insert(new_quota("NMI0000001", DAY), at=BOOKED)
    done = replace(
        new_quota("NMI0000001", DAY),
        status=QuotaStatus.COMPLETED,
        free_kwh=Decimal("1.2340"),
        free_value=Decimal("0.37"),
        completed_at=BOOKED,
        revision=2,
    )
    entry = quotas.LedgerEntry("NMI0000001", DAY, 1, Decimal("1.2340"), Decimal("0.37"), BOOKED)
    with store.write() as unit:
        unit.quotas.save_and_book([(done, entry)])
    with store.read() as unit:
        assert unit.quotas.latest("NMI0000001", DAY) == done
        assert unit.quotas.ledger("NMI0000001") == [entry]
