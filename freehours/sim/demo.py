"""``freehours demo``: the whole system end to end on the embedded default, under injected faults.

1. **API**: a SQLite database in ``--out``, the HTTP API (``freehours serve``'s application) on a
   free 127.0.0.1 port, behind a gateway that can fail; an admin key and an ingest key.
2. **Catalogue**: the four built-in plans, and the customers, spread over every region, put
   through the API with the admin key.
3. **Meters**: ``freehours agent --simulate`` runs as a process of its own: its simulated meters
   read every half-hour of the demo's days (in the past, so every day is due at once; simulated
   time runs fast) and it posts them. The API is down as the agent starts (503 for
   ``OUTAGE_SECONDS`` from its first request): its breaker opens, it waits for a trial call,
   then sends what it spooled.
   Now and then the gateway loses an answer after the API stored the batch: the agent resends it
   and the API replays its first answer.
4. **Settlement**: settlement jobs were enqueued with the reads. One worker dies right after it
   claims a job and locks its quota; the worker pool starts, the rescuer finds the dead worker's
   job once its lease runs out and the quota's lock is taken over. Some first attempts meet a
   database error before the final write (released, retried), some cache writes fail, and one
   quota has a stale "pending" cache entry. The pool starts once the meters' reads are in: a read
   that lands after its day is settled opens the next version of the day, which step 5 shows.
5. **Invoices**: an invoice run (``freehours invoices run``'s), its jobs run by the worker pool,
   as of the moment the demo's billing period (July, monthly from the 1st) closed: its last
   day's data deadline passed (``invoice_as_of``). The demo's clock is the machine's and its days
   are the offer's first, in the past; a run as of now would also invoice every month since, for
   which the demo has no meter data, at the daily supply charge alone. The period's days without
   data (the demo reads ``--days`` of them) are billed as invoicing bills a day that got no data
   by its deadline: supply, no energy.
6. **Revision**: the meter data provider revises one invoiced day (half its reads: an estimate
   replaced by the actual), a NEM12 file that ``freehours agent --nem12-dir`` sends: the quota
   reopens as version 2 and books the difference. A second run, a day after the first, credits
   exactly the difference on a credit note that names the invoice.
7. **Answers and bills**: every quota asked once more over HTTP (a replay, 200), every
   customer's bill fetched over HTTP.
8. **Documents**: every invoice and credit note written as PDF and HTML to ``--out``/documents.

A region whose customers had no free energy on a day is told why (``no_free_days``): what its
meters imported and exported inside that day's window, read back from the store.

Then the invariants are checked: every customer-day settled (or aborted with its reason), one
credit per quota version and the ledger summing to the settled free energy, bills agreeing with
the settlements, no meter data left behind; one invoice per customer and period, each day's free
energy on its documents the ledger's to the 0.001 kWh, the credit note's total the difference
between the period's bill after the revision and its invoice, numbers without a gap.

Leases and settlement locks are 5 s here instead of 30 s, so that the dead worker's job is rescued
within seconds; everything else runs as configured.
"""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from datetime import time as clock_time
from decimal import Decimal
from pathlib import Path
from typing import Any, Protocol

import httpx
import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from freehours.agent.breaker import BreakerConfig
from freehours.agent.tally import Counts
from freehours.api.app import create_app
from freehours.api.keys import Scope as KeyScope
from freehours.api.keys import create_key
from freehours.api.ratelimit import RateLimits
from freehours.api.services import Services
from freehours.cache.quota import CacheUnavailable
from freehours.clock import SystemClock
from freehours.documents.html import render_html
from freehours.documents.pdf import render_pdf
from freehours.domain.invoicing import BillingCycle, DocumentType, Period, Series
from freehours.domain.plan import Plan
from freehours.domain.reads import IntervalDay
from freehours.domain.settlement import Quota, QuotaStatus, new_quota, quota_key
from freehours.domain.time import NEM_TIME, Region
from freehours.domain.webhooks import EVENT_TYPES, DeliveryStatus
from freehours.invoicing import document_of
from freehours.jobs.job import JobState
from freehours.jobs.webhook import webhook_tasks
from freehours.jobs.worker import Worker
from freehours.meterdata.writer import write_nem12
from freehours.plans import builtin_document, builtin_plan
from freehours.runtime import Runtime
from freehours.settings import Settings
from freehours.settlement import FaultPoint
from freehours.sim.meters import SOLAR_SHARER_START, households
from freehours.sim.receiver import DemoReceiver
from freehours.sim.replay import WorkerDied
from freehours.store.errors import connection_lost
from freehours.store.invoices import InvoiceRun, RunCounts, StoredDocument

