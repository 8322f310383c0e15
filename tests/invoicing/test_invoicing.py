"""Invoice runs on SQLite and PostgreSQL: one invoice per account and period, its free energy the
ledger's, numbers without gaps, documents that cannot be edited, and late data corrected by
difference."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import date
from decimal import Decimal

import pytest
import sqlalchemy as sa
from prometheus_client import REGISTRY

from freehours.documents.html import render_html
from freehours.documents.pdf import render_pdf
from freehours.domain.bill import Bill, make_bill
from freehours.domain.invoicing import DocumentType, Series
from freehours.domain.profiles import DayProfiles
from freehours.domain.rating import MeterRating
from freehours.domain.settlement import QuotaStatus
from freehours.domain.time import Region
from freehours.invoicing.documents import document_of
from freehours.invoicing.model import InvoicingFaultPoint
from freehours.plans.document import parse_plan
from freehours.store.database import Store
from freehours.store.invoices import StoredDocument
from freehours.store.tables import documents
from tests.invoicing.support import JULY, REVISION_STAMP, System, consumption, halved


@pytest.fixture
def system(store: Store) -> System:
    return System.on(store)


def invoices(system: System) -> list[StoredDocument]:
    return [d for d in system.documents() if d.document_type is DocumentType.INVOICE]


def test_a_run_invoices_each_ended_period_once_with_the_ledgers_free_energy(
    system: System,
) -> None:
    meters = system.customers(3)
    system.month(meters)
    system.run()
    found = invoices(system)
    assert [d.number for d in found] == ["INV-00000001", "INV-00000002", "INV-00000003"]
    assert {d.nmi for d in found} == set(meters)
    for document in found:
        assert (document.period_start, document.period_end) == (JULY[0], JULY[-1])
        assert document.issue_date == date(2026, 8, 5)
        assert document.due_date == date(2026, 8, 26)
        codes = [line.code for line in document.figures.lines]
        assert (
            codes
            == ["PEAK", "SHOULDER", "OFF_PEAK", "SUPPLY", "FEED_IN", "FREE_ENERGY"][: len(codes)]
            or "SUPPLY" in codes
        )
        with system.store.read() as unit:
            ledger = unit.quotas.ledger(document.nmi)
        booked: dict[date, Decimal] = {}
        for entry in ledger:
            booked[entry.date] = booked.get(entry.date, Decimal(0)) + entry.kwh
        for day in document.figures.days:
            assert day.free_kwh.quantize(Decimal("0.001")) == booked[day.day].quantize(
                Decimal("0.001")
            )
            assert day.quota_version == 1
        assert document.figures.free_kwh == sum(booked.values()) == Decimal(93)
        lines = sum((line.amount for line in document.figures.lines), Decimal(0))
        assert lines == document.figures.subtotal
        assert document.figures.subtotal + document.figures.gst == document.figures.total
    # A second run, and a third, find nothing more to invoice.
    system.run()
    system.run()
    assert len(invoices(system)) == 3
    with system.store.read() as unit:
        runs = unit.invoices.list_runs()
    assert [run.counts.invoices for run in runs] == [0, 0, 3]
    assert all(run.finished for run in runs)


def test_a_period_waits_until_its_days_are_settled(system: System) -> None:
    [meter] = system.customers(1)
    # Data for the month, but the settlement jobs have not run yet.
    system.ingestion.file(consumption(meter, day) for day in JULY)
    run = system.invoicing.run_once()
    assert run.counts.invoices == 0
    assert run.counts.waiting == 1
    assert "not settled" in run.notes[0]
    system.settle()
    assert system.invoicing.run_once().counts.invoices == 1


def test_a_day_whose_window_has_no_data_waits_for_no_quota(system: System) -> None:
    # NEM days are AEST: in Adelaide (half an hour behind) the NEM day of 31 July begins at
    # 23:30 on the 30th, so data for that day alone touches the 30th, but not its free window.
    # The 30th gets no quota (the settlement's rule, quota_dates), and the invoice must not
    # wait for one.
    [meter] = system.customers(1, plan="sso-sa", region=Region.SA)
    system.month([meter], days=[JULY[-1]])
    with system.store.read() as unit:
        assert unit.quotas.latest(meter, JULY[-2]) is None
        settled = unit.quotas.latest(meter, JULY[-1])
    assert settled is not None
    assert settled.status is QuotaStatus.COMPLETED
    run = system.invoicing.run_once()
    assert (run.counts.invoices, run.counts.waiting) == (1, 0), run.notes
    (invoice,) = invoices(system)
    with system.store.read() as unit:
        booked = sum((entry.kwh for entry in unit.quotas.ledger(meter)), Decimal(0))
    assert invoice.figures.free_kwh == booked > 0


def test_days_without_meter_data_are_kept_as_such_and_corrected_when_data_comes(
    system: System,
) -> None:
    # Data from 21 July only: the 20 days before are billed with no energy, and the invoice
    # keeps that they had no meter data, which its document marks (not as a zero reading).
    [meter] = system.customers(1)
    system.month([meter], days=JULY[20:])
    system.run()
    (invoice,) = invoices(system)
    kept = {day.day: day.metered for day in invoice.figures.days}
    assert kept == {day: day >= JULY[20] for day in JULY}
    document = document_of(invoice)
    assert [day.day for day in document.days if not day.metered] == JULY[:20]
    assert "No meter data" in render_html(document)
    # The first day's data comes late: the correction's day is metered, and so is the period's.
    system.revise(consumption(meter, JULY[0], stamp=REVISION_STAMP))
    _, correction = system.documents()
    assert [(day.day, day.metered) for day in correction.figures.days] == [(JULY[0], True)]


def test_an_aborted_quota_holds_the_period(system: System) -> None:
    [meter] = system.customers(1)
    system.month([meter])
    with system.store.write() as unit:
        quota = unit.quotas.latest(meter, JULY[9], for_update=True)
        assert quota is not None
        aborted = replace(quota, status=QuotaStatus.ABORTED, reason="test")
        unit.quotas.save([aborted], at=system.clock.now())
    run = system.invoicing.run_once()
    assert (run.counts.invoices, run.counts.held) == (0, 1)
    assert "2026-07-10: quota version 1 ABORTED" in run.notes[0]


def test_a_revision_is_credited_by_exactly_the_difference(system: System) -> None:
    [meter] = system.customers(1)
    system.month([meter])
    system.run()
    [invoice] = system.documents()
    # The MDP revises 10 July down by half: less consumption, less free energy, less GST.
    system.revise(halved(meter))
    docs = system.documents()
    assert len(docs) == 2
    note = docs[1]
    assert note.document_type is DocumentType.CREDIT_NOTE
    assert note.number == "CN-00000001"
    assert note.corrects == invoice.number
    assert note.figures.total < 0
    assert note.due_date is None
    # Exactly the difference from a fresh rating of the revised month.
    assert note.figures.free_kwh == Decimal("-1.5")
    [day] = note.figures.days
    assert (day.day, day.quota_version) == (JULY[9], 2)
    assert day.consumption_kwh == Decimal("-6.75")  # 13.5 kWh a day, halved
    assert invoice.figures.total + note.figures.total == _rated_total(system, meter)
    assert invoice.figures.gst + note.figures.gst == _rated_gst(system, meter)
    # Nothing more to correct.
    system.run()
    assert len(system.documents()) == 2


def test_a_revision_that_changes_nothing_makes_nothing(system: System) -> None:
    [meter] = system.customers(1)
    system.month([meter])
    system.run()
    # The same values, now substituted (quality S) rather than actual: stored as a revision,
    # looked at by the next run, and nothing to bill differently.
    same = replace(consumption(meter, JULY[3], stamp=REVISION_STAMP), qualities="S" * 48)
    assert system.ingestion.file([same]).counts.changed
    system.settle()
    system.run()
    assert len(system.documents()) == 1
    with system.store.read() as unit:
        [period] = unit.invoices.periods([meter]).values()
    assert period.documents == 1


def test_a_revision_outside_the_window_is_corrected_without_a_new_quota_version(
    system: System,
) -> None:
    [meter] = system.customers(1)
    system.month([meter])
    system.run()
    # Evening consumption of 12 July doubles; the window's free energy is as settled.
    values = list(consumption(meter, JULY[11]).values)
    values[40] = Decimal("0.500")
    revised = replace(consumption(meter, JULY[11], stamp=REVISION_STAMP), values=tuple(values))
    system.ingestion.file([revised])
    system.settle()
    with system.store.read() as unit:
        quota = unit.quotas.latest(meter, JULY[11])
    assert quota is not None
    assert quota.version == 1
    system.run()
    invoice, adjustment = system.documents()
    assert adjustment.document_type is DocumentType.ADJUSTMENT_INVOICE
    assert adjustment.figures.free_kwh == 0
    assert adjustment.figures.consumption_kwh == Decimal("0.25")
    assert adjustment.reason == "Revised meter data for 1 day (2026-07-12)"
    assert invoice.figures.total + adjustment.figures.total == _rated_total(system, meter)


def test_an_upward_revision_is_an_adjustment_invoice(system: System) -> None:
    [meter] = system.customers(1)
    system.month([meter])
    system.run()
    system.revise(consumption(meter, JULY[0], scale=Decimal(3), stamp=REVISION_STAMP))
    _, adjustment = system.documents()
    assert adjustment.document_type is DocumentType.ADJUSTMENT_INVOICE
    assert adjustment.number == "INV-00000002"  # a tax invoice: the invoices' series
    assert adjustment.figures.total > 0
    assert adjustment.due_date is not None


@dataclass
class FailOnce:
    fired: int = 0

    def check(self, point: InvoicingFaultPoint, batch: str) -> None:
        if point is InvoicingFaultPoint.NUMBERED and not self.fired:
            self.fired += 1
            raise RuntimeError("injected: the finalising transaction fails after numbering")


def test_numbers_taken_by_a_rolled_back_transaction_are_used_again(store: Store) -> None:
    faults = FailOnce()
    system = System.on(store, faults=faults, batch_size=2)
    meters = system.customers(5)
    system.month(meters)
    system.invoicing.start_run()
    system.settle()
    # Let the failed batch's retry come due.
    system.clock.advance(600)
    system.settle()
    assert faults.fired == 1
    with store.read() as unit:
        serials = unit.invoices.serials(Series.INVOICE)
        assert unit.invoices.next_serial(Series.INVOICE) == 6
    assert serials == [1, 2, 3, 4, 5]


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE documents SET total = '0.00'",
        "UPDATE documents SET lines = '[]'",
        "DELETE FROM documents",
    ],
)
def test_the_store_refuses_to_change_a_finalised_document(system: System, statement: str) -> None:
    [meter] = system.customers(1)
    system.month([meter])
    system.run()
    [before] = system.documents()
    with pytest.raises(sa.exc.DatabaseError, match="immutable"), system.store.write() as unit:
        unit.connection.exec_driver_sql(statement)
    [after] = system.documents()
    assert after == before


def test_no_customers_no_batches(system: System) -> None:
    run = system.invoicing.start_run()
    system.settle()
    with system.store.read() as unit:
        done = unit.invoices.get_run(run.run_id)
    assert done is not None
    assert (done.finished, done.batches) == (True, 0)


def _rated(system: System, meter: str) -> Bill:
    with system.store.read() as unit:
        stored = unit.catalog.get_plan("sso-nsw")
        assert stored is not None
        plan = parse_plan(stored.document, source="plan")
        days = unit.meter.days_for(meter, [d for day in JULY for d in plan.nem_dates(day)])
    rating = MeterRating(meter, DayProfiles(plan))
    for day in days:
        rating.add(day)
    return make_bill(plan, meter, rating.days(JULY).values())


def _rated_total(system: System, meter: str) -> Decimal:
    return _rated(system, meter).total


def _rated_gst(system: System, meter: str) -> Decimal:
    return _rated(system, meter).gst


def test_documents_table_is_keyed_against_a_second_invoice() -> None:
    keys = {
        tuple(c.name for c in u.columns)
        for u in documents.constraints
        if isinstance(u, sa.UniqueConstraint)
    }
    assert ("nmi", "period_start", "sequence") in keys


def test_every_stored_document_renders_from_what_it_kept(system: System) -> None:
    [meter] = system.customers(1)
    system.month([meter])
    system.run()
    system.revise(halved(meter))
    invoice, note = system.documents()
    for stored in (invoice, note):
        document = document_of(stored)
        assert document.total == stored.figures.total
        assert render_pdf(document).startswith(b"%PDF-")
        page = render_html(document)
        assert stored.number in page
        assert meter in page
    assert document_of(note).corrects == invoice.number


def test_documents_and_runs_are_counted(system: System) -> None:
    def finalised(kind: str) -> float:
        value = REGISTRY.get_sample_value("freehours_documents_finalised_total", {"type": kind})
        return value or 0.0

    def runs() -> float:
        return REGISTRY.get_sample_value("freehours_invoice_run_seconds_count") or 0.0

    before = finalised("invoice"), finalised("credit_note"), runs()
    [meter] = system.customers(1)
    system.month([meter])
    system.run()
    system.revise(halved(meter))
    after = finalised("invoice"), finalised("credit_note"), runs()
    assert [b - a for a, b in zip(before, after, strict=True)] == [1.0, 1.0, 2.0]
