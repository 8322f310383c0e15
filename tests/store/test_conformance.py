"""Every repository method, through the ``store`` fixture: the same answers on SQLite and
PostgreSQL.

Each test runs once per backend and asserts literal results, so a driver that answers differently
fails it. A new repository method, or a new ``Driver`` method, gets a case here. Behaviour in
depth (the revision rule, the job life cycle, races) is tested beside each repository; this suite
is the contract the two drivers share.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from functools import cached_property
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext

import freehours.store
from freehours.domain.contacts import Contact, Delivery
from freehours.domain.invoicing import BillingCycle, Frequency
from freehours.domain.offers import OfferSource, OfferTerms
from freehours.domain.reads import IntervalDay, IntervalRead
from freehours.domain.settlement import QuotaStatus, claim, complete, new_quota, release
from freehours.domain.time import NEM_TIME, Region
from freehours.domain.webhooks import DeliveryStatus
from freehours.errors import InputError
from freehours.jobs.decisions import Complete, Finish, Release
from freehours.jobs.job import JobError, JobState
from freehours.jobs.retry import Discard, DiscardReason, RetryAt, SnoozeUntil
from freehours.store.agents import AgentReport
from freehours.store.catalog import Customer, NewOffer, RegionMismatch, StoredPlan
from freehours.store.database import Store, Unit
from freehours.store.idempotency import SavedResponse, StoredIdempotencyKey
from freehours.store.ingestions import IngestionRecord
from freehours.store.invoice_records import Account
from freehours.store.jobs import NOTIFY_CHANNEL
from freehours.store.keys import StoredKey
from freehours.store.meter import IngestCounts
from freehours.store.quotas import LedgerEntry, QuotaEvent
from freehours.store.webhooks import (
    DELIVERY_KIND,
    DELIVERY_MAX_ATTEMPTS,
    FANOUT_KIND,
    NewEvent,
)
from tests.support import stored_or_new

NMI = "4102000001"
OTHER = "4102000002"
DAY = date(2026, 7, 1)
NOW = datetime(2026, 7, 2, 9, 0, tzinfo=UTC)
STAMP = datetime(2026, 7, 2, 6, 0, tzinfo=NEM_TIME)
LEASE = timedelta(minutes=5)


def write_then_fail(store: Store, write: Callable[[Unit], object], lock: str | None = None) -> None:
    """A write transaction that fails after ``write``: it must leave nothing behind."""
    with pytest.raises(RuntimeError), store.write(lock) as unit:  # noqa: PT012 - the point
        write(unit)
        raise RuntimeError("the transaction fails after the write")


def nem12_day(nmi: str, value: str, stamp: datetime = STAMP, suffix: str = "E1") -> IntervalDay:
    return IntervalDay(nmi, suffix, DAY, 30, (Decimal(value),) * 48, "A" * 48, stamp)


# --- quotas and the ledger ----------------------------------------------------------------------


def test_quotas(store: Store) -> None:
    first = new_quota(NMI, DAY)
    with store.autocommit() as unit:
        assert unit.quotas.insert_if_absent([first], at=NOW) == {(NMI, DAY)}
        assert unit.quotas.insert_if_absent([first], at=NOW) == set()
    with store.write() as unit:
        assert unit.quotas.latest(NMI, DAY) == first
        assert unit.quotas.latest(OTHER, DAY) is None
        assert stored_or_new(unit, NMI, DAY, at=NOW) == first
        assert stored_or_new(unit, OTHER, DAY, at=NOW) == new_quota(OTHER, DAY)
        held = claim(first, NOW, timedelta(seconds=30), 5)
        unit.quotas.save([held.quota], at=NOW)
        done = complete(held.quota, held.quota.fence, Decimal("1.5"), Decimal("0.75"), NOW)
        unit.quotas.save_and_book(
            [(done, LedgerEntry(NMI, DAY, 1, Decimal("1.5"), Decimal("0.75"), NOW))]
        )
        assert unit.quotas.latest(NMI, DAY, for_update=True) == done
    with store.write() as unit:
        assert unit.quotas.settled_among([(OTHER, DAY), (NMI, DAY), (NMI, DAY)]) == {(NMI, DAY)}
        assert unit.quotas.terminal_among([(OTHER, DAY), (NMI, DAY)]) == {(NMI, DAY)}
        successor = unit.quotas.reopen_if_settled(NMI, DAY, at=NOW)
        assert successor == new_quota(NMI, DAY, version=2)
        assert unit.quotas.reopen_if_settled(NMI, DAY, at=NOW) is None  # version 2 is not settled
        assert unit.quotas.reopen_if_settled(OTHER, DAY, at=NOW) is None
        unit.quotas.book(LedgerEntry(NMI, DAY, 2, Decimal("0.5"), Decimal("0.25"), NOW))
        unit.quotas.insert(new_quota(OTHER, DAY, version=2), at=NOW)
    with store.read() as unit:
        # NMI's newest, v2, is PENDING: settled no longer; OTHER's never was; no quota at all
        later = DAY + timedelta(days=1)
        assert unit.quotas.settled_among([(NMI, DAY), (OTHER, DAY), (NMI, later)]) == set()
        assert unit.quotas.settled_among([]) == set()
        assert unit.quotas.terminal_among([(NMI, DAY), (OTHER, DAY), (NMI, later)]) == set()
        assert unit.quotas.stored_among([(NMI, DAY), (OTHER, DAY), (NMI, later)]) == {
            (NMI, DAY),
            (OTHER, DAY),
        }
        assert unit.quotas.stored_among([]) == set()
        assert unit.quotas.booked_before(NMI, DAY, 1) == (Decimal(0), Decimal(0))
        assert unit.quotas.booked_before(NMI, DAY, 3) == (Decimal("2.0"), Decimal("1.00"))
        assert unit.quotas.ledger(NMI) == [
            LedgerEntry(NMI, DAY, 1, Decimal("1.5"), Decimal("0.75"), NOW),
            LedgerEntry(NMI, DAY, 2, Decimal("0.5"), Decimal("0.25"), NOW),
        ]
        assert unit.quotas.ledger(NMI, DAY + timedelta(days=1)) == []
        assert unit.quotas.every_credit() == unit.quotas.ledger(NMI)
        assert unit.quotas.duplicate_credits() == 0
        assert unit.quotas.count_versions() == 4
        assert unit.quotas.sum_attempts() == 0
        assert unit.quotas.first_versions_completed_at() == [NOW]


TRACE = 0x0AF7651916CD43DD8448EB211C80319C


def in_trace(trace_id: int = TRACE) -> AbstractContextManager[object]:
    """A current span with a valid context in the trace ``trace_id`` (never recorded)."""
    context = SpanContext(trace_id=trace_id, span_id=0x00F067AA0BA902B7, is_remote=False)
    return trace.use_span(NonRecordingSpan(context))


def test_every_quota_state_written_is_an_event(store: Store) -> None:
    """insert, insert_if_absent (when it inserts), save, save_and_book and reopen_if_settled
    each record the state they wrote, at the time given (the completion's own for
    save_and_book), with the current trace; none outside one."""
    later, last = NOW + timedelta(seconds=5), NOW + timedelta(seconds=9)
    held = claim(new_quota(NMI, DAY), NOW, timedelta(seconds=30), 5).quota
    with store.autocommit() as unit, in_trace():
        assert unit.quotas.insert_if_absent([held], at=NOW) == {(NMI, DAY)}
        assert unit.quotas.insert_if_absent([held], at=later) == set()  # no write, no event
    released = release(held, held.fence, "attempt failed", later, 5)
    with store.write() as unit:
        unit.quotas.save([released], at=later)
        again = claim(released, later, timedelta(seconds=30), 5).quota
        unit.quotas.save([again], at=later)
        done = complete(again, again.fence, Decimal(1), Decimal("0.5"), last)
        entry = LedgerEntry(NMI, DAY, 1, Decimal(1), Decimal("0.5"), last)
        with in_trace(TRACE + 1):
            unit.quotas.save_and_book([(done, entry)])
            assert unit.quotas.reopen_if_settled(NMI, DAY, at=last) is not None
        unit.quotas.insert(new_quota(OTHER, DAY), at=NOW)
    trace_id = "0af7651916cd43dd8448eb211c80319c"
    booked = "0af7651916cd43dd8448eb211c80319d"
    with store.read() as unit:
        assert unit.quotas.events(NMI, DAY) == [
            QuotaEvent(NMI, DAY, 1, NOW, QuotaStatus.LOCKED, 1, 0, None, trace_id),
            QuotaEvent(NMI, DAY, 1, later, QuotaStatus.PENDING, 1, 1, "attempt failed", None),
            QuotaEvent(NMI, DAY, 1, later, QuotaStatus.LOCKED, 2, 1, None, None),
            QuotaEvent(NMI, DAY, 1, last, QuotaStatus.COMPLETED, 2, 1, None, booked),
            QuotaEvent(NMI, DAY, 2, last, QuotaStatus.PENDING, 0, 0, None, booked),
        ]
        assert unit.quotas.events(OTHER, DAY) == [
            QuotaEvent(OTHER, DAY, 1, NOW, QuotaStatus.PENDING, 0, 0, None, None)
        ]
        assert unit.quotas.events(NMI, DAY + timedelta(days=1)) == []


def test_a_save_of_no_row_records_no_event(store: Store) -> None:
    with store.write() as unit:
        unit.quotas.save([new_quota(NMI, DAY)], at=NOW)
        assert unit.quotas.latest(NMI, DAY) is None
        assert unit.quotas.events(NMI, DAY) == []


def test_a_transition_and_its_entry_stand_or_fall_together(store: Store) -> None:
    first = new_quota(NMI, DAY)
    held = claim(first, NOW, timedelta(seconds=30), 5).quota
    with store.write() as unit:
        unit.quotas.insert(held, at=NOW)
    done = complete(held, held.fence, Decimal(1), Decimal("0.5"), NOW)
    entry = LedgerEntry(NMI, DAY, 1, Decimal(1), Decimal("0.5"), NOW)
    write_then_fail(store, lambda unit: unit.quotas.save_and_book([(done, entry)]))
    with store.read() as unit:
        assert unit.quotas.latest(NMI, DAY) == held
        assert unit.quotas.ledger(NMI) == []
        assert [event.status for event in unit.quotas.events(NMI, DAY)] == [QuotaStatus.LOCKED]


# --- meter data ---------------------------------------------------------------------------------


def test_meter(store: Store) -> None:
    with store.write() as unit:
        counts = unit.meter.ingest_days(
            [nem12_day(NMI, "0.1"), nem12_day(OTHER, "0.2")], received_at=NOW
        )
        assert counts == IngestCounts(accepted=2)
        assert counts.changed == {(NMI, "E1", DAY), (OTHER, "E1", DAY)}
    with store.write() as unit:
        later = STAMP + timedelta(hours=1)
        counts = unit.meter.ingest_days(
            [
                nem12_day(NMI, "0.3", later),
                nem12_day(OTHER, "0.2"),
                nem12_day(OTHER, "0.9", STAMP - timedelta(hours=1)),
            ],
            received_at=NOW,
        )
        assert counts == IngestCounts(superseded=1, unchanged=1, stale=1)
        assert counts.changed == {(NMI, "E1", DAY)}
        numbers = counts.numbers()  # what an import's summary keeps of each file
        assert numbers == counts  # the four counts (``changed`` is not part of equality)
        assert numbers.changed == frozenset()
    start = datetime(2026, 7, 1, 0, 0, tzinfo=NEM_TIME)
    with store.write() as unit:
        counts = unit.meter.ingest_reads(
            [
                IntervalRead(NMI, "E1", start, start + timedelta(minutes=30), Decimal("0.5"), "A"),
                IntervalRead(NMI, "B1", start, start + timedelta(minutes=30), Decimal("0.4"), "A"),
            ],
            received_at=NOW,
        )
        assert counts == IngestCounts(accepted=1, superseded=1)
        assert counts.changed == {(NMI, "E1", DAY), (NMI, "B1", DAY)}
    with store.read() as unit:
        days = unit.meter.days_for(NMI, [DAY, DAY + timedelta(days=5)])
        assert [(d.suffix, d.values[:2]) for d in days] == [
            ("B1", (Decimal("0.4"), None)),
            ("E1", (Decimal("0.5"), Decimal("0.3"))),
        ]
        assert unit.meter.days_for(NMI, []) == []
        assert sorted(unit.meter.day_keys_since(NMI, DAY)) == [(NMI, "B1", DAY), (NMI, "E1", DAY)]
        assert unit.meter.day_keys_since(NMI, DAY + timedelta(days=1)) == []
        assert sorted(unit.meter.day_keys_of([OTHER, NMI, NMI], DAY, DAY)) == sorted(
            [*unit.meter.day_keys_since(NMI, DAY), *unit.meter.day_keys_since(OTHER, DAY)]
        )
        assert unit.meter.day_keys_of([NMI], DAY - timedelta(days=2), DAY - timedelta(days=1)) == []
        assert unit.meter.day_keys_of([], DAY, DAY) == []
        assert unit.meter.nmis_with_data_on(DAY) == [NMI, OTHER]


def test_a_failed_ingest_leaves_nothing_behind(store: Store) -> None:
    bad = IntervalDay(NMI, "E1", DAY, 30, (Decimal(1),) * 47, "A" * 47, STAMP)
    with pytest.raises(InputError), store.write() as unit:
        unit.meter.ingest_days([nem12_day(OTHER, "0.1"), bad], received_at=NOW)
    with store.write() as unit:  # the staging table went with the rollback
        assert unit.meter.ingest_days([nem12_day(OTHER, "0.1")], received_at=NOW).accepted == 1


# --- the catalogue ------------------------------------------------------------------------------


def test_a_plan_and_its_customers_keep_one_region(store: Store) -> None:
    with store.write() as unit:
        unit.catalog.put_plan("sa", {"region": "SA"}, updated_at=NOW)
        with pytest.raises(RegionMismatch, match="plan 'sa' is for region SA, the customer's"):
            unit.catalog.put_customer(NMI, plan_id="sa", region=Region.NSW, updated_at=NOW)
        unit.catalog.put_customer(NMI, plan_id="sa", region=Region.SA, updated_at=NOW)
        with pytest.raises(RegionMismatch, match="customers on it are in region SA"):
            unit.catalog.put_plan("sa", {"region": "VIC"}, updated_at=NOW)
        unit.catalog.put_plan("sa", {"region": "SA", "changed": True}, updated_at=NOW)
    with store.read() as unit:
        stored = unit.catalog.get_plan("sa")
        assert stored is not None
        assert stored.document == {"region": "SA", "changed": True}


def test_days_without_quota(store: Store) -> None:
    """Day rows of customers' NMIs with no quota of their date, by the ``day`` index, bounded."""
    later = DAY + timedelta(days=1)
    with store.write() as unit:
        unit.catalog.put_plan("p", {}, updated_at=NOW)
        unit.catalog.put_customer(NMI, plan_id="p", region=Region.NSW, updated_at=NOW)
        unit.meter.ingest_days(
            [
                nem12_day(NMI, "0.1"),
                nem12_day(OTHER, "0.1"),
                replace(nem12_day(NMI, "0.1"), day=later),
            ],
            received_at=NOW,
        )
        # OTHER has no customer: left out.
        assert sorted(unit.meter.days_without_quota(DAY, later, limit=10)) == [
            (NMI, "E1", DAY),
            (NMI, "E1", later),
        ]
        assert len(unit.meter.days_without_quota(DAY, later, limit=1)) == 1
        unit.quotas.insert(new_quota(NMI, DAY), at=NOW)
        assert unit.meter.days_without_quota(DAY, later, limit=10) == [(NMI, "E1", later)]
        assert unit.meter.days_without_quota(DAY, DAY, limit=10) == []


