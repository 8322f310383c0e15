"""Invoicing's records (an account, a billing period, a stored document, a run) and how each is
written to its row and read back (``freehours.store.invoices`` uses them)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any, NamedTuple

import sqlalchemy as sa

from freehours.domain.bill import BillLine
from freehours.domain.invoicing import (
    BillingCycle,
    DayFigures,
    DocumentType,
    Figures,
    Series,
)
from freehours.domain.settlement import QuotaStatus
from freehours.domain.time import Region
from freehours.domain.webhooks import EventType
from freehours.store.tables import (
    UtcDateTime,
)
from freehours.store.webhooks import NewEvent


@dataclass(frozen=True, slots=True)
class Account:
    """A customer as invoicing sees them: NMI, plan, region and billing cycle."""

    nmi: str
    plan_id: str
    region: Region
    cycle: BillingCycle


@dataclass(frozen=True, slots=True)
class BillingPeriodRow:
    """What a customer's billing period has had so far: its documents, and the quota version each
    local date was billed at (None: billed without a quota, after its data deadline)."""

    nmi: str
    start: date
    end: date
    documents: int
    versions: dict[date, int | None]
    data_stamp: str = ""
    checked_at: datetime | None = None
    #: What the invoice keeps of the period's usage (``PeriodUsage.text``), or None.
    usage: str | None = None


@dataclass(frozen=True, slots=True)
class StoredDocument:
    """A finalised document as stored."""

    number: str
    series: Series
    serial: int
    document_type: DocumentType
    nmi: str
    period_start: date
    period_end: date
    sequence: int
    corrects: str | None
    run_id: str | None
    issue_date: date
    due_date: date | None
    finalised_at: datetime
    plan_id: str
    region: Region
    time_zone: str
    figures: Figures
    reason: str | None
    plan_document: dict[str, Any]
    retailer: dict[str, Any]
    #: The customer's name and addresses as printed (``{"name", "supply_address",
    #: "billing_address"}``), or None where the customer had no contact when it was finalised.
    customer: dict[str, Any] | None = None
    #: An invoice's better offer check (``BetterOfferCheck.as_json``), or None.
    better_offer: dict[str, Any] | None = None
    #: An invoice's usage compared (``UsageSummary.as_json`` each), or None.
    usage: list[dict[str, Any]] | None = None


class QuotaVersion(NamedTuple):
    """A quota's version and status, without its figures."""

    version: int
    status: QuotaStatus


class SettledQuota(NamedTuple):
    """A quota's version, status and free energy (None until COMPLETED)."""

    version: int
    status: QuotaStatus
    free_kwh: Decimal | None


_QUOTA_STATUSES = {status.value: status for status in QuotaStatus}


@dataclass(frozen=True, slots=True)
class RunCounts:
    """What one batch of a run did."""

    accounts: int = 0
    invoices: int = 0
    credit_notes: int = 0
    adjustment_invoices: int = 0
    waiting: int = 0
    held: int = 0


@dataclass(frozen=True, slots=True)
class InvoiceRun:
    """An invoice run and what it has done so far."""

    run_id: str
    state: str
    requested_at: datetime
    as_of: datetime
    batches: int | None
    batches_done: int
    counts: RunCounts
    notes: tuple[str, ...]
    finished_at: datetime | None

    @property
    def finished(self) -> bool:
        return self.state == "COMPLETED"


#: How many notes (a period waiting or held, and why) a run keeps: the first ones, as examples;
#: the counts say how many there were.
MAX_RUN_NOTES = 100


class _Stamps(dict[datetime | None, tuple[datetime | None, str]]):
    """Stored stamps as ``UtcDateTime`` reads them, and their text (``str``, None for none),
    each distinct one worked out once."""

    def __init__(self, dialect: sa.Dialect) -> None:
        super().__init__()
        self._dialect = dialect
        self._type = UtcDateTime()

    def __missing__(self, raw: datetime | None) -> tuple[datetime | None, str]:
        stamp = self._type.process_result_value(raw, self._dialect)
        self[raw] = found = (stamp, str(stamp))
        return found


def _event(document: StoredDocument) -> NewEvent:
    """A finalised document's webhook event: ``credit_note.issued`` for a credit note,
    ``invoice.finalised`` for an invoice or adjustment invoice (docs/webhooks.md#events)."""
    kind = (
        EventType.CREDIT_NOTE_ISSUED
        if document.document_type is DocumentType.CREDIT_NOTE
        else EventType.INVOICE_FINALISED
    )
    figures = document.figures
    return NewEvent(
        kind.value,
        document.finalised_at,
        {
            "number": document.number,
            "document_type": document.document_type.value,
            "nmi": document.nmi,
            "period_start": document.period_start,
            "period_end": document.period_end,
            "issue_date": document.issue_date,
            "due_date": document.due_date,
            "corrects": document.corrects,
            "run_id": document.run_id,
            "subtotal": figures.subtotal,
            "gst": figures.gst,
            "total": figures.total,
            "free_kwh": figures.free_kwh,
            "free_value": figures.free_value,
            "finalised_at": document.finalised_at,
        },
    )


def _period(row: sa.Row[Any]) -> BillingPeriodRow:
    versions = {date.fromisoformat(day): v for day, v in json.loads(row.versions).items()}
    return BillingPeriodRow(
        row.nmi,
        row.period_start,
        row.period_end,
        row.documents,
        versions,
        row.data_stamp,
        row.checked_at,
        row.usage,
    )


