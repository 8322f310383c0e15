"""Gauges measured when they are scraped, for what only a database knows.

A gauge set as things happen is only as true as the process that sets it: ``freehours_jobs_stuck``
was set by the workers, so an API process with no worker beside it reported 0 while jobs waited
for months. A ``MeasuredGauge`` is counted afresh by whichever process is scraped, from the
database they all share, so every process that exports it tells the truth, and in multiprocess
mode it is never summed over processes that each counted the same rows.

A scrape must not hang on a database that does not answer (docs/security.md, "Failing
dependencies"), so a measurement runs on a thread of its own and is waited for at most
``timeout`` seconds; past that, or when it fails, the series is left out of that scrape (a gauge
that says nothing rather than a stale or made-up value) and a warning names the metric. One
measurement runs at a time: scrapes that come while it runs wait for it rather than starting
another. A value is reused for ``fresh_for`` seconds, so several scrapers cost one query.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future

import structlog
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from freehours.clock import Clock, SystemClock

log = structlog.get_logger("freehours.metrics")

#: Longest a scrape waits for a measurement: well inside Prometheus' default scrape timeout
#: (10 s), as /readyz waits for the database.
MEASURE_TIMEOUT_SECONDS = 2.0
#: How long a measured value is served again before the next scrape measures anew.
FRESH_SECONDS = 5.0


class MeasuredGauge:
    """A gauge's name and help; ``measured_by`` gives the collector that measures it."""

    def __init__(self, name: str, documentation: str) -> None:
        self.name = name
        self.documentation = documentation

    def measured_by(
        self,
        measure: Callable[[], float],
        *,
        timeout: float = MEASURE_TIMEOUT_SECONDS,
        fresh_for: float = FRESH_SECONDS,
        clock: Clock | None = None,
    ) -> Measurement:
        """A collector whose every scrape gives ``measure()`` (``timeout`` and ``fresh_for`` as
        the module says; ``fresh_for`` on ``clock``, the system's by default)."""
        return Measurement(
            self, measure, timeout=timeout, fresh_for=fresh_for, clock=clock or SystemClock()
        )

    def family(self, value: float | None = None) -> GaugeMetricFamily:
        return GaugeMetricFamily(self.name, self.documentation, value=value)


class Measurement:
    """A Prometheus collector (``collect``) of one ``MeasuredGauge``."""

    def __init__(
        self,
        gauge: MeasuredGauge,
        measure: Callable[[], float],
        *,
        timeout: float,
        fresh_for: float,
        clock: Clock,
    ) -> None:
        self.gauge = gauge
        self._clock = clock
        self._measure = measure
        self._timeout = timeout
        self._fresh_for = fresh_for
        self._lock = threading.Lock()
        self._running: Future[float] | None = None
        self._last: tuple[float, float] | None = None  # (value, clock.monotonic() when taken)

    def describe(self) -> Iterable[Metric]:
        return [self.gauge.family()]

    def collect(self) -> Iterable[Metric]:
        value = self.value()
        return [] if value is None else [self.gauge.family(value)]

    def value(self) -> float | None:
        """The gauge's value now: a fresh one, or one measured now within the timeout; None
        when none could be had in time."""
        with self._lock:
            if self._last is not None and self._clock.monotonic() - self._last[1] < self._fresh_for:
                return self._last[0]
            running = self._running
            if running is None:
                running = self._running = self._start()
        try:
            return running.result(timeout=self._timeout)
        except TimeoutError:
            log.warning(
                "metric_not_measured",
                metric=self.gauge.name,
                error=f"no answer within {self._timeout:g} s",
            )
        except Exception as exc:  # noqa: BLE001 - whatever failed, this scrape goes without it
            log.warning(
                "metric_not_measured", metric=self.gauge.name, error=f"{type(exc).__name__}: {exc}"
            )
        return None

    def _start(self) -> Future[float]:
        future: Future[float] = Future()

        def run() -> None:
            try:
                value = float(self._measure())
            except BaseException as exc:  # noqa: BLE001 - handed to the scrapes that wait
                with self._lock:
                    self._running = None
                future.set_exception(exc)
                return
            with self._lock:
                self._running = None
                self._last = (value, self._clock.monotonic())
            future.set_result(value)

        # A daemon thread: a measurement hung on a black-holed database must not hold the
        # process at exit (the database's own timeouts end it meanwhile).
        threading.Thread(target=run, name=f"measure-{self.gauge.name}", daemon=True).start()
        return future
