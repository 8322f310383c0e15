"""The running system's parts, built once from the settings: what every command and server uses.

runtime = Runtime.open(get_settings())
runtime.settlements.settle(nmi, day)
runtime.ingestion.file(read_days(path))
runtime.close()
"""

from __future__ import annotations

import gc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import partial
from random import Random

import structlog

from freehours.backoff import RandomSource
from freehours.cache.breaker import RedisBreaker
from freehours.cache.quota import open_quota_cache
from freehours.clock import Clock, SystemClock
from freehours.documents.examples import EXAMPLE_RETAILER
from freehours.documents.model import DocumentError, Retailer
from freehours.domain.contacts import Contact
from freehours.domain.invoicing import BillingCycle
from freehours.domain.time import Region
from freehours.errors import ConfigurationError
from freehours.invoicing.mail import DocumentMail, PageLinks, Sender
from freehours.invoicing.model import InvoicingPolicy
from freehours.invoicing.service import Invoicing
from freehours.invoicing.smtp import SmtpServer
from freehours.jobs.retry import RetryPolicy
from freehours.observability.measured import Measurement
from freehours.observability.metrics import JOBS_STUCK, SETTLEMENTS_UNSCHEDULED
from freehours.operations.customer_csv import CustomerRecord
from freehours.plans.cache import PlanCache
from freehours.plans.calendars import load_holiday_calendars
from freehours.settings import Settings
from freehours.settlement.ingest import Ingestion
from freehours.settlement.model import SettlementFaults, SettlementPolicy
from freehours.settlement.service import Settlements
from freehours.store.catalog import RegionMismatch, UnknownPlan
from freehours.store.database import Store, Unit
from freehours.store.timeouts import Timeouts
from freehours.webhooks.sender import HttpSender
from freehours.webhooks.service import Webhooks
from freehours.workers import rescuer
from freehours.workers.invoice import invoicing_tasks
from freehours.workers.mail import mail_tasks
from freehours.workers.settle import SettlementJobs, settlement_tasks
from freehours.workers.webhook import webhook_tasks
from freehours.workers.worker import Worker, WorkerConfig


def freeze_start_up_heap() -> None:
    """For a long-running process (the API, a worker), once it has started: what start-up made
    (modules, the application and its schemas, the services) moved out of the cyclic garbage
    collector's sight, after one last collection. The collector walks every object it tracks
    now and then, and a served process keeps hundreds of thousands from start-up that it never
    frees: measured on the API under load (``make bench``, section ``api``), the collector took
    1.36 s of a 15.5 s run, 0.49 s with them frozen, and a settlement 1.51 ms of CPU instead of
    1.14. What is made afterwards is collected as before. Logged at debug (a process's
    start-up says nothing more at info) as ``start_up_heap_frozen``, with the number of
    ``objects`` frozen."""
    gc.collect()
    gc.freeze()
    structlog.get_logger("freehours.runtime").debug(
        "start_up_heap_frozen", objects=gc.get_freeze_count()
    )


# The settings mapped onto the policies they configure: here, where the parts are built, so that
# the settings (read by every part) depend on none of them.
def settlement_policy(settings: Settings) -> SettlementPolicy:
    """The settlement's limits as configured."""
    return SettlementPolicy(
        lock_timeout=timedelta(seconds=settings.lock_timeout_seconds),
        max_attempts=settings.settlement_max_attempts,
        grace=timedelta(seconds=settings.settlement_grace_seconds),
        data_deadline=timedelta(hours=settings.data_deadline_hours),
    )


#: The settings that name the retailer on its documents, and the field of ``Retailer`` each sets.
#: ``freehours_settlements_unscheduled_days`` reads a week of the meter days' index (0.08 s at
#: 20,000 customers): measured at most every 5 minutes, since a stranded day is a matter of hours
#: (its alert waits an hour), not of the seconds ``freehours_jobs_stuck`` is.
UNSCHEDULED_FRESH_SECONDS = 300.0