#: Each region's built-in plan.
REGION_PLANS = {
    Region.NSW: "sso-nsw",
    Region.SEQ: "sso-seq",
    Region.SA: "sso-sa",
    Region.VIC: "mps-vic",
}
#: The API answers 503 for this long from the agent's first request: a deploy, long enough for
#: the agent's breaker (three failures in a row, 2 s open) to open and let a trial call through.
OUTAGE_SECONDS = 3.0
#: Share of ingest answers the gateway loses after the API did the work.
LOST_ANSWER_RATE = 0.01
#: Share of quotas whose first settlement attempt meets a database error before the final write.
DATABASE_ERROR_RATE = 0.1
#: Share of cache writes after a commit that fail.
CACHE_FAILURE_RATE = 0.05
#: Leases and locks in the demo: a dead worker's job and lock are taken over after this long.
DEMO_LEASE_SECONDS = 5.0
#: The agent's breaker in the demo: opens after three failures, tries again after two seconds.
DEMO_BREAKER = BreakerConfig(fail_max=3, reset_timeout=2.0, name="demo-agent")
#: The agent's simulated meters read the demo's days within this many real seconds.
SPEED_SECONDS = 1.0
#: The longest the agent may go on trying to empty its spool after its meters finished.
DRAIN_SECONDS = 120.0
#: The longest the demo waits for every quota to settle, or for the revision's.
SETTLE_DEADLINE = 90.0
#: How often the demo looks at the quotas while it waits.
POLL_SECONDS = 0.25
#: Where the demo's webhook receiver listens (``DemoReceiver``): allowed despite being loopback.
RECEIVER_NETWORK = "127.0.0.1/32"
#: The longest the demo waits for its webhooks' last deliveries after the pool stops.
WEBHOOK_DRAIN_SECONDS = 60.0
#: Where the documents go, in ``--out``: the report links them by this relative path.
DOCUMENTS_DIR = "documents"
#: What a raising revision adds to each interval, in kWh.
RAISED = Decimal("0.250")
#: How closely a document's free energy must match the ledger's (and the revision's reads' step).
KWH_THOUSANDTH = Decimal("0.001")


def counted(count: int, noun: str) -> str:
    """ "1 invoice", "8 invoices", "0 credit notes"."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def invoice_as_of(period: Period, data_deadline: timedelta) -> datetime:
    """The first midnight, NEM time, by which ``period``'s last day is past its data deadline in
    every region: when a retailer's run can invoice it, every day settled or given up on."""
    whole_days = data_deadline.days + (
        1 if data_deadline - timedelta(days=data_deadline.days) else 0
    )
    return datetime.combine(period.end + timedelta(days=1 + whole_days), clock_time(), NEM_TIME)


class DemoProgress(Protocol):
    """Where the demo says what it is doing."""

    def phase(self, title: str, total: float | None = None) -> None:
        """A step begins; ``total``: how much of it there is to do, when known."""

    def update(self, done: float, detail: str = "") -> None:
        """How far the step has come."""


@dataclass(frozen=True, slots=True)
class DemoConfig:
    out: Path
    customers: int
    days: int
    seed: int
    #: Jobs the worker pool runs at once.
    concurrency: int = 4


@dataclass(frozen=True, slots=True)
class RegionTotals:
    customers: int
    free_kwh: Decimal
    free_value: Decimal


#: kWh in the demo's summary: to the watt-hour, as its meters read, never rounded (a figure with
#: more places shows them all).
KWH_PLACES = 3


def kwh_figure(value: Decimal) -> str:
    """``value`` kWh as every figure of the demo's summary writes it: three decimals at least,
    "3.726", "0.000", "1.500", so that the figures of a column line up."""
    exponent = value.normalize().as_tuple().exponent
    places = max(KWH_PLACES, -exponent if isinstance(exponent, int) else 0)
    return format(value.quantize(Decimal(1).scaleb(-places)), "f")