def test_catalog(store: Store) -> None:
    with store.write() as unit:
        plan = unit.catalog.put_plan("p", {"price": Decimal("0.25")}, updated_at=NOW)
        assert plan == StoredPlan("p", {"price": "0.25"}, NOW)
        unit.catalog.put_plan("p", {"price": Decimal("0.30")}, updated_at=NOW + timedelta(1))
        unit.catalog.put_plan("a", {}, updated_at=NOW)
        customer = unit.catalog.put_customer(NMI, plan_id="p", region=Region.NSW, updated_at=NOW)
        assert customer == Customer(NMI, "p", Region.NSW, NOW)
        unit.catalog.put_customer(NMI, plan_id="a", region=Region.VIC, updated_at=NOW)
        with pytest.raises(InputError, match="not known"):
            unit.catalog.put_customer(OTHER, plan_id="nope", region=Region.NSW, updated_at=NOW)
    with store.read() as unit:
        assert unit.catalog.customer_nmis(after=None, limit=10) == [NMI]
        assert unit.catalog.customer_nmis(after=NMI, limit=10) == []
        assert unit.catalog.get_plan("p") == StoredPlan("p", {"price": "0.30"}, NOW + timedelta(1))
        assert unit.catalog.get_plan("nope") is None
        assert [p.plan_id for p in unit.catalog.list_plans()] == ["a", "p"]
        assert unit.catalog.get_customer(NMI) == Customer(NMI, "a", Region.VIC, NOW)
        assert unit.catalog.get_customer(OTHER) is None
        assert unit.catalog.count_customers() == 1
        assert unit.catalog.plan_version_of(NMI) == ("a", NOW)
        assert unit.catalog.plan_version_of(OTHER) is None
        assert unit.catalog.plan_versions_of([OTHER, NMI, NMI]) == {NMI: ("a", NOW)}
        assert unit.catalog.plan_versions_of([]) == {}