RETAILER_SETTINGS = {
    "retailer_name": "name",
    "retailer_abn": "abn",
    "retailer_phone": "phone",
    "retailer_website": "website",
    "retailer_postal_address": "postal_address",
    "retailer_email": "email",
    "retailer_hardship_phone": "hardship_phone",
}
_RETAILER_REQUIRED = (
    "retailer_name",
    "retailer_abn",
    "retailer_phone",
    "retailer_website",
    "retailer_postal_address",
)


def retailer(settings: Settings) -> Retailer:
    """The retailer's details as configured; the example retailer (marked as such on every
    document) when none is. Part of them is a ``ConfigurationError`` naming what is missing."""
    given = {name: getattr(settings, name) for name in RETAILER_SETTINGS}
    if all(value is None for value in given.values()):
        return EXAMPLE_RETAILER
    missing = [name for name in _RETAILER_REQUIRED if not given[name]]
    if missing:
        names = ", ".join(f"FREEHOURS_{name.upper()}" for name in missing)
        raise ConfigurationError(f"the retailer's details are incomplete: set {names}")
    values: dict[str, object] = {
        field: given[name] for name, field in RETAILER_SETTINGS.items() if given[name]
    }
    values["postal_address"] = tuple(
        line.strip() for line in str(given["retailer_postal_address"]).split("|") if line.strip()
    )
    try:
        return Retailer(**values)  # type: ignore[arg-type]
    except DocumentError as exc:
        raise ConfigurationError(f"FREEHOURS_RETAILER_*: {exc}") from None


def invoicing_policy(settings: Settings) -> InvoicingPolicy:
    """How invoices are numbered and runs are cut, as configured."""
    return InvoicingPolicy(
        data_deadline=timedelta(hours=settings.data_deadline_hours),
        invoice_prefix=settings.invoice_prefix,
        credit_note_prefix=settings.credit_note_prefix,
        batch_size=settings.invoice_batch_size,
        retailer=retailer(settings),
        better_offer_threshold=settings.better_offer_threshold,
        better_offer_check=settings.better_offer_check,
    )


def worker_config(
    settings: Settings,
    concurrency: int | None = None,
    queues: Mapping[str, int] | None = None,
) -> WorkerConfig:
    """How a job worker runs as configured; a command's options override the settings:
    ``concurrency`` ``worker_concurrency`` (the runners of each queue not sized otherwise),
    ``queues`` (the runners of the queues it names) ``worker_queues``."""
    return WorkerConfig(
        concurrency=concurrency or settings.worker_concurrency,
        queues=dict(settings.queue_runners() if queues is None else queues),
        lease=timedelta(seconds=settings.job_lease_seconds),
        poll=timedelta(seconds=settings.job_poll_seconds),
        retention=timedelta(hours=settings.job_retention_hours),
        partitions_ahead=settings.partitions_ahead_months,
        history_months=settings.history_retention_months,
    )


def retry_policy(
    settings: Settings, clock: Clock, random: RandomSource | None = None
) -> RetryPolicy:
    """The job retry policy as configured, drawing its jitter from ``random`` (default: the
    system's ``random.Random``)."""
    return RetryPolicy(
        clock,
        random or Random(),
        base=timedelta(seconds=settings.job_retry_base_seconds),
        cap=timedelta(seconds=settings.job_retry_cap_seconds),
    )


def configured_webhooks(store: Store, settings: Settings, clock: Clock) -> Webhooks:
    """Webhooks as configured: the destination policy (``webhook_allowed_networks``) checked
    at registration and at every connect, each attempt bounded by ``webhook_deadline_seconds``."""
    destinations = settings.webhook_destinations()
    sender = HttpSender(destinations, deadline=settings.webhook_deadline_seconds)
    return Webhooks(store, clock, send=sender, destinations=destinations)


