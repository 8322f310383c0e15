"""An invoice run's parts: its job kinds, the policy, the fault points, a draft and what a batch
made of its accounts (``freehours.invoicing.service`` performs the run)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, timedelta
from decimal import Decimal
from enum import StrEnum
from typing import TypeAlias

from freehours import defaults
from freehours.documents.examples import (
    EXAMPLE_RETAILER,
)
from freehours.documents.model import (
    Retailer,
)
from freehours.domain.better_offer import BetterOfferCheck, UsageSummary
from freehours.domain.invoicing import (
    DocumentType,
    Figures,
    Period,
    Series,
)
from freehours.domain.plan import Plan
from freehours.domain.profiles import DayProfiles
from freehours.domain.rating import DayRating
from freehours.domain.reads import IntervalDay
from freehours.faults import Faults
from freehours.store.catalog import StoredPlan
from freehours.store.invoices import (
    Account,
    BillingPeriodRow,
    InvoiceRun,
    RunCounts,
    SettledQuota,
    StoredDocument,
)

PLAN_KIND = "invoice-run"


BATCH_KIND = "invoice-batch"


KILOWATT_HOUR_THOUSANDTH = Decimal("0.001")


@dataclass(frozen=True, slots=True)
class InvoicingPolicy:
    """How invoices are numbered and runs are cut. The prefixes are settings
    (``FREEHOURS_INVOICE_PREFIX``, ``FREEHOURS_CREDIT_NOTE_PREFIX``)."""

    #: After a window's end, how long its day may still get data before it settles with what
    #: there is (the settlement's data deadline): a day without a quota is billed after it.
    data_deadline: timedelta = defaults.DATA_DEADLINE
    invoice_prefix: str = "INV-"
    credit_note_prefix: str = "CN-"
    #: Digits of the serial number, zero-padded ("INV-00000042"); more when it outgrows them.
    digits: int = 8
    #: Accounts per batch job: one write transaction finalises a batch, so the run's throughput
    #: grows with it; 500 keeps that transaction under a second on this machine.
    batch_size: int = 500
    #: How far back a revision is looked for on invoiced periods. The Retail Rules (rule 30)
    #: limit backbilling to 9 months; a revision older than that is not billed again.
    correction_window: timedelta = timedelta(days=275)
    #: The retailer's details, printed on every document and kept with it.
    retailer: Retailer = field(default=EXAMPLE_RETAILER)
    #: The better offer check: what an offer must save a year, more than this, to be a better
    #: one (``FREEHOURS_BETTER_OFFER_THRESHOLD``).
    better_offer_threshold: Decimal = Decimal("0.00")
    #: Whether each invoice carries a better offer check and usage compared
    #: (``FREEHOURS_BETTER_OFFER_CHECK``).
    better_offer_check: bool = True

    def number(self, series: Series, serial: int) -> str:
        prefix = self.invoice_prefix if series is Series.INVOICE else self.credit_note_prefix
        return f"{prefix}{serial:0{self.digits}d}"


class InvoicingFaultPoint(StrEnum):
    """Where a test makes a batch fail or hang."""

    NUMBERED = "numbered"  # in the finalising transaction: numbers taken, documents not stored
    COMMITTED = "committed"  # just after its commit, before the job is marked done


#: Invoicing's fault-injection seam (``freehours.faults``): a point, and the batch job's key.
InvoicingFaults: TypeAlias = Faults[InvoicingFaultPoint, str]


@dataclass(frozen=True, slots=True)
class Draft:
    """A document worked out for one period, not numbered yet."""

    account: Account
    period: Period
    document_type: DocumentType
    figures: Figures
    #: The period's documents when drafted (the sequence this one takes).
    sequence: int
    corrects: str | None
    reason: str | None
    plan: StoredPlan
    #: The quota versions the draft was rated against, by day, as they must still be.
    versions: dict[date, int | None]
    #: The digest of the meter data it rated.
    stamp: str
    #: An invoice's better offer check and usage compared (none on a correction).
    better_offer: BetterOfferCheck | None = None
    usage: tuple[UsageSummary, ...] = ()
    #: What an invoice's period keeps of its usage (``PeriodUsage.text``).
    kept_usage: str | None = None
    #: An invoice's days as its bill rated them, and those without a meter value: what its
    #: better offer check takes of the customer's plan rather than rating the period again.
    rated_days: tuple[DayRating, ...] = ()
    unread: frozenset[date] = frozenset()


@dataclass(frozen=True, slots=True)
class _Candidate:
    """A period a batch looks at, and what it needs to draft its document."""

    account: Account
    stored: StoredPlan
    plan: Plan
    profiles: DayProfiles
    period: Period
    row: BillingPeriodRow | None
    days: list[tuple[IntervalDay, str]]
    quotas: dict[date, SettledQuota]


@dataclass(frozen=True, slots=True)
class Checked:
    """A revised period whose new rating changes nothing: its versions are noted, no document."""

    nmi: str
    period: Period
    documents: int
    versions: dict[date, int | None]
    stamp: str


@dataclass
class BatchResult:
    drafts: list[Draft] = field(default_factory=list)
    checked: list[Checked] = field(default_factory=list)
    waiting: int = 0
    held: int = 0
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class BatchOutcome:
    """What finalising a batch did; ``replayed`` when the batch had been done before."""

    documents: tuple[StoredDocument, ...]
    counts: RunCounts
    run: InvoiceRun | None
    replayed: bool = False


def batch_key(run_id: str, batch: int) -> str:
    """The key of a run's batch job: ``"{run id}:{batch}"``."""
    return f"{run_id}:{batch}"


class _Replayed(Exception):
    """A batch found done in its run: roll back what this attempt wrote."""
