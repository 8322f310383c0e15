"""The demo's invoice run: its documents written as PDF and HTML, and checked against the
settlements' free energy and the bills."""

from __future__ import annotations

import time
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path

import httpx

from freehours.documents.html import render_html
from freehours.documents.pdf import render_pdf
from freehours.documents.wording import better_offer
from freehours.domain.invoicing import DocumentType, Period, Series
from freehours.invoicing.documents import document_of
from freehours.operations.runtime import Runtime

#: Each region's built-in plan.
from freehours.sim.demo.model import (
    DOCUMENTS_DIR,
    KWH_THOUSANDTH,
    POLL_SECONDS,
    SETTLE_DEADLINE,
    DemoDocument,
    DemoProgress,
    DemoResult,
    DemoRun,
    _a,
    _Sampler,
)
from freehours.store.invoices import InvoiceRun, StoredDocument


def _explain_as_of(result: DemoResult, period: Period, as_of: datetime, days: list[date]) -> None:
    unread = period.days - len(days)
    result.invoicing = (
        f"Invoice runs as of {as_of:%d %b %Y %H:%M} AEST, when the billing period"
        f" {period.start} to {period.end} closed (its last day past its data deadline), and a day"
        " later: the demo's days are in the past on the machine's clock, and a run as of now would"
        " also invoice every month since, which the demo has no meter data for. The period's"
        f" {unread} days without meter data (the demo reads {len(days)}) are billed as invoicing"
        " bills a day that got no data by its deadline: daily supply, no energy."
    )


def _invoice_run(
    runtime: Runtime,
    as_of: datetime,
    *,
    result: DemoResult,
    progress: DemoProgress,
    sample: _Sampler,
) -> InvoiceRun | None:
    """An invoice run as of ``as_of``, its jobs run by the worker pool; the run once finished."""
    number = len(result.runs) + 1
    progress.phase(
        f"invoice run {number}, as of {as_of:%d %b %Y %H:%M} AEST: its jobs run by the pool"
    )
    run_id = runtime.invoicing.start_run(as_of=as_of).run_id
    deadline = time.monotonic() + SETTLE_DEADLINE
    while time.monotonic() < deadline:
        sample.sample()
        with runtime.store.read() as unit:
            run = unit.invoices.get_run(run_id)
        assert run is not None, "a run's row is never deleted"
        counts = run.counts
        progress.update(
            run.batches_done,
            f"{run.batches_done} of {run.batches or '?'} batches: {counts.invoices} invoices,"
            f" {counts.credit_notes} credit notes, {counts.adjustment_invoices} adjustment"
            f" invoices, {counts.waiting} waiting, {counts.held} held",
        )
        if run.finished:
            result.runs.append(DemoRun(as_of, counts, run.notes))
            return run
        time.sleep(POLL_SECONDS)
    result.failures.append(f"invoice run {number} did not finish in {SETTLE_DEADLINE:.0f} s")
    return None


def _period_total(api: httpx.Client, nmi: str, period: Period) -> Decimal:
    """The total of ``nmi``'s bill for ``period``, over HTTP: what the period rates at now."""
    answer = api.get(
        f"/v1/customers/{nmi}/bill",
        params={"from": period.start.isoformat(), "to": period.end.isoformat()},
    )
    answer.raise_for_status()
    return Decimal(answer.json()["total"])


def _write_documents(
    runtime: Runtime, out: Path, result: DemoResult, progress: DemoProgress
) -> list[StoredDocument]:
    """Every finalised document as PDF and HTML in ``out``/documents; the documents."""
    with runtime.store.read() as unit:
        stored = unit.invoices.list_documents(limit=100_000)
    progress.phase(
        f"documents: {len(stored)} as PDF and HTML in {out / DOCUMENTS_DIR}", len(stored)
    )
    folder = out / DOCUMENTS_DIR
    folder.mkdir(exist_ok=True)
    for n, document in enumerate(stored, start=1):
        readable = document_of(document)
        pdf, page = (
            f"{DOCUMENTS_DIR}/{document.number}.pdf",
            f"{DOCUMENTS_DIR}/{document.number}.html",
        )
        (out / pdf).write_bytes(render_pdf(readable))
        (out / page).write_text(render_html(readable), encoding="utf-8")
        figures = document.figures
        result.documents.append(
            DemoDocument(
                document.number,
                document.document_type,
                document.nmi,
                Period(document.period_start, document.period_end),
                figures.total,
                figures.free_kwh,
                document.corrects,
                pdf,
                page,
                None if document.better_offer is None else document.better_offer["outcome"],
                better_offer(readable) if document.better_offer is not None else "",
            )
        )
        progress.update(n, document.number)
    return stored


