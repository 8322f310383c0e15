"""Invoicing's rules: billing cycles on the customer's calendar, and corrections by difference.

**Cycles.** A customer is billed monthly or quarterly from an *anchor day* (1 to 28, so that every
month has it): a monthly period runs from the anchor day of one month to the day before the
anchor day of the next, a quarterly one over three months (anchored on January, April, July and
October). Periods are local dates on the customer's own calendar (the plan's clock). The amount
is due ``payment_term_days`` after the issue date.

**Corrections.** An invoice is never edited. When a day it billed is revised (a new quota
version), the period is rated again and what was billed so far (the invoice and every
correction after it, added up line by line) is taken from the new figures: the difference, line
by line, is the next document. A difference that is a credit (or nothing to pay, but energy that
moved) is a credit note; one that charges is an adjustment invoice. A revision that changes no
quantity and no amount makes no document (``difference`` answers None).
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal
from enum import StrEnum

from freehours.domain.bill import Bill, BillLine

ZERO = Decimal(0)

#: Anchor days stop at 28: every month has them, so a period never moves with the month's length.
MAX_ANCHOR_DAY = 28
#: The Retail Rules (rule 26) give a customer at least 13 business days to pay; 21 calendar days
#: is at least that in every month, public holidays included.
DEFAULT_PAYMENT_TERM_DAYS = 21
MIN_PAYMENT_TERM_DAYS = 13
MAX_PAYMENT_TERM_DAYS = 90


class Frequency(StrEnum):
    """How often a customer is billed."""

    MONTHLY = "monthly"
    QUARTERLY = "quarterly"

    @property
    def months(self) -> int:
        return 1 if self is Frequency.MONTHLY else 3


class CycleError(ValueError):
    """A billing cycle that cannot be: the message names the field."""


@dataclass(frozen=True, slots=True, order=True)
class Period:
    """A billing period: local dates ``start`` to ``end``, both inclusive."""

    start: date
    end: date

    @property
    def days(self) -> int:
        return (self.end - self.start).days + 1

    def dates(self) -> list[date]:
        return [self.start + timedelta(days=n) for n in range(self.days)]

    def __contains__(self, day: object) -> bool:
        return isinstance(day, date) and self.start <= day <= self.end


@dataclass(frozen=True, slots=True)
class BillingCycle:
    """A customer's billing cycle."""

    frequency: Frequency = Frequency.MONTHLY
    anchor_day: int = 1
    payment_term_days: int = DEFAULT_PAYMENT_TERM_DAYS

    def __post_init__(self) -> None:
        if not 1 <= self.anchor_day <= MAX_ANCHOR_DAY:
            raise CycleError(f"anchor_day: {self.anchor_day} is not 1 to {MAX_ANCHOR_DAY}")
        if not MIN_PAYMENT_TERM_DAYS <= self.payment_term_days <= MAX_PAYMENT_TERM_DAYS:
            raise CycleError(
                f"payment_term_days: {self.payment_term_days} is not {MIN_PAYMENT_TERM_DAYS} to"
                f" {MAX_PAYMENT_TERM_DAYS} (the Retail Rules give at least 13 business days)"
            )

    def period_of(self, day: date) -> Period:
        """The period that holds local date ``day``."""
        months = self.frequency.months
        # Months since year 0, of the period's first month: the anchor day's month, or the one
        # before when ``day`` is before the anchor; quarters start in Jan, Apr, Jul and Oct.
        index = day.year * 12 + day.month - 1 - (day.day < self.anchor_day)
        index -= index % months
        start = self._anchor(index)
        return Period(start, self._anchor(index + months) - timedelta(days=1))

    def periods(self, first_day: date, ended_before: date) -> list[Period]:
        """The periods from the one holding ``first_day`` whose last day is before
        ``ended_before``, in order."""
        found = []
        period = self.period_of(first_day)
        while period.end < ended_before:
            found.append(period)
            period = self.period_of(period.end + timedelta(days=1))
        return found

    def due_date(self, issued: date) -> date:
        return issued + timedelta(days=self.payment_term_days)

    def _anchor(self, month_index: int) -> date:
        return date(month_index // 12, month_index % 12 + 1, self.anchor_day)


class DocumentType(StrEnum):
    """What a stored document is (``freehours.documents.model.DocumentKind`` names the same)."""

    INVOICE = "invoice"
    CREDIT_NOTE = "credit_note"
    ADJUSTMENT_INVOICE = "adjustment_invoice"

    @property
    def series(self) -> Series:
        """Credit notes have their own numbers; an adjustment invoice is a tax invoice."""
        return Series.CREDIT_NOTE if self is DocumentType.CREDIT_NOTE else Series.INVOICE


class Series(StrEnum):
    """A gapless sequence of document numbers."""

    INVOICE = "invoice"
    CREDIT_NOTE = "credit_note"


@dataclass(frozen=True, slots=True)
class DayFigures:
    """One local day as a document bills it, and the quota version it billed (None: the day had
    no quota, its data deadline passed without data). On a correction, the change in each
    figure. ``metered``: whether the day had any meter value (a day without is billed as zero,
    which the household's document marks as no meter data, not as a reading of zero)."""

    day: date
    quota_version: int | None
    consumption_kwh: Decimal
    free_kwh: Decimal
    export_kwh: Decimal
    metered: bool = True


@dataclass(frozen=True, slots=True)
class Figures:
    """What a document charges: its lines (as the bill's), their subtotal, GST and total, the
    free energy and its value, and each day. On a correction, all of these are differences."""

    lines: tuple[BillLine, ...]
    subtotal: Decimal
    gst: Decimal
    total: Decimal
    consumption_kwh: Decimal
    free_kwh: Decimal
    free_value: Decimal
    over_cap_kwh: Decimal
    export_kwh: Decimal
    days: tuple[DayFigures, ...]

    def versions(self) -> dict[date, int | None]:
        return {day.day: day.quota_version for day in self.days}


def figures_of(
    bill: Bill, versions: dict[date, int | None], unread: Collection[date] = ()
) -> Figures:
    """A bill's figures, each day with the quota version it was rated against; the days in
    ``unread`` had no meter value."""
    return Figures(
        lines=bill.lines,
        subtotal=bill.subtotal,
        gst=bill.gst,
        total=bill.total,
        consumption_kwh=bill.consumption_kwh,
        free_kwh=bill.free_kwh,
        free_value=bill.free_energy_value,
        over_cap_kwh=bill.over_cap_kwh,
        export_kwh=bill.export_kwh,
        days=tuple(
            DayFigures(
                day.local_date,
                versions.get(day.local_date),
                day.consumption_kwh,
                day.free_kwh,
                day.export_kwh,
                day.local_date not in unread,
            )
            for day in bill.days
        ),
    )


def billed_so_far(documents: Iterable[Figures]) -> Figures:
    """The figures of a period's documents added up: what the customer has been billed for it.
    Each day keeps the newest quota version any document billed."""
    documents = list(documents)
    if not documents:
        raise ValueError("billed_so_far needs at least one document")
    lines: dict[str, BillLine] = {}
    days: dict[date, DayFigures] = {}
    for figures in documents:
        for line in figures.lines:
            known = lines.get(line.code)
            lines[line.code] = line if known is None else _add_line(known, line)
        for day in figures.days:
            seen = days.get(day.day)
            days[day.day] = day if seen is None else _add_day(seen, day)
    return Figures(
        lines=tuple(lines.values()),
        subtotal=sum((f.subtotal for f in documents), ZERO),
        gst=sum((f.gst for f in documents), ZERO),
        total=sum((f.total for f in documents), ZERO),
        consumption_kwh=sum((f.consumption_kwh for f in documents), ZERO),
        free_kwh=sum((f.free_kwh for f in documents), ZERO),
        free_value=sum((f.free_value for f in documents), ZERO),
        over_cap_kwh=sum((f.over_cap_kwh for f in documents), ZERO),
        export_kwh=sum((f.export_kwh for f in documents), ZERO),
        days=tuple(sorted(days.values(), key=lambda d: d.day)),
    )


def difference(billed: Figures, rated: Figures) -> Figures | None:
    """What ``rated`` (the period rated again) adds to ``billed`` (what its documents charged),
    line by line and day by day; None when no quantity, amount or day changed. Lines and days
    that did not change are left out; each changed day carries its new quota version."""
    old_lines = {line.code: line for line in billed.lines}
    new_lines = {line.code: line for line in rated.lines}
    lines = []
    for code in [*new_lines, *(code for code in old_lines if code not in new_lines)]:
        new, old = new_lines.get(code), old_lines.get(code)
        line = _line_difference(new, old)
        if line.quantity or line.amount:
            lines.append(line)
    old_days = {day.day: day for day in billed.days}
    days = []
    for day in rated.days:
        before = old_days.get(day.day)
        change = day if before is None else _day_difference(day, before)
        if change.consumption_kwh or change.free_kwh or change.export_kwh:
            days.append(change)
    if not lines and not days:
        return None
    return Figures(
        lines=tuple(lines),
        subtotal=rated.subtotal - billed.subtotal,
        gst=rated.gst - billed.gst,
        total=rated.total - billed.total,
        consumption_kwh=rated.consumption_kwh - billed.consumption_kwh,
        free_kwh=rated.free_kwh - billed.free_kwh,
        free_value=rated.free_value - billed.free_value,
        over_cap_kwh=rated.over_cap_kwh - billed.over_cap_kwh,
        export_kwh=rated.export_kwh - billed.export_kwh,
        days=tuple(days),
    )


def correction_type(change: Figures) -> DocumentType:
    """A charge is an adjustment invoice; a credit, or energy moved at no cost, a credit note."""
    return DocumentType.ADJUSTMENT_INVOICE if change.total > 0 else DocumentType.CREDIT_NOTE


def revised_days(billed: dict[date, int | None], latest: dict[date, int | None]) -> list[date]:
    """The days whose newest quota version is not the one billed."""
    return sorted(day for day, version in latest.items() if billed.get(day) != version)


def _line_difference(new: BillLine | None, old: BillLine | None) -> BillLine:
    if old is None:
        assert new is not None
        return new
    if new is None:
        return BillLine(
            old.code, old.description, -old.quantity, old.unit, old.unit_price, -old.amount
        )
    return BillLine(
        new.code,
        new.description,
        new.quantity - old.quantity,
        new.unit,
        new.unit_price,
        new.amount - old.amount,
    )


def _add_line(a: BillLine, b: BillLine) -> BillLine:
    return BillLine(
        a.code, a.description, a.quantity + b.quantity, a.unit, a.unit_price, a.amount + b.amount
    )


def _add_day(a: DayFigures, b: DayFigures) -> DayFigures:
    versions = [v for v in (a.quota_version, b.quota_version) if v is not None]
    return DayFigures(
        a.day,
        max(versions) if versions else None,
        a.consumption_kwh + b.consumption_kwh,
        a.free_kwh + b.free_kwh,
        a.export_kwh + b.export_kwh,
        b.metered,  # as the later document found it
    )


def _day_difference(new: DayFigures, old: DayFigures) -> DayFigures:
    return DayFigures(
        new.day,
        new.quota_version,
        new.consumption_kwh - old.consumption_kwh,
        new.free_kwh - old.free_kwh,
        new.export_kwh - old.export_kwh,
        new.metered,
    )


def data_stamp(rows: Iterable[str]) -> str:
    """A digest of meter day rows, each given as its stored text: equal exactly when the rows
    are, whatever order they come in."""
    digest = hashlib.sha256()
    for row in sorted(rows):
        digest.update(row.encode())
        digest.update(b"\n")
    return digest.hexdigest()
