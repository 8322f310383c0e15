"""The better offer check: what it adds to an invoice run, on PostgreSQL.

The goal (issue 34): the check of 100,000 customers, each with 12 months of 30-minute data,
against 20 offers, adds at most 25% to the invoice run at 100,000 accounts.

``ACCOUNTS`` customers (``FREEHOURS_BENCH_OFFER_ACCOUNTS``, default 2,000) are loaded as the
invoicing benchmark loads them (``bench_invoicing._load``: July 2026 settled, E1 and B1
half-hourly), with meter data for the 13 months to July (1 July 2025 to 31 July 2026), and 20
offers of their region (the NSW plan with other supply charges and shoulder prices, half of
them with peak hours of their own: the half that only prices differently shares the customer's
plan's totals, the other half is rated by ``ManyPlans``). The 12
months before July are as the runs before this one left them: each billing period invoiced,
keeping its usage under the plan and every offer, and June its year's totals
(``billing_periods.usage``, made by the check's own ``rate_period`` for each consumption pattern
and shared by its accounts, as the load shares its rows).

Then, batch by batch as a run's jobs draft them, each batch is drafted twice in a read
transaction, without the check and with it (``Invoicing._draft``: the check rates July under
the plan and each offer, and prices the year from June's, less July 2025); the difference is the
check's cost. Last the whole run is made in this process without the check
(``Invoicing.run_once``): the run the check is added to. The ratio printed is the check's time
over that run's.

Loading is not measured. The figure is per account, so it carries to 100,000 accounts as long
as a batch's cost does not grow with the run (the invoicing benchmark shows it does not).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from functools import reduce

import psycopg
import sqlalchemy as sa

from benchmarks.bench_day import copy_lines
from benchmarks.bench_invoicing import (
    AS_OF,
    DEFAULT_ADMIN_URL,
    JULY,
    PATTERNS,
    PLAN_ID,
    _consumption,
    _export,
    _load,
    _nmi,
)
from benchmarks.scale import size
from benchmarks.workers import warnings_only
from freehours.clock import SystemClock
from freehours.domain.better_offer import UsageTotals, joined
from freehours.domain.invoicing import BillingCycle
from freehours.domain.offers import Offer, OfferSource, OfferTerms
from freehours.domain.profiles import DayProfiles
from freehours.domain.time import Region
from freehours.invoicing.better_offer import Priced, plan_key, rate_period
from freehours.invoicing.model import InvoicingPolicy
from freehours.invoicing.service import Invoicing
from freehours.plans import builtin_document
from freehours.plans.document import parse_plan
from freehours.store.catalog import NewOffer
from freehours.store.database import Store
from tests.databases import fresh_postgres_database

ACCOUNTS = size(2_000, 20)
OFFERS = 20
GOAL = 0.25
#: The meter data: 13 months, so that July's check drops July 2025 from the year June kept.
YEAR = [datetime(2025, 7, 1, tzinfo=UTC).date() + timedelta(days=n) for n in range(396)]


def run() -> None:
    admin_url = os.environ.get("FREEHOURS_BENCH_DATABASE_URL", DEFAULT_ADMIN_URL)
    accounts = int(os.environ.get("FREEHOURS_BENCH_OFFER_ACCOUNTS", ACCOUNTS))
    with warnings_only():
        _measure(admin_url, accounts)


def _offers() -> list[NewOffer]:
    offers = []
    for n in range(OFFERS):
        document = builtin_document(PLAN_ID)
        offer_id = f"offer-{n:02d}"
        document.update(id=offer_id, description=f"Offer {n}")
        document["daily_supply_charge"] = f"{0.90 + n * 0.02:.4f}"
        for band in document["time_of_use"]:
            if band["type"] == "SHOULDER":
                band["unit_price"] = f"{0.28 + n * 0.005:.4f}"
            if band["type"] == "PEAK" and n % 2:  # half of them on other peak hours
                band["periods"][0]["start"] = "16:00"
                band["periods"][0]["end"] = "20:00"
        offers.append(
            NewOffer(offer_id, f"Offer {n}", OfferSource.PLAN, OfferTerms(Region.NSW), document)
        )
    return offers


def _steady(store: Store, url: str, accounts: int, offers: list[Offer]) -> None:
    """The year before July as earlier runs left it: a first quota on its first day (where each
    customer's billing starts), and each of its 11 billing periods invoiced, with what it keeps
    of its usage."""
    with store.read() as unit:
        stored = unit.catalog.get_plan(PLAN_ID)
    assert stored is not None
    plan = parse_plan(stored.document, source=PLAN_ID)
    own = Priced(plan_key(stored), plan.name, plan, DayProfiles(plan))
    priced = [own]
    for offer in offers:
        parsed = parse_plan(offer.document, source=offer.offer_id)
        key = f"offer:{offer.offer_id}:{offer.version}"
        priced.append(Priced(key, offer.name, parsed, DayProfiles(parsed), offer))
    cycle = BillingCycle()
    periods = cycle.periods(YEAR[0], JULY[0])
    kept: list[dict[date, str]] = []
    for scale in PATTERNS:
        usages = {}
        totals: dict[str, list[UsageTotals]] = {plan.key: [] for plan in priced}
        for period in periods:
            days = [period.start + timedelta(days=n) for n in range(-1, period.days + 1)]
            rows = [row for day in days for row in (_consumption(day, scale), _export(day))]
            usages[period.start], rated = rate_period(
                "4000000000", own, priced, period, first_data=YEAR[0], rows=rows
            )
            for key, part in rated.items():
                totals[key].append(part)
        # June's invoice priced its year, July 2025 to June 2026, and kept it.
        june = periods[-1].start
        year = {key: reduce(joined, parts).text() for key, parts in totals.items()}
        usages[june] = replace(usages[june], year=year)
        kept.append({start: _copy_text(usage.text()) for start, usage in usages.items()})
    checked = (datetime.now(UTC) + timedelta(days=2)).isoformat()  # no revision to look for
    received = datetime.now(UTC).isoformat()

    def quota_lines() -> Iterator[str]:
        for n in range(accounts):
            yield (f"{_nmi(n)}\t{YEAR[0]}\t1\tCOMPLETED\t1\t0\t\\N\t0\t0\t{received}\t\\N\t2\n")

    def period_lines() -> Iterator[str]:
        for n in range(accounts):
            texts = kept[n % len(PATTERNS)]
            for period in periods:
                yield (
                    f"{_nmi(n)}\t{period.start}\t{period.end}\t1\t{{}}\t\t{checked}\t"
                    f"{texts[period.start]}\n"
                )

    conninfo = sa.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(conninfo) as conn:
        copy_lines(
            conn,
            "quotas",
            "nmi, day, version, status, fence, attempts, locked_until, free_kwh, free_value,"
            " completed_at, reason, revision",
            quota_lines(),
        )
        copy_lines(
            conn,
            "billing_periods",
            "nmi, period_start, period_end, documents, versions, data_stamp, checked_at, usage",
            period_lines(),
        )
        conn.commit()
        conn.autocommit = True
        conn.execute("VACUUM ANALYZE")


def _copy_text(text: str) -> str:
    """``text`` as a field of COPY's text format."""
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t")


def _measure(admin_url: str, accounts: int) -> None:
    with (
        fresh_postgres_database(admin_url, prefix="freehours_bench") as url,
        Store.open(url) as store,
    ):
        _load(store, url, accounts, meter_dates=YEAR)
        with store.write() as unit:
            offers = unit.catalog.put_offers(_offers(), at=datetime.now(UTC))
        _steady(store, url, accounts, offers)
        clock = SystemClock()
        without = InvoicingPolicy(better_offer_check=False)
        invoicing = Invoicing(store, clock, without)
        # Plans parsed once, as a worker's runtime shares them.
        checking = Invoicing(
            store, clock, replace(without, better_offer_check=True), plans=invoicing.plans
        )
        run = invoicing.start_run(as_of=AS_OF)
        drafting = {False: 0.0, True: 0.0}
        drafted = 0
        checked = 0
        after = None
        while True:
            with store.read() as unit:
                page = unit.invoices.account_page(after, without.batch_size)
            if not page:
                break
            for service, on in ((invoicing, False), (checking, True)):
                with store.read() as unit:
                    started = time.perf_counter()
                    result = service._draft(unit, run, page)
                    drafting[on] += time.perf_counter() - started
                if on:
                    checked += sum(d.better_offer is not None for d in result.drafts)
                else:
                    drafted += len(result.drafts)
            after = page[-1]
        started = time.perf_counter()
        done = invoicing.run_once(as_of=AS_OF)
        whole = time.perf_counter() - started
    check = drafting[True] - drafting[False]
    ratio = check / whole
    print(
        f"better offer check postgres {accounts:,} accounts, 12 months of 30-minute data,"
        f" {OFFERS} offers: {drafted:,} invoices drafted, {checked:,} checked; the check"
        f" {check / accounts * 1000:.2f} ms an account ({drafting[False] / accounts * 1000:.2f} ms"
        f" to draft without it); the run without it {whole / accounts * 1000:.2f} ms an account"
        f" ({done.counts.invoices:,} invoices in {whole:.1f} s, in this process); the check adds"
        f" {ratio:.0%} (goal at most {GOAL:.0%}: {ratio / GOAL:.1f}x the goal)"
    )
