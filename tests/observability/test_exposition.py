"""Serving the metrics: from this process, or in multiprocess mode from every process that shares
PROMETHEUS_MULTIPROC_DIR, counters summed and gauges as each one says."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from prometheus_client import Gauge

from freehours.errors import ConfigurationError
from freehours.observability import metrics
from freehours.observability.exposition import MULTIPROC_DIR, render_metrics, serve_metrics
from freehours.observability.metrics import JOB_ATTEMPTS
from tests.metrics import Samples


def completed(text: str) -> float:
    return Samples.of(text).count(
        "freehours_job_attempts_total", kind="metrics-test", outcome="completed"
    )


def in_a_process(directory: Path, code: str) -> None:
    """Run ``code`` in a Python process of its own, in multiprocess mode over ``directory``."""
    subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, MULTIPROC_DIR: str(directory)},
        check=True,
        timeout=60,
    )


def test_several_processes_are_served_as_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prelude = (
        "from freehours.observability.metrics import AGENT_SPOOLED, JOB_ATTEMPTS\n"
        "from freehours.observability.exposition import forget_process\n"
        "JOB_ATTEMPTS.labels('metrics-test', 'completed').inc({n})\n"
        "AGENT_SPOOLED.set({spooled})\n"
    )
    # The first process ends as the commands do (its live gauge goes); the others are still
    # live, and their spools are summed.
    in_a_process(tmp_path, prelude.format(n=2, spooled=5) + "forget_process()\n")
    in_a_process(tmp_path, prelude.format(n=3, spooled=1))
    in_a_process(tmp_path, prelude.format(n=0, spooled=2))
    monkeypatch.setenv(MULTIPROC_DIR, str(tmp_path))
    text = render_metrics().decode()
    assert completed(text) == 5
    assert Samples.of(text).value("freehours_agent_spooled") == 3


def test_a_metrics_port_serves_this_processs_metrics(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MULTIPROC_DIR, raising=False)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = serve_metrics(port, "127.0.0.1")
    try:
        before = completed(httpx.get(f"http://127.0.0.1:{port}/metrics").text)
        JOB_ATTEMPTS.labels("metrics-test", "completed").inc()
        after = completed(httpx.get(f"http://127.0.0.1:{port}/metrics").text)
    finally:
        server.shutdown()
        server.server_close()
    assert after == before + 1


def test_a_metrics_port_that_is_taken_is_a_configuration_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ConfigurationError, match=f"--metrics-port {port}"):
            serve_metrics(port, "127.0.0.1")


def test_every_gauge_says_how_processes_combine_and_the_live_ones_drop_the_dead() -> None:
    gauges = {name: metric for name, metric in vars(metrics).items() if isinstance(metric, Gauge)}
    assert gauges  # the breaker's state and the agents' spools, at least
    for name, gauge in gauges.items():
        # "all" (the default) would export one series per process id, dead ones included.
        mode = gauge._multiprocess_mode  # prometheus-client has no public getter for it
        assert mode.startswith("live"), f"{name}: multiprocess_mode {mode!r}"