@dataclass(frozen=True, slots=True)
class NoFreeDays:
    """A region's days on which its customers had no free energy, and what their meters read in
    the free window on those days: why they had none."""

    region: str
    #: The days without free energy, of how many the demo billed.
    days: tuple[date, ...]
    billed_days: int
    window: str
    #: Inside the window on those days: energy drawn from the grid, and exported to it.
    imported_kwh: Decimal
    exported_kwh: Decimal

    def sentence(self) -> str:
        """What the summary says, for instance "SA: 0.000 kWh free: its simulated solar export
        covered the window (12:00-15:00 local) on every day (...)"."""
        every = len(self.days) == self.billed_days
        when = ("on every day" if self.billed_days > 1 else "on the day") if every else "then"
        if self.imported_kwh == 0 and self.exported_kwh > 0:
            why = (
                f"its simulated solar export covered the window ({self.window} local) {when}"
                f" (nothing imported from the grid in it; {kwh_figure(self.exported_kwh)} kWh"
                " exported)"
            )
        elif self.imported_kwh == 0:
            why = f"its meters read no import in the window ({self.window} local) {when}"
        else:
            why = (
                f"{kwh_figure(self.imported_kwh)} kWh imported in the window ({self.window}"
                f" local) {when}, none of it billed free"
            )
        if every:
            return f"{self.region}: {kwh_figure(Decimal(0))} kWh free: {why}"
        dates = " and ".join(f"{day:%a %d %b}" for day in self.days)
        return f"{self.region}: no free kWh on {dates}: {why}"


def no_free_days(
    region: str,
    plan: Plan,
    free_by_day: dict[date, Decimal],
    meter_days: Iterable[IntervalDay],
) -> NoFreeDays | None:
    """Why ``region`` had no free energy on the days ``free_by_day`` (its customers' free kWh
    per day, from the bills) gives 0, from ``meter_days`` (its customers' stored days): what
    they imported and exported inside each such day's window, whole intervals. None when every
    day had some."""
    days = tuple(sorted(day for day, kwh in free_by_day.items() if kwh == 0))
    if not days or plan.free_window is None:
        return None
    windows = [plan.free_window.bounds(day, plan.zone) for day in days]
    imported = exported = Decimal(0)
    for meter_day in meter_days:
        length = timedelta(minutes=meter_day.interval_minutes)
        for index, value in enumerate(meter_day.values):
            start = meter_day.start + index * length
            inside = any(opens <= start and start + length <= closes for opens, closes in windows)
            if value is None or not inside:
                continue
            if plan.is_consumption(meter_day.suffix):
                imported += value
            elif plan.is_export(meter_day.suffix):
                exported += value
    return NoFreeDays(region, days, len(free_by_day), plan.free_window.label, imported, exported)


@dataclass
class DemoFaults:
    """What the demo injects into the server's settlements (the ``SettlementFaults`` seam)."""

    seed: int
    #: Set while the doomed worker runs: it dies after its claim.
    dying: bool = False
    died_holding: str | None = None
    database_errors: set[str] = field(default_factory=set)
    cache_failures: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def check(self, point: FaultPoint, quota: Quota) -> None:
        if point is FaultPoint.AFTER_CLAIM and self.dying:
            self.died_holding = quota.key
            raise WorkerDied(quota.key)
        if point is FaultPoint.BEFORE_COMPLETE and quota.fence == 1:
            if self._strikes("database", quota.key, DATABASE_ERROR_RATE):
                with self._lock:
                    self.database_errors.add(quota.key)
                raise connection_lost("COMMIT", "injected: the connection was lost")
        elif point is FaultPoint.CACHE_WRITE and self._strikes(
            "cache", f"{quota.key}:{quota.revision}", CACHE_FAILURE_RATE
        ):
            with self._lock:
                self.cache_failures += 1
            raise CacheUnavailable("injected: the cache did not answer")

    def _strikes(self, kind: str, what: str, rate: float) -> bool:
        """Whether the fault strikes ``what``: the same answer whichever thread asks first."""
        return random.Random(f"{self.seed}:{kind}:{what}").random() < rate


