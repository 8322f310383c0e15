"""The console's reads (``freehours.store.console``) with literal answers, on SQLite and
PostgreSQL: a day's quotas per region count each quota's newest version once, and its free
energy exactly."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

from freehours.domain.settlement import Quota, QuotaStatus, new_quota
from freehours.domain.time import Region
from freehours.store.console import QuotaFilter, RegionDay
from tests.api.conftest import Api

DAY = date(2026, 7, 1)
AT = datetime(2026, 7, 1, 5, 0, tzinfo=UTC)


def _completed(nmi: str, version: int, kwh: str, value: str) -> Quota:
    return replace(
        new_quota(nmi, DAY, version=version),
        status=QuotaStatus.COMPLETED,
        free_kwh=Decimal(kwh),
        free_value=Decimal(value),
        completed_at=AT,
    )


def test_a_days_regions_count_newest_versions_and_sum_exactly(api: Api) -> None:
    runtime = api.services.runtime
    for nmi, region, plan_id in (
        ("4100000001", Region.NSW, "sso-nsw"),
        ("4100000002", Region.NSW, "sso-nsw"),
        ("6100000001", Region.SA, "sso-sa"),
    ):
        runtime.put_customer(nmi, plan_id=plan_id, region=region, cycle={})
    with runtime.store.write() as unit:
        # A first version superseded by a second: only the second counts.
        unit.quotas.insert(_completed("4100000001", 1, "1.001", "0.30"), at=AT)
        unit.quotas.insert(_completed("4100000001", 2, "1.100", "0.33"), at=AT)
        unit.quotas.insert(_completed("4100000002", 1, "0.100", "0.03"), at=AT)
        unit.quotas.insert(replace(new_quota("6100000001", DAY), status=QuotaStatus.ABORTED), at=AT)
        # Another day's quota is not this day's.
        unit.quotas.insert(new_quota("4100000002", DAY + timedelta(days=1)), at=AT)
    with runtime.store.read() as unit:
        regions = unit.console.regions_of_day(DAY)
        rows = unit.console.quotas(QuotaFilter(day=DAY), limit=10)
        page = unit.console.quotas(QuotaFilter(), limit=2)
        after = unit.console.quotas(QuotaFilter(), limit=10, after=(page[-1].day, page[-1].nmi))
    assert regions == [
        RegionDay("NSW", {"COMPLETED": 2}, Decimal("1.200"), Decimal("0.36")),
        RegionDay("SA", {"ABORTED": 1}, Decimal(0), Decimal(0)),
    ]
    assert [(q.nmi, q.version, q.region) for q in rows] == [
        ("6100000001", 1, "SA"),
        ("4100000002", 1, "NSW"),
        ("4100000001", 2, "NSW"),
    ]
    # Keyset pages: newest date first, then NMI; the next page starts after the last row shown.
    assert [(q.nmi, q.day) for q in page] == [
        ("4100000002", DAY + timedelta(days=1)),
        ("6100000001", DAY),
    ]
    assert [(q.nmi, q.day) for q in after] == [("4100000002", DAY), ("4100000001", DAY)]