def _versions_text(versions: dict[date, int | None]) -> str:
    return json.dumps(
        {day.isoformat(): v for day, v in sorted(versions.items())}, separators=(",", ":")
    )


def _run(row: sa.Row[Any]) -> InvoiceRun:
    return InvoiceRun(
        run_id=row.run_id,
        state=row.state,
        requested_at=row.requested_at,
        as_of=row.as_of,
        batches=row.batches,
        batches_done=row.batches_done,
        counts=RunCounts(
            accounts=row.accounts,
            invoices=row.invoices,
            credit_notes=row.credit_notes,
            adjustment_invoices=row.adjustment_invoices,
            waiting=row.waiting,
            held=row.held,
        ),
        notes=tuple(json.loads(row.notes)),
        finished_at=row.finished_at,
    )


def _lines_text(lines: Sequence[BillLine]) -> str:
    return json.dumps(
        [
            [
                line.code,
                line.description,
                str(line.quantity),
                line.unit,
                str(line.unit_price),
                str(line.amount),
            ]
            for line in lines
        ],
        separators=(",", ":"),
    )


def _lines(text: str) -> tuple[BillLine, ...]:
    return tuple(
        BillLine(code, description, Decimal(quantity), unit, Decimal(price), Decimal(amount))
        for code, description, quantity, unit, price, amount in json.loads(text)
    )


def _days_text(days: Sequence[DayFigures]) -> str:
    return json.dumps(
        [
            [
                day.day.isoformat(),
                day.quota_version,
                str(day.consumption_kwh),
                str(day.free_kwh),
                str(day.export_kwh),
                # A sixth field only for a day without meter data: the rows written before it
                # was kept have five, and read as metered.
                *(() if day.metered else (False,)),
            ]
            for day in days
        ],
        separators=(",", ":"),
    )


def _days(text: str) -> tuple[DayFigures, ...]:
    return tuple(
        DayFigures(
            date.fromisoformat(day), version, Decimal(c), Decimal(f), Decimal(e), not unmetered
        )
        for day, version, c, f, e, *unmetered in json.loads(text)
    )


class ToPost(NamedTuple):
    """A run's document as its print batch reads it: no more of its row than that needs."""

    number: str
    document_type: str
    nmi: str
    #: The customer's name and addresses as printed (``StoredDocument.customer``), or None.
    customer: dict[str, Any] | None


def _to_post(row: Any) -> ToPost:  # a row of number, document_type, nmi, customer
    customer = None if row.customer is None else json.loads(row.customer)
    return ToPost(row.number, row.document_type, row.nmi, customer)


def _document_row(document: StoredDocument, texts: dict[int, str]) -> dict[str, Any]:
    """``document`` as a row; ``texts``: the JSON of the objects written so far, by identity
    (kept only while they are)."""
    figures = document.figures
    return {
        "number": document.number,
        "series": document.series.value,
        "serial": document.serial,
        "document_type": document.document_type.value,
        "nmi": document.nmi,
        "period_start": document.period_start,
        "period_end": document.period_end,
        "sequence": document.sequence,
        "corrects": document.corrects,
        "run_id": document.run_id,
        "issue_date": document.issue_date,
        "due_date": document.due_date,
        "finalised_at": document.finalised_at,
        "plan_id": document.plan_id,
        "region": document.region.value,
        "time_zone": document.time_zone,
        "subtotal": figures.subtotal,
        "gst": figures.gst,
        "total": figures.total,
        "consumption_kwh": figures.consumption_kwh,
        "free_kwh": figures.free_kwh,
        "free_value": figures.free_value,
        "over_cap_kwh": figures.over_cap_kwh,
        "export_kwh": figures.export_kwh,
        "reason": document.reason,
        "lines": _lines_text(figures.lines),
        "days": _days_text(figures.days),
        "plan_document": _json_once(document.plan_document, texts),
        "retailer": _json_once(document.retailer, texts),
        "customer": None if document.customer is None else json.dumps(document.customer),
        "better_offer": (
            None if document.better_offer is None else json.dumps(document.better_offer)
        ),
        "usage": None if document.usage is None else json.dumps(document.usage),
    }


def _json_once(value: dict[str, Any], texts: dict[int, str]) -> str:
    text = texts.get(id(value))
    if text is None:
        text = texts[id(value)] = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return text


def _document(row: sa.Row[Any]) -> StoredDocument:
    return StoredDocument(
        number=row.number,
        series=Series(row.series),
        serial=row.serial,
        document_type=DocumentType(row.document_type),
        nmi=row.nmi,
        period_start=row.period_start,
        period_end=row.period_end,
        sequence=row.sequence,
        corrects=row.corrects,
        run_id=row.run_id,
        issue_date=row.issue_date,
        due_date=row.due_date,
        finalised_at=row.finalised_at,
        plan_id=row.plan_id,
        region=Region(row.region),
        time_zone=row.time_zone,
        figures=Figures(
            lines=_lines(row.lines),
            subtotal=row.subtotal,
            gst=row.gst,
            total=row.total,
            consumption_kwh=row.consumption_kwh,
            free_kwh=row.free_kwh,
            free_value=row.free_value,
            over_cap_kwh=row.over_cap_kwh,
            export_kwh=row.export_kwh,
            days=_days(row.days),
        ),
        reason=row.reason,
        plan_document=json.loads(row.plan_document),
        retailer=json.loads(row.retailer),
        customer=None if row.customer is None else json.loads(row.customer),
        better_offer=None if row.better_offer is None else json.loads(row.better_offer),
        usage=None if row.usage is None else json.loads(row.usage),
    )
