"""Invoicing: from settled quotas to numbered, finalised invoices, exactly once, and the credit
notes and adjustment invoices that late meter data makes.

An **invoice run** (``Invoicing.start_run``) is a row and a durable job. The job (``plan``) pages
the customers by NMI into batches and enqueues a job per batch; each batch job
(``invoice_batch``) invoices its accounts in two steps:

1. **Draft**, in a read transaction: for every account, every billing period of its cycle that
   ended before the run's ``as_of`` (on the customer's own calendar) and has no invoice, and
   every invoiced period with a day whose quota has a newer version. A period is *ready* when
   each of its days has its newest quota COMPLETED, or no quota and no consumption data past its
   data deadline; a day still settling makes the period *wait* (the next run takes it), an
   ABORTED quota *holds* it (an operator reopens the quota; the invoice never disagrees with the
   ledger). A ready period is rated from the meter data as ``freehours bill`` rates it, and each
   day's free energy is checked against its settled quota to the 0.001 kWh (a day that differs
   waits for its revision to settle). A revised period is rated again with the plan it was
   invoiced under, and the difference from what its documents billed is its next document
   (``freehours.domain.invoicing.difference``).
2. **Finalise**, in one write transaction: the batch marked done in its run (a batch done
   before changes nothing: its worker died after the commit), the billing periods locked in
   key order, each period's documents and quota versions read again (a period that changed
   since its draft is left to the next run), the periods and the run's counts written, and
   last the numbers taken from their series' counters and the documents inserted (every batch
   waits for a counter's lock, so it is held as briefly as can be). The key (NMI, period,
   sequence) refuses a second invoice whatever runs at once; the counters' row locks make
   numbers gapless.

The meter data is read before the quotas in step 1: a revision commits its data and its quota's
next version together, so a draft never sees revised data without the version that will settle
it.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Hashable, Sequence
from dataclasses import asdict, replace
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import structlog
from opentelemetry import trace

from freehours.clock import Clock
from freehours.documents.model import (
    DocumentError,
)
from freehours.domain.better_offer import BetterOfferCheck
from freehours.domain.bill import Bill, make_bill
from freehours.domain.invoicing import (
    DocumentType,
    Figures,
    Period,
    Series,
    billed_so_far,
    correction_type,
    data_stamp,
    difference,
    figures_of,
    revised_days,
)
from freehours.domain.plan import Plan
from freehours.domain.profiles import DayProfiles
from freehours.domain.rating import MeterRating
from freehours.domain.reads import IntervalDay
from freehours.domain.settlement import QuotaStatus, data_deadline_of, has_quota
from freehours.faults import NoFaults
from freehours.invoicing.better_offer import BetterOffers
from freehours.invoicing.documents import (
    _document,
    _retailer_json,
    printed_customer,
)
from freehours.invoicing.model import (
    BATCH_KIND,
    KILOWATT_HOUR_THOUSANDTH,
    PLAN_KIND,
    BatchOutcome,
    BatchResult,
    Checked,
    Draft,
    InvoicingFaultPoint,
    InvoicingFaults,
    InvoicingPolicy,
    _Candidate,
    _Replayed,
    batch_key,
)
from freehours.observability.metrics import DOCUMENTS_FINALISED, INVOICE_RUN_SECONDS
from freehours.observability.tracing import child_span
from freehours.plans.cache import PlanCache
from freehours.store.catalog import StoredPlan
from freehours.store.database import Store, Unit
from freehours.store.invoices import (
    Account,
    BillingPeriodRow,
    InvoiceRun,
    RunCounts,
    SettledQuota,
    StoredDocument,
)

log = structlog.get_logger("freehours.invoicing")


tracer = trace.get_tracer("freehours.invoicing")


class Invoicing:
    """The invoicing service over one store."""

    def __init__(
        self,
        store: Store,
        clock: Clock,
        policy: InvoicingPolicy | None = None,
        faults: InvoicingFaults | None = None,
        plans: PlanCache | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.policy = policy or InvoicingPolicy()
        self.faults: InvoicingFaults = faults or NoFaults()
        #: Stored plans parsed once per version (shared with the settlement by ``Runtime``).
        self.plans = plans or PlanCache()
        #: The better offer check, what it keeps from batch to batch.
        self.offers = BetterOffers(self.plans)

    # --- runs --------------------------------------------------------------------------------

    def start_run(self, *, as_of: datetime | None = None, run_id: str | None = None) -> InvoiceRun:
        """A new run over every account, as of ``as_of`` (default: now), and its plan job."""
        now = self.clock.now()
        run_id = run_id or uuid.uuid4().hex
        with self.store.write() as unit:
            run = self.start_run_in(unit, as_of=as_of or now, run_id=run_id)
        log.info("invoice_run_started", run_id=run.run_id, as_of=run.as_of.isoformat())
        return run

    def start_run_in(self, unit: Unit, *, as_of: datetime, run_id: str) -> InvoiceRun:
        """``start_run`` in the caller's transaction (the API's, with its Idempotency-Key)."""
        now = self.clock.now()
        run = unit.invoices.create_run(run_id, requested_at=now, as_of=as_of)
        unit.jobs.enqueue(
            PLAN_KIND,
            run_id,
            {"run_id": run_id},
            run_at=now,
            deadline=now + timedelta(days=1),
            now=now,
        )
        return run

    def plan(self, run_id: str) -> int | None:
        """The plan job: a batch job per ``batch_size`` accounts; how many, or None when the run
        was planned before."""
        now = self.clock.now()
        with self.store.write() as unit:
            run = unit.invoices.get_run(run_id, for_update=True)
            if run is None:
                raise LookupError(f"invoice run {run_id} is not stored")
            if run.batches is not None:
                return None
            batches = 0
            after = None
            while page := unit.invoices.account_page(after, self.policy.batch_size):
                unit.jobs.enqueue(
                    BATCH_KIND,
                    batch_key(run_id, batches),
                    {"run_id": run_id, "batch": batches, "nmis": page},
                    run_at=now,
                    deadline=now + timedelta(days=1),
                    now=now,
                )
                batches += 1
                after = page[-1]
            unit.invoices.planned(run_id, batches, now=now)
        log.info("invoice_run_planned", run_id=run_id, batches=batches)
        if batches == 0:
            INVOICE_RUN_SECONDS.observe((now - run.requested_at).total_seconds())
        return batches

    def invoice_batch(self, run_id: str, batch: int, nmis: Sequence[str]) -> BatchOutcome:
        """Draft and finalise the documents of one batch of accounts (see the module docstring)."""
        with child_span(tracer, "invoicing.batch"):
            with self.store.read() as unit:
                run = unit.invoices.get_run(run_id)
                if run is None:
                    raise LookupError(f"invoice run {run_id} is not stored")
                drafted = self._draft(unit, run, nmis)
            return self._finalise(run, batch, len(nmis), drafted)

    def run_once(self, *, as_of: datetime | None = None) -> InvoiceRun:
        """A whole run in this thread, without workers: for tests, the demo and a CLI run that
        is asked to run here. The same jobs' work, in the same transactions."""
        run = self.start_run(as_of=as_of)
        self.plan(run.run_id)
        after = None
        batch = 0
        while True:
            with self.store.read() as unit:
                page = unit.invoices.account_page(after, self.policy.batch_size)
            if not page:
                break
            self.invoice_batch(run.run_id, batch, page)
            batch += 1
            after = page[-1]
        with self.store.read() as unit:
            done = unit.invoices.get_run(run.run_id)
        assert done is not None
        return done

    # --- drafting ----------------------------------------------------------------------------

    def _draft(self, unit: Unit, run: InvoiceRun, nmis: Sequence[str]) -> BatchResult:
        result = BatchResult()
        accounts = unit.invoices.accounts(nmis)
        if not accounts:
            return result
        known = [a.nmi for a in accounts]
        first_days = unit.invoices.first_days(known)
        periods = unit.invoices.periods(known)
        now = self.clock.now()
        wanted: list[_Wanted] = []
        plans: dict[str, StoredPlan] = {}
        for account in accounts:
            stored = plans.get(account.plan_id)
            if stored is None:
                stored = unit.catalog.get_plan(account.plan_id)
                assert stored is not None, "a customer's plan is kept by its foreign key"
                plans[account.plan_id] = stored
            parsed = self._plan(stored)
            if parsed is None:
                result.held += 1
                result.notes.append(f"{account.nmi}: its plan {stored.plan_id!r} does not parse")
                continue
            plan, profiles = parsed
            first = first_days.get(account.nmi)
            if first is None:
                continue  # no data, no quota: nothing to bill yet
            today = run.as_of.astimezone(plan.zone).date()
            oldest = today - self.policy.correction_window
            for period in account.cycle.periods(first, today):
                row = periods.get((account.nmi, period.start))
                if row is not None and row.documents and period.end < oldest:
                    continue
                wanted.append((account, stored, plan, profiles, period, row))
        wanted = self._revisable(unit, wanted)
        if not wanted:
            return result
        first = min(item[4].start for item in wanted)
        last = max(item[4].end for item in wanted)
        nmis_wanted = sorted({item[0].nmi for item in wanted})
        # Meter data first, then quotas: see the module docstring.
        meter = unit.invoices.meter_days(
            nmis_wanted, first - timedelta(days=1), last + timedelta(days=1)
        )
        quotas = unit.invoices.latest_quotas(nmis_wanted, first, last)
        for account, stored, plan, profiles, period, row in wanted:
            candidate = _Candidate(
                account,
                stored,
                plan,
                profiles,
                period,
                row,
                meter.get(account.nmi, []),
                quotas.get(account.nmi, {}),
            )
            if row is None or row.documents == 0:
                self._draft_invoice(result, candidate, now)
            else:
                self._draft_correction(result, unit, candidate, now)
        if self.policy.better_offer_check:
            # Each invoice's better offer check, usage compared and what its period keeps.
            result.drafts = self.offers.check_drafts(
                unit,
                run.as_of,
                result.drafts,
                threshold=self.policy.better_offer_threshold,
                first_days=first_days,
                meter=meter,
                parsed=self._parsed,
            )
        showable = []
        for draft in result.drafts:
            why = self._unshowable(run, draft, now)
            if why is None:
                showable.append(draft)
            else:
                # Held, as a plan that does not parse is: until the plan is put again.
                result.held += 1
                result.notes.append(
                    f"{draft.account.nmi} {draft.period.start}..{draft.period.end}: its document "
                    f"could not be shown ({why}); held"
                )
                # The reason names the field, not its value: a name or address is personal.
                log.warning("document_not_showable", plan_id=draft.plan.plan_id)
        result.drafts = showable
        return result

    def _parsed(self, stored: StoredPlan) -> tuple[Plan, DayProfiles]:
        parsed = self._plan(stored)
        assert parsed is not None, "a draft's plan parsed when it was drafted"
        return parsed

    def better_offer(self, nmi: str, as_of: date | None = None) -> BetterOfferCheck | None:
        """The better offer check an invoice issued on ``as_of`` (default: today on the
        customer's clock) would make: for the last billing period that ended before it, against
        the offers that apply that day (``GET /v1/customers/{nmi}/better-offer``). None when
        there is no such customer or their plan does not parse."""
        with self.store.read() as unit:
            accounts = unit.invoices.accounts([nmi])
            if not accounts:
                return None
            stored = unit.catalog.get_plan(accounts[0].plan_id)
            assert stored is not None, "a customer's plan is kept by its foreign key"
            parsed = self._plan(stored)
            if parsed is None:
                return None
            day = as_of or self.clock.now().astimezone(parsed[0].zone).date()
            return self.offers.on_demand(
                unit,
                accounts[0],
                stored,
                parsed,
                day=day,
                threshold=self.policy.better_offer_threshold,
            )

    def _revisable(self, unit: Unit, wanted: list[_Wanted]) -> list[_Wanted]:
        """``wanted`` without the invoiced periods that no day row received since they were
        last looked at (less ``RECEIPT_MARGIN``) can have revised."""
        invoiced = [item for item in wanted if item[5] is not None and item[5].documents]
        if not invoiced:
            return wanted
        since = min(item[5].checked_at or EPOCH for item in invoiced if item[5]) - RECEIPT_MARGIN
        received = unit.invoices.received_since(
            sorted({item[0].nmi for item in invoiced}),
            min(item[4].start for item in invoiced) - timedelta(days=1),
            max(item[4].end for item in invoiced) + timedelta(days=1),
            since,
        )
        kept = []
        for item in wanted:
            account, _, plan, _, period, row = item
            if row is not None and row.documents:
                touched = received.get(account.nmi, set())
                if not touched or not touched & _nem_dates(plan, period):
                    continue
            kept.append(item)
        return kept

    def _ready(
        self,
        plan: Plan,
        period: Period,
        days: list[IntervalDay],
        quotas: dict[date, SettledQuota],
        now: datetime,
    ) -> tuple[dict[date, int | None], str | None, bool]:
        """The quota version of each day of ``period``, or why it cannot be billed yet and
        whether that is a hold (an ABORTED quota) rather than a wait."""
        versions: dict[date, int | None] = {}
        deadline = self.policy.data_deadline
        if plan.free_window is None:
            if now < data_deadline_of(plan, period.end, deadline):
                return versions, f"{period.end}: its data deadline has not passed", False
            return dict.fromkeys(period.dates()), None, False
        consumption_dates = {
            day.day for day in days if day.is_energy and plan.is_consumption(day.suffix)
        }
        for local_date in period.dates():
            quota = quotas.get(local_date)
            if quota is None:
                if has_quota(plan, local_date, consumption_dates) or now < data_deadline_of(
                    plan, local_date, deadline
                ):
                    return versions, f"{local_date}: not settled yet", False
                versions[local_date] = None
            elif quota.status is QuotaStatus.COMPLETED:
                versions[local_date] = quota.version
            elif quota.status is QuotaStatus.ABORTED:
                return versions, f"{local_date}: quota version {quota.version} ABORTED", True
            else:
                return versions, f"{local_date}: quota {quota.status.value}", False
        return versions, None, False

    def _rate(
        self, nmi: str, plan: Plan, profiles: DayProfiles, period: Period, rows: list[IntervalDay]
    ) -> tuple[Bill, frozenset[date]]:
        """The period's bill, and its days without any meter value."""
        rating = MeterRating(nmi, profiles)
        for day in rows:
            rating.add(day)
        dates = period.dates()
        unread = frozenset(day for day in dates if rating.unread(day))
        return make_bill(plan, nmi, rating.days(dates).values()), unread

    def _free_mismatch(self, bill: Bill, quotas: dict[date, SettledQuota]) -> str | None:
        for day in bill.days:
            quota = quotas.get(day.local_date)
            settled = quota.free_kwh if quota is not None else None
            if settled is None:
                settled = Decimal(0)
            rated = day.free_kwh.quantize(KILOWATT_HOUR_THOUSANDTH)
            if rated != settled.quantize(KILOWATT_HOUR_THOUSANDTH):
                return (
                    f"{day.local_date}: rated free energy {day.free_kwh} kWh is not the settled"
                    f" {settled} kWh; waiting for its revision to settle"
                )
        return None

    def _rated(
        self,
        result: BatchResult,
        candidate: _Candidate,
        plan: Plan,
        profiles: DayProfiles,
        now: datetime,
    ) -> tuple[Figures, dict[date, int | None], str, Bill, frozenset[date]] | str:
        """A ready period rated under ``plan`` (its figures), each day's quota version and the
        rows' digest; or why it waits or is held (counted in ``result``)."""
        rows, stamp = _period_rows(plan, candidate.period, candidate.days)
        versions, why, hold = self._ready(plan, candidate.period, rows, candidate.quotas, now)
        if why is None:
            bill, unread = self._rate(candidate.account.nmi, plan, profiles, candidate.period, rows)
            if plan.free_window is None:
                return figures_of(bill, versions, unread), versions, stamp, bill, unread
            why = self._free_mismatch(bill, candidate.quotas)
            if why is None:
                return figures_of(bill, versions, unread), versions, stamp, bill, unread
        if hold:
            result.held += 1
        else:
            result.waiting += 1
        return why

    def _draft_invoice(self, result: BatchResult, candidate: _Candidate, now: datetime) -> None:
        account, stored, plan, profiles = (
            candidate.account,
            candidate.stored,
            candidate.plan,
            candidate.profiles,
        )
        period = candidate.period
        rated = self._rated(result, candidate, plan, profiles, now)
        if isinstance(rated, str):
            result.notes.append(f"{account.nmi} {period.start}..{period.end}: {rated}")
            return
        figures, versions, stamp, bill, unread = rated
        result.drafts.append(
            Draft(
                account,
                period,
                DocumentType.INVOICE,
                figures,
                0,
                None,
                None,
                stored,
                versions,
                stamp,
                rated_days=bill.days,
                unread=unread,
            )
        )

    def _draft_correction(
        self, result: BatchResult, unit: Unit, candidate: _Candidate, now: datetime
    ) -> None:
        account, period, days, quotas = (
            candidate.account,
            candidate.period,
            candidate.days,
            candidate.quotas,
        )
        row = candidate.row
        assert row is not None
        latest = {day: (quotas[day].version if day in quotas else None) for day in period.dates()}
        if (
            not revised_days(row.versions, latest)
            and row.data_stamp == (_period_rows(candidate.plan, period, days)[1])
        ):
            return
        documents = unit.invoices.period_documents(account.nmi, period.start)
        original = documents[0]
        stored = StoredPlan(original.plan_id, original.plan_document, original.finalised_at)
        parsed = self._plan(stored, ("document", original.number))
        if parsed is None:  # it parsed when the invoice was made; a later rule refuses it
            result.held += 1
            result.notes.append(f"{original.number}: its plan no longer parses")
            return
        plan, profiles = parsed
        rated = self._rated(result, candidate, plan, profiles, now)
        if isinstance(rated, str):
            result.notes.append(f"{original.number} revision: {rated}")
            return
        figures, versions, stamp, _, _ = rated
        change = difference(billed_so_far(d.figures for d in documents), figures)
        if change is None:
            result.checked.append(Checked(account.nmi, period, len(documents), versions, stamp))
            return
        revised = revised_days(row.versions, latest) or sorted({day.day for day in change.days})
        shown = ", ".join(day.isoformat() for day in revised[:3])
        more = f" and {len(revised) - 3} more" if len(revised) > 3 else ""
        noun = "day" if len(revised) == 1 else "days"
        reason = f"Revised meter data for {len(revised)} {noun} ({shown}{more})"
        result.drafts.append(
            Draft(
                account,
                period,
                correction_type(change),
                change,
                len(documents),
                original.number,
                reason,
                stored,
                versions,
                stamp,
            )
        )

    def _plan(
        self, stored: StoredPlan, version: Hashable | None = None
    ) -> tuple[Plan, DayProfiles] | None:
        """``stored`` parsed (once per ``version``: by default, the plan's own), with its day
        profiles; None when it no longer parses."""
        version = version or (stored.plan_id, stored.updated_at)
        parsed = self.plans.parsed(version, stored.plan_id, lambda: stored.document)
        return None if parsed is None else (parsed.plan, parsed.profiles)

    # --- finalising --------------------------------------------------------------------------

    def _finalise(
        self, run: InvoiceRun, batch: int, accounts: int, drafted: BatchResult
    ) -> BatchOutcome:
        try:
            return self._finalise_once(run, batch, accounts, drafted)
        except _Replayed:
            log.info("invoice_batch_replayed", run_id=run.run_id, batch=batch)
            return BatchOutcome((), RunCounts(), None, replayed=True)

    def _finalise_once(
        self, run: InvoiceRun, batch: int, accounts: int, drafted: BatchResult
    ) -> BatchOutcome:
        now = self.clock.now()
        result = BatchResult(waiting=drafted.waiting, held=drafted.held, notes=list(drafted.notes))
        with child_span(tracer, "invoicing.finalise"), self.store.write() as unit:
            keys = [(d.account.nmi, d.period.start, d.period.end) for d in drafted.drafts]
            keys += [(c.nmi, c.period.start, c.period.end) for c in drafted.checked]
            locked = unit.invoices.lock_periods(keys, now=now)
            fresh = self._still_fresh(unit, drafted, locked)
            for draft in drafted.drafts:
                if fresh.get((draft.account.nmi, draft.period.start), False):
                    result.drafts.append(draft)
                else:
                    result.waiting += 1
                    result.notes.append(
                        f"{draft.account.nmi} {draft.period.start}: changed while it was drafted"
                    )
            saved = []
            for draft in result.drafts:
                row = locked[(draft.account.nmi, draft.period.start)]
                saved.append(
                    BillingPeriodRow(
                        row.nmi,
                        row.start,
                        row.end,
                        row.documents + 1,
                        {**row.versions, **draft.versions},
                        draft.stamp,
                        # An invoice keeps its usage; a correction forgets it (the next check
                        # rates the revised data).
                        usage=draft.kept_usage,
                    )
                )
            for checked in drafted.checked:
                row = locked[(checked.nmi, checked.period.start)]
                if fresh.get((checked.nmi, checked.period.start), False):
                    saved.append(
                        BillingPeriodRow(
                            row.nmi,
                            row.start,
                            row.end,
                            row.documents,
                            {**row.versions, **checked.versions},
                            checked.stamp,
                            usage=row.usage,
                        )
                    )
            unit.invoices.save_periods(saved, now=now)
            unit.invoices.forget_later_usage(
                [
                    (draft.account.nmi, draft.period.start)
                    for draft in result.drafts
                    if draft.document_type is not DocumentType.INVOICE
                ]
            )
            counts = RunCounts(
                accounts=accounts,
                invoices=sum(d.document_type is DocumentType.INVOICE for d in result.drafts),
                credit_notes=sum(
                    d.document_type is DocumentType.CREDIT_NOTE for d in result.drafts
                ),
                adjustment_invoices=sum(
                    d.document_type is DocumentType.ADJUSTMENT_INVOICE for d in result.drafts
                ),
                waiting=result.waiting,
                held=result.held,
            )
            finished = unit.invoices.finish_batch(run.run_id, batch, counts, result.notes, now=now)
            if finished is None:
                # Done before (its worker died after that commit): this transaction undoes all.
                raise _Replayed
            # Numbers last: their counter stays locked until the commit, and every other batch
            # waits for it, so as little as can be happens while it is held.
            stored = self._number(unit, run, result.drafts, now)
            self.faults.check(InvoicingFaultPoint.NUMBERED, batch_key(run.run_id, batch))
            unit.invoices.insert_documents(stored)
        self.faults.check(InvoicingFaultPoint.COMMITTED, batch_key(run.run_id, batch))
        for document in stored:
            DOCUMENTS_FINALISED.labels(document.document_type.value).inc()
        if stored:
            log.info(
                "invoices_finalised",
                run_id=run.run_id,
                batch=batch,
                documents=len(stored),
                first=stored[0].number,
                last=stored[-1].number,
            )
        if finished.finished and finished.finished_at is not None:
            seconds = (finished.finished_at - finished.requested_at).total_seconds()
            INVOICE_RUN_SECONDS.observe(seconds)
            log.info(
                "invoice_run_finished",
                run_id=run.run_id,
                seconds=seconds,
                **asdict(finished.counts),
            )
        return BatchOutcome(tuple(stored), counts, finished)

    def _still_fresh(
        self,
        unit: Unit,
        drafted: BatchResult,
        locked: dict[tuple[str, date], BillingPeriodRow],
    ) -> dict[tuple[str, date], bool]:
        """Whether each drafted period is as it was drafted, now that it is locked: the same
        number of documents, and each day's newest quota still the version rated."""
        items: list[tuple[str, Period, int, dict[date, int | None]]] = [
            (d.account.nmi, d.period, d.sequence, d.versions) for d in drafted.drafts
        ]
        items += [(c.nmi, c.period, c.documents, c.versions) for c in drafted.checked]
        if not items:
            return {}
        first = min(period.start for _, period, _, _ in items)
        last = max(period.end for _, period, _, _ in items)
        quotas = unit.invoices.latest_versions(sorted({nmi for nmi, *_ in items}), first, last)
        fresh = {}
        for nmi, period, documents, versions in items:
            row = locked[(nmi, period.start)]
            now_versions = quotas.get(nmi, {})
            same = all(
                (now_versions[day].version if day in now_versions else None) == version
                and (day not in now_versions or now_versions[day].status is QuotaStatus.COMPLETED)
                for day, version in versions.items()
            )
            fresh[(nmi, period.start)] = row.documents == documents and same
        return fresh

    def _number(
        self, unit: Unit, run: InvoiceRun, drafts: list[Draft], now: datetime
    ) -> list[StoredDocument]:
        """The drafts numbered from their series (taken in this transaction) and finalised."""
        by_series: dict[Series, list[Draft]] = {}
        for draft in sorted(drafts, key=lambda d: (d.account.nmi, d.period.start)):
            by_series.setdefault(draft.document_type.series, []).append(draft)
        stored = []
        retailer = _retailer_json(self.policy.retailer)
        contacts = unit.catalog.contacts([draft.account.nmi for draft in drafts])
        # Counters in a fixed order, after every period lock and the run's row: no two
        # transactions wait on each other in a circle.
        for series in sorted(by_series):
            series_drafts = by_series[series]
            first = unit.invoices.take_numbers(series, len(series_drafts))
            for serial, draft in enumerate(series_drafts, start=first):
                finalised = self._finalised(
                    run,
                    draft,
                    series,
                    serial,
                    now=now,
                    retailer=retailer,
                    customer=printed_customer(contacts.get(draft.account.nmi)),
                )
                stored.append(finalised)
        return stored

    def _finalised(
        self,
        run: InvoiceRun,
        draft: Draft,
        series: Series,
        serial: int,
        *,
        now: datetime,
        retailer: dict[str, Any],
        customer: dict[str, Any] | None = None,
    ) -> StoredDocument:
        """``draft`` as the document finalised with the number ``serial`` of ``series``."""
        plan, _ = self._plan(draft.plan, _plan_version(draft)) or (None, None)
        assert plan is not None, "a draft's plan parsed when it was drafted"
        issued = run.as_of.astimezone(plan.zone).date()
        charges = draft.figures.total > 0
        return StoredDocument(
            number=self.policy.number(series, serial),
            series=series,
            serial=serial,
            document_type=draft.document_type,
            nmi=draft.account.nmi,
            period_start=draft.period.start,
            period_end=draft.period.end,
            sequence=draft.sequence,
            corrects=draft.corrects,
            run_id=run.run_id,
            issue_date=issued,
            due_date=draft.account.cycle.due_date(issued) if charges else None,
            finalised_at=now,
            plan_id=draft.plan.plan_id,
            region=draft.account.region,
            time_zone=plan.zone_name,
            figures=draft.figures,
            reason=draft.reason,
            plan_document=draft.plan.document,
            retailer=retailer,
            customer=customer,
            better_offer=None if draft.better_offer is None else draft.better_offer.as_json(),
            usage=[summary.as_json() for summary in draft.usage] or None,
        )

    def _unshowable(self, run: InvoiceRun, draft: Draft, now: datetime) -> str | None:
        """Why ``draft``, once finalised, would be a document that cannot be shown (a field
        longer than a document holds), or None. Asked before a number is taken: a document
        that can never be rendered is never finalised, and no number is spent on it."""
        # Its number is not known yet: the widest of the series' padded numbers stands in.
        serial = 10**self.policy.digits - 1
        retailer = _retailer_json(self.policy.retailer)
        series = draft.document_type.series
        plan, _ = self._plan(draft.plan, _plan_version(draft)) or (None, None)
        assert plan is not None, "a draft's plan parsed when it was drafted"
        # Its check and usage compared as they are, not turned into JSON and back: the same.
        bare = replace(draft, better_offer=None, usage=())
        finalised = self._finalised(run, bare, series, serial, now=now, retailer=retailer)
        try:
            _document(finalised, plan, (draft.better_offer, draft.usage))
        except DocumentError as exc:
            return str(exc)
        return None


