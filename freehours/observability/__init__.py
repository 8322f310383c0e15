"""Structured logs, Prometheus metrics and traces.

    logging      ``configure_logging``: structlog JSON lines; fields for the canonical lines
    metrics      every Prometheus metric, defined once
    exposition   ``/metrics`` and ``--metrics-port``, one process or several
    tracing      ``configure_tracing``: OpenTelemetry, ``FREEHOURS_TRACES``
    trace_ids    ``current_trace_id``: the current trace, as the store records it

What each signal says and what to do about the alerts on them: ``docs/operations.md``.
"""
