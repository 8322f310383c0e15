"""A finalised invoice or credit note as JSON: the one writing of it, which the API serves
(``GET /v1/invoices``, ``/v1/invoices/{number}``, ``DocumentSummaryOut`` and ``DocumentOut``) and
``freehours invoices list|show --format json`` prints, so that the two agree key for key.

Decimals are strings in the bill's notation (docs/bill.md#numbers, ``freehours.domain.bill``):
energy exact without trailing zeros (``"43.19"``, ``"0"``), money to the cent (``"12.60"``),
prices as the plan writes them; dates ``YYYY-MM-DD``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from freehours.domain.bill import kwh_text, money_text
from freehours.domain.invoicing import Series

if TYPE_CHECKING:
    from freehours.store.invoices import StoredDocument

#: Where the API serves each series' documents: invoices and adjustment invoices, credit notes.
COLLECTION_PATHS = {Series.INVOICE: "/v1/invoices", Series.CREDIT_NOTE: "/v1/credit-notes"}


def links(document: StoredDocument) -> dict[str, str]:
    """The document's paths in the API: as JSON, PDF and HTML."""
    path = f"{COLLECTION_PATHS[document.series]}/{document.number}"
    return {"document": path, "pdf": f"{path}.pdf", "html": f"{path}.html"}


def summary(document: StoredDocument, corrected_by: list[str]) -> dict[str, Any]:
    """A document's summary (``DocumentSummaryOut``): an item of a list."""
    figures = document.figures
    return {
        "number": document.number,
        "type": document.document_type.value,
        "nmi": document.nmi,
        "period_start": document.period_start.isoformat(),
        "period_end": document.period_end.isoformat(),
        "issue_date": document.issue_date.isoformat(),
        "due_date": None if document.due_date is None else document.due_date.isoformat(),
        "subtotal": money_text(figures.subtotal),
        "gst": money_text(figures.gst),
        "total": money_text(figures.total),
        "free_kwh": kwh_text(figures.free_kwh),
        "free_value": money_text(figures.free_value),
        "corrects": document.corrects,
        "corrected_by": corrected_by,
        "links": links(document),
    }


def whole(document: StoredDocument, corrected_by: list[str]) -> dict[str, Any]:
    """A document, every field (``DocumentOut``)."""
    figures = document.figures
    return {
        **summary(document, corrected_by),
        "series": document.series.value,
        "serial": document.serial,
        "sequence": document.sequence,
        "run_id": document.run_id,
        "finalised_at": document.finalised_at.isoformat(),
        "plan_id": document.plan_id,
        "region": document.region.value,
        "time_zone": document.time_zone,
        "reason": document.reason,
        "consumption_kwh": kwh_text(figures.consumption_kwh),
        "over_cap_kwh": kwh_text(figures.over_cap_kwh),
        "export_kwh": kwh_text(figures.export_kwh),
        "lines": [line.as_json() for line in figures.lines],
        "days": [
            {
                "date": day.day.isoformat(),
                "quota_version": day.quota_version,
                "consumption_kwh": kwh_text(day.consumption_kwh),
                "free_kwh": kwh_text(day.free_kwh),
                "export_kwh": kwh_text(day.export_kwh),
            }
            for day in figures.days
        ],
        "plan": document.plan_document,
        "retailer": document.retailer,
        "better_offer": document.better_offer,
        "usage": document.usage,
    }
