"""Gauges measured when scraped: the value of a measurement in time, a fresh one reused, none
(the series left out, a warning) when the measurement fails or takes too long, never a hang, and
one measurement at a time however many scrapes wait."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

from prometheus_client import generate_latest
from structlog.testing import capture_logs

from freehours.clock import ManualClock
from freehours.observability.measured import MeasuredGauge, Measurement
from tests.metrics import Samples
from tests.support import eventually

GAUGE = MeasuredGauge("freehours_test_measured", "A gauge for the tests.")


def scraped(measurement: Measurement) -> Samples:
    return Samples.of(generate_latest(measurement).decode())


def test_a_scrape_gives_the_measured_value_and_reuses_it_while_fresh() -> None:
    values = iter([3, 5, 8])
    clock = ManualClock(datetime(2026, 7, 1, tzinfo=UTC))
    measurement = GAUGE.measured_by(lambda: next(values), fresh_for=0.3, clock=clock)
    assert scraped(measurement).value("freehours_test_measured") == 3
    clock.advance(0.29)
    assert scraped(measurement).value("freehours_test_measured") == 3  # fresh: not measured again
    clock.advance(0.01)
    assert scraped(measurement).value("freehours_test_measured") == 5


def test_a_measurement_that_fails_leaves_the_series_out_and_says_why() -> None:
    def broken() -> float:
        raise ConnectionError("database at db:5432: connection refused")

    measurement = GAUGE.measured_by(broken)
    with capture_logs() as logs:
        assert "freehours_test_measured" not in {name for name, _ in scraped(measurement)}
    assert logs == [
        {
            "event": "metric_not_measured",
            "log_level": "warning",
            "metric": "freehours_test_measured",
            "error": "ConnectionError: database at db:5432: connection refused",
        }
    ]


def test_a_measurement_that_hangs_costs_a_scrape_its_timeout_and_runs_once_for_all() -> None:
    release = threading.Event()
    started: list[float] = []

    def hung() -> float:
        started.append(time.monotonic())
        release.wait(30)
        return 7

    measurement = GAUGE.measured_by(hung, timeout=0.2)
    try:
        began = time.monotonic()
        with capture_logs() as logs, ThreadPoolExecutor(4) as pool:
            scrapes = list(pool.map(lambda _: measurement.value(), range(4)))
        took = time.monotonic() - began
        assert scrapes == [None] * 4
        assert took < 2.0  # each waited its 0.2 s, side by side: not 30 s
        assert len(started) == 1  # one measurement in flight, whoever scrapes
        assert {line["error"] for line in logs} == {"no answer within 0.2 s"}
        assert measurement.value() is None  # still running: waited for again, not restarted
        assert len(started) == 1
    finally:
        release.set()
    # Once it answers, its value is there for the next scrape.
    assert eventually(measurement.value, within=5, what="the measurement answering") == 7
