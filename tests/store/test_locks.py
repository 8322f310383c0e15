"""Named locks: a write transaction holding one excludes a transaction sharing it, on PostgreSQL
(SQLite's write lock already excludes every other writer); either way the transaction commits or
rolls back as a whole."""

from __future__ import annotations

import threading
from datetime import UTC, date, datetime

import pytest
import sqlalchemy as sa

from freehours.domain.settlement import new_quota
from freehours.store import locks
from freehours.store.database import Store
from tests.support import eventually

DAY = date(2026, 7, 1)
AT = datetime(2026, 7, 2, 9, 0, tzinfo=UTC)


def test_keys_are_stable_64_bit_hashes() -> None:
    assert locks.key("quota-day:4102000001:2026-07-01") == locks.key(
        "quota-day:4102000001:2026-07-01"
    )
    assert locks.key("a") != locks.key("b")
    assert all(-(2**63) <= locks.key(name) < 2**63 for name in ("a", "b", "quota-day:x"))


def test_a_locked_write_commits_or_rolls_back_as_a_whole(store: Store) -> None:
    with store.write(lock="day") as unit:
        unit.quotas.insert(new_quota("NMI0000001", DAY), at=AT)

    def version_2_twice(lock: str | None) -> None:
        with store.write(lock) as unit:
            unit.quotas.insert(new_quota("NMI0000001", DAY, version=2), at=AT)
            unit.quotas.insert(new_quota("NMI0000001", DAY, version=2), at=AT)

    with pytest.raises(sa.exc.IntegrityError):
        version_2_twice("day")
    # The connection went back to the pool transactional: a plain write still rolls back whole.
    with pytest.raises(sa.exc.IntegrityError):
        version_2_twice(None)
    with store.read() as unit:
        assert unit.quotas.latest("NMI0000001", DAY) == new_quota("NMI0000001", DAY)


@pytest.mark.postgres
@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
def test_sharing_a_name_waits_for_the_transaction_that_holds_it(store: Store) -> None:
    holding = threading.Event()
    waited: list[bool] = []
    events: list[str] = []

    def hold() -> None:
        with store.write(lock="quota-day:x"):
            holding.set()
            waited.append(_someone_waits_for_a_lock(store))
            events.append("released")

    holder = threading.Thread(target=hold)
    holder.start()
    assert holding.wait(timeout=5)
    with store.write() as unit:
        unit.hold_shared(["quota-day:y", "quota-day:x"])
        events.append("shared")
        unit.hold_shared(["quota-day:x"])  # shared twice is still shared
    holder.join()
    assert waited == [True]
    assert events == ["released", "shared"]
    # Shared holders do not wait for each other.
    with store.write() as first, store.write() as second:
        first.hold_shared(["quota-day:x"])
        second.hold_shared(["quota-day:x"])


def _someone_waits_for_a_lock(store: Store) -> bool:
    """Whether a transaction waits for an advisory lock within 10 s (polled)."""

    def waiting() -> bool:
        with store.read() as unit:
            waiting = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            return bool(unit.connection.execute(sa.text(waiting)).scalar())

    return eventually(waiting, within=10, what="a transaction waiting for the lock", every=0.01)
