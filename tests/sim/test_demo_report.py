"""The demo's summary and plots: kWh in one format, a region without free energy said why from
its meters' reads, whole-number ticks on the axes of counts."""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from rich.console import Console

from freehours.cli.demo import _print_summary
from freehours.domain.invoicing import DocumentType, Period
from freehours.domain.reads import IntervalDay
from freehours.domain.time import NEM_TIME
from freehours.plans import builtin_plan
from freehours.sim.demo.model import (
    DemoConfig,
    DemoDocument,
    DemoResult,
    DemoRun,
    NoFreeDays,
    RegionTotals,
    invoice_as_of,
    kwh_figure,
    no_free_days,
)
from freehours.sim.report import documents_section, latency_figure, retries_figure
from freehours.store.invoices import RunCounts

DAY = date(2026, 7, 1)
STAMP = datetime(2026, 7, 2, 6, 0, tzinfo=NEM_TIME)


def test_kwh_are_written_to_the_watt_hour_and_never_rounded() -> None:
    figures = ["3.726", "0", "1.5", "3.64", "12", "1.5000", "0.0001", "2E+1"]
    assert [kwh_figure(Decimal(text)) for text in figures] == [
        "3.726",
        "0.000",
        "1.500",
        "3.640",
        "12.000",
        "1.500",
        "0.0001",
        "20.000",
    ]


def channel(suffix: str, day: date, kwh: dict[int, str]) -> IntervalDay:
    """A 30-minute day whose intervals are 0 but those of ``kwh`` (by index)."""
    values = tuple(Decimal(kwh.get(index, "0")) for index in range(48))
    return IntervalDay("4100000003", suffix, day, 30, values, "A" * 48, STAMP)


def test_a_region_whose_solar_covered_the_window_every_day_is_said_so() -> None:
    # South Australia's window, 12:00-15:00 local (UTC+9:30), is intervals 25 to 30 of the NEM
    # day (12:30-15:30 AEST): the import at 12:00-12:30 AEST is before it.
    plan = builtin_plan("sso-sa")
    second = DAY + timedelta(days=1)
    days = [
        channel("E1", DAY, {24: "0.400", 31: "0.250", 40: "1.1"}),
        channel("B1", DAY, {25: "1.000", 30: "0.500", 31: "0.700"}),
        channel("B1", second, {27: "0.125"}),
    ]
    explained = no_free_days("SA", plan, {DAY: Decimal(0), second: Decimal(0)}, days)
    assert explained == NoFreeDays(
        "SA", (DAY, second), 2, "12:00-15:00", Decimal("0.000"), Decimal("1.625")
    )
    assert explained.sentence() == (
        "SA: 0.000 kWh free: its simulated solar export covered the window (12:00-15:00 local)"
        " on every day (nothing imported from the grid in it; 1.625 kWh exported)"
    )
    one_day = no_free_days("SA", plan, {second: Decimal(0)}, days[2:])
    assert one_day is not None
    assert "covered the window (12:00-15:00 local) on the day (" in one_day.sentence()


def test_some_days_without_free_energy_are_named_and_a_region_with_some_every_day_is_not() -> None:
    plan = builtin_plan("sso-seq")
    second = DAY + timedelta(days=1)
    days = [channel("B1", DAY, {24: "0.2"}), channel("E1", second, {24: "0.3"})]
    free = {DAY: Decimal(0), second: Decimal("0.3")}
    explained = no_free_days("SEQ", plan, free, days)
    assert explained is not None
    assert explained.sentence() == (
        "SEQ: no free kWh on Wed 01 Jul: its simulated solar export covered the window"
        " (11:00-14:00 local) then (nothing imported from the grid in it; 0.200 kWh exported)"
    )
    assert no_free_days("SEQ", plan, {second: Decimal("0.3")}, days) is None


#: A demo's fault figures where no injected fault did anything.
NO_FAULTS: dict[str, object] = {
    "outage_refused": 0,
    "answers_lost": 0,
    "worker_died_holding": None,
    "database_errors": 0,
    "cache_write_failures": 0,
    "stale_cache_entry": None,
}


