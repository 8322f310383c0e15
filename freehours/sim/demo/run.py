"""``run_demo``: the demo's phases in order: the agent's reads over a faulty link, the
settlements, a revision, the bills, then the invoice run (``invoices.py``)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
from pydantic import SecretStr

from freehours.agent.tally import Counts
from freehours.api.app import create_app
from freehours.api.ratelimit import RateLimits
from freehours.api.services import Services
from freehours.clock import SystemClock
from freehours.domain.comparison import compare_days
from freehours.domain.invoicing import BillingCycle, DocumentType
from freehours.domain.offers import OfferSource, OfferTerms
from freehours.domain.reads import IntervalDay
from freehours.domain.settlement import Quota, QuotaStatus, new_quota, quota_key
from freehours.domain.time import NEM_TIME, Region
from freehours.domain.webhooks import EVENT_TYPES, DeliveryStatus
from freehours.jobs.job import JobState
from freehours.meterdata.writer import write_nem12
from freehours.operations.runtime import Runtime
from freehours.plans import builtin_document, builtin_plan
from freehours.plans.document import parse_plan
from freehours.settings import Settings
from freehours.sim.demo.invoices import (
    _check_better_offers,
    _check_invoices,
    _explain_as_of,
    _invoice_run,
    _period_total,
    _write_documents,
)
from freehours.sim.demo.mail import DEMO_PAGE_SECRET, send_mail

#: Each region's built-in plan.
from freehours.sim.demo.model import (
    DEMO_BREAKER,
    DEMO_LEASE_SECONDS,
    DRAIN_SECONDS,
    KWH_THOUSANDTH,
    OUTAGE_SECONDS,
    POLL_SECONDS,
    RAISED,
    RECEIVER_NETWORK,
    REGION_PLANS,
    SETTLE_DEADLINE,
    SPEED_SECONDS,
    WEBHOOK_DRAIN_SECONDS,
    ApiServer,
    DemoConfig,
    DemoFaults,
    DemoProgress,
    DemoResult,
    Gateway,
    RegionTotals,
    _clear,
    _first_day,
    _keys,
    _Sampler,
    invoice_as_of,
    no_free_days,
)
from freehours.sim.meters import households
from freehours.sim.receiver import DemoReceiver
from freehours.sim.replay import WorkerDied
from freehours.store.catalog import NewOffer
from freehours.workers.webhook import webhook_tasks
from freehours.workers.worker import Worker


def run_demo(config: DemoConfig, settings: Settings, progress: DemoProgress) -> DemoResult:
    """Run the demo in ``config.out`` over ``settings`` (its database URL, Redis and leases are
    the demo's own); every step's outcome is in the result, every broken invariant in its
    ``failures``."""
    started = time.monotonic()
    out = config.out
    out.mkdir(parents=True, exist_ok=True)
    _clear(out)
    settings = settings.model_copy(
        update={
            "database_url": f"sqlite:///{out / 'demo.db'}",
            "redis_url": None,
            "job_lease_seconds": DEMO_LEASE_SECONDS,
            "lock_timeout_seconds": DEMO_LEASE_SECONDS,
            # The demo's webhook receiver runs beside it, on loopback: a private destination.
            "webhook_allowed_networks": RECEIVER_NETWORK,
            # Its emails link to the customers' pages as --serve serves them.
            "public_url": f"http://127.0.0.1:{config.port}",
            "page_secret": SecretStr(DEMO_PAGE_SECRET),
        }
    )
    first_day = _first_day(config.days)
    result = DemoResult(config, first_day)
    regions = list(REGION_PLANS)
    customers = {
        house.nmi: regions[n % len(regions)]
        for n, house in enumerate(households(config.customers, random.Random(config.seed)))
    }
    days = [first_day + timedelta(days=n) for n in range(config.days)]
    keys = [(nmi, day) for nmi in customers for day in days]
    result.customer_days = len(keys)
    faults = DemoFaults(config.seed)
    runtime = Runtime.open(settings, SystemClock(), faults)
    receiver = DemoReceiver()
    try:
        admin_key, agent_key = _keys(runtime)
        limits = RateLimits.open(None, settings.rate_limit_per_client, settings.rate_limit_per_nmi)
        gateway = Gateway(create_app(Services(runtime, limits)), config.seed, OUTAGE_SECONDS)
        sample = _Sampler(runtime, gateway, result)
        with (
            receiver,
            ApiServer(gateway) as server,
            httpx.Client(
                base_url=server.url,
                headers={"Authorization": f"Bearer {admin_key}"},
                timeout=60.0,
            ) as api,
        ):
            progress.phase(f"API on {server.url}; plans and customers in every region")
            _catalogue(api, customers)
            _offers(runtime)
            _register_receiver(api, receiver)
            _deliver(
                config,
                server.url,
                agent_key,
                runtime=runtime,
                gateway=gateway,
                first_day=first_day,
                result=result,
                progress=progress,
                sample=sample,
            )
            pool = _settle(runtime, faults, keys, result=result, progress=progress, sample=sample)
            target, halve = _revision_target(runtime, keys, config.seed)
            period = BillingCycle().period_of(days[-1])
            as_of = invoice_as_of(period, runtime.settlements.policy.data_deadline)
            invoicing = as_of <= runtime.clock.now()
            before: Decimal | None = None
            try:
                if invoicing:
                    _explain_as_of(result, period, as_of, days)
                    _invoice_run(runtime, as_of, result=result, progress=progress, sample=sample)
                    before = _period_total(api, target[0], period)
                else:
                    result.invoicing = (
                        f"no invoices: the billing period {period.start} to {period.end} is not"
                        f" over before {as_of.isoformat()} (its last day's data deadline), and the"
                        " machine's clock says it is not that yet"
                    )
                _revise(
                    config,
                    server.url,
                    agent_key,
                    runtime=runtime,
                    target=target,
                    halve=halve,
                    result=result,
                    progress=progress,
                    sample=sample,
                )
                if invoicing:
                    _invoice_run(
                        runtime,
                        as_of + timedelta(days=1),
                        result=result,
                        progress=progress,
                        sample=sample,
                    )
            finally:
                pool.stop(settings.worker_grace_seconds)
            _drain_webhooks(runtime, receiver, result, progress)
            if invoicing:
                progress.phase("documents by email to the demo's mail server")
                send_mail(runtime, result)
            after = _period_total(api, target[0], period) if invoicing else None
            progress.phase("every quota asked once more; every customer's bill", len(keys))
            _ask(api, keys, result, progress)
            billed = _bills(api, customers, days, result)
        _explain_no_free(runtime, customers, result)
        _compare_offers(runtime, next(iter(customers)), days, result)
        result.faults.update(
            outage_refused=gateway.refused,
            answers_lost=gateway.lost,
            worker_died_holding=faults.died_holding,
            database_errors=len(faults.database_errors),
            cache_write_failures=faults.cache_failures,
        )
        _check(runtime, keys, billed, result)
        if invoicing:
            stored = _write_documents(runtime, out, result, progress)
            _check_invoices(
                runtime,
                stored=stored,
                nmis=set(customers),
                period=period,
                target=target,
                credited=halve,
                before=before,
                after=after,
                result=result,
            )
            _check_better_offers(stored, result)
    finally:
        runtime.close()
    result.elapsed = time.monotonic() - started
    return result


#: The demo's one offer beyond the built-in plans: NSW's plan with a lower supply charge and
#: shoulder price, so that its NSW customers' invoices name a better offer and the others' say
#: they are on the best plan for them.
SAVER_ID = "sso-nsw-saver"
SAVER_NAME = "Solar Saver Plus"


def _offers(runtime: Runtime) -> None:
    """The retailer's offers: each built-in plan, and NSW's saver."""
    offers = []
    for plan_id in REGION_PLANS.values():
        plan = builtin_plan(plan_id)
        terms = OfferTerms(Region(plan.region))
        offers.append(
            NewOffer(plan_id, plan.name, OfferSource.PLAN, terms, builtin_document(plan_id))
        )
    saver = builtin_document("sso-nsw")
    saver.update(id=SAVER_ID, description=SAVER_NAME, daily_supply_charge="0.9500")
    for band in saver["time_of_use"]:
        if band["type"] == "SHOULDER":
            band["unit_price"] = "0.3000"
    offers.append(NewOffer(SAVER_ID, SAVER_NAME, OfferSource.PLAN, OfferTerms(Region.NSW), saver))
    with runtime.store.write() as unit:
        unit.catalog.put_offers(offers, at=runtime.clock.now())


def _compare_offers(runtime: Runtime, nmi: str, days: list[date], result: DemoResult) -> None:
    """``nmi``'s stored data compared under every offer of the retailer, as ``freehours
    compare --offers`` compares a file."""
    with runtime.store.read() as unit:
        stored = unit.catalog.current_offers()
        read = unit.meter.days_for(nmi, days)
    plans = [parse_plan(offer.document, source=f"offer {offer.offer_id}") for offer in stored]
    compared, _ = compare_days(plans, read, None, None, Path(f"NMI {nmi}"))
    result.compared = (nmi, [row.as_json(n) for n, row in enumerate(compared[nmi], 1)])


def _register_receiver(api: httpx.Client, receiver: DemoReceiver) -> None:
    """The demo's receiver registered for every event type, through the API."""
    answer = api.post(
        "/v1/webhook-endpoints",
        json={"url": receiver.url, "events": list(EVENT_TYPES), "description": "the demo"},
    )
    answer.raise_for_status()
    receiver.secret = answer.json()["secret"]


def _drain_webhooks(
    runtime: Runtime, receiver: DemoReceiver, result: DemoResult, progress: DemoProgress
) -> None:
    """Deliver what the pool left pending (the receiver's 503s wait out their backoff), then
    hold the receiver's counts to the store's: one event per completed version, revision and
    document."""
    progress.phase("webhooks: the deliveries still pending")
    deliverer = Worker(runtime.store, webhook_tasks(runtime.webhooks), clock=runtime.clock)
    deadline = time.monotonic() + WEBHOOK_DRAIN_SECONDS
    while True:
        # A fan-out left to run writes deliveries: done only when nothing ran and none pends.
        ran = deliverer.run_due()
        with runtime.store.read() as unit:
            pending = unit.webhooks.count_by_status().get(DeliveryStatus.PENDING.value, 0)
        progress.update(0, f"{pending} pending")
        if (not pending and not ran) or time.monotonic() > deadline:
            break
        time.sleep(POLL_SECONDS)
    with runtime.store.read() as unit:
        credits = unit.quotas.every_credit()
        documents = unit.invoices.list_documents(limit=100_000)
        statuses = unit.webhooks.count_by_status()
    result.webhooks = Counter(receiver.events)
    result.webhook_requests = Counter(
        requests=receiver.requests,
        duplicates=receiver.duplicates,
        refused=receiver.refused,
        bad_signatures=receiver.bad_signatures,
        pending=statuses.get(DeliveryStatus.PENDING.value, 0),
        failed=statuses.get(DeliveryStatus.FAILED.value, 0),
    )
    expected = Counter(
        {
            "quota.completed": len(credits),
            "quota.revised": sum(
                1 for c in credits if c.version > 1 and (c.kwh != 0 or c.amount != 0)
            ),
            "invoice.finalised": sum(
                1 for d in documents if d.document_type is not DocumentType.CREDIT_NOTE
            ),
            "credit_note.issued": sum(
                1 for d in documents if d.document_type is DocumentType.CREDIT_NOTE
            ),
        }
    )
    for kind, count in expected.items():
        if result.webhooks[kind] != count:
            result.failures.append(
                f"webhooks: {result.webhooks[kind]} {kind} events received, {count} state changes"
            )
    if receiver.bad_signatures:
        result.failures.append(f"webhooks: {receiver.bad_signatures} bad signatures")


#: The demo's households: made-up names and addresses (one a region), each street in turn.
_NAMES = ("Sam Citizen", "Alex Example", "Jo Bloggs", "Kim Sample", "Lee Placeholder", "Pat Demo")
_STREETS = {
    Region.NSW: ("Sun Street", "Newtown NSW 2042"),
    Region.SEQ: ("Jacaranda Avenue", "Paddington QLD 4064"),
    Region.SA: ("Wattle Road", "Norwood SA 5067"),
    Region.VIC: ("Tram Lane", "Brunswick VIC 3056"),
}


def _catalogue(api: httpx.Client, customers: dict[str, Region]) -> None:
    """The plans, and each customer on its region's plan with a contact: a made-up name and
    supply address, half of them emailed (the others posted)."""
    for plan_id in REGION_PLANS.values():
        api.put(f"/v1/plans/{plan_id}", json=builtin_document(plan_id)).raise_for_status()
    for n, (nmi, region) in enumerate(customers.items()):
        street, locality = _STREETS[region]
        name = _NAMES[n % len(_NAMES)]
        body: dict[str, object] = {
            "plan_id": REGION_PLANS[region],
            "region": region.value,
            "name": name,
            "supply_address": [f"{n + 1} {street}", locality],
        }
        if n % 2 == 0:
            body["email"] = f"{name.split()[0].lower()}{n + 1}@example.com"
        api.put(f"/v1/customers/{nmi}", json=body).raise_for_status()


def _run_agent(
    config: DemoConfig,
    url: str,
    key: str,
    sources: list[str],
    *,
    on_poll: Callable[[], None],
) -> dict[str, Any]:
    """``freehours agent`` with ``sources`` as a process of its own (as a meter site runs it),
    until it exits; ``on_poll`` is called every ``POLL_SECONDS`` meanwhile. Its summary."""
    env = {name: value for name, value in os.environ.items() if name != "FREEHOURS_REDIS_URL"}
    env["FREEHOURS_API_KEY"] = key
    command = [
        sys.executable,
        "-c",
        "from freehours.cli import main; main()",
        "agent",
        "--api",
        url,
        "--spool",
        str(config.out / "agent-spool.db"),
        "--breaker-failures",
        str(DEMO_BREAKER.fail_max),
        "--breaker-reset",
        str(DEMO_BREAKER.reset_timeout),
        "--drain-timeout",
        str(DRAIN_SECONDS),
        "--json",
        *sources,
    ]
    with (config.out / "agent.log").open("a", encoding="utf-8") as log:
        # The command is freehours' own, with arguments the demo made: nothing untrusted.
        agent = subprocess.Popen(  # noqa: S603
            command, env=env, stdout=subprocess.PIPE, stderr=log, text=True
        )
        while agent.poll() is None:
            on_poll()
            time.sleep(POLL_SECONDS)
        stdout, _ = agent.communicate()
    lines = stdout.strip().splitlines()
    if not lines:
        raise RuntimeError(f"the agent exited with {agent.returncode} and no summary")
    summary: dict[str, Any] = json.loads(lines[-1])
    return summary


def _deliver(
    config: DemoConfig,
    url: str,
    key: str,
    *,
    runtime: Runtime,
    gateway: Gateway,
    first_day: date,
    result: DemoResult,
    progress: DemoProgress,
    sample: _Sampler,
) -> None:
    """The agent's simulated meters post every half-hour of the demo's days, the API down at
    first."""
    batches = config.customers * config.days * 48 * 2
    progress.phase(
        f"meter agent: {config.customers} meters, {config.days} days, {batches} batches"
        f" (the API down for its first {OUTAGE_SECONDS:.0f} s)",
        batches,
    )

    def poll() -> None:
        sample.sample()
        with runtime.store.read() as unit:
            stored = unit.idempotency.count()
        progress.update(
            stored or 0,
            f"{gateway.refused} refused while down, {gateway.repeats} re-sent",
        )

    seconds = config.days * 86400
    summary = _run_agent(
        config,
        url,
        key,
        [
            "--simulate",
            str(config.customers),
            "--seed",
            str(config.seed),
            "--start",
            f"{first_day.isoformat()}T00:00",
            "--duration",
            f"{config.days}d",
            "--speed",
            str(seconds / SPEED_SECONDS),
        ],
        on_poll=poll,
    )
    _add_agent_run(result, summary)


def _add_agent_run(result: DemoResult, summary: dict[str, Any]) -> None:
    total = result.agent.as_dict()
    result.agent = Counts(**{name: total[name] + summary[name] for name in total})
    result.agent_pending += summary["pending"]


def _settle(
    runtime: Runtime,
    faults: DemoFaults,
    keys: list[tuple[str, date]],
    *,
    result: DemoResult,
    progress: DemoProgress,
    sample: _Sampler,
) -> Worker:
    """A worker dies holding a quota; the pool settles every customer-day. Returns the running
    pool."""
    stale_nmi, stale_day = keys[random.Random(f"stale:{result.config.seed}").randrange(len(keys))]
    runtime.settlements.cache.put(new_quota(stale_nmi, stale_day), SETTLE_DEADLINE)
    result.faults["stale_cache_entry"] = quota_key(stale_nmi, stale_day)
    doomed = runtime.worker(1)
    faults.dying = True
    try:
        doomed.run_due(limit=1)
    except WorkerDied:
        pass  # its claimed job waits for its lease to run out, its quota for its lock to
    finally:
        faults.dying = False
    pool = runtime.worker(result.config.concurrency)
    progress.phase(
        f"settlement: a worker died holding {faults.died_holding}; a pool of"
        f" {result.config.concurrency} settles every customer-day",
        len(keys),
    )
    pool_started = time.monotonic()
    pool.start()
    deadline = pool_started + SETTLE_DEADLINE
    while True:
        settled = _settled(runtime, keys)
        sample.sample()
        progress.update(len(settled), f"{len(settled)} of {len(keys)} settled")
        if len(settled) == len(keys) or time.monotonic() > deadline:
            break
        time.sleep(POLL_SECONDS)
    offset = runtime.clock.now() - timedelta(seconds=time.monotonic() - pool_started)
    with runtime.store.read() as unit:
        completed = unit.quotas.first_versions_completed_at()
    result.settle_seconds = [(at - offset).total_seconds() for at in completed]
    return pool


def _settled(runtime: Runtime, keys: list[tuple[str, date]]) -> dict[tuple[str, date], Quota]:
    """The customer-days whose newest version is terminal."""
    found = {}
    with runtime.store.read() as unit:
        for nmi, day in keys:
            quota = unit.quotas.latest(nmi, day)
            if quota is not None and quota.status.is_terminal:
                found[nmi, day] = quota
    return found


def _revise(
    config: DemoConfig,
    url: str,
    key: str,
    *,
    runtime: Runtime,
    target: tuple[str, date],
    halve: bool,
    result: DemoResult,
    progress: DemoProgress,
    sample: _Sampler,
) -> None:
    """The provider revises one settled (and invoiced) day, halving its reads (``halve``) or
    raising each by 0.25 kWh: a NEM12 file through the agent; version 2."""
    nmi, day = target
    with runtime.store.read() as unit:
        before = unit.quotas.latest(nmi, day)
        stored = [d for d in unit.meter.days_for(nmi, [day]) if d.suffix == "E1"]
    if before is None or before.status is not QuotaStatus.COMPLETED or not stored:
        result.failures.append(f"{nmi}:{day}: not settled, so it cannot be revised")
        return
    how = "halves" if halve else "raises"
    progress.phase(f"revision: the provider {how} {nmi}'s reads of {day}; version 2", 1)
    original = stored[0]
    revised = IntervalDay(
        nmi,
        "E1",
        day,
        original.interval_minutes,
        tuple(
            None if v is None else (v / 2).quantize(KWH_THOUSANDTH) if halve else v + RAISED
            for v in original.values
        ),
        "A" * len(original.values),
        datetime.now(NEM_TIME).replace(microsecond=0) + timedelta(seconds=1),
    )
    inbox = config.out / "inbox"
    inbox.mkdir(exist_ok=True)
    write_nem12([revised], inbox / f"revision-{nmi}-{day.isoformat()}.csv")
    summary = _run_agent(
        config, url, key, ["--nem12-dir", str(inbox), "--once"], on_poll=sample.sample
    )
    _add_agent_run(result, summary)
    deadline = time.monotonic() + SETTLE_DEADLINE
    while time.monotonic() < deadline:
        sample.sample()
        with runtime.store.read() as unit:
            after = unit.quotas.latest(nmi, day)
        if after is not None and after.version > before.version and after.status.is_terminal:
            progress.update(1, f"version {after.version}: {after.status.value}")
            if before.free_kwh is not None and after.free_kwh is not None:
                result.revised = (quota_key(nmi, day), before.free_kwh, after.free_kwh)
            return
        time.sleep(POLL_SECONDS)
    result.failures.append(f"{nmi}:{day}: the revision's version 2 did not settle")


def _revision_target(
    runtime: Runtime, keys: list[tuple[str, date]], seed: int
) -> tuple[tuple[str, date], bool]:
    """The customer-day the provider revises, and whether it halves its reads: a day with free
    energy, so that halving it changes what was settled (a read that leaves the free energy as
    it was opens no new version) and the invoice is credited; without one, a day whose reads
    are raised, charged on an adjustment invoice."""
    settled = _settled(runtime, keys)
    free = [
        key
        for key in keys
        if (quota := settled.get(key)) is not None
        and quota.status is QuotaStatus.COMPLETED
        and (quota.free_kwh or 0) > 0
    ]
    chosen = free or keys
    return chosen[random.Random(seed).randrange(len(chosen))], bool(free)


def _ask(
    api: httpx.Client,
    keys: list[tuple[str, date]],
    result: DemoResult,
    progress: DemoProgress,
) -> None:
    for n, (nmi, day) in enumerate(keys, start=1):
        answer = api.post("/v1/free-energy/settlements", json={"nmi": nmi, "date": day.isoformat()})
        result.asks[answer.status_code] += 1
        progress.update(n, f"{result.asks[200]} replayed (200)")


def _bills(
    api: httpx.Client, customers: dict[str, Region], days: list[date], result: DemoResult
) -> dict[tuple[str, date], Decimal]:
    """Every customer's bill; the free kWh billed per customer-day."""
    billed: dict[tuple[str, date], Decimal] = {}
    totals: dict[str, list[Any]] = {}
    for nmi, region in customers.items():
        answer = api.get(
            f"/v1/customers/{nmi}/bill",
            params={"from": days[0].isoformat(), "to": days[-1].isoformat()},
        )
        answer.raise_for_status()
        bill = answer.json()
        kept = totals.setdefault(region.value, [0, Decimal(0), Decimal(0)])
        kept[0] += 1
        kept[1] += Decimal(bill["totals"]["free_kwh"])
        kept[2] += Decimal(bill["free_energy_value"])
        per_day = result.free_by_region_day.setdefault(region.value, {})
        for line in bill["days"]:
            day = date.fromisoformat(line["date"])
            per_day[day] = per_day.get(day, Decimal(0)) + Decimal(line["free_kwh"])
            billed[nmi, day] = Decimal(line["free_kwh"])
    result.regions = {
        region: RegionTotals(count, kwh, value) for region, (count, kwh, value) in totals.items()
    }
    return billed


def _explain_no_free(runtime: Runtime, customers: dict[str, Region], result: DemoResult) -> None:
    """Each region's days without free energy, with what its meters read in the window."""
    for region, free_by_day in sorted(result.free_by_region_day.items()):
        plan = builtin_plan(REGION_PLANS[Region(region)])
        nem_dates = {nem for day in free_by_day for nem in plan.nem_dates(day)}
        with runtime.store.read() as unit:
            meter_days = [
                meter_day
                for nmi, home in customers.items()
                if home.value == region
                for meter_day in unit.meter.days_for(nmi, nem_dates)
            ]
        explained = no_free_days(region, plan, free_by_day, meter_days)
        if explained is not None:
            result.no_free.append(explained)


def _check(
    runtime: Runtime,
    keys: list[tuple[str, date]],
    billed: dict[tuple[str, date], Decimal],
    result: DemoResult,
) -> None:
    """The invariants; each one broken is a sentence in ``result.failures``."""
    settled = _settled(runtime, keys)
    with runtime.store.read() as unit:
        result.versions = unit.quotas.count_versions()
        credits = unit.quotas.every_credit()
        every_job = unit.jobs.every()
        result.failed_settlement_attempts = unit.quotas.sum_attempts()
    for job in every_job:
        result.job_runs += job.runs
        result.job_retries += max(0, job.runs - 1)
        if job.state is JobState.DISCARDED:
            result.discarded.append(f"job {job.key}: {job.outcome}")
    booked: dict[tuple[str, date], Decimal] = {}
    for credit in credits:
        key = (credit.nmi, credit.date)
        booked[key] = booked.get(key, Decimal(0)) + credit.kwh
    for nmi, day in keys:
        quota = settled.get((nmi, day))
        where = quota_key(nmi, day)
        if quota is None:
            result.failures.append(f"{where}: not settled, and no reason given")
            continue
        if quota.status is QuotaStatus.ABORTED:
            result.aborted.append(f"{where}: {quota.reason}")
            continue
        result.settled += 1
        if booked.get((nmi, day)) != quota.free_kwh:
            result.failures.append(
                f"{where}: the ledger books {booked.get((nmi, day))} kWh,"
                f" the settlement says {quota.free_kwh}"
            )
        if billed.get((nmi, day)) != quota.free_kwh:
            result.failures.append(
                f"{where}: the bill shows {billed.get((nmi, day))} free kWh,"
                f" the settlement {quota.free_kwh}"
            )
    if result.agent_pending or result.agent.rejected:
        result.failures.append(
            f"the agent left {result.agent_pending} batches unsent and had"
            f" {result.agent.rejected} refused"
        )
    replays = result.asks.get(200, 0)
    if replays != len(keys):
        result.failures.append(f"{len(keys) - replays} quotas did not answer 200 when asked")
