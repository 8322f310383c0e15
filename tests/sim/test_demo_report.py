"""The demo's summary and plots: kWh in one format, a region without free energy said why from
its meters' reads, whole-number ticks on the axes of counts."""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from rich.console import Console

from freehours.cli.demo import _print_summary
from freehours.domain.reads import IntervalDay
from freehours.domain.time import NEM_TIME
from freehours.plans import builtin_plan
from freehours.sim.demo import (
    DemoConfig,
    DemoResult,
    NoFreeDays,
    RegionTotals,
    kwh_figure,
    no_free_days,
)
from freehours.sim.report import latency_figure, retries_figure

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


def result() -> DemoResult:
    done = DemoResult(DemoConfig(out=Path("unused"), customers=4, days=1, seed=1), DAY)
    done.faults.update(
        outage_refused=0,
        answers_lost=0,
        worker_died_holding=None,
        database_errors=0,
        cache_write_failures=0,
        stale_cache_entry=None,
    )
    done.regions = {
        "NSW": RegionTotals(1, Decimal("3.64"), Decimal("1.23")),
        "SA": RegionTotals(1, Decimal(0), Decimal("0.00")),
        "SEQ": RegionTotals(1, Decimal("1.5"), Decimal("0.36")),
    }
    done.revised = ("4100000002:2026-07-01", Decimal(0), Decimal("1.5"))
    done.no_free = [NoFreeDays("SA", (DAY,), 1, "12:00-15:00", Decimal(0), Decimal("2.25"))]
    done.retry_samples = [(0.5, 0, 0), (1.0, 1, 0), (2.0, 2, 1), (3.0, 2, 2)]
    done.settle_seconds = [0.1, 0.2, 0.3, 1.4, 2.5]
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
