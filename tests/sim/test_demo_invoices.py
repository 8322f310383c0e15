"""The demo's invoice invariants on SQLite and PostgreSQL: they hold for a run and the credit
note of a revision, and each one broken is named."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal
from pathlib import Path

import pytest

from freehours.domain.invoicing import DocumentType, Period
from freehours.operations.runtime import Runtime
from freehours.settings import Settings
from freehours.sim.demo import DemoConfig, DemoResult
from freehours.sim.demo.invoices import _check_invoices
from freehours.store.database import Store
from freehours.store.invoices import StoredDocument
from tests.invoicing.support import JULY, System, halved

JULY_PERIOD = Period(JULY[0], JULY[-1])


def checked(
    store: Store,
    system: System,
    *,
    nmis: set[str],
    credited: bool = True,
    after: Decimal | None = None,
    documents: list[StoredDocument] | None = None,
) -> list[str]:
    """The failures ``_check_invoices`` finds for ``documents`` (default: the store's)."""
    documents = documents or system.documents()
    invoice = next(d for d in documents if d.document_type is DocumentType.INVOICE)
    correction = next((d for d in documents if d.document_type is not DocumentType.INVOICE), None)
    fair = invoice.figures.total + (correction.figures.total if correction else Decimal(0))
    result = DemoResult(DemoConfig(out=Path("unused"), customers=2, days=31, seed=1), JULY[0])
    runtime = Runtime.on(store, Settings(), system.clock)
    _check_invoices(
        runtime,
        stored=documents,
        nmis=nmis,
        period=JULY_PERIOD,
        target=(invoice.nmi, JULY[9]),
        credited=credited,
        before=invoice.figures.total,
        after=fair if after is None else after,
        result=result,
    )
    return result.failures


@pytest.fixture
def revised(store: Store, clean_env: pytest.MonkeyPatch) -> System:
    """Two customers invoiced for July; the first's 10 July halved after, and credited."""
    system = System.on(store)
    meters = system.customers(2)
    system.month(meters)
    system.run()
    system.revise(halved(meters[0]))
    return system


def test_the_invariants_hold_for_the_invoices_and_the_credit_note(
    store: Store, revised: System
) -> None:
    kinds = [d.document_type for d in revised.documents()]
    assert sorted(kinds) == sorted([DocumentType.INVOICE] * 2 + [DocumentType.CREDIT_NOTE])
    nmis = {d.nmi for d in revised.documents()}
    assert checked(store, revised, nmis=nmis) == []


def test_each_broken_invariant_is_named(store: Store, revised: System) -> None:
    documents: list[StoredDocument] = revised.documents()
    nmis = {d.nmi for d in documents}
    invoice = next(d for d in documents if d.document_type is DocumentType.INVOICE)
    note = next(d for d in documents if d.document_type is DocumentType.CREDIT_NOTE)
    wrong = invoice.figures.total + note.figures.total + Decimal("0.01")
    assert checked(store, revised, nmis=nmis, after=wrong) == [
        f"CN-00000001: total {note.figures.total}, not the difference {wrong} -"
        f" {invoice.figures.total} of the period's bills"
    ]
    assert checked(store, revised, nmis=nmis, credited=False) == [
        f"CN-00000001: a credit note correcting {note.corrects}, where an adjustment invoice"
        f" correcting {invoice.number} was due"
    ]
    assert checked(store, revised, nmis={*nmis, "4103099999"}) == [
        "4103099999: no invoice for 2026-07-01 to 2026-07-31"
    ]


def test_free_energy_off_the_ledgers_by_a_watt_hour_is_named(store: Store, revised: System) -> None:
    documents = revised.documents()
    first = documents[0]
    days = list(first.figures.days)
    days[4] = replace(days[4], free_kwh=days[4].free_kwh + Decimal("0.001"))
    documents[0] = replace(first, figures=replace(first.figures, days=tuple(days)))
    failures = checked(store, revised, nmis={d.nmi for d in documents}, documents=documents)
    assert failures[0] == (
        f"{first.number}: 2026-07-05 billed 3.001 free kWh so far, the ledger books 3.000"
        " (version 1)"
    )
