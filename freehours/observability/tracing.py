"""Traces (OpenTelemetry): one trace from the meter agent's request to the settlement's cache write.

    configure_tracing(settings.traces, service="freehours-api")      # once, at start-up

The spans, and what carries a trace from one process to the next (a W3C ``traceparent``)::

    agent.send_batch            the agent, one per send of a batch (freehours.agent.sender)
      POST /v1/meter-readings   its HTTP attempts (client); ``traceparent`` header
        POST /v1/meter-readings the API (server: FastAPI's own span, with fastapi.endpoint and
                                others inside); the ingest stores the current ``traceparent``
                                on each settlement job it schedules
          job settle            the worker (consumer), a child of the job row's ``traceparent``
            settlement.settle   freehours.settlement.service, with settlement.claim,
                                settlement.complete and cache.put inside

``FREEHOURS_TRACES`` says where finished spans go: ``off`` (the default) nowhere, ``console`` one
JSON object per line on stderr, ``otlp`` to an OpenTelemetry collector, configured by the
exporter's own ``OTEL_EXPORTER_OTLP_*`` variables, when an OTLP exporter package is installed
(``opentelemetry-exporter-otlp-proto-http`` or ``-grpc``; freehours does not depend on one).
With ``off`` spans are still made but never recorded (the sampler says no to every one): each
costs an id and a context switch, no more, and log lines still carry real trace and span ids that
the ``traceparent`` passed on keeps (not sampled) from the agent to the worker, so that one grep
finds a batch's lines in every process. Spans inside one that is not recorded are not made at all
(``child_span``): the settlement's own run in the request's or the job's span. Set the same
value in every process: a span whose parent was not sampled is not recorded either.
"""

from __future__ import annotations

import importlib
import sys
from contextlib import AbstractContextManager, nullcontext
from typing import IO

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, DEFAULT_ON

from freehours.errors import ConfigurationError

#: The values ``FREEHOURS_TRACES`` takes.
EXPORTERS = ("off", "console", "otlp")

#: Where an OTLP span exporter may be found: HTTP first (no gRPC runtime needed), then gRPC.
OTLP_MODULES = (
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.proto.grpc.trace_exporter",
)


def tracer_provider(exporter: str, service: str, *, out: IO[str] | None = None) -> TracerProvider:
    """A tracer provider for ``service`` that sends finished spans to ``exporter`` (one of
    ``EXPORTERS``); ``console`` writes to ``out`` (stderr by default)."""
    if exporter not in EXPORTERS:
        raise ConfigurationError(f"FREEHOURS_TRACES={exporter!r}: one of {', '.join(EXPORTERS)}")
    provider = TracerProvider(
        resource=Resource.create({"service.name": service}),
        # Recorded when exported: a root span always, a child when its parent was.
        sampler=ALWAYS_OFF if exporter == "off" else DEFAULT_ON,
    )
    if exporter == "console":
        # Exported as each span ends: this is for reading along, not for volume.
        console = ConsoleSpanExporter(out=out or sys.stderr, formatter=_one_line)
        provider.add_span_processor(SimpleSpanProcessor(console))
    elif exporter == "otlp":
        provider.add_span_processor(BatchSpanProcessor(_otlp_exporter()))
    return provider


def configure_tracing(exporter: str, service: str) -> None:
    """Make ``tracer_provider(exporter, service)`` this process's; its spans are flushed at exit."""
    trace.set_tracer_provider(tracer_provider(exporter, service))


def child_span(tracer: trace.Tracer, name: str) -> AbstractContextManager[object]:
    """``tracer.start_as_current_span(name)``, unless the current span is one that is not
    recorded: the samplers here follow the parent (and ``off`` records nothing), so its child
    would be dropped too, after costing an id and two context switches (measured: 7% of a
    settlement's CPU for its four spans). Log lines inside then carry the current span's ids,
    in the same trace. With no current span, a root span is started as usual."""
    current = trace.get_current_span()
    if not current.is_recording() and current.get_span_context().is_valid:
        return nullcontext()
    return tracer.start_as_current_span(name)


def hide_path(path: str) -> None:
    """Record ``path`` as the current request span's ``url.path``, in place of the one asked
    for: a path that carries a credential (a customer's page link) never reaches a trace."""
    span = trace.get_current_span()
    if span.is_recording():
        span.set_attribute("url.path", path)


def _one_line(span: ReadableSpan) -> str:
    return f"{span.to_json(indent=None)}\n"


def _otlp_exporter() -> SpanExporter:
    for name in OTLP_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        exporter: SpanExporter = module.OTLPSpanExporter()
        return exporter
    raise ConfigurationError(
        "FREEHOURS_TRACES=otlp needs an OTLP exporter: "
        "pip install opentelemetry-exporter-otlp-proto-http (or -grpc)"
    )
