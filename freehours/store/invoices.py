"""Invoicing's rows: accounts, billing periods, document numbers, finalised documents and runs.

A document is inserted once, finalised, and never changed: the migration puts triggers on
``documents`` that refuse an UPDATE or DELETE (and on PostgreSQL a TRUNCATE), so that not even a
hand-typed statement can edit an invoice. Numbers come from ``document_counters`` in the
transaction that inserts their documents (``take_numbers``): the counter's row stays locked
until that transaction ends, so two runs take turns, and a rollback gives the numbers back.

``Invoices`` runs in its unit of work's transaction.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import date, datetime
from typing import Any

import sqlalchemy as sa

from freehours.domain.better_offer import PeriodUsage
from freehours.domain.invoicing import (
    BillingCycle,
    DocumentType,
    Frequency,
    Series,
)
from freehours.domain.reads import IntervalDay
from freehours.domain.time import Region
from freehours.store.invoice_records import (
    _QUOTA_STATUSES,
    MAX_RUN_NOTES,
    Account,
    BillingPeriodRow,
    InvoiceRun,
    QuotaVersion,
    RunCounts,
    SettledQuota,
    StoredDocument,
    ToPost,
    _document,
    _document_row,
    _event,
    _period,
    _run,
    _Stamps,
    _to_post,
    _versions_text,
)
from freehours.store.mail import Mail
from freehours.store.meter import decode_values
from freehours.store.repository import Repository
from freehours.store.tables import (
    UtcDateTime,
    billing_periods,
    customers,
    document_counters,
    documents,
    invoice_run_batches,
    invoice_runs,
    meter_days,
    quotas,
)
from freehours.store.webhooks import Webhooks

_ACCOUNT = sa.select(
    customers.c.nmi,
    customers.c.plan_id,
    customers.c.region,
    customers.c.billing_frequency,
    customers.c.anchor_day,
    customers.c.payment_term_days,
)


def _account(row: Any) -> Account:
    return Account(
        row.nmi,
        row.plan_id,
        Region(row.region),
        BillingCycle(Frequency(row.billing_frequency), row.anchor_day, row.payment_term_days),
    )


class Invoices(Repository):
    """Invoicing's tables, in the unit of work's transaction."""

    __slots__ = ()

    # --- accounts and their data -------------------------------------------------------------

    def account_page(self, after: str | None, limit: int) -> list[str]:
        """Up to ``limit`` customers' NMIs after ``after``, in order: how a run pages them."""
        query = sa.select(customers.c.nmi).order_by(customers.c.nmi).limit(limit)
        if after is not None:
            query = query.where(customers.c.nmi > after)
        return list(self._conn.scalars(query))

    def accounts(self, nmis: Collection[str]) -> list[Account]:
        """The customers of ``nmis``, by NMI (in queries of at most 5,000 NMIs)."""
        wanted = sorted(set(nmis))
        found: list[Account] = []
        for start in range(0, len(wanted), 5_000):
            rows = self._each_nmi(_ACCOUNT, customers.c.nmi, wanted[start : start + 5_000], ["nmi"])
            found += [_account(row) for row in rows]
        return found

    def accounts_after(
        self,
        after: str | None,
        limit: int,
        *,
        plan_id: str | None = None,
        region: Region | None = None,
    ) -> list[Account]:
        """A page of the customers, by NMI: the first ``limit`` after ``after`` (from the first
        where None), only those on ``plan_id`` or in ``region`` where given."""
        c = customers.c
        where: list[sa.ColumnElement[bool]] = [sa.true()]
        if after is not None:
            where.append(c.nmi > after)
        if plan_id is not None:
            where.append(c.plan_id == plan_id)
        if region is not None:
            where.append(c.region == region.value)
        return self._accounts(sa.and_(*where), limit)

    def _accounts(self, where: sa.ColumnElement[bool], limit: int | None = None) -> list[Account]:
        rows = self._conn.execute(_ACCOUNT.where(where).order_by(customers.c.nmi).limit(limit))
        return [_account(row) for row in rows]

    def set_cycle(self, nmi: str, cycle: BillingCycle) -> bool:
        """Set the billing cycle of ``nmi``'s customer; whether there is one."""
        return self.set_cycles({nmi: cycle}) == 1

    def set_cycles(self, cycles: Mapping[str, BillingCycle]) -> int:
        """Set the billing cycle of each customer in ``cycles`` (by NMI), in one statement; how
        many customers there were."""
        if not cycles:
            return 0
        c = customers.c
        done = self._conn.execute(
            customers.update()
            .where(c.nmi == sa.bindparam("k_nmi"))
            .values(
                billing_frequency=sa.bindparam("k_frequency"),
                anchor_day=sa.bindparam("k_anchor_day"),
                payment_term_days=sa.bindparam("k_payment_term_days"),
            ),
            [
                {
                    "k_nmi": nmi,
                    "k_frequency": cycle.frequency.value,
                    "k_anchor_day": cycle.anchor_day,
                    "k_payment_term_days": cycle.payment_term_days,
                }
                for nmi, cycle in cycles.items()
            ],
        )
        return int(done.rowcount)

    def first_days(self, nmis: Collection[str]) -> dict[str, date]:
        """The first date each NMI has a quota for, else a meter day row: where its billing
        starts."""
        found: dict[str, date] = {}
        for table in (quotas, meter_days):
            missing = [nmi for nmi in nmis if nmi not in found]
            if not missing:
                break
            first = sa.func.min(table.c.day).label("first")
            if self._driver.takes_arrays:
                # NMI by NMI, two aggregates and no GROUP BY: each is an index's first entry of
                # the NMI (in each partition), where grouping would read every row of it.
                query = sa.select(sa.func.min(table.c.nmi).label("nmi"), first)
            else:
                query = sa.select(table.c.nmi, first).group_by(table.c.nmi)
            rows = self._each_nmi(query, table.c.nmi, missing, ["nmi"])
            found.update({nmi: day for nmi, day in rows if day is not None})
        return found

    def latest_quotas(
        self, nmis: Collection[str], first: date, last: date
    ) -> dict[str, dict[date, SettledQuota]]:
        """The newest version of each quota of ``nmis`` on ``first`` to ``last``, by NMI and
        date: its version, status and free energy, which is what a draft needs (not a whole
        ``Quota``: a batch reads 15,000 of them)."""
        c = quotas.c
        rows = self._each_nmi(
            sa.select(c.nmi, c.day, c.version, c.status, c.free_kwh).where(
                c.day >= first, c.day <= last
            ),
            c.nmi,
            nmis,
            ["nmi", "day", "version"],
        )
        found: dict[str, dict[date, SettledQuota]] = defaultdict(dict)
        for nmi, day, version, status, free_kwh in rows:
            # Ordered by version: the last one read is the newest.
            found[nmi][day] = SettledQuota(version, _QUOTA_STATUSES[status], free_kwh)
        return found

    def latest_versions(
        self, nmis: Collection[str], first: date, last: date
    ) -> dict[str, dict[date, QuotaVersion]]:
        """The newest version of each quota of ``nmis`` on ``first`` to ``last`` and its status,
        by NMI and date: ``latest_quotas`` without the rest of each quota."""
        c = quotas.c
        rows = self._each_nmi(
            sa.select(c.nmi, c.day, c.version, c.status).where(c.day >= first, c.day <= last),
            c.nmi,
            nmis,
            ["nmi", "day", "version"],
        )
        found: dict[str, dict[date, QuotaVersion]] = defaultdict(dict)
        for nmi, day, version, status in rows:
            # Ordered by version: the last one read is the newest.
            found[nmi][day] = QuotaVersion(version, _QUOTA_STATUSES[status])
        return found

    def meter_days(
        self, nmis: Collection[str], first: date, last: date
    ) -> dict[str, list[tuple[IntervalDay, str]]]:
        """The stored day rows of ``nmis`` on NEM dates ``first`` to ``last``, by NMI, each with
        its text as stored (channel, date, interval length, unit, values, qualities, stamp): what
        ``freehours.domain.invoicing.data_stamp`` digests, exactly as the row is, without
        writing its values out again."""
        m = meter_days.c
        rows = self._each_nmi(
            sa.select(
                m.nmi,
                m.suffix,
                m.day,
                m.interval_minutes,
                m.interval_values,
                m.qualities,
                # Read as the driver gives it, and made a UTC datetime once per distinct stamp
                # below: a batch's 31,000 rows share a few (a file's UpdateDateTime).
                sa.type_coerce(m.update_datetime, UtcDateTime.impl).label("update_datetime"),
                m.uom,
            ).where(m.day >= first, m.day <= last),
            m.nmi,
            nmis,
            ["nmi", "day", "suffix"],
        )
        found: dict[str, list[tuple[IntervalDay, str]]] = defaultdict(list)
        stamps = _Stamps(self._conn.dialect)
        for nmi, suffix, day, minutes, values, qualities, raw, uom in rows:
            stamp, stamp_text = stamps[raw]
            text = f"{suffix}|{day}|{minutes}|{uom}|{values}|{qualities}|{stamp_text}"
            found[nmi].append(
                (
                    IntervalDay(
                        nmi=nmi,
                        suffix=suffix,
                        day=day,
                        interval_minutes=minutes,
                        values=decode_values(values),
                        qualities=qualities,
                        update_datetime=stamp,
                        uom=uom,
                    ),
                    text,
                )
            )
        return found

    def received_since(
        self, nmis: Collection[str], first: date, last: date, since: datetime
    ) -> dict[str, set[date]]:
        """The NEM dates from ``first`` to ``last`` on which each NMI has a day row received
        since ``since``: where a revision of an invoiced period may be."""
        m = meter_days.c
        rows = self._each_nmi(
            sa.select(m.nmi, m.day).where(m.day >= first, m.day <= last, m.received_at >= since),
            m.nmi,
            nmis,
            ["nmi", "day"],
        )
        found: dict[str, set[date]] = defaultdict(set)
        for nmi, day in rows:
            found[nmi].add(day)
        return found

    # --- billing periods ---------------------------------------------------------------------

    def periods(self, nmis: Collection[str]) -> dict[tuple[str, date], BillingPeriodRow]:
        """Every billing period of ``nmis`` that a run has locked before, by (NMI, start);
        without what each keeps of its usage (``usage`` None: the better offer check reads it
        for the periods it wants, ``period_usages``)."""
        columns = [c for c in billing_periods.c if c.name != "usage"]
        query = sa.select(*columns, sa.null().label("usage"))
        rows = self._each_nmi(query, billing_periods.c.nmi, nmis, ["nmi", "period_start"])
        return {(row.nmi, row.period_start): _period(row) for row in rows}

    def lock_periods(
        self, keys: Sequence[tuple[str, date, date]], *, now: datetime
    ) -> dict[tuple[str, date], BillingPeriodRow]:
        """Lock the billing periods ``keys`` (NMI, start, end) for this transaction, creating the
        rows that are not there yet, and read them as they are once locked.

        Rows are created and locked in key order, so two runs whose batches overlap wait for
        each other instead of deadlocking; a period another transaction is finalising is read
        after it commits.
        """
        if not keys:
            return {}
        ordered = sorted(set(keys))
        self._conn.execute(
            self._driver.insert_or_ignore(billing_periods),
            [
                {
                    "nmi": nmi,
                    "period_start": start,
                    "period_end": end,
                    "documents": 0,
                    "versions": "{}",
                    "data_stamp": "",
                    "checked_at": now,
                }
                for nmi, start, end in ordered
            ],
        )
        b = billing_periods.c
        nmis = sorted({nmi for nmi, _, _ in ordered})
        rows = self._each_nmi(
            sa.select(billing_periods).where(
                b.period_start >= min(start for _, start, _ in ordered),
                b.period_start <= max(start for _, start, _ in ordered),
            ),
            b.nmi,
            nmis,
            ["nmi", "period_start"],
            for_update=True,
        )
        wanted = {(nmi, start) for nmi, start, _ in ordered}
        return {
            (row.nmi, row.period_start): _period(row)
            for row in rows
            if (row.nmi, row.period_start) in wanted
        }

    def period_usages(
        self, nmis: Collection[str], first: date, last: date
    ) -> dict[str, dict[date, PeriodUsage]]:
        """What the invoiced billing periods of ``nmis`` starting ``first`` to ``last`` keep of
        their usage, by NMI and period start (the periods without it left out)."""
        b = billing_periods.c
        rows = self._each_nmi(
            sa.select(b.nmi, b.period_start, b.period_end, b.usage).where(
                b.period_start >= first, b.period_start <= last, b.usage.is_not(None)
            ),
            b.nmi,
            nmis,
            ["nmi", "period_start"],
        )
        found: dict[str, dict[date, PeriodUsage]] = defaultdict(dict)
        for nmi, start, end, text in rows:
            found[nmi][start] = PeriodUsage.parse(start, end, text)
        return found

    def period_usages_on(
        self, nmis: Collection[str], starts: Collection[date]
    ) -> dict[str, dict[date, PeriodUsage]]:
        """``period_usages`` of the periods of ``nmis`` that start on one of ``starts``."""
        b = billing_periods.c
        rows = self._each_nmi(
            sa.select(b.nmi, b.period_start, b.period_end, b.usage).where(
                b.period_start.in_(list(starts)), b.usage.is_not(None)
            ),
            b.nmi,
            nmis,
            ["nmi", "period_start"],
        )
        found: dict[str, dict[date, PeriodUsage]] = defaultdict(dict)
        for nmi, start, end, text in rows:
            found[nmi][start] = PeriodUsage.parse(start, end, text)
        return found

    def forget_later_usage(self, periods: Sequence[tuple[str, date]]) -> None:
        """Forget what the billing periods after each of ``periods`` (NMI, start) keep of their
        usage: their year's totals added up a period that a correction has since revised."""
        if not periods:
            return
        b = billing_periods.c
        self._conn.execute(
            billing_periods.update()
            .where(
                b.nmi == sa.bindparam("key_nmi"),
                b.period_start > sa.bindparam("key_start"),
                b.usage.is_not(None),
            )
            .values(usage=None),
            [{"key_nmi": nmi, "key_start": start} for nmi, start in periods],
        )

    def save_periods(self, periods: Sequence[BillingPeriodRow], *, now: datetime) -> None:
        """Write what each of the locked ``periods`` has billed so far, in one statement run
        for them all (one round trip, not one each)."""
        if not periods:
            return
        b = billing_periods.c
        self._conn.execute(
            billing_periods.update()
            .where(b.nmi == sa.bindparam("key_nmi"), b.period_start == sa.bindparam("key_start"))
            .values(
                documents=sa.bindparam("documents"),
                versions=sa.bindparam("versions"),
                data_stamp=sa.bindparam("data_stamp"),
                checked_at=sa.bindparam("checked_at", type_=b.checked_at.type),
                usage=sa.bindparam("usage"),
            ),
            [
                {
                    "key_nmi": period.nmi,
                    "key_start": period.start,
                    "documents": period.documents,
                    "versions": _versions_text(period.versions),
                    "data_stamp": period.data_stamp,
                    "checked_at": now,
                    "usage": period.usage,
                }
                for period in periods
            ],
        )

    # --- numbers and documents ---------------------------------------------------------------

    def take_numbers(self, series: Series, count: int) -> int:
        """The first of ``count`` consecutive serial numbers of ``series``, taken in this
        transaction (its counter stays locked until it ends, and a rollback gives them back)."""
        c = document_counters.c
        row = self._conn.execute(
            document_counters.update()
            .where(c.series == series.value)
            .values(next_number=c.next_number + count)
            .returning(c.next_number)
        ).one()
        return int(row[0]) - count

    def next_serial(self, series: Series) -> int:
        c = document_counters.c
        return int(self._conn.scalar(sa.select(c.next_number).where(c.series == series.value)) or 1)

    def insert_documents(self, stored: Iterable[StoredDocument]) -> None:
        # A batch's documents share their plan's and retailer's details: each written out once.
        texts: dict[int, str] = {}
        stored = list(stored)
        rows = [_document_row(document, texts) for document in stored]
        if rows:
            self._conn.execute(documents.insert(), rows)
            # The webhook outbox, in the same transaction: every document is finalised here.
            Webhooks(self._conn, self._driver).publish([_event(document) for document in stored])
            # And the first send by email of each whose customer chose it.
            Mail(self._conn, self._driver).queue_for(
                [(document.number, document.nmi) for document in stored],
                at=stored[0].finalised_at,
            )

    def period_documents(self, nmi: str, start: date) -> list[StoredDocument]:
        """A period's documents, in order: the invoice, then its corrections."""
        d = documents.c
        rows = self._conn.execute(
            sa.select(documents).where(d.nmi == nmi, d.period_start == start).order_by(d.sequence)
        )
        return [_document(row) for row in rows]

    def get_document(self, number: str) -> StoredDocument | None:
        row = self._conn.execute(
            sa.select(documents).where(documents.c.number == number)
        ).one_or_none()
        return None if row is None else _document(row)

    def corrections_of(self, numbers: Collection[str]) -> dict[str, list[str]]:
        """The numbers of the documents that correct each of ``numbers``, in order (one query,
        by the index on ``corrects``); an empty list for a document nothing corrects."""
        d = documents.c
        found: dict[str, list[str]] = {number: [] for number in numbers}
        if not found:
            return found
        rows = self._conn.execute(
            sa.select(d.corrects, d.number)
            .where(d.corrects.in_(list(found)))
            .order_by(d.corrects, d.sequence)
        )
        for corrected, number in rows:
            found[corrected].append(number)
        return found

    def list_documents(
        self,
        *,
        nmi: str | None = None,
        first: date | None = None,
        last: date | None = None,
        series: Series | None = None,
        run_id: str | None = None,
        after: tuple[date, str, int] | None = None,
        limit: int = 100,
    ) -> list[StoredDocument]:
        """Documents whose period overlaps ``first`` to ``last``, oldest period first, then by
        NMI, each invoice before its corrections: keyset pages after ``after`` (the period
        start, NMI and sequence of the last one seen)."""
        d = documents.c
        query = sa.select(documents)
        if nmi is not None:
            query = query.where(d.nmi == nmi)
        if first is not None:
            query = query.where(d.period_end >= first)
        if last is not None:
            query = query.where(d.period_start <= last)
        if series is not None:
            query = query.where(d.series == series.value)
        if run_id is not None:
            query = query.where(d.run_id == run_id)
        if after is not None:
            query = query.where(sa.tuple_(d.period_start, d.nmi, d.sequence) > sa.tuple_(*after))
        rows = self._conn.execute(query.order_by(d.period_start, d.nmi, d.sequence).limit(limit))
        return [_document(row) for row in rows]

    def to_post(
        self, run_id: str, *, invoices: bool, after: str | None = None, limit: int = 1000
    ) -> list[ToPost]:
        """A page of run ``run_id``'s documents in number order after ``after``: its invoices,
        or (``invoices`` False) its other documents; read by the index of (run, number), so a
        page costs its own rows whatever the run's size (the print batch, docs/invoices.md)."""
        d = documents.c
        kind = d.document_type == DocumentType.INVOICE.value
        query = sa.select(d.number, d.document_type, d.nmi, d.customer).where(
            d.run_id == run_id, kind if invoices else ~kind
        )
        if after is not None:
            query = query.where(d.number > after)
        rows = self._conn.execute(query.order_by(d.number).limit(limit))
        return [_to_post(row) for row in rows]

    def serials(self, series: Series) -> list[int]:
        """Every serial number of ``series``, in order (for the gapless checks)."""
        d = documents.c
        return list(
            self._conn.scalars(
                sa.select(d.serial).where(d.series == series.value).order_by(d.serial)
            )
        )

    # --- runs --------------------------------------------------------------------------------

    def create_run(self, run_id: str, *, requested_at: datetime, as_of: datetime) -> InvoiceRun:
        row = {
            "run_id": run_id,
            "state": "RUNNING",
            "requested_at": requested_at,
            "as_of": as_of,
            "batches": None,
            "batches_done": 0,
            "accounts": 0,
            "invoices": 0,
            "credit_notes": 0,
            "adjustment_invoices": 0,
            "waiting": 0,
            "held": 0,
            "notes": "[]",
            "finished_at": None,
        }
        self._conn.execute(invoice_runs.insert().values(row))
        run = self.get_run(run_id)
        assert run is not None
        return run

    def get_run(self, run_id: str, *, for_update: bool = False) -> InvoiceRun | None:
        query = sa.select(invoice_runs).where(invoice_runs.c.run_id == run_id)
        if for_update:
            # FOR NO KEY UPDATE, not FOR UPDATE: the run's batches and documents refer to it by
            # their foreign keys, which take KEY SHARE locks on it; FOR UPDATE would wait for
            # those of every batch in flight, and two batches' waits would deadlock.
            query = query.with_for_update(key_share=True)
        row = self._conn.execute(query).one_or_none()
        return None if row is None else _run(row)

    def list_runs(self, limit: int = 20) -> list[InvoiceRun]:
        rows = self._conn.execute(
            sa.select(invoice_runs).order_by(invoice_runs.c.requested_at.desc()).limit(limit)
        )
        return [_run(row) for row in rows]

    def planned(self, run_id: str, batches: int, *, now: datetime) -> None:
        """The plan job made ``batches`` batches (a run of none is done at once)."""
        r = invoice_runs.c
        values: dict[str, Any] = {"batches": batches}
        if batches == 0:
            values.update(state="COMPLETED", finished_at=now)
        self._conn.execute(
            invoice_runs.update().where(r.run_id == run_id, r.batches.is_(None)).values(values)
        )

    def finish_batch(
        self, run_id: str, batch: int, counts: RunCounts, notes: Sequence[str], *, now: datetime
    ) -> InvoiceRun | None:
        """Add a batch's counts to its run, once: None when this batch was done before. The run
        is COMPLETED by its last batch."""
        # The run's row locked first: the batch row's foreign key takes a share lock on it, and
        # two batches each holding that and asking for the row's update lock would deadlock.
        run = self.get_run(run_id, for_update=True)
        assert run is not None, f"invoice run {run_id} is not stored"
        inserted = self._conn.execute(
            self._driver.insert_or_ignore(invoice_run_batches)
            .values(run_id=run_id, batch=batch, done_at=now)
            .returning(invoice_run_batches.c.batch)
        ).first()
        if inserted is None:
            return None
        kept = [*run.notes, *notes][:MAX_RUN_NOTES]
        done = run.batches_done + 1
        finished = run.batches is not None and done >= run.batches
        r = invoice_runs.c
        total = run.counts
        self._conn.execute(
            invoice_runs.update()
            .where(r.run_id == run_id)
            .values(
                batches_done=done,
                accounts=total.accounts + counts.accounts,
                invoices=total.invoices + counts.invoices,
                credit_notes=total.credit_notes + counts.credit_notes,
                adjustment_invoices=total.adjustment_invoices + counts.adjustment_invoices,
                waiting=total.waiting + counts.waiting,
                held=total.held + counts.held,
                notes=json.dumps(kept),
                state="COMPLETED" if finished else "RUNNING",
                finished_at=now if finished else None,
            )
        )
        return self.get_run(run_id)


__all__ = [
    "Account",
    "BillingPeriodRow",
    "InvoiceRun",
    "Invoices",
    "QuotaVersion",
    "RunCounts",
    "SettledQuota",
    "StoredDocument",
]
