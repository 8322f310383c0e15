"""Plans and customers in the store, on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from freehours.domain.time import NEM_TIME, Region
from freehours.errors import InputError
from freehours.store.catalog import Customer, StoredPlan, UnknownPlan
from freehours.store.database import Store

AT = datetime(2026, 7, 1, 9, 0, tzinfo=NEM_TIME)
PLAN = {
    "id": "sso-sa-example",
    "region": "SA",
    "daily_supply_charge": Decimal("1.2000"),
    "free_window": {"start": "12:00", "end": "15:00", "cap_kwh": "24"},
    "time_of_use": [{"type": "OFF_PEAK", "unit_price": "0.2500"}],
}


def test_a_plan_round_trips_with_decimals_as_exact_strings(store: Store) -> None:
    with store.write() as unit:
        put = unit.catalog.put_plan("sso-sa-example", PLAN, updated_at=AT)
    with store.read() as unit:
        got = unit.catalog.get_plan("sso-sa-example")

    assert got == put
    assert got == StoredPlan(
        "sso-sa-example", {**PLAN, "daily_supply_charge": "1.2000"}, AT.astimezone(UTC)
    )


def test_putting_a_plan_again_replaces_it(store: Store) -> None:
    later = AT + timedelta(days=1)
    with store.write() as unit:
        unit.catalog.put_plan("p", {"version": 1}, updated_at=AT)
        unit.catalog.put_plan("p", {"version": 2}, updated_at=later)
    with store.read() as unit:
        assert unit.catalog.get_plan("p") == StoredPlan("p", {"version": 2}, later)


def test_plans_are_listed_by_id_and_an_unknown_one_is_none(store: Store) -> None:
    with store.write() as unit:
        for plan_id in ("sso-sa", "mps-vic", "sso-nsw"):
            unit.catalog.put_plan(plan_id, {"id": plan_id}, updated_at=AT)
    with store.read() as unit:
        assert [plan.plan_id for plan in unit.catalog.list_plans()] == [
            "mps-vic",
            "sso-nsw",
            "sso-sa",
        ]
        assert unit.catalog.get_plan("nope") is None


def test_a_customer_is_created_then_moved_to_another_plan(store: Store) -> None:
    with store.write() as unit:
        unit.catalog.put_plan("sso-nsw", {}, updated_at=AT)
        unit.catalog.put_plan("sso-seq", {}, updated_at=AT)
        unit.catalog.put_customer("4103035611", plan_id="sso-nsw", region=Region.NSW, updated_at=AT)
        unit.catalog.put_customer("4103035611", plan_id="sso-seq", region=Region.SEQ, updated_at=AT)
    with store.read() as unit:
        assert unit.catalog.get_customer("4103035611") == Customer(
            "4103035611", "sso-seq", Region.SEQ, AT
        )
        assert unit.catalog.get_customer("4103035612") is None


def test_a_customer_on_an_unknown_plan_is_refused_and_the_transaction_goes_on(
    store: Store,
) -> None:
    with store.write() as unit:
        with pytest.raises(InputError, match="customer 4103035611: plan 'nope' is not known"):
            unit.catalog.put_customer("4103035611", plan_id="nope", region=Region.SA, updated_at=AT)
        unit.catalog.put_plan("sso-sa", {}, updated_at=AT)
    with store.read() as unit:
        assert [plan.plan_id for plan in unit.catalog.list_plans()] == ["sso-sa"]


@pytest.mark.parametrize("nmi", ["", "41030356110", "nlower0001", "ABC", "NMI000000\u0661"])
def test_a_nmi_that_is_not_an_nmi_is_refused(store: Store, nmi: str) -> None:
    with store.write() as unit:
        unit.catalog.put_plan("p", {}, updated_at=AT)
        with pytest.raises(InputError, match=r"^nmi: .* is not an NMI"):
            unit.catalog.put_customer(nmi, plan_id="p", region=Region.VIC, updated_at=AT)


def test_a_built_in_plan_is_stored_on_first_use_and_an_unknown_one_refused(store: Store) -> None:
    now = datetime(2026, 7, 1, tzinfo=UTC)
    with store.write() as unit:
        unit.catalog.ensure_plan("sso-nsw", updated_at=now)
        unit.catalog.put_plan("sso-sa", {"id": "sso-sa", "mine": True}, updated_at=now)
        unit.catalog.ensure_plan("sso-sa", updated_at=now + timedelta(days=1))
    with store.read() as unit:
        built_in = unit.catalog.get_plan("sso-nsw")
        kept = unit.catalog.get_plan("sso-sa")
    assert built_in is not None
    assert built_in.document["id"] == "sso-nsw"
    assert kept == StoredPlan("sso-sa", {"id": "sso-sa", "mine": True}, now)  # not replaced
    refused = pytest.raises(UnknownPlan, match="no plan 'nope' \\(stored, or built in: sso-nsw")
    with refused, store.write() as unit:
        unit.catalog.ensure_plan("nope", updated_at=now)
    with store.read() as unit:
        assert unit.catalog.get_plan("nope") is None