def _check_invoices(
    runtime: Runtime,
    *,
    stored: list[StoredDocument],
    nmis: set[str],
    period: Period,
    target: tuple[str, date],
    credited: bool,
    before: Decimal | None,
    after: Decimal | None,
    result: DemoResult,
) -> None:
    """The invoices' invariants; each one broken is a sentence in ``result.failures``."""
    with runtime.store.read() as unit:
        credits = unit.quotas.every_credit()
        serials = {series: unit.invoices.serials(series) for series in Series}
    booked: dict[tuple[str, date], list[tuple[int, Decimal]]] = {}
    for credit in credits:
        booked.setdefault((credit.nmi, credit.date), []).append((credit.version, credit.kwh))
    by_period: dict[tuple[str, date], list[StoredDocument]] = {}
    for document in stored:
        by_period.setdefault((document.nmi, document.period_start), []).append(document)
    # One invoice per customer and period, and one for each customer's demo period.
    for nmi in sorted(nmis):
        if (nmi, period.start) not in by_period:
            result.failures.append(f"{nmi}: no invoice for {period.start} to {period.end}")
    for (nmi, start), documents in sorted(by_period.items()):
        documents.sort(key=lambda d: d.sequence)
        invoices = [d for d in documents if d.document_type is DocumentType.INVOICE]
        if len(invoices) != 1 or documents[0] is not invoices[0]:
            result.failures.append(f"{nmi} {start}: {len(invoices)} invoices, not one")
            continue
        # Each day's free energy, as the documents have billed it so far, is the ledger's.
        billed: dict[date, tuple[int | None, Decimal]] = {}
        for document in documents:
            for day in document.figures.days:
                version, kwh = billed.get(day.day, (None, Decimal(0)))
                newest = day.quota_version if day.quota_version is not None else version
                billed[day.day] = (newest, kwh + day.free_kwh)
            for local_date, (version, kwh) in sorted(billed.items()):
                entries = booked.get((nmi, local_date), [])
                ledger = sum(
                    (k for v, k in entries if version is not None and v <= version), Decimal(0)
                )
                if kwh.quantize(KWH_THOUSANDTH) != ledger.quantize(KWH_THOUSANDTH):
                    result.failures.append(
                        f"{document.number}: {local_date} billed {kwh} free kWh so far, the ledger"
                        f" books {ledger} (version {version})"
                    )
    # The revision's credit note: the difference, naming the invoice.
    corrections = [d for d in stored if d.document_type is not DocumentType.INVOICE]
    original = by_period.get((target[0], period.start), [None])[0]
    if len(corrections) != 1 or original is None:
        result.failures.append(
            f"the revision of {target[0]}:{target[1]} made {len(corrections)} corrections, not one"
        )
    else:
        (note,) = corrections
        wanted = DocumentType.CREDIT_NOTE if credited else DocumentType.ADJUSTMENT_INVOICE
        if note.document_type is not wanted or note.corrects != original.number:
            result.failures.append(
                f"{note.number}: {_a(note.document_type)} correcting {note.corrects}, where"
                f" {_a(wanted)} correcting {original.number} was due"
            )
        if before != original.figures.total:
            result.failures.append(
                f"{original.number}: total {original.figures.total}, its period's bill {before}"
            )
        if after is None or note.figures.total != after - original.figures.total:
            result.failures.append(
                f"{note.number}: total {note.figures.total}, not the difference"
                f" {after} - {original.figures.total} of the period's bills"
            )
    for series, numbers in serials.items():
        if numbers != list(range(1, len(numbers) + 1)):
            result.failures.append(f"{series.value} numbers are not 1 to {len(numbers)}: {numbers}")


def _check_better_offers(stored: list[StoredDocument], result: DemoResult) -> None:
    """The demo's offers make at least one invoice name a better offer (its NSW customers have
    a cheaper one) and one say the customer is on the best plan for them (the others)."""
    outcomes = {d.better_offer["outcome"] for d in stored if d.better_offer is not None}
    for wanted in ("better_offer", "best_offer"):
        if wanted not in outcomes:
            result.failures.append(f"no invoice's better offer check found {wanted}")
