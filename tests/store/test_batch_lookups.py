"""A settlement batch's look-ups on PostgreSQL read the batch's rows, not the day's partition.

A day's partitions fill up during its burst with no statistics yet (autovacuum behind, or off as
on this machine's CI), so the planner guesses: an ``IN (SELECT unnest ...)`` over the keys was
once planned as a hash join over a parallel scan of the whole partition, every customer's rows of
the day read for each batch of 64. ``driver.each_key`` looks each key up on its own."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

from freehours.domain.reads import IntervalDay
from freehours.domain.settlement import new_quota
from freehours.store.database import Store
from freehours.store.meter import _DAYS_FOR_MANY
from freehours.store.prepared import Prepared
from freehours.store.quotas import _LATEST_MANY_FOR_UPDATE
from tests.jobs.support import postgres_only

DAY = date(2026, 7, 31)
AT = datetime(2026, 8, 1, 4, 0, tzinfo=UTC)
CUSTOMERS = 3_000


def _scans(store: Store, prepared: Prepared, parameters: dict[str, list[Any]]) -> dict[str, int]:
    """The rows each scan of a partition read, ``prepared`` run on ``parameters`` as the
    repository runs it (its text as compiled for the store's dialect)."""
    sql = str(prepared.statement.compile(dialect=store.engine.dialect))
    read: dict[str, int] = {}

    def walk(node: dict[str, Any]) -> None:
        if "Scan" in node["Node Type"] and node.get("Relation Name", "").startswith(
            ("meter_days", "quotas")
        ):
            name = f"{node['Node Type']} {node['Relation Name']}"
            read[name] = read.get(name, 0) + node["Actual Rows"] * node.get("Actual Loops", 1)
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