def result() -> DemoResult:
    done = DemoResult(DemoConfig(out=Path("unused"), customers=4, days=1, seed=1), DAY)
    done.faults.update(NO_FAULTS)
    done.regions = {
        "NSW": RegionTotals(1, Decimal("3.64"), Decimal("1.23")),
        "SA": RegionTotals(1, Decimal(0), Decimal("0.00")),
        "SEQ": RegionTotals(1, Decimal("1.5"), Decimal("0.36")),
    }
    done.revised = ("4100000002:2026-07-01", Decimal(0), Decimal("1.5"))
    done.no_free = [NoFreeDays("SA", (DAY,), 1, "12:00-15:00", Decimal(0), Decimal("2.25"))]
    done.retry_samples = [(0.5, 0, 0), (1.0, 1, 0), (2.0, 2, 1), (3.0, 2, 2)]
    done.settle_seconds = [0.1, 0.2, 0.3, 1.4, 2.5]
    july = Period(DAY, date(2026, 7, 31))
    as_of = datetime(2026, 8, 4, tzinfo=NEM_TIME)
    done.runs = [
        DemoRun(as_of, RunCounts(accounts=2, invoices=2), ()),
        DemoRun(as_of + timedelta(days=1), RunCounts(accounts=2, credit_notes=1), ()),
    ]
    done.documents = [
        DemoDocument(
            f"INV-0000000{n}",
            DocumentType.INVOICE,
            f"410000000{n}",
            july,
            Decimal("40.12"),
            Decimal("3.640"),
            None,
            f"documents/INV-0000000{n}.pdf",
            f"documents/INV-0000000{n}.html",
        )
        for n in (1, 2)
    ]
    done.documents.append(
        DemoDocument(
            "CN-00000001",
            DocumentType.CREDIT_NOTE,
            "4100000001",
            july,
            Decimal("-0.62"),
            Decimal("-0.500"),
            "INV-00000001",
            "documents/CN-00000001.pdf",
            "documents/CN-00000001.html",
        )
    )
    done.invoicing = "Invoice runs as of 04 Aug 2026 00:00 AEST, when the billing period closed"
    return done


def test_the_summary_writes_every_kwh_alike_and_says_why_a_region_had_none() -> None:
    console = Console(record=True, width=200)
    _print_summary(result(), console)
    text = console.export_text()
    assert "revised after settlement: 0.000 -> 1.500 free kWh" in text
    rows = re.findall(r"│ (NSW|SA|SEQ)\s+│\s+1 │\s+(\S+) │\s+(\S+) │", text)
    assert rows == [("NSW", "3.640", "1.23"), ("SA", "0.000", "0.00"), ("SEQ", "1.500", "0.36")]
    assert "SA: 0.000 kWh free: its simulated solar export covered the window (12:00-15:00" in text


def test_the_axes_of_counts_have_whole_number_ticks() -> None:
    for figure in (retries_figure(result()), latency_figure(result())):
        figure.draw_without_rendering()
        (axes,) = figure.axes
        ticks = list(axes.get_yticks())
        assert len(ticks) >= 3
        assert all(float(tick).is_integer() for tick in ticks), ticks


def test_the_summary_counts_the_runs_and_documents_and_says_how_they_were_dated() -> None:
    console = Console(record=True, width=200)
    _print_summary(result(), console)
    text = " ".join(console.export_text().split())
    assert "Invoice runs as of 04 Aug 2026 00:00 AEST, when the billing period closed" in text
    assert (
        "invoice runs as of 04 Aug 2026: 2 invoices, 0 credit notes, 0 adjustment invoices, 0"
        " waiting, 0 held; as of 05 Aug 2026: 0 invoices, 1 credit note" in text
    )
    assert (
        "documents 2 invoices, 1 credit note, 0 adjustment invoices; numbers gapless;"
        " CN-00000001 corrects INV-00000001 by -0.62 AUD; PDF and HTML of each in"
        " unused/documents" in text
    )


def test_the_report_links_each_document_by_its_relative_path() -> None:
    section = documents_section(result().documents)
    assert "2 invoices,\n1 credit note,\n0 adjustment invoices" in section
    assert section.count("<tr><td>") == 3
    assert (
        '<td class="n">-0.62</td><td class="n">-0.500</td><td>INV-00000001</td><td></td>'
        '<td><a href="documents/CN-00000001.pdf">PDF</a>'
        ' <a href="documents/CN-00000001.html">HTML</a></td>' in section
    )
    assert documents_section([]) == ""


def test_a_run_is_dated_the_first_midnight_after_the_periods_last_data_deadline() -> None:
    july = Period(DAY, date(2026, 7, 31))
    assert invoice_as_of(july, timedelta(days=3)) == datetime(2026, 8, 4, tzinfo=NEM_TIME)
    assert invoice_as_of(july, timedelta(hours=1)) == datetime(2026, 8, 2, tzinfo=NEM_TIME)
    assert invoice_as_of(july, timedelta(0)) == datetime(2026, 8, 1, tzinfo=NEM_TIME)