def configured_mail(store: Store, settings: Settings, clock: Clock) -> DocumentMail:
    """Documents by email as configured: the ``FREEHOURS_SMTP_*`` server (none where
    ``smtp_host`` is empty) and the address they come from."""
    server = None
    if settings.smtp_host:
        server = SmtpServer(
            settings.smtp_host,
            settings.smtp_port,
            settings.smtp_security,
            settings.smtp_username,
            settings.smtp_password.get_secret_value(),
            settings.smtp_ca_file,
            settings.smtp_deadline_seconds,
        )
    links = None
    secret = settings.page_secret.get_secret_value()
    if settings.public_url and secret:
        links = PageLinks(settings.public_url, secret.encode(), settings.page_link_days)
    return DocumentMail(store, clock, Sender(server, settings.mail_from, links))


@dataclass
class Runtime:
    """The database, the quota cache, the settlement service, ingestion (which schedules the
    settlement jobs) and invoicing, wired together."""

    settings: Settings
    store: Store
    clock: Clock
    settlements: Settlements
    ingestion: Ingestion
    invoicing: Invoicing
    #: Whether Redis is worth asking, shared by the quota cache and the API's rate limits.
    redis_breaker: RedisBreaker | None = None
    #: The gauges counted in this database when this process is scraped (its /metrics or
    #: --metrics-port): what no single process can know by itself.
    measured: tuple[Measurement, ...] = field(init=False)
    #: Webhook endpoints and the deliveries' attempts (docs/webhooks.md).
    webhooks: Webhooks = field(init=False)
    #: Finalised documents sent by email (docs/invoices.md, Delivery by email).
    mail: DocumentMail = field(init=False)

    def __post_init__(self) -> None:
        self.webhooks = configured_webhooks(self.store, self.settings, self.clock)
        self.mail = configured_mail(self.store, self.settings, self.clock)
        stuck = partial(rescuer.count_stuck, self.store, self.clock)
        self.measured = (
            JOBS_STUCK.measured_by(stuck, clock=self.clock),
            SETTLEMENTS_UNSCHEDULED.measured_by(
                self.settlements.count_unscheduled,
                fresh_for=UNSCHEDULED_FRESH_SECONDS,
                clock=self.clock,
            ),
        )

    @classmethod
    def open(
        cls,
        settings: Settings,
        clock: Clock | None = None,
        faults: SettlementFaults | None = None,
        *,
        long_running: bool = False,
    ) -> Runtime:
        """Open the database (migrating a new one, refusing an out-of-date one) and the cache.

        A ``long_running`` process (the API, a worker) loads the public holiday calendars now,
        about 0.2 s, so that its first rating does not pay it inside a request or a job; a
        one-shot command pays it only if it rates a plan with holiday periods."""
        clock = clock or SystemClock()
        store = Store.open(settings.database_url, Timeouts.from_settings(settings))
        if long_running:
            load_holiday_calendars()
        return cls.on(store, settings, clock, faults)

    @classmethod
    def on(
        cls,
        store: Store,
        settings: Settings,
        clock: Clock,
        faults: SettlementFaults | None = None,
    ) -> Runtime:
        """The parts over an open store."""
        breaker = RedisBreaker(
            retry_seconds=settings.redis_retry_seconds,
            slow_seconds=settings.redis_slow_seconds,
            budget_seconds=settings.redis_budget_seconds,
            clock=clock,
        )
        cache = open_quota_cache(
            settings.redis_url,
            clock,
            settings.redis_prefix,
            timeout=settings.redis_timeout_seconds,
            breaker=breaker,
        )
        plans = PlanCache()  # one parse of a plan version for both
        settlements = Settlements(
            store, cache, clock, settlement_policy(settings), faults, plans=plans
        )
        ingestion = Ingestion(store, settlements, clock, schedule=SettlementJobs(settlements))
        invoicing = Invoicing(store, clock, invoicing_policy(settings), plans=plans)
        return cls(settings, store, clock, settlements, ingestion, invoicing, breaker)

    def put_customer(
        self,
        nmi: str,
        *,
        plan_id: str,
        region: Region,
        cycle: Mapping[str, object],
        contact: Contact | None = None,
    ) -> BillingCycle:
        """Create or update a customer in one transaction: its plan (a built-in one stored on
        first use; ``UnknownPlan`` for an id neither stored nor built in), its region, the
        fields of its billing cycle in ``cycle`` (``BillingCycle``'s; those left out keep what
        is stored, or the defaults for a new customer), and its contact where given (None keeps
        what is stored). Reads that came before the customer settle now. The cycle as stored;
        ``CycleError`` for one that cannot be."""
        record = CustomerRecord(0, nmi, plan_id, region, dict(cycle), contact)
        return self.import_customers([record])[nmi]

    def import_customers(self, records: Sequence[CustomerRecord]) -> dict[str, BillingCycle]:
        """``put_customer`` for each record, all in one transaction: every one stored, or none
        (``UnknownPlan`` or ``RegionMismatch`` naming the record's line where it has one). Each
        customer's cycle as stored, by NMI."""
        now = self.clock.now()
        cycles: dict[str, BillingCycle] = {}
        with self.store.write() as unit:
            for plan_id in dict.fromkeys(record.plan_id for record in records):
                try:
                    unit.catalog.ensure_plan(plan_id, updated_at=now)
                except UnknownPlan as exc:
                    first = next(r for r in records if r.plan_id == plan_id)
                    raise UnknownPlan(_at_line(first, "plan_id", exc)) from None
            # In chunks, each a few statements: what a chunk's statements hold is let go before
            # the next (a file of 100,000 customers in one statement held 330 MB).
            for start in range(0, len(records), IMPORT_CHUNK):
                cycles |= self._import_chunk(unit, records[start : start + IMPORT_CHUNK], now)
        return cycles

    def _import_chunk(
        self, unit: Unit, records: Sequence[CustomerRecord], now: datetime
    ) -> dict[str, BillingCycle]:
        nmis = [record.nmi for record in records]
        try:
            unit.catalog.put_customers(
                [(r.nmi, r.plan_id, r.region) for r in records], updated_at=now
            )
        except RegionMismatch as exc:
            first = next(r for r in records if r.nmi == exc.nmi)
            raise RegionMismatch(_at_line(first, "region", exc), exc.nmi) from None
        stored = {account.nmi: account.cycle for account in unit.invoices.accounts(nmis)}
        cycles = {r.nmi: replace(stored[r.nmi], **r.cycle) for r in records}  # type: ignore[arg-type]
        unit.invoices.set_cycles({nmi: c for nmi, c in cycles.items() if c != stored[nmi]})
        contacts = {r.nmi: r.contact for r in records if r.contact is not None}
        unit.catalog.put_contacts(contacts, updated_at=now)
        # Reads may have come first (meter data is never dropped): their days settle now.
        self.ingestion.customers_changed(unit, nmis)
        return cycles

    def worker(
        self, concurrency: int | None = None, queues: Mapping[str, int] | None = None
    ) -> Worker:
        """A job worker over this runtime (settlements, invoice runs, webhook deliveries and,
        with an SMTP server set, documents by email, each kind in its queue), as configured
        (``worker_config``); ``start()`` it."""
        mail = mail_tasks(self.mail) if self.mail.sender.server is not None else {}
        return Worker(
            self.store,
            {
                **settlement_tasks(self.settlements),
                **invoicing_tasks(self.invoicing),
                **webhook_tasks(self.webhooks),
                **mail,
            },
            config=worker_config(self.settings, concurrency, queues),
            clock=self.clock,
            retry=retry_policy(self.settings, self.clock),
        )

    def close(self) -> None:
        self.store.close()


#: Customers an import writes a chunk at a time, in its one transaction.
IMPORT_CHUNK = 5_000


def _at_line(record: CustomerRecord, column: str, exc: Exception) -> str:
    """``exc``'s message, for a record of a file led by the file, the line and the column."""
    return f"{record.source}:{record.line}: {column}: {exc}" if record.source else str(exc)
