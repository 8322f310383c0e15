"""What the invoicing tests share: a system over a real store under a manual clock, customers
with a month of NEM12 days settled by a worker, and revisions of those days."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

from freehours.cache.quota import MemoryQuotaCache
from freehours.clock import ManualClock
from freehours.domain.reads import IntervalDay
from freehours.domain.time import NEM_TIME, Region
from freehours.invoicing.model import InvoicingFaults, InvoicingPolicy
from freehours.invoicing.service import Invoicing
from freehours.plans import builtin_document
from freehours.settlement.ingest import Ingestion
from freehours.settlement.model import SettlementPolicy
from freehours.settlement.service import Settlements
from freehours.store.database import Store
from freehours.store.invoices import StoredDocument
from freehours.workers.invoice import invoicing_tasks
from freehours.workers.settle import SettlementJobs, settlement_tasks
from freehours.workers.worker import Worker

#: July 2026: the first month of the Solar Sharer Offer.
JULY = [date(2026, 7, 1) + timedelta(days=n) for n in range(31)]
#: Two days after the data deadline of July's last day: its invoices are due.
AFTER_JULY = datetime(2026, 8, 5, tzinfo=UTC)
DEADLINE = timedelta(hours=1)
STAMP = datetime(2026, 8, 1, 9, 0, tzinfo=NEM_TIME)
#: The stamp of a revision the MDP sends after July is invoiced.
REVISION_STAMP = STAMP + timedelta(days=3)
#: Half-hourly consumption: 0.25 kWh every interval, 0.5 in the window's six (11:00-14:00 AEST in
#: July), export 0.1 at midday: each day 3 kWh free.
INTERVALS = 48


def nmi(n: int) -> str:
    return f"41030{n:05d}"


def day_values(day: date, scale: Decimal = Decimal(1)) -> tuple[Decimal | None, ...]:
    return tuple(
        (Decimal("0.500") if 22 <= i < 28 else Decimal("0.250")) * scale for i in range(INTERVALS)
    )


def consumption(
    meter: str, day: date, *, scale: Decimal = Decimal(1), stamp: datetime = STAMP
) -> IntervalDay:
    return IntervalDay(meter, "E1", day, 30, day_values(day, scale), "A" * INTERVALS, stamp)


def halved(meter: str) -> IntervalDay:
    """The MDP's revision of ``meter``'s 10 July, after July is invoiced: its consumption down by
    half (less free energy, less GST)."""
    return consumption(meter, JULY[9], scale=Decimal("0.5"), stamp=REVISION_STAMP)


def export(meter: str, day: date, stamp: datetime = STAMP) -> IntervalDay:
    values = tuple(Decimal("0.100") if 20 <= i < 30 else Decimal(0) for i in range(INTERVALS))
    return IntervalDay(meter, "B1", day, 30, values, "A" * INTERVALS, stamp)


@dataclass
class System:
    store: Store
    clock: ManualClock
    settlements: Settlements
    ingestion: Ingestion
    invoicing: Invoicing
    worker: Worker

    @classmethod
    def on(
        cls,
        store: Store,
        *,
        faults: InvoicingFaults | None = None,
        batch_size: int = 500,
        at: datetime = AFTER_JULY,
    ) -> System:
        clock = ManualClock(at)
        policy = SettlementPolicy(data_deadline=DEADLINE)
        settlements = Settlements(store, MemoryQuotaCache(clock), clock, policy)
        ingestion = Ingestion(store, settlements, clock, schedule=SettlementJobs(settlements))
        invoicing = Invoicing(
            store,
            clock,
            InvoicingPolicy(data_deadline=DEADLINE, batch_size=batch_size),
            faults,
        )
        tasks = {**settlement_tasks(settlements), **invoicing_tasks(invoicing)}
        worker = Worker(store, tasks, clock=clock)
        return cls(store, clock, settlements, ingestion, invoicing, worker)

    def customers(
        self, count: int, *, plan: str = "sso-nsw", region: Region = Region.NSW
    ) -> list[str]:
        meters = [nmi(n) for n in range(count)]
        now = self.clock.now()
        with self.store.write() as unit:
            if unit.catalog.get_plan(plan) is None:
                unit.catalog.put_plan(plan, builtin_document(plan), updated_at=now)
            for meter in meters:
                unit.catalog.put_customer(meter, plan_id=plan, region=region, updated_at=now)
        return meters

    def month(self, meters: list[str], days: list[date] = JULY) -> None:
        """A month of data for ``meters``, settled by the worker."""
        rows = [row for m in meters for d in days for row in (consumption(m, d), export(m, d))]
        self.ingestion.file(rows)
        self.settle()

    def settle(self) -> None:
        while self.worker.run_due():
            pass

    def run(self) -> None:
        """A run as the API starts one: its jobs, run by the worker."""
        self.invoicing.start_run()
        self.settle()

    def revise(self, *days: IntervalDay) -> None:
        """``days`` filed (the MDP's revisions of days already invoiced, or days it sent late),
        settled, and a run: the run that corrects what was invoiced of them."""
        self.ingestion.file(days)
        self.settle()
        self.run()

    def documents(self) -> list[StoredDocument]:
        with self.store.read() as unit:
            return unit.invoices.list_documents(limit=10_000)