class Gateway:
    """What stands between the agent and the API, as a load balancer would: 503 for the first
    ``outage`` seconds of ingest traffic (a deploy), and now and then a 502 in place of an
    ingest's answer, after the API did the work. It counts the agent's re-sends: requests with
    an Idempotency-Key it has seen."""

    def __init__(self, app: ASGIApp, seed: int, outage: float) -> None:
        self._app = app
        self._rng = random.Random(f"gateway:{seed}")
        self._outage = outage
        self._back_at: float | None = None
        self.refused = 0
        self.lost = 0
        self.repeats = 0
        self._seen: set[bytes] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/v1/meter-readings"):
            await self._app(scope, receive, send)
            return
        key = dict(scope["headers"]).get(b"idempotency-key", b"")
        if key in self._seen:
            self.repeats += 1
        self._seen.add(key)
        if self._back_at is None:
            self._back_at = time.monotonic() + self._outage
        if time.monotonic() < self._back_at:
            self.refused += 1
            await _problem(send, 503, "the API is down (injected)")
            return
        if self._rng.random() < LOST_ANSWER_RATE:
            self.lost += 1

            async def lost(message: Message) -> None:
                return None

            await self._app(scope, receive, lost)
            await _problem(send, 502, "the API's answer was lost (injected)")
            return
        await self._app(scope, receive, send)


async def _problem(send: Send, status: int, title: str) -> None:
    body = f'{{"title":"{title}","status":{status}}}'.encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/problem+json")],
        }
    )
    await send({"type": "http.response.body", "body": body})


class ApiServer:
    """uvicorn serving ``app`` on a free 127.0.0.1 port, in a thread of this process."""

    def __init__(self, app: ASGIApp) -> None:
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}"
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )

    def __enter__(self) -> ApiServer:
        self._thread.start()
        deadline = time.monotonic() + 30.0
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the demo's API server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(10.0)
        self._socket.close()


@dataclass(frozen=True, slots=True)
class DemoRun:
    """An invoice run of the demo: as of when, what it made, and why any period waited."""

    as_of: datetime
    counts: RunCounts
    notes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DemoDocument:
    """A finalised document of the demo, and its PDF and HTML (paths relative to ``--out``)."""

    number: str
    kind: DocumentType
    nmi: str
    period: Period
    total: Decimal
    free_kwh: Decimal
    corrects: str | None
    pdf: str
    html: str


@dataclass
class DemoResult:
    """What the demo did and found."""

    config: DemoConfig
    first_day: date
    customer_days: int = 0
    settled: int = 0
    versions: int = 0
    #: The revised day: its key, and its free kWh before and after.
    revised: tuple[str, Decimal, Decimal] | None = None
    regions: dict[str, RegionTotals] = field(default_factory=dict)
    free_by_region_day: dict[str, dict[date, Decimal]] = field(default_factory=dict)
    #: The regions with days without free energy, and why (``no_free_days``).
    no_free: list[NoFreeDays] = field(default_factory=list)
    agent: Counts = field(default_factory=Counts)
    agent_pending: int = 0
    job_runs: int = 0
    job_retries: int = 0
    failed_settlement_attempts: int = 0
    discarded: list[str] = field(default_factory=list)
    aborted: list[str] = field(default_factory=list)
    faults: dict[str, Any] = field(default_factory=dict)
    asks: Counter[int] = field(default_factory=Counter)
    #: Seconds from the worker pool's start to each first version's settlement.
    settle_seconds: list[float] = field(default_factory=list)
    #: (seconds since the start, the agent's retried attempts, job runs after a job's first).
    retry_samples: list[tuple[float, int, int]] = field(default_factory=list)
    #: The invoice runs, the documents they made, and how the runs were dated and why.
    runs: list[DemoRun] = field(default_factory=list)
    documents: list[DemoDocument] = field(default_factory=list)
    invoicing: str = ""
    #: The webhook receiver's counts: events by type (each webhook-id once), and ``requests``,
    #: ``duplicates``, ``refused`` (its own 503s, retried), ``bad_signatures``.
    webhooks: Counter[str] = field(default_factory=Counter)
    webhook_requests: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    elapsed: float = 0.0


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
            after = _period_total(api, target[0], period) if invoicing else None
            progress.phase("every quota asked once more; every customer's bill", len(keys))
            _ask(api, keys, result, progress)
            billed = _bills(api, customers, days, result)
        _explain_no_free(runtime, customers, result)
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
    finally:
        runtime.close()
    result.elapsed = time.monotonic() - started
    return result


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


