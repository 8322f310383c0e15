"""Every Prometheus metric freehours exports, defined once, named as DESIGN.md section 6 says.

Gauges say how they combine over processes in multiprocess mode (``multiprocess_mode``; see
``freehours.observability.exposition``); counters and histograms are summed. What only the
database knows is a ``MeasuredGauge``, counted by whichever process is scraped
(``freehours.observability.measured``).
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from freehours.observability.measured import MeasuredGauge

# --- the API ---
HTTP_REQUESTS = Counter(
    "freehours_http_requests_total",
    "HTTP requests answered, by method, route (its template, e.g. "
    "/v1/free-energy/settlements/{nmi}/{day}; unmatched for no route) and status code.",
    ["method", "route", "status"],
)
HTTP_REQUEST_SECONDS = Histogram(
    "freehours_http_request_seconds",
    "Time from a request's arrival to its answer's last byte, seconds, by method and route.",
    ["method", "route"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
INGESTED_VALUES = Counter(
    "freehours_ingested_values_total",
    "Interval values in committed ingests, by path: reads (JSON batches, POST "
    "/v1/meter-readings), nem12 (NEM12 files, uploaded or imported).",
    ["path"],
)
UPLOAD_BYTES_READ = Counter(
    "freehours_upload_bytes_read_total",
    "Bytes of NEM12 uploads read while checking them, once decompressed: how far each got "
    "before it was stored or refused (a bomb stops at its limit).",
)

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
SETTLEMENT_BATCH_SIZE = Histogram(
    "freehours_api_settlement_batch_size",
    "Settlement requests an API process settled together in one batch (those that arrived"
    " while its settlement threads were busy).",
    buckets=(1, 2, 4, 8, 16, 32, 64),
)
DOCUMENTS_FINALISED = Counter(
    "freehours_documents_finalised_total",
    "Invoices, credit notes and adjustment invoices finalised, by type.",
    ["type"],
)
INVOICE_RUN_SECONDS = Histogram(
    "freehours_invoice_run_seconds",
    "Time from requesting an invoice run to its last batch finalised, seconds.",
    buckets=(0.1, 0.5, 1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600),
)
RATE_LIMIT_ERRORS = Counter(
    "freehours_rate_limit_errors_total",
    "Rate-limit checks that could not reach their storage and let the request through.",
)
REDIS_UNAVAILABLE = Counter(
    "freehours_redis_unavailable_total",
    "Times Redis failed or answered too slowly, by use (rate_limit, quota_cache); it is then "
    "bypassed for FREEHOURS_REDIS_RETRY_SECONDS.",
    ["use"],
)
REDIS_BYPASSED = Counter(
    "freehours_redis_bypassed_total",
    "Redis calls not made because Redis recently failed, by use (rate limits counted in the "
    "process instead, quota cache skipped).",
    ["use"],
)
DATABASE_UNAVAILABLE = Counter(
    "freehours_database_unavailable_total",
    "Requests answered 503 because the database did not answer in time (or refused).",
)
JOB_ATTEMPTS = Counter(
    "freehours_job_attempts_total",
    "Job attempts by kind and outcome: completed, snoozed (not yet; no attempt counted), "
    "failed (retried later), discarded (out of attempts or past its deadline), stale (the job "
    "was rescued and claimed again meanwhile: this result was not written).",
    ["kind", "outcome"],
)
JOB_RETRIES = Histogram(
    "freehours_job_retries",
    "Failed attempts of each job when it finished (COMPLETED or DISCARDED).",
    ["kind"],
    buckets=(0, 1, 2, 3, 5, 10, 20),
)
JOBS_RESCUED = Counter(
    "freehours_jobs_rescued_total",
    "Running jobs whose lease ran out (their worker died or hung), made retryable or discarded.",
    ["kind"],
)
JOBS_DISCARDED = Counter(
    "freehours_jobs_discarded_total",
    "Jobs DISCARDED, by kind and reason (attempts, deadline): each one is alerted on.",
    ["kind", "reason"],
)
JOBS_STUCK = MeasuredGauge(
    "freehours_jobs_stuck",
    "Jobs due for over 20 seconds that no worker has started (no worker for their kind, or "
    "workers overloaded or down), counted in the database when scraped.",
)
WORKER_RUNNERS = Gauge(
    "freehours_worker_runners",
    "Runner threads of each worker queue (settle, invoice, webhook), in the live workers.",
    ["queue"],
    multiprocess_mode="livesum",  # each worker process has runners of its own
)
WORKER_RUNNERS_BUSY = Gauge(
    "freehours_worker_runners_busy",
    "Runner threads of each worker queue running a job now: at freehours_worker_runners, the "
    "queue is saturated and its jobs wait.",
    ["queue"],
    multiprocess_mode="livesum",
)
WORKER_JOBS_WAITING = Gauge(
    "freehours_worker_jobs_waiting",
    "Jobs a worker claimed that wait for a runner of their queue (due jobs no worker has "
    "claimed yet are freehours_jobs_stuck once late).",
    ["queue"],
    multiprocess_mode="livesum",
)

SETTLEMENTS_UNSCHEDULED = MeasuredGauge(
    "freehours_settlements_unscheduled_days",
    "Quota days of the last week with meter data and a customer, whose window ended over an hour"
    " ago, with no quota: no settlement job took them up (run `freehours settlements"
    " schedule`), counted in the database when scraped, at most every 5 minutes.",
)

PARTITIONS = Counter(
    "freehours_partitions_total",
    "Monthly partitions (PostgreSQL) the scheduled upkeep created or detached, by table.",
    ["table", "action"],
)
PARTITION_DEFAULT_ROWS = Gauge(
    "freehours_partition_default_rows",
    "Rows in a partitioned table's default partition at the last upkeep: 0 unless partitions "
    "were missing when they arrived (the upkeep stopped, or a date far off).",
    ["table"],
    multiprocess_mode="livemax",  # every process counts the same table: the latest, at most
)
UPKEEP_FAILURES = Counter(
    "freehours_upkeep_failures_total",
    "Steps of the scheduled upkeep that failed, by table: a partitioned table's creating, moving "
    "or detaching of months (PostgreSQL), or an expiry's deletion (named as its expiry).",
    ["table"],
)
UPKEEP_SUCCEEDED = Gauge(
    "freehours_upkeep_last_success_timestamp_seconds",
    "When the scheduled upkeep last did every step of a table's without a failure (Unix time).",
    ["table"],
    multiprocess_mode="livemax",  # whichever live process did it last: each runs it hourly
)

# --- the meter agent (freehours agent) ---
CIRCUIT_BREAKER_STATE = Gauge(
    "freehours_circuit_breaker_state",
    "A circuit breaker's state as this process sees it: 0 closed, 1 half-open, 2 open.",
    ["breaker"],
    multiprocess_mode="livemax",  # the worst any live process sees
)
AGENT_BREAKER_TRIPS = Counter(
    "freehours_agent_breaker_trips_total",
    "Times the agent saw its circuit breaker open.",
)
AGENT_SPOOLED = Gauge(
    "freehours_agent_spooled",
    "Batches in the agent's spool waiting to be sent.",
    multiprocess_mode="livesum",  # each agent has a spool of its own
)
AGENT_SENT = Counter(
    "freehours_agent_sent_total",
    "Batches the API answered 200 to, deleted from the spool.",
)
AGENT_READS_SENT = Counter(
    "freehours_agent_reads_sent_total",
    "Interval reads in the JSON batches the API answered 200 to.",
)
AGENT_ATTEMPTS = Counter(
    "freehours_agent_attempts_total",
    "HTTP attempts by result: delivered, retry (408, 409, 429, 5xx), rejected (other 4xx), "
    "unreachable (no answer within the deadline), unsendable (no valid request could be made).",
    ["result"],
)
AGENT_RETRIES = Counter(
    "freehours_agent_retries_total",
    "Attempts after a batch's first (a retry, or a resend after a deferral or a restart).",
)
AGENT_RETRY_BUDGET_EXHAUSTED = Counter(
    "freehours_agent_retry_budget_exhausted_total",
    "Retries the retry budget refused (retries were over 10 % of recent requests).",
)
AGENT_REJECTED = Counter(
    "freehours_agent_rejected_total",
    "Batches set aside, never resent: the API refused them for good (a 4xx other than 408, 409 "
    "and 429), or no valid request could be made of them.",
)
AGENT_FILES_REJECTED = Counter(
    "freehours_agent_files_rejected_total",
    "NEM12 files moved to rejected/ by reason: unreadable, too_large (never read), refused (by "
    "the API), unsendable (no valid request could be made).",
    ["reason"],
)
WEBHOOK_ATTEMPTS = Counter(
    "freehours_webhook_attempts_total",
    "Webhook delivery attempts by endpoint and outcome: succeeded (a 2xx answer), failed "
    "(another answer), error (no answer: refused, reset, timed out).",
    ["endpoint", "outcome"],
)
WEBHOOK_ATTEMPT_SECONDS = Histogram(
    "freehours_webhook_attempt_seconds",
    "Time from a webhook attempt's connect to its answer (or its failure), seconds, by endpoint.",
    ["endpoint"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15),
)
WEBHOOK_ATTEMPTS_POSTPONED = Counter(
    "freehours_webhook_attempts_postponed_total",
    "Webhook deliveries postponed without an attempt, by endpoint and reason: circuit_open (its "
    "circuit breaker is open) or in_flight (its attempts in flight are at their cap).",
    ["endpoint", "reason"],
)
WEBHOOK_DESTINATIONS_REFUSED = Counter(
    "freehours_webhook_destinations_refused_total",
    "Webhook attempts refused by the destination policy (every address of the host private, "
    "loopback, link-local or otherwise not public, and not allowed), by endpoint.",
    ["endpoint"],
)
WEBHOOK_DELIVERIES_FAILED = Counter(
    "freehours_webhook_deliveries_failed_total",
    "Webhook deliveries failed for good (retried for the whole schedule, or their endpoint "
    "disabled), by endpoint.",
    ["endpoint"],
)
WEBHOOK_ENDPOINTS_DISABLED = Counter(
    "freehours_webhook_endpoints_disabled_total",
    "Webhook endpoints disabled because their deliveries kept failing.",
)