def test_accounts(store: Store) -> None:
    third = "4102000003"
    with store.write() as unit:
        unit.catalog.put_plan("p", {}, updated_at=NOW)
        unit.catalog.put_plan("v", {}, updated_at=NOW)
        for nmi, plan, region in ((OTHER, "p", Region.NSW), (NMI, "p", Region.NSW)):
            unit.catalog.put_customer(nmi, plan_id=plan, region=region, updated_at=NOW)
        unit.catalog.put_customer(third, plan_id="v", region=Region.VIC, updated_at=NOW)
        monthly = BillingCycle()
        quarterly = BillingCycle(Frequency.QUARTERLY, 15, 30)
        assert unit.invoices.set_cycle(third, quarterly)
        assert not unit.invoices.set_cycle("4102000009", quarterly)
    with store.read() as unit:
        every = unit.invoices.accounts_after(None, 10)
        assert every == [
            Account(NMI, "p", Region.NSW, monthly),
            Account(OTHER, "p", Region.NSW, monthly),
            Account(third, "v", Region.VIC, quarterly),
        ]
        assert unit.invoices.accounts([third, NMI, "4102000009"]) == [every[0], every[2]]
        assert unit.invoices.accounts_after(None, 2) == every[:2]
        assert unit.invoices.accounts_after(OTHER, 2) == every[2:]
        assert unit.invoices.accounts_after(third, 2) == []
        assert unit.invoices.accounts_after(None, 10, plan_id="p") == every[:2]
        assert unit.invoices.accounts_after(NMI, 10, plan_id="p") == every[1:2]
        assert unit.invoices.accounts_after(None, 10, region=Region.VIC) == every[2:]
        assert unit.invoices.accounts_after(None, 10, plan_id="v", region=Region.NSW) == []


