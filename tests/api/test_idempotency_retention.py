"""Idempotency-Keys are kept for the retention (24 hours at least), then purged."""

from __future__ import annotations

from datetime import timedelta

from freehours.api.keys import find_key
from freehours.api.once import purge_keys
from freehours.store.maintenance import Retention
from tests.api.conftest import Api
from tests.api.test_meter_readings import batch, post


def test_a_key_is_replayed_within_the_retention_and_forgotten_after_the_purge(api: Api) -> None:
    first = post(api, batch("0.412"), key="kept")
    api.clock.advance(23 * 3600)
    assert post(api, batch("0.412"), key="kept").headers["Idempotent-Replayed"] == "true"
    api.clock.advance(2 * 3600)
    retention = timedelta(hours=api.services.settings.idempotency_retention_hours)
    with api.services.store.write() as unit:
        purged = unit.idempotency.purge(older_than=api.clock.now() - retention)
    assert purged == 1
    again = post(api, batch("0.412"), key="kept")
    assert "Idempotent-Replayed" not in again.headers
    assert again.json() == {"accepted": 0, "superseded": 0, "unchanged": 1}
    assert first.json() == {"accepted": 1, "superseded": 0, "unchanged": 0}


def test_the_purge_keeps_keys_younger_than_the_retention(api: Api) -> None:
    post(api, batch("0.412"), key="young")
    with api.services.store.write() as unit:
        key = find_key(unit.keys, api.keys["ingest"])
        assert key is not None
        purged = unit.idempotency.purge(older_than=api.clock.now() - timedelta(hours=24))
    assert purged == 0


def test_the_apis_retention_purges_the_keys_past_it(api: Api) -> None:
    post(api, batch("0.412"), key="aged")
    hours = api.services.settings.idempotency_retention_hours
    retention = Retention(api.services.store, api.clock, [purge_keys(hours)])
    assert retention.run() == {"idempotency_keys": 0}  # younger than the retention
    api.clock.advance(hours * 3600 + 1)
    assert retention.run() == {"idempotency_keys": 1}
    again = post(api, batch("0.412"), key="aged")
    assert "Idempotent-Replayed" not in again.headers  # forgotten: run afresh
