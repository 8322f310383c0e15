"""Serving the metrics: the API's ``/metrics``, and ``--metrics-port`` of the worker and the agent.

In one process the default registry is served: every metric of
``freehours.observability.metrics``, and the process's own (CPU, memory, open files, GC). Beside
them, the gauges the process measures when scraped (``freehours.observability.measured``: what
only the database knows, ``freehours_jobs_stuck``), given to ``render_metrics`` and
``serve_metrics`` by the server that has the database.

Several processes on one host (API processes behind one port, ``freehours worker`` started more
than once) share their metrics through prometheus-client's multiprocess mode: set
``PROMETHEUS_MULTIPROC_DIR`` to one empty directory in the environment of every one of them
before they start (the variable is read when prometheus-client is imported), and empty it
whenever the whole group starts again. Each process then writes its values to files there, and
each endpoint serves all the processes' values together: counters and histograms summed, each
gauge as its ``multiprocess_mode`` says. Scrape one endpoint per directory, since every one of
them answers for the whole group. A process that exits calls ``forget_process`` so that its
live gauges stop counting. ``freehours serve --processes N`` makes a directory of its own when
the variable is not set (``freehours.api.server``). Process metrics (CPU, memory) are not
exported in multiprocess mode.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from wsgiref.simple_server import WSGIServer

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest, start_http_server
from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead
from prometheus_client.registry import Collector

from freehours.errors import ConfigurationError

#: The environment variable that turns multiprocess mode on (prometheus-client's own name).
MULTIPROC_DIR = "PROMETHEUS_MULTIPROC_DIR"
#: The media type of ``render_metrics()``.
CONTENT_TYPE = CONTENT_TYPE_LATEST


class Exported:
    """What this process serves, as a Prometheus collector: the default registry, or in
    multiprocess mode every process's files (read on each scrape); then ``measured``."""

    def __init__(self, measured: Sequence[Collector] = ()) -> None:
        directory = os.environ.get(MULTIPROC_DIR)
        self._recorded: Collector = (
            # prometheus_client.multiprocess has no annotations.
            MultiProcessCollector(None, path=directory)  # type: ignore[no-untyped-call]
            if directory
            else REGISTRY
        )
        self._measured = tuple(measured)

    def collect(self) -> Iterable[Metric]:
        yield from self._recorded.collect()
        for collector in self._measured:
            yield from collector.collect()


def render_metrics(measured: Sequence[Collector] = ()) -> bytes:
    """The metrics in Prometheus' text format, as a scrape gets them, with ``measured``."""
    return generate_latest(Exported(measured))


def serve_metrics(port: int, host: str, measured: Sequence[Collector] = ()) -> WSGIServer:
    """Serve the metrics, with ``measured``, on ``host:port`` from a thread of its own;
    ``shutdown()`` it.

    Raises ``ConfigurationError`` when nothing can listen there (the port is taken, say).
    """
    try:
        server, _ = start_http_server(port, addr=host, registry=Exported(measured))
    except OSError as exc:
        raise ConfigurationError(f"--metrics-port {port}: cannot listen on {host} ({exc})") from exc
    return server


def forget_process(pid: int | None = None) -> None:
    """In multiprocess mode, as a process ends (this one, or ``pid`` that its supervisor saw
    die): drop its values of the live gauges."""
    directory = os.environ.get(MULTIPROC_DIR)
    if directory:
        # prometheus_client.multiprocess has no annotations.
        mark_process_dead(pid or os.getpid(), directory)  # type: ignore[no-untyped-call]