def test_contacts(store: Store) -> None:
    sam = Contact("Sam", ("1 Sun St", "Newtown NSW 2042"), (), "sam@example.com", Delivery.EMAIL)
    jo = Contact("Jo", ("2 Moon Rd",), ("PO Box 1", "Adelaide SA 5000"))
    with store.write() as unit:
        unit.catalog.put_plan("p", {}, updated_at=NOW)
        unit.catalog.put_customers(
            [(NMI, "p", Region.NSW), (OTHER, "p", Region.NSW)], updated_at=NOW
        )
        unit.catalog.put_contacts({NMI: sam, OTHER: jo}, updated_at=NOW)
        unit.catalog.put_contacts({}, updated_at=NOW)
        with pytest.raises(InputError, match="nmi: no customer 4102000009"):
            unit.catalog.put_contacts({"4102000009": sam}, updated_at=NOW)
        assert unit.invoices.set_cycles({}) == 0
        assert unit.invoices.set_cycles({NMI: BillingCycle(anchor_day=5)}) == 1
    with store.read() as unit:
        assert unit.catalog.contacts([OTHER, NMI, "4102000009"]) == {NMI: sam, OTHER: jo}
        assert unit.catalog.contacts([]) == {}
        assert unit.invoices.accounts([NMI])[0].cycle == BillingCycle(anchor_day=5)
    with store.write() as unit:
        unit.catalog.put_contacts({NMI: jo}, updated_at=NOW)  # replaced whole
        assert unit.catalog.forget_contact(OTHER)
        assert not unit.catalog.forget_contact(OTHER)
    with store.read() as unit:
        assert unit.catalog.contacts([NMI, OTHER]) == {NMI: jo}
        assert unit.catalog.count_customers() == 2
    write_then_fail(store, lambda unit: unit.catalog.put_contacts({OTHER: sam}, updated_at=NOW))
    with store.read() as unit:
        assert unit.catalog.contacts([OTHER]) == {}


