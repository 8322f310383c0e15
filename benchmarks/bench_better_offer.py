"""The better offer check: what it adds to an invoice run, on PostgreSQL.

The goal (issue 34): the check of 100,000 customers, each with 12 months of 30-minute data,
against 20 offers, adds at most 25% to the invoice run at 100,000 accounts.

``ACCOUNTS`` customers (``FREEHOURS_BENCH_OFFER_ACCOUNTS``, default 2,000) are loaded as the
invoicing benchmark loads them (``bench_invoicing._load``: July 2026 settled, E1 and B1
half-hourly), with meter data for the whole year to July (1 August 2025 to 31 July 2026), and 20
offers of their region (the NSW plan with other supply charges and shoulder prices). Then, batch
by batch as a run's jobs draft them, each batch is drafted twice in a read transaction, without
the check and with it (``Invoicing._draft``: the check reads each customer's 13 months and rates
them under their plan and each offer); the difference is the check's cost. Last the whole run is
made in this process without the check (``Invoicing.run_once``): the run the check is added to.
The ratio printed is the check's time over that run's.

Loading is not measured. The figure is per account, so it carries to 100,000 accounts as long
as a batch's cost does not grow with the run (the invoicing benchmark shows it does not).
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from logging import WARNING

import structlog

from benchmarks.bench_invoicing import AS_OF, DEFAULT_ADMIN_URL, PLAN_ID, _load
from freehours.clock import SystemClock
from freehours.domain.offers import OfferSource, OfferTerms
from freehours.domain.time import Region
from freehours.invoicing.model import InvoicingPolicy
from freehours.invoicing.service import Invoicing
from freehours.plans import builtin_document
from freehours.store.catalog import NewOffer
from freehours.store.database import Store
from tests.databases import fresh_postgres_database

ACCOUNTS = 2_000
OFFERS = 20
GOAL = 0.25
YEAR = [datetime(2025, 8, 1, tzinfo=UTC).date() + timedelta(days=n) for n in range(365)]


def run() -> None:
    admin_url = os.environ.get("FREEHOURS_BENCH_DATABASE_URL", DEFAULT_ADMIN_URL)
    accounts = int(os.environ.get("FREEHOURS_BENCH_OFFER_ACCOUNTS", ACCOUNTS))
    logging = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(WARNING))
    try:
        _measure(admin_url, accounts)
    finally:
        structlog.configure(**logging)


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
        offers.append(
            NewOffer(offer_id, f"Offer {n}", OfferSource.PLAN, OfferTerms(Region.NSW), document)
        )
    return offers


def _measure(admin_url: str, accounts: int) -> None:
    with (
        fresh_postgres_database(admin_url, prefix="freehours_bench") as url,
        Store.open(url) as store,
    ):
        _load(store, url, accounts, meter_dates=YEAR)
        with store.write() as unit:
            unit.catalog.put_offers(_offers(), at=datetime.now(UTC))
        clock = SystemClock()
        without = InvoicingPolicy(better_offer_check=False)
        invoicing = Invoicing(store, clock, without)
        checking = Invoicing(store, clock, replace(without, better_offer_check=True))
        checking.plans = invoicing.plans  # parsed once, as a worker's runtime shares them
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