#: A period of a customer, its plan as stored and parsed, and its row (None: never looked at).
_Wanted = tuple[Account, StoredPlan, Plan, DayProfiles, Period, BillingPeriodRow | None]


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


#: Day rows received this long before a period was last looked at are looked at again: longer
#: than any ingest transaction, whose rows carry the time it began, may take to commit.
RECEIPT_MARGIN = timedelta(days=1)


@functools.lru_cache(maxsize=1024)
def _nem_dates(plan: Plan, period: Period) -> frozenset[date]:
    """The NEM dates of ``period``'s local dates: the same for every account of a batch."""
    return frozenset(d for day in period.dates() for d in plan.nem_dates(day))


def _period_rows(
    plan: Plan, period: Period, days: list[tuple[IntervalDay, str]]
) -> tuple[list[IntervalDay], str]:
    """The day rows on the NEM dates that cover ``period``, and their digest."""
    wanted = _nem_dates(plan, period)
    kept = [(day, text) for day, text in days if day.day in wanted]
    return [day for day, _ in kept], data_stamp(text for _, text in kept)


def _plan_version(draft: Draft) -> Hashable:
    """The version ``_plan`` parsed ``draft``'s plan under: a correction's is its original's."""
    if draft.corrects is not None:
        return ("document", draft.corrects)
    return (draft.plan.plan_id, draft.plan.updated_at)
