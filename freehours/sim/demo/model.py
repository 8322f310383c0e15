"""The demo's configuration, what it found (``DemoResult``) and the parts it runs: the gateway
that injects its faults and the API server on a port of its own."""

from __future__ import annotations

import random
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from datetime import time as clock_time
from decimal import Decimal
from pathlib import Path
from typing import Any, Protocol

import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from freehours.agent.breaker import BreakerConfig
from freehours.agent.tally import Counts
from freehours.api.keys import Scope as KeyScope
from freehours.api.keys import create_key
from freehours.cache.quota import CacheUnavailable
from freehours.domain.invoicing import DocumentType, Period
from freehours.domain.plan import Plan
from freehours.domain.reads import IntervalDay
from freehours.domain.settlement import Quota
from freehours.domain.time import NEM_TIME, Region
from freehours.operations.runtime import Runtime
from freehours.settlement.model import FaultPoint
from freehours.sim.meters import SOLAR_SHARER_START
from freehours.sim.replay import WorkerDied
from freehours.store.errors import connection_lost
from freehours.store.invoices import RunCounts

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
    #: Where ``--serve`` serves the API, the console and the customers' pages.
    port: int = 8765


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
        # log_config=None: uvicorn's lines through the root logger, rendered as the demo's are
        # (its own set-up would give its loggers handlers of their own, on this stderr for good).
        config = uvicorn.Config(
            app, log_level="warning", log_config=None, access_log=False, lifespan="on"
        )
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
    #: An invoice's better offer check: its outcome, and the message page 1 prints.
    offer_outcome: str | None = None
    offer_message: str = ""


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
    #: The retailer's offers (the demo stores its built-in plans as offers) compared on one
    #: customer's data, cheapest first: its NMI and each plan's row (``Rated.as_json``).
    compared: tuple[str, list[dict[str, object]]] | None = None
    #: Documents by email: deliveries by status, and ``received`` by the demo's mailbox.
    mail: dict[str, int] = field(default_factory=dict)
    #: A customer's page, as the first email's link has it.
    page_link: str | None = None
    failures: list[str] = field(default_factory=list)
    elapsed: float = 0.0


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


def _a(kind: DocumentType) -> str:
    """ "a credit note", "an invoice", "an adjustment invoice"."""
    words = kind.value.replace("_", " ")
    return f"{'an' if words[0] in 'aeiou' else 'a'} {words}"
