"""Every Prometheus metric freehours exports, defined once, named as DESIGN.md section 6 says."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

QUOTA_CACHE_REQUESTS = Counter(
    "freehours_quota_cache_requests_total",
    "Quota cache look-ups by result: hit (terminal, served from the cache), miss (nothing cached), "
    "stale (cached state older than the database's), revalidated (non-terminal, re-read and "
    "current), error (the cache could not be reached).",
    ["result"],
)
QUOTA_CACHE_WRITE_FAILURES = Counter(
    "freehours_quota_cache_write_failures_total",
    "Cache writes after commit that failed; logged, never fatal.",
)
SETTLEMENT_OUTCOMES = Counter(
    "freehours_settlement_outcomes_total",
    "Settlement answers by quota status and whether it was a replay.",
    ["status", "replayed"],
)
SETTLEMENT_SECONDS = Histogram(
    "freehours_settlement_seconds",
    "Time from claiming a quota to COMPLETED, seconds.",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
