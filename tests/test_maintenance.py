"""The one retention schedule: every expiry run together, at once and then every hour."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from freehours.clock import ManualClock
from freehours.maintenance import Expiry, Retention
from freehours.store.database import Store

START = datetime(2026, 7, 1, tzinfo=UTC)


def test_each_expiry_deletes_before_its_own_retention_at_once_then_hourly(store: Store) -> None:
    clock = ManualClock(START)
    asked: list[tuple[str, datetime]] = []

    def expiry(name: str, keep: timedelta) -> Expiry:
        def delete(_: Store, before: datetime) -> int:
            asked.append((name, before))
            return 0

        return Expiry(name, keep, delete)

    retention = Retention(
        store, clock, [expiry("jobs", timedelta(days=7)), expiry("keys", timedelta(hours=24))]
    )
    retention.run_if_due()
    assert asked == [("jobs", START - timedelta(days=7)), ("keys", START - timedelta(hours=24))]
    clock.advance(3599)
    retention.run_if_due()
    assert len(asked) == 2  # not an hour yet
    clock.advance(1)
    retention.run_if_due()
    assert asked[2:] == [
        ("jobs", clock.now() - timedelta(days=7)),
        ("keys", clock.now() - timedelta(hours=24)),
    ]