def _clear(out: Path) -> None:
    """Forget an earlier demo in ``out``: its database, spool and files."""
    for name in ("demo.db", "agent-spool.db"):
        for suffix in ("", "-wal", "-shm"):
            (out / f"{name}{suffix}").unlink(missing_ok=True)
    (out / "agent.log").unlink(missing_ok=True)
    for directory in (out / "inbox", out / DOCUMENTS_DIR):
        if directory.is_dir():
            for path in sorted(directory.rglob("*"), reverse=True):
                if path.is_dir():
                    path.rmdir()
                else:
                    path.unlink()


def _first_day(days: int) -> date:
    """The Solar Sharer Offer's first day, or, on a machine whose clock is before the demo's
    last day has passed, the days that end the day before yesterday: every day must be over."""
    latest_first = datetime.now(NEM_TIME).date() - timedelta(days=days + 1)
    return min(SOLAR_SHARER_START, latest_first)


def _keys(runtime: Runtime) -> tuple[str, str]:
    """An admin key for the demo and an ingest key for the agent, as ``freehours keys create``
    makes them."""
    now = runtime.clock.now()
    with runtime.store.write() as unit:
        _, admin = create_key(unit.keys, frozenset({KeyScope.ADMIN}), "demo", now)
        _, agent = create_key(unit.keys, frozenset({KeyScope.INGEST}), "demo agent", now)
    return admin, agent


def _catalogue(api: httpx.Client, customers: dict[str, Region]) -> None:
    for plan_id in REGION_PLANS.values():
        api.put(f"/v1/plans/{plan_id}", json=builtin_document(plan_id)).raise_for_status()
    for nmi, region in customers.items():
        body = {"plan_id": REGION_PLANS[region], "region": region.value}
        api.put(f"/v1/customers/{nmi}", json=body).raise_for_status()


class _Sampler:
    """Samples the retries for the report's plot: the agent's re-sends as the gateway sees them,
    and the jobs' runs after their first, from the store."""

    def __init__(self, runtime: Runtime, gateway: Gateway, result: DemoResult) -> None:
        self._runtime = runtime
        self._gateway = gateway
        self._result = result
        self._started = time.monotonic()

    def sample(self) -> None:
        with self._runtime.store.read() as unit:
            reruns = unit.jobs.reruns()
        self._result.retry_samples.append(
            (time.monotonic() - self._started, self._gateway.repeats, int(reruns or 0))
        )


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


def _a(kind: DocumentType) -> str:
    """ "a credit note", "an invoice", "an adjustment invoice"."""
    words = kind.value.replace("_", " ")
    return f"{'an' if words[0] in 'aeiou' else 'a'} {words}"


@dataclass(frozen=True, slots=True)
class ConsoleServer:
    """The console over a finished demo's database: where, and the key to sign in with."""

    url: str
    key: str
    server: uvicorn.Server
    runtime: Runtime

    def run(self) -> None:
        """Serve until interrupted (Ctrl-C), then close the database."""
        try:
            self.server.run()
        finally:
            self.runtime.close()


def console_server(out: Path, settings: Settings, port: int) -> ConsoleServer:
    """The API and its console on 127.0.0.1:``port`` over the demo's database in ``out``, with
    a new admin key to sign in with (made as ``freehours keys create --scope admin`` makes one).
    Not started: ``run()`` serves until interrupted."""
    settings = settings.model_copy(
        update={"database_url": f"sqlite:///{out / 'demo.db'}", "redis_url": None}
    )
    runtime = Runtime.open(settings, SystemClock())
    with runtime.store.write() as unit:
        _, key = create_key(
            unit.keys, frozenset({KeyScope.ADMIN}), "demo console", runtime.clock.now()
        )
    limits = RateLimits.open(None, settings.rate_limit_per_client, settings.rate_limit_per_nmi)
    app = create_app(Services(runtime, limits))
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", access_log=False, lifespan="on"
    )
    return ConsoleServer(f"http://127.0.0.1:{port}/console/", key, uvicorn.Server(config), runtime)