def test_offers(store: Store) -> None:
    nsw = OfferTerms(Region.NSW, ("Ausgrid",), False, date(2026, 7, 1), None)
    plan = {"id": "o1", "region": "NSW", "price": Decimal("0.25")}
    first = NewOffer("o1", "Offer one", OfferSource.CDR, nsw, plan)
    other = NewOffer("o2", "Offer two", OfferSource.PLAN, OfferTerms(Region.VIC), {"id": "o2"})
    with store.write() as unit:
        made = unit.catalog.put_offers([first, other], at=NOW)
        assert [(o.offer_id, o.version) for o in made] == [("o1", 1), ("o2", 1)]
        assert made[0].document == {"id": "o1", "region": "NSW", "price": "0.25"}
        again = unit.catalog.put_offers([first], at=NOW)  # nothing changed: no new version
        assert [(o.offer_id, o.version) for o in again] == [("o1", 1)]
        dearer = replace(first, document={**plan, "price": Decimal("0.30")})
        later = replace(dearer, terms=replace(nsw, effective_to=date(2026, 12, 31)))
        assert unit.catalog.put_offers([dearer], at=NOW)[0].version == 2
        assert unit.catalog.put_offers([later], at=NOW)[0].version == 3
    with store.read() as unit:
        current = unit.catalog.current_offers()
        assert [(o.offer_id, o.version) for o in current] == [("o1", 3), ("o2", 1)]
        assert current[0].terms == replace(nsw, effective_to=date(2026, 12, 31))
        assert current[0].source is OfferSource.CDR
        assert [o.offer_id for o in unit.catalog.current_offers(region=Region.VIC)] == ["o2"]
        assert unit.catalog.current_offers(ids=[]) == []
        assert [o.version for o in unit.catalog.current_offers(ids=["o1", "o9"])] == [3]
        one = unit.catalog.offer("o1", 1)
        assert one is not None
        assert (one.version, one.document["price"], one.terms.effective_to) == (1, "0.25", None)
        latest = unit.catalog.offer("o1")
        assert latest is not None
        assert latest.version == 3
        assert unit.catalog.offer("o1", 9) is None
        assert unit.catalog.offer("o9") is None
    write_then_fail(store, lambda unit: unit.catalog.put_offers([dearer], at=NOW))
    with store.read() as unit:
        assert [o.version for o in unit.catalog.current_offers(ids=["o1"])] == [3]


# --- jobs ---------------------------------------------------------------------------------------


def test_jobs(store: Store) -> None:
    with store.write() as unit:
        first = unit.jobs.enqueue("settle", "a", {"n": 1}, run_at=NOW, now=NOW)
        second = unit.jobs.enqueue("settle", "b", {"n": 2}, run_at=NOW, now=NOW)
        later = unit.jobs.enqueue("settle", "c", {}, run_at=NOW + timedelta(hours=1), now=NOW)
        assert unit.jobs.enqueue("settle", "a", {"n": 1}, run_at=NOW, now=NOW) is None
        assert None not in (first, second, later)
    with store.write() as unit:
        assert unit.jobs.next_due({"settle"}) == NOW
        assert unit.jobs.next_due({"other"}) is None
        claimed = unit.jobs.claim("w1", {"settle"}, 10, now=NOW, lease=LEASE)
        assert [(j.key, j.state, j.runs, j.worker) for j in claimed] == [
            ("a", JobState.RUNNING, 1, "w1"),
            ("b", JobState.RUNNING, 1, "w1"),
        ]
        assert unit.jobs.renew("w1", now=NOW, lease=LEASE) == 2
        assert unit.jobs.renew("w2", now=NOW, lease=LEASE) == 0
        (expired,) = unit.jobs.expired(now=NOW + 2 * LEASE, limit=1)
        assert expired in claimed
        assert unit.jobs.expired(now=NOW, limit=10) == []
    job_a, job_b = claimed
    with store.write() as unit:
        written = unit.jobs.finish(
            [Finish(job_a, Complete("done")), Finish(job_b, Release())], now=NOW
        )
        assert written == {job_a.id, job_b.id}
        assert unit.jobs.finish([Finish(job_a, Complete("again"))], now=NOW) == set()  # stale
        assert unit.jobs.cancel("settle", "c", now=NOW) == later
        assert unit.jobs.cancel("settle", "c", now=NOW) is None
    with store.write() as unit:
        (job_b,) = unit.jobs.claim("w1", {"settle"}, 10, now=NOW, lease=LEASE)
        retry = RetryAt(NOW + timedelta(seconds=5), 1)
        assert unit.jobs.finish([Finish(job_b, retry, "Boom: failed")], now=NOW) == {job_b.id}
    with store.write() as unit:
        (job_b,) = unit.jobs.claim("w1", {"settle"}, 10, now=NOW + LEASE, lease=LEASE)
        snooze = SnoozeUntil(NOW + LEASE)
        assert unit.jobs.finish([Finish(job_b, snooze, "later")], now=NOW) == {job_b.id}
    with store.write() as unit:
        (job_b,) = unit.jobs.claim("w1", {"settle"}, 10, now=NOW + LEASE, lease=LEASE)
        discard = Discard(DiscardReason.ATTEMPTS, 2)
        assert unit.jobs.finish([Finish(job_b, discard, "Boom")], now=NOW) == {job_b.id}
    with store.read() as unit:
        assert [(j.key, j.state, j.runs) for j in unit.jobs.every()] == [
            ("a", JobState.COMPLETED, 1),
            ("b", JobState.DISCARDED, 4),
            ("c", JobState.CANCELLED, 0),
        ]
        assert [j.key for j in unit.jobs.history("settle", "b")] == ["b"]
        # The retry and the discard were failed attempts; the snooze was none.
        assert unit.jobs.history("settle", "b")[0].errors == (
            JobError(1, NOW, "Boom: failed"),
            JobError(2, NOW, "Boom"),
        )
        assert unit.jobs.history("settle", "a")[0].errors == ()
        assert unit.jobs.get(10_000) is None
        assert unit.jobs.reruns() == 3
        counts = unit.jobs.count_by_state()
        assert counts[JobState.COMPLETED] == counts[JobState.DISCARDED] == 1
        assert counts[JobState.AVAILABLE] == 0
        assert unit.jobs.count_stuck(now=NOW + timedelta(days=1), waiting_over=LEASE) == 0
    with store.write() as unit:
        assert unit.jobs.prune(finished_before=NOW + timedelta(seconds=1), limit=2) == 2
        assert unit.jobs.prune(finished_before=NOW + timedelta(seconds=1), limit=2) == 1
        unit.jobs.enqueue("settle", "d", {}, run_at=NOW, now=NOW)
        assert unit.jobs.count_stuck(now=NOW + 2 * LEASE, waiting_over=LEASE) == 1


