"""``freehours simulate incident`` on a small run: freehours keeps every must-hold where the legacy
model storms, on the same workload and faults."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from freehours.cli import app


def test_twenty_meters_settle_once_without_a_storm_and_the_legacy_model_storms(
    tmp_path: Path,
) -> None:
    result = CliRunner().invoke(
        app,
        ["simulate", "incident", "--meters", "20", "--seed", "1", "--json", "--out", str(tmp_path)],
    )
    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout)
    assert set(figures) == {"legacy", "freehours", "retry_reduction"}
    freehours, legacy = figures["freehours"], figures["legacy"]
    assert figures["retry_reduction"] >= 0.95
    assert freehours["duplicate_credits"] == 0
    assert freehours["jobs_stuck_over_20s"] == 0
    assert freehours["quotas_settled"] == 20
    assert freehours["quotas_unsettled"] == 0
    # The dead worker's quotas are rescued with its jobs' leases, seconds after it died (4.5 s
    # measured; 41.6 s with 30 s leases and locks).
    assert freehours["settle_seconds_p99"] <= 10
    # The same faults, on the broken design: a second credit, and quotas left in process.
    assert legacy["duplicate_credits"] > 0
    assert legacy["quotas_unsettled"] > 0
    assert json.loads((tmp_path / "incident.json").read_text()) == figures
    assert (tmp_path / "retries.png").read_bytes().startswith(b"\x89PNG")
