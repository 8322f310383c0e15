"""The one retention schedule: every expiry run together, at once and then every hour."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from prometheus_client import REGISTRY
from structlog.testing import capture_logs

from freehours.clock import ManualClock
from freehours.store.database import Store
from freehours.store.maintenance import Expiry, Retention

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


def test_a_failing_expiry_stops_no_other_and_is_logged_and_counted(store: Store) -> None:
    clock = ManualClock(START)
    ran: list[str] = []

    def failing(_: Store, before: datetime) -> int:
        ran.append("quotas")
        # A database error, whose message names a row's key: never logged.
        raise ValueError("Key (nmi)=(NMI0000001) is still referenced") from KeyError("NMI0000001")

    def deleting(name: str) -> Expiry:
        def delete(_: Store, before: datetime) -> int:
            ran.append(name)
            return 3

        return Expiry(name, timedelta(days=1), delete)

    retention = Retention(
        store,
        clock,
        [deleting("jobs"), Expiry("quotas", timedelta(days=1), failing), deleting("keys")],
    )
    before = REGISTRY.get_sample_value("freehours_upkeep_failures_total", {"table": "quotas"})
    with capture_logs() as logs:
        assert retention.run() == {"jobs": 3, "keys": 3}
    assert ran == ["jobs", "quotas", "keys"]  # the one after the failing one ran too
    assert (
        REGISTRY.get_sample_value("freehours_upkeep_failures_total", {"table": "quotas"})
        == (before or 0) + 1
    )
    assert logs == [
        {
            "event": "upkeep_failed",
            "log_level": "error",
            "table": "quotas",
            "error": "ValueError(KeyError)",
        }
    ]
    last = "freehours_upkeep_last_success_timestamp_seconds"
    assert REGISTRY.get_sample_value(last, {"table": "keys"}) == START.timestamp()
    clock.advance(3600)
    assert retention.run() == {"jobs": 3, "keys": 3}
    assert ran[3:] == ["jobs", "quotas", "keys"]  # the next round tries it again
    assert REGISTRY.get_sample_value(last, {"table": "keys"}) == clock.now().timestamp()