# --- ingestions and agents --------------------------------------------------------------------


def test_ingestions(store: Store) -> None:
    counts = IngestCounts(accepted=3, superseded=2, unchanged=1, stale=4)
    with store.write() as unit:
        first = unit.ingestions.record(
            received_at=NOW,
            source="nem12",
            size=1234,
            counts=counts,
            name="a.csv",
            key_id="key_1",
            agent="gw-1",
            trace_id="0af7651916cd43dd8448eb211c80319c",
        )
        second = unit.ingestions.record(
            received_at=NOW, source="import", size=5, counts=IngestCounts(), name="x" * 300
        )
        third = unit.ingestions.record(received_at=NOW, source="reads", size=9, counts=counts)
        with pytest.raises(ValueError, match="ingestion source 'ftp'"):
            unit.ingestions.record(received_at=NOW, source="ftp", size=1, counts=counts)
    assert first < second < third
    with store.read() as unit:
        newest = unit.ingestions.recent(limit=2)
        assert [r.id for r in newest] == [third, second]
        assert newest[1].name == "x" * 255
        (oldest,) = unit.ingestions.recent(limit=2, before_id=second)
        assert oldest == IngestionRecord(
            first, NOW, "nem12", "a.csv", "key_1", "gw-1", 1234, 3, 2, 1, 4,
            "0af7651916cd43dd8448eb211c80319c",
        )  # fmt: skip
        assert unit.ingestions.recent(limit=5, before_id=first) == []


def test_agents(store: Store) -> None:
    later = NOW + timedelta(seconds=10)
    with store.write() as unit:
        unit.agents.report(AgentReport("gw-2", "closed", 0, "0.1.0", "10.0.0.2", NOW))
        unit.agents.report(AgentReport("gw-1", "open", 1, "0.1.0", "10.0.0.1", NOW))
        unit.agents.report(AgentReport("gw-1", "half-open", 2, "0.2.0", "10.0.0.9", later))
        unit.agents.report(AgentReport("gw-1", "closed", 0, "0.1.0", "10.0.0.1", NOW))  # older
    with store.read() as unit:
        assert unit.agents.every() == [
            AgentReport("gw-1", "half-open", 2, "0.2.0", "10.0.0.9", later),
            AgentReport("gw-2", "closed", 0, "0.1.0", "10.0.0.2", NOW),
        ]


# --- keys and idempotency -----------------------------------------------------------------------


def test_keys(store: Store) -> None:
    with store.write() as unit:
        added = unit.keys.add(
            "key_1", name="one", key_hash="h1", scopes=frozenset({"read"}), created_at=NOW
        )
        assert added == StoredKey("key_1", "one", frozenset({"read"}), NOW, None)
        unit.keys.add("key_2", name="two", key_hash="h2", scopes=frozenset(), created_at=NOW)
        assert unit.keys.revoke("key_2", NOW) is True
        assert unit.keys.revoke("key_2", NOW) is False
    with store.read() as unit:
        assert unit.keys.every() == [added, StoredKey("key_2", "two", frozenset(), NOW, NOW)]
        assert unit.keys.live_by_hash("h1") == added
        assert unit.keys.live_by_hash("h2") is None


