"""deploy/observability: every metric the alert rules and the dashboard query exists, under the
name a scrape shows, and every label they select, group or show by is one it has."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.metrics import MetricWrapperBase

from freehours.observability import metrics
from freehours.observability.measured import MeasuredGauge

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "observability"
METRIC = re.compile(r"\bfreehours_[a-z0-9_]+\b")
SELECTOR = re.compile(r"\b(freehours_[a-z0-9_]+)\s*\{([^}]*)\}")
MATCHER = re.compile(r"([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)")
GROUPING = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")
LEGEND = re.compile(r"\{\{\s*(\w+)\s*\}\}")
#: The sample names each metric type exposes, by suffix of its family name.
SUFFIXES = {"counter": ("_total",), "gauge": ("",), "histogram": ("_bucket", "_sum", "_count")}


def exposed() -> dict[str, set[str]]:
    """Every sample name freehours exposes, with the labels it has."""
    names: dict[str, set[str]] = {}
    for metric in vars(metrics).values():
        if isinstance(metric, MeasuredGauge):  # counted when scraped: one sample, no labels
            names[metric.name] = set()
            continue
        if not isinstance(metric, MetricWrapperBase):
            continue
        (family,) = metric.describe()
        labels = set(metric._labelnames)  # prometheus-client has no public getter for them
        for suffix in SUFFIXES[family.type]:
            names[family.name + suffix] = labels | ({"le"} if suffix == "_bucket" else set())
    return names


def alert_queries() -> Iterator[tuple[str, str, str]]:
    """(alert, expression, "") for each rule."""
    rules = yaml.safe_load((DEPLOY / "alerts.yml").read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            yield rule["alert"], rule["expr"], ""


def dashboard_queries() -> Iterator[tuple[str, str, str]]:
    """(panel title, expression, legend) for each panel's query."""
    dashboard = json.loads((DEPLOY / "grafana-dashboard.json").read_text())

    def panels(found: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for panel in found:
            yield panel
            yield from panels(panel.get("panels", []))

    for panel in panels(dashboard["panels"]):
        for target in panel.get("targets", []):
            yield panel["title"], target["expr"], target.get("legendFormat", "")


QUERIES = [*alert_queries(), *dashboard_queries()]


def test_there_are_alerts_for_each_thing_the_operations_guide_covers() -> None:
    alerts = {name for name, _, _ in alert_queries()}
    assert {
        "FreehoursSettlementRetryStorm",
        "FreehoursApiRetryAnswers",
        "FreehoursJobsStuck",
        "FreehoursJobsDiscarded",
        "FreehoursSettlementsUnscheduled",
        "FreehoursCircuitBreakerOpen",
        "FreehoursQuotaCacheHitRatioFalling",
    } <= alerts
    guide = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    for alert in alerts:
        assert f"### {alert}" in guide, alert


@pytest.mark.parametrize(("where", "expr", "legend"), QUERIES, ids=[q[0] for q in QUERIES])
def test_every_metric_and_label_a_query_uses_exists(where: str, expr: str, legend: str) -> None:
    known = exposed()
    used = set(METRIC.findall(expr))
    assert used, f"{where}: no freehours metric in {expr!r}"
    assert used <= known.keys(), f"{where}: unknown {sorted(used - known.keys())}"
    for name, matchers in SELECTOR.findall(expr):
        selected = set(MATCHER.findall(matchers))
        assert selected <= known[name], f"{where}: {name} has no {sorted(selected - known[name])}"
    available = set().union(*(known[name] for name in used))
    for grouping in GROUPING.findall(expr):
        grouped = {label.strip() for label in grouping.split(",") if label.strip()}
        assert grouped <= available, f"{where}: no {sorted(grouped - available)} to group by"
    shown = set(LEGEND.findall(legend))
    assert shown <= available, f"{where}: legend shows {sorted(shown - available)}"
