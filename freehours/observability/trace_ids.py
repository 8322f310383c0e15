"""The current trace's id, as the rows that record what a request or job did store it.

Only OpenTelemetry's API is imported here (not its SDK, as ``tracing`` does), so that the store
may call it without loading the exporters.
"""

from __future__ import annotations

from opentelemetry import trace


def current_trace_id() -> str | None:
    """The current span's trace id as 32 lowercase hex digits, or None outside a valid span
    context (no span, or the invalid one OpenTelemetry answers with when there is none)."""
    context = trace.get_current_span().get_span_context()
    return trace.format_trace_id(context.trace_id) if context.is_valid else None