def test_idempotency(store: Store) -> None:
    answer = SavedResponse(200, "{}", "application/json")
    with store.write() as unit:
        assert unit.idempotency.insert_if_absent(principal="p", key="k", fingerprint="f", now=NOW)
        assert not unit.idempotency.insert_if_absent(
            principal="p", key="k", fingerprint="g", now=NOW
        )
        assert unit.idempotency.insert_if_absent(principal="p", key="j", fingerprint="f", now=NOW)
        assert unit.idempotency.locked(principal="p", key="k") == StoredIdempotencyKey(
            "f", NOW, None
        )
        later = NOW + timedelta(seconds=10)
        unit.idempotency.take_over(principal="p", key="k", now=later)
        assert unit.idempotency.renew([("p", "k"), ("p", "nope")], now=later) == 1
        assert unit.idempotency.renew([], now=later) == 0
        unit.idempotency.finish(principal="p", key="k", response=answer, now=later)
        assert unit.idempotency.renew([("p", "k")], now=later) == 0  # answered: not in flight
        unit.idempotency.forget(principal="p", key="j")
        unit.idempotency.forget(principal="p", key="k")  # answered: kept
    with store.read() as unit:
        assert unit.idempotency.locked(principal="p", key="k") == StoredIdempotencyKey(
            "f", later, answer
        )
        assert unit.idempotency.count() == 1
    with store.write() as unit:
        assert unit.idempotency.purge(older_than=NOW) == 0
        assert unit.idempotency.purge(older_than=later) == 1


# --- webhooks -------------------------------------------------------------------------------------


def test_webhooks(store: Store) -> None:
    secret = "whsec_" + "A" * 43 + "="
    with store.write() as unit:
        assert unit.webhooks.publish([NewEvent("quota.completed", NOW, {"n": 1})]) == []
        hooks = unit.webhooks.create_endpoint(
            url="https://a.example/h",
            description="a",
            events=["quota.completed", "quota.revised"],
            secret=secret,
            now=NOW,
        )
        other = unit.webhooks.create_endpoint(
            url="https://b.example/h",
            description="",
            events=["invoice.finalised"],
            secret=secret,
            now=NOW + timedelta(seconds=1),
        )
        assert unit.webhooks.count_endpoints() == 2
    write_then_fail(
        store, lambda unit: unit.webhooks.publish([NewEvent("quota.completed", NOW, {})])
    )
    with store.write() as unit:
        (ident,) = unit.webhooks.publish(
            [
                NewEvent("quota.completed", NOW, {"kwh": Decimal("1.50"), "date": DAY}),
                NewEvent("quota.aborted", NOW, {}),  # nobody subscribes
            ]
        )
        # The transaction writes the event and its fan-out, not the deliveries.
        assert unit.webhooks.deliveries() == []
    with store.write() as unit:
        (fanout,) = unit.jobs.history(FANOUT_KIND, ident)
        assert (fanout.payload, fanout.run_at, fanout.max_attempts) == (
            {"events": [ident], "endpoints": {"quota.completed": [hooks.id]}},
            NOW,
            DELIVERY_MAX_ATTEMPTS,
        )
        assert unit.webhooks.fan_out([ident], {"quota.completed": [hooks.id]}) == 1
        # Run again (a worker died after it), it writes nothing twice; a gone event, nothing.
        assert unit.webhooks.fan_out([ident], {"quota.completed": [hooks.id]}) == 0
        assert unit.webhooks.fan_out(["msg_gone"], {"quota.completed": [hooks.id]}) == 0
        assert unit.webhooks.fan_out([ident], {"quota.completed": ["ep_gone"]}) == 0
    with store.read() as unit:
        assert [e.id for e in unit.webhooks.endpoints()] == [hooks.id, other.id]
        assert unit.webhooks.endpoint(hooks.id) == hooks
        assert unit.webhooks.endpoint("ep_none") is None
        assert unit.webhooks.event(ident) == (
            "quota.completed",
            '{"data":{"date":"2026-07-01","kwh":"1.50"},"timestamp":"2026-07-02T09:00:00Z",'
            '"type":"quota.completed"}',
            NOW,
        )
        assert [e[:2] for e in unit.webhooks.events()] == [(ident, "quota.completed")]
        (delivery,) = unit.webhooks.deliveries()
        assert (delivery.event_id, delivery.endpoint_id, delivery.status) == (
            ident,
            hooks.id,
            DeliveryStatus.PENDING,
        )
        assert (delivery.attempts, delivery.started_at, delivery.next_attempt_at) == (0, NOW, NOW)
        assert unit.webhooks.deliveries(endpoint_id=other.id) == []
        (job,) = unit.jobs.history(DELIVERY_KIND, str(delivery.id))
        assert (job.payload, job.run_at, job.max_attempts) == (
            {"delivery_id": delivery.id},
            NOW,
            DELIVERY_MAX_ATTEMPTS,
        )
    later = NOW + timedelta(seconds=5)
    with store.write() as unit:
        work = unit.webhooks.work(delivery.id)
        assert work is not None
        assert (work.delivery, work.endpoint) == (delivery, hooks)
        unit.webhooks.record_attempt(
            work,
            at=later,
            outcome="failed",
            status_code=500,
            latency_ms=12,
            error="HTTP 500: x" * 200,
            status=DeliveryStatus.PENDING,
            next_attempt_at=later + timedelta(seconds=5),
        )
    with store.write() as unit:
        (failing,) = unit.webhooks.deliveries(status=DeliveryStatus.PENDING)
        assert (failing.attempts, failing.last_status_code) == (1, 500)
        assert failing.last_error is not None
        assert len(failing.last_error) == 1000
        assert unit.webhooks.endpoint(hooks.id).failing_since == later  # type: ignore[union-attr]
        work = unit.webhooks.work(delivery.id)
        assert work is not None
        unit.webhooks.record_attempt(
            work,
            at=later,
            outcome="succeeded",
            status_code=204,
            latency_ms=3,
            error=None,
            status=DeliveryStatus.SUCCEEDED,
            next_attempt_at=None,
        )
    with store.write() as unit:
        attempts = unit.webhooks.attempts([delivery.id, 999])
        assert [(a.outcome, a.status_code, a.latency_ms) for a in attempts[delivery.id]] == [
            ("failed", 500, 12),
            ("succeeded", 204, 3),
        ]
        assert attempts[999] == []
        assert unit.webhooks.count_by_status() == {"succeeded": 1}
        endpoint = unit.webhooks.endpoint(hooks.id)
        assert endpoint is not None
        assert (endpoint.failing_since, endpoint.final_failures) == (None, 0)
        replayed = unit.webhooks.replay(delivery.id, now=later)
        assert replayed is not None
        assert (replayed.status, replayed.attempts, replayed.replays) == (
            DeliveryStatus.PENDING,
            0,
            1,
        )
        assert unit.webhooks.replay(999, now=later) is None
        again = unit.webhooks.replay_event(ident, other.id, now=later)
        assert again is not None
        assert (again.endpoint_id, again.event_id) == (other.id, ident)
        work = unit.webhooks.work(again.id)
        assert work is not None
        unit.webhooks.fail(work, at=later, reason="endpoint disabled")
        unit.webhooks.disable(other.id, at=later, reason="failing")
        changed = unit.webhooks.update_endpoint(
            hooks.id, now=later, events=["quota.aborted"], description="b"
        )
        assert changed is not None
        assert (changed.events, changed.description, changed.updated_at) == (
            ("quota.aborted",),
            "b",
            later,
        )
    with store.write() as unit:
        gone = unit.webhooks.endpoint(other.id)
        assert gone is not None
        assert (gone.enabled, gone.disabled_reason, gone.disabled_at) == (False, "failing", later)
        assert unit.webhooks.count_by_status() == {"failed": 1, "pending": 1}
        enabled = unit.webhooks.update_endpoint(other.id, now=later, enabled=True)
        assert enabled is not None
        assert (enabled.enabled, enabled.disabled_reason) == (True, None)
        assert unit.webhooks.delete_endpoint(other.id)
        assert not unit.webhooks.delete_endpoint(other.id)
        assert unit.webhooks.count_by_status() == {"pending": 1}
        # Pruning keeps an event while a delivery of it is pending.
        assert unit.webhooks.prune(before=later, limit=10) == 0
        work = unit.webhooks.work(delivery.id)
        assert work is not None
        unit.webhooks.fail(work, at=later, reason="gave up")
        assert unit.webhooks.prune(before=NOW, limit=10) == 0  # not older than NOW
        assert unit.webhooks.prune(before=later, limit=10) == 1
        assert unit.webhooks.events() == []
        assert unit.webhooks.deliveries() == []
        assert unit.webhooks.attempts([delivery.id]) == {delivery.id: []}


