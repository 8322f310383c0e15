"""The console's reads (``freehours.store.console``) with literal answers, on SQLite and
PostgreSQL: a day's quotas per region count each quota's newest version once, and its free
energy exactly."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

from freehours.api.console.pages import day_clock
from freehours.domain.settlement import Quota, QuotaStatus, new_quota
from freehours.domain.time import Region
from freehours.jobs.decisions import Complete, Finish
from freehours.jobs.retry import RetryAt
from freehours.store.console import QuotaFilter, RegionDay
from tests.api.conftest import Api
from tests.console.browser import consumption
from tests.mail.test_delivery import JANE, invoiced

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


def test_the_overview_opens_on_the_latest_day_with_data_not_an_empty_today(admin: Api) -> None:
    # Today is 2026-07-01 on the API's clock, and the data is of days before it (and, from a
    # simulation, one after it, which is not "latest").
    runtime = admin.services.runtime
    runtime.put_customer("4100000001", plan_id="sso-nsw", region=Region.NSW, cycle={})
    earlier = DAY - timedelta(days=3)
    with runtime.store.write() as unit:
        unit.quotas.insert(_completed_on("4100000001", earlier - timedelta(days=1)), at=AT)
        unit.quotas.insert(_completed_on("4100000001", earlier), at=AT)
        unit.quotas.insert(_completed_on("4100000001", DAY + timedelta(days=5)), at=AT)
    page = admin.client.get("/console/").text
    assert f"<h1>Overview of {earlier}</h1>" in page
    assert "1.001" in page  # its free kWh
    assert f"Today, {DAY}, has none yet." in page
    assert f'<a href="/console/?day={DAY}">Today</a>' in page
    # a day asked for is that day, and today with no data stays empty
    page = admin.client.get(f"/console/?day={DAY}").text
    assert f"<h1>Overview of {DAY}</h1>" in page
    assert "No quotas for this day." in page
    assert '<a href="/console/">Latest day with data</a>' in page
    with admin.services.store.read() as unit:
        assert unit.console.latest_day(DAY) == earlier
        assert unit.console.latest_day(earlier - timedelta(days=2)) is None


def _completed_on(nmi: str, day: date) -> Quota:
    return replace(
        new_quota(nmi, day),
        status=QuotaStatus.COMPLETED,
        free_kwh=Decimal("1.001"),
        free_value=Decimal("0.30"),
        completed_at=AT,
    )


def test_a_completed_job_shows_its_earlier_failure_as_an_earlier_attempt(admin: Api) -> None:
    store = admin.services.store
    with store.write() as unit:
        job_id = unit.jobs.enqueue("settle", "4100000001:2026-07-01", {}, run_at=AT, now=AT)
    with store.write() as unit:
        (job,) = unit.jobs.claim("w1", ["settle"], 1, now=AT, lease=timedelta(seconds=30))
        failed = "lease expired: worker w1 stopped renewing it"
        unit.jobs.finish([Finish(job, RetryAt(AT, 1), failed)], now=AT)
    with store.write() as unit:
        (job,) = unit.jobs.claim("w2", ["settle"], 1, now=AT, lease=timedelta(seconds=30))
        unit.jobs.finish([Finish(job, Complete("settled 1.001 kWh"))], now=AT)
    listed = admin.client.get("/console/jobs").text
    row = next(line for line in listed.splitlines() if f'href="/console/jobs/{job_id}"' in line)
    assert "COMPLETED" in row
    assert "settled 1.001 kWh" in row
    assert f"An earlier attempt failed: {failed}" in row
    page = admin.client.get(f"/console/jobs/{job_id}").text
    assert f"failed before it completed: {failed}" in page
    assert "Last error" not in page
    assert "The job completed after 1 failed attempt." in page


def test_a_quotas_reads_chart_and_footer_give_its_regions_clock_and_the_unit(admin: Api) -> None:
    runtime = admin.services.runtime
    nmi = "6100000001"
    runtime.put_customer(nmi, plan_id="sso-sa", region=Region.SA, cycle={})
    runtime.ingestion.file([consumption(nmi, DAY, 1, AT)])
    with runtime.store.write() as unit:
        if unit.quotas.latest(nmi, DAY) is None:
            unit.quotas.insert(new_quota(nmi, DAY), at=AT)
    page = admin.client.get(f"/console/quotas/{nmi}/{DAY}").text
    assert "free window 12:00\u201315:00 ACST (local time)" in page
    chart = page[page.index("<svg") : page.index("</svg>")]
    assert ">kWh</text>" in chart
    assert ">ACST</text>" in chart
    footer = page[page.index('<footer class="foot">') :]
    assert "the region's local time, ACST (Australia/Adelaide)" in footer
    assert "Other times are NEM time (AEST)." in footer
    # other pages keep NEM time
    assert "Times are NEM time (AEST)." in admin.client.get("/console/jobs").text


def test_a_day_when_daylight_saving_starts_names_both_clocks() -> None:
    zone = ZoneInfo("Australia/Adelaide")
    start = datetime(2026, 10, 4, tzinfo=zone)
    assert day_clock(start, datetime(2026, 10, 5, tzinfo=zone)) == "ACST/ACDT"
    assert day_clock(datetime(2026, 7, 1, tzinfo=zone), datetime(2026, 7, 2, tzinfo=zone)) == "ACST"


def test_the_invoices_page_shows_each_documents_email_and_a_refusal_without_its_address(
    admin: Api,
) -> None:
    store = admin.services.store
    system, emailed, posted = invoiced(store)
    numbers = {d.nmi: d.number for d in system.documents()}
    with store.read() as unit:
        (delivery,) = unit.mail.of_document(numbers[emailed])
    with store.write() as unit:
        unit.mail.begin(delivery.id, at=system.clock.now())
        unit.mail.failed(
            delivery.id,
            code=550,
            error="5.1.1 <recipient>: Recipient address rejected",
            at=system.clock.now(),
            final=True,
        )
    page = admin.client.get("/console/invoices").text
    assert "0 queued, 0 sent, 1 failed for good" in page
    row = next(line for line in page.splitlines() if numbers[emailed] in line and "<th" in line)
    cells = page[page.index(row) :].split("</tr>")[0]
    assert "failed: 5.1.1 &lt;recipient&gt;: Recipient address rejected" in cells
    assert JANE.email not in page
    posted_row = page[page.index(f">{numbers[posted]}<") :].split("</tr>")[0]
    assert "<td>—</td>" in posted_row
