"""``freehours settlements schedule`` on SQLite and PostgreSQL: the days with reads and no final
quota get their settlement jobs, once; bad input is refused naming its option."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from freehours.domain.reads import IntervalDay
from freehours.domain.time import NEM_TIME, Region
from freehours.settings import get_settings
from freehours.settlement import ingest
from freehours.store.database import Store
from tests.support import run_flat
from tests.test_settlement import PLAN

NMI = "4102000001"
OTHER = "4102000002"
#: Days of a month ago: the command runs on the system clock, and they are long settleable.
TODAY = datetime.now(UTC).astimezone(NEM_TIME).date()
DAYS = [TODAY - timedelta(days=30 - n) for n in range(3)]


@pytest.fixture
def stranded(store: Store, store_url: str, clean_env: pytest.MonkeyPatch) -> Iterator[Store]:
    """A customer stored without its days scheduled (as a version before this one left it), its
    reads of ``DAYS``, and the commands pointed at its database."""
    clean_env.setenv("FREEHOURS_DATABASE_URL", store_url)
    get_settings.cache_clear()
    now = datetime.now(UTC)
    with store.write() as unit:
        unit.catalog.put_plan("test-nsw", PLAN, updated_at=now)
        unit.catalog.put_customer(NMI, plan_id="test-nsw", region=Region.NSW, updated_at=now)
        unit.meter.ingest_days(
            [IntervalDay(NMI, "E1", d, 30, (Decimal("0.4"),) * 48, "A" * 48, None) for d in DAYS],
            received_at=now,
        )
    yield store
    get_settings.cache_clear()


def settle_keys(store: Store) -> list[str]:
    with store.read() as unit:
        return sorted(job.key for job in unit.jobs.every() if job.kind == "settle")


def schedule(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str):
    return run_flat(monkeypatch, capsys, "settlements", "schedule", *args)


def test_schedule_gives_each_unsettled_day_its_job_once(
    stranded: Store, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    first, last = DAYS[0].isoformat(), DAYS[1].isoformat()
    code, out, _ = schedule(monkeypatch, capsys, "--nmi", NMI, "--from", first, "--to", last)
    assert (code, out.strip()) == (
        0,
        f"2 days scheduled to settle, {first} to {last}, of customer {NMI}",
    )
    assert settle_keys(stranded) == [f"{NMI}:{d.isoformat()}" for d in DAYS[:2]]
    # Every customer, a customer a transaction: the third day and the other customer's too; the
    # two waiting are not enqueued twice.
    with stranded.write() as unit:
        now = datetime.now(UTC)
        unit.catalog.put_customer(OTHER, plan_id="test-nsw", region=Region.NSW, updated_at=now)
        unit.meter.ingest_days(
            [IntervalDay(OTHER, "E1", DAYS[0], 30, (Decimal("0.4"),) * 48, "A" * 48, None)],
            received_at=now,
        )
    monkeypatch.setattr(ingest, "CUSTOMERS_PER_TRANSACTION", 1)
    code, out, _ = schedule(monkeypatch, capsys, "--from", first, "--to", DAYS[2].isoformat())
    assert (code, out.split(" days")[0]) == (0, "4")
    assert settle_keys(stranded) == sorted(
        [f"{NMI}:{d.isoformat()}" for d in DAYS] + [f"{OTHER}:{first}"]
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--from", "2026-07-03", "--to", "2026-07-01"],
            "error: --to: 2026-07-01 is before --from 2026-07-03",
        ),
        (
            ["--from", "2025-01-01", "--to", "2026-07-01"],
            "error: --to: 2026-07-01 is more than 366 days from --from 2025-01-01",
        ),
        (
            ["--from", "1999-12-31", "--to", "2000-01-01"],
            "error: --from: 1999-12-31 is before 2000-01-01",
        ),
        (
            ["--nmi", "NOBODY0001", "--from", "2026-07-01", "--to", "2026-07-01"],
            "error: --nmi: no customer NOBODY0001",
        ),
        (
            ["--nmi", "x", "--from", "2026-07-01", "--to", "2026-07-01"],
            "error: --nmi: 'x' is not an NMI: 10 upper-case letters and digits (A-Z, 0-9)",
        ),
    ],
)
def test_schedule_refuses_what_cannot_be_naming_the_option(
    stranded: Store,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    code, out, err = schedule(monkeypatch, capsys, *args)
    assert (code, out, err) == (2, "", message)
    assert settle_keys(stranded) == []