# --- the unit of work and the driver -----------------------------------------------------------


def test_units_commit_roll_back_and_lock(store: Store) -> None:
    write_then_fail(store, lambda unit: unit.quotas.insert(new_quota(NMI, DAY), at=NOW))
    write_then_fail(
        store, lambda unit: unit.quotas.insert(new_quota(OTHER, DAY), at=NOW), "quota-day:x"
    )
    with store.write(lock="quota-day:x") as unit:
        unit.hold_shared(["quota-day:y"])
        unit.quotas.insert(new_quota(OTHER, DAY), at=NOW)
        store.driver.notify(unit.connection, NOTIFY_CHANNEL)
    with store.read() as unit:
        unit.ping()
        assert unit.quotas.latest(NMI, DAY) is None
        assert unit.quotas.latest(OTHER, DAY) == new_quota(OTHER, DAY)


def test_listening_wakes_on_a_committed_notification(store: Store) -> None:
    """PostgreSQL wakes a listener when a job is enqueued; SQLite has no notifications
    (``listens`` is False), so its listener only ever times out and its workers poll."""
    with store.listen(NOTIFY_CHANNEL) as notifications:
        assert notifications.wait(0.05) is False
        with store.write() as unit:
            unit.jobs.enqueue("settle", "a", {}, run_at=NOW, now=NOW)
        assert notifications.wait(5 if store.listens else 0.05) is store.listens


def test_every_list_of_the_repositories_is_the_units() -> None:
    """docs/architecture.md and the store's own map name every repository a ``Unit`` has."""
    repositories = sorted(
        name for name, value in vars(Unit).items() if isinstance(value, cached_property)
    )
    doc = (Path(__file__).parents[2] / "docs" / "architecture.md").read_text()
    listed = re.search(r"Repositories \(([^:]*):", doc)
    assert listed is not None
    assert sorted(re.findall(r"`(\w+)`", listed[1])) == repositories
    assert freehours.store.__doc__ is not None
    mapped = re.findall(r"\(``unit\.(\w+)``\)", freehours.store.__doc__)
    assert sorted(mapped) == repositories
