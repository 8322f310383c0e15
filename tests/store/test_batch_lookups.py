"""A settlement batch's look-ups, and an invoice batch's, on PostgreSQL read the batch's rows, not
the day's partition (nor the whole table).

A day's partitions fill up during its burst with no statistics yet (autovacuum behind, or off as
on this machine's CI), so the planner guesses: an ``IN (SELECT unnest ...)`` over the keys was
once planned as a hash join over a parallel scan of the whole partition, every customer's rows of
the day read for each batch of 64. ``driver.each_key`` looks each key up on its own."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import sqlalchemy as sa

from freehours.domain.reads import IntervalDay
from freehours.domain.settlement import new_quota
from freehours.domain.time import Region
from freehours.plans import builtin_document
from freehours.store.database import Store
from freehours.store.meter import _DAYS_FOR_MANY
from freehours.store.prepared import Prepared
from freehours.store.quotas import _LATEST_MANY_FOR_UPDATE
from freehours.store.tables import documents
from tests.jobs.support import postgres_only

DAY = date(2026, 7, 31)
AT = datetime(2026, 8, 1, 4, 0, tzinfo=UTC)
CUSTOMERS = 3_000


_TABLES = ("meter_days", "quotas", "customers", "billing_periods", "documents")


def _scans(store: Store, prepared: Prepared, parameters: dict[str, list[Any]]) -> dict[str, int]:
    """The rows each scan of a partition read, ``prepared`` run on ``parameters`` as the
    repository runs it (its text as compiled for the store's dialect)."""
    return _explained(
        store, str(prepared.statement.compile(dialect=store.engine.dialect)), parameters
    )


def _explained(store: Store, sql: str, parameters: Any) -> dict[str, int]:
    """The rows each scan of a table (or partition) of ``_TABLES`` read (those it kept and
    those its filter dropped), ``sql`` run on ``parameters``."""
    read: dict[str, int] = {}

    def walk(node: dict[str, Any]) -> None:
        if "Scan" in node["Node Type"] and node.get("Relation Name", "").startswith(_TABLES):
            name = f"{node['Node Type']} {node['Relation Name']}"
            rows = node["Actual Rows"] + node.get("Rows Removed by Filter", 0)  # all it read
            read[name] = read.get(name, 0) + rows * node.get("Actual Loops", 1)
        for child in node.get("Plans", []):
            walk(child)

    raw = store.engine.raw_connection()
    try:
        cursor = raw.cursor()
        cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", parameters, prepare=False)
        walk(cursor.fetchone()[0][0]["Plan"])
        raw.rollback()
    finally:
        raw.close()
    return read


@contextmanager
def _statements(store: Store) -> Iterator[list[tuple[str, Any]]]:
    """Every statement ``store`` sends meanwhile, with its parameters."""
    ran: list[tuple[str, Any]] = []

    def note(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        ran.append((statement, parameters))

    sa.event.listen(store.engine, "before_cursor_execute", note)
    try:
        yield ran
    finally:
        sa.event.remove(store.engine, "before_cursor_execute", note)


@postgres_only
def test_a_batch_reads_its_own_customers_rows_of_the_day(store: Store) -> None:
    nmis = [f"4{n:09d}" for n in range(CUSTOMERS)]
    values = tuple(Decimal("0.5") for _ in range(48))
    with store.write() as unit:
        unit.meter.ingest_days(
            [
                IntervalDay(nmi, suffix, DAY, 30, values, "A" * 48, AT)
                for nmi in nmis
                for suffix in ("E1", "B1")
            ],
            received_at=AT,
        )
        unit.quotas.insert_if_absent([new_quota(nmi, DAY) for nmi in nmis], at=AT, trace_ids={})
    batch = nmis[1_000:1_064]
    # As the batch runs them: the rows' (NMI, date) keys, one array per column.
    meter = _scans(store, _DAYS_FOR_MANY, {"nmis": batch, "days": [DAY] * len(batch)})
    quotas = _scans(store, _LATEST_MANY_FOR_UPDATE, {"k_nmi": batch, "k_day": [DAY] * len(batch)})
    for read in (meter, quotas):
        assert read, "the statement read no partition"
        assert not [scan for scan in read if scan.startswith(("Seq", "Parallel"))], str(read)
        assert sum(read.values()) <= 2 * len(batch), read


@postgres_only
def test_an_invoice_batch_reads_its_own_accounts_rows(store: Store) -> None:
    """Each of an invoice batch's reads (as ``Invoicing._draft`` and the finalisation make them)
    reads about its accounts' rows, whatever the planner knows of tables the day just filled: an
    ``IN`` list of the batch's NMIs was planned as a scan of the month's partition, or of the
    customers, ten times the work at ten times the customers."""
    nmis = [f"4{n:09d}" for n in range(CUSTOMERS)]
    values = tuple(Decimal("0.5") for _ in range(48))
    with store.write() as unit:
        unit.catalog.put_plan("sso-nsw", builtin_document("sso-nsw"), updated_at=AT)
        unit.catalog.put_customers([(nmi, "sso-nsw", Region.NSW) for nmi in nmis], updated_at=AT)
        unit.meter.ingest_days(
            [
                IntervalDay(nmi, suffix, DAY, 30, values, "A" * 48, AT)
                for nmi in nmis
                for suffix in ("E1", "B1")
            ],
            received_at=AT,
        )
        unit.quotas.insert_if_absent([new_quota(nmi, DAY) for nmi in nmis], at=AT)
        unit.invoices.lock_periods([(nmi, date(2026, 7, 1), DAY) for nmi in nmis], now=AT)
    # A batch's 500, and one customer's (a page, its usage: a plain look-up, not per key).
    for batch in (nmis[1_000:1_500], nmis[2_000:2_001]):
        with _statements(store) as ran, store.read() as unit:
            invoices = unit.invoices
            assert len(invoices.accounts(batch)) == len(batch)
            assert len(invoices.first_days(batch)) == len(batch)
            july = (date(2026, 7, 1), date(2026, 8, 1))
            assert len(invoices.meter_days(batch, *july)) == len(batch)
            assert len(invoices.latest_quotas(batch, date(2026, 7, 1), DAY)) == len(batch)
            assert len(invoices.periods(batch)) == len(batch)
            assert invoices.period_usages(batch, date(2026, 7, 1), DAY) == {}
            assert invoices.received_since(batch, date(2026, 7, 1), DAY, AT) != {}
        assert len(ran) == 7
        for statement, parameters in ran:
            read = _explained(store, statement, parameters)
            assert read, f"the statement read no table: {statement}"
            assert not [scan for scan in read if scan.startswith(("Seq", "Parallel"))], (
                read,
                statement,
            )
            assert sum(read.values()) <= 3 * len(batch), (read, statement)


def _document(number: int, run_id: str) -> dict[str, Any]:
    """A run's invoice as its row: what a print batch reads of it, the rest as small as allowed."""
    return {
        "number": f"INV-{number:08d}",
        "series": "invoice",
        "serial": number,
        "document_type": "invoice",
        "nmi": f"4{number:09d}",
        "period_start": date(2026, 7, 1),
        "period_end": DAY,
        "sequence": 0,
        "run_id": run_id,
        "issue_date": DAY,
        "finalised_at": AT,
        "plan_id": "sso-nsw",
        "region": "NSW",
        "time_zone": "Australia/Sydney",
        **dict.fromkeys(("subtotal", "gst", "total", "consumption_kwh"), Decimal(0)),
        **dict.fromkeys(("free_kwh", "free_value", "over_cap_kwh", "export_kwh"), Decimal(0)),
        **dict.fromkeys(("lines", "days", "plan_document", "retailer"), "{}"),
    }


@postgres_only
def test_a_print_batch_page_reads_its_own_documents_of_the_run(store: Store) -> None:
    """A page of a run's print batch (``Invoices.to_post``) reads its page's documents by the
    index of (run, number), not every document of the run to sort them: part N of a run of a
    million costs its pages, not a million rows a page. Two runs at once (customers on two
    billing cycles) number their documents in turn."""
    runs = ("run-1", "run-2")
    with store.write() as unit:
        for run in runs:
            unit.invoices.create_run(run, requested_at=AT, as_of=AT)
    with store.engine.begin() as conn:
        conn.execute(sa.insert(documents), [_document(n, runs[n % 2]) for n in range(CUSTOMERS)])
    with _statements(store) as ran, store.read() as unit:
        page = unit.invoices.to_post("run-1", invoices=True, after="INV-00001000", limit=100)
    assert [d.number for d in page] == [f"INV-{n:08d}" for n in range(1_002, 1_201, 2)]
    (statement, parameters), *_ = [(s, p) for s, p in ran if "FROM documents" in s]
    read = _explained(store, statement, parameters)
    assert read, f"the statement read no table: {statement}"
    assert not [scan for scan in read if scan.startswith(("Seq", "Parallel", "Bitmap"))], read
    assert sum(read.values()) <= 100, read
