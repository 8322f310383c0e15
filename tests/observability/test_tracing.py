"""``tracer_provider``: spans in every mode; exported to nowhere, to stderr as JSON lines, or to
an OTLP exporter when one is installed."""

from __future__ import annotations

import io
import json
import sys
import types

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import format_span_id, format_trace_id

from freehours.errors import ConfigurationError
from freehours.observability.tracing import OTLP_MODULES, child_span, tracer_provider


def test_off_records_nothing_but_still_gives_ids_for_log_lines_and_traceparents() -> None:
    provider = tracer_provider("off", "freehours-test")
    tracer = provider.get_tracer("tests")
    with (
        tracer.start_as_current_span("work") as span,
        tracer.start_as_current_span("inner") as inner,
    ):
        pass
    assert not span.is_recording()
    assert span.get_span_context().is_valid
    assert not span.get_span_context().trace_flags.sampled
    assert inner.get_span_context().trace_id == span.get_span_context().trace_id


@pytest.mark.parametrize("exporter", ["off", "console"])
def test_a_child_span_is_made_only_where_it_can_be_recorded(exporter: str) -> None:
    out = io.StringIO()
    provider = tracer_provider(exporter, "freehours-test", out=out)
    tracer = provider.get_tracer("tests")
    with child_span(tracer, "root") as root:  # no current span: a root, as the sampler says
        assert isinstance(root, trace.Span)
        with child_span(tracer, "child") as child:
            current = trace.get_current_span()
    if exporter == "off":
        # Under a live span that is not recorded, no child: the work runs in the parent's span.
        assert child is None
        assert current is root
        assert out.getvalue() == ""
    else:
        assert isinstance(child, trace.Span)
        assert current is child
        names = [json.loads(line)["name"] for line in out.getvalue().splitlines()]
        assert names == ["child", "root"]


def test_console_writes_one_json_line_per_span_with_its_service() -> None:
    out = io.StringIO()
    provider = tracer_provider("console", "freehours-test", out=out)
    tracer = provider.get_tracer("tests")
    with tracer.start_as_current_span("outer") as outer, tracer.start_as_current_span("inner"):
        pass
    inner, finished_outer = (json.loads(line) for line in out.getvalue().splitlines())
    assert (inner["name"], finished_outer["name"]) == ("inner", "outer")
    context = outer.get_span_context()
    assert inner["context"]["trace_id"] == f"0x{format_trace_id(context.trace_id)}"
    assert inner["parent_id"] == f"0x{format_span_id(context.span_id)}"
    assert inner["resource"]["attributes"]["service.name"] == "freehours-test"


def test_otlp_without_an_exporter_package_says_which_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in OTLP_MODULES:
        monkeypatch.setitem(sys.modules, name, None)  # as if not installed
    with pytest.raises(ConfigurationError, match="opentelemetry-exporter-otlp-proto-http"):
        tracer_provider("otlp", "freehours-test")


def test_otlp_sends_spans_to_the_installed_exporter(monkeypatch: pytest.MonkeyPatch) -> None:
    exported = InMemorySpanExporter()

    class OTLPSpanExporter:
        """Stands in for the package's exporter (configured by OTEL_EXPORTER_OTLP_*)."""

        def export(self, spans: object) -> SpanExportResult:
            return exported.export(spans)  # type: ignore[arg-type]

        def shutdown(self) -> None:
            exported.shutdown()

        def force_flush(self, timeout_millis: int = 30_000) -> bool:
            return True

    module = types.ModuleType(OTLP_MODULES[0])
    module.OTLPSpanExporter = OTLPSpanExporter  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, OTLP_MODULES[0], module)
    provider = tracer_provider("otlp", "freehours-test")
    with provider.get_tracer("tests").start_as_current_span("shipped"):
        pass
    provider.force_flush()
    assert [span.name for span in exported.get_finished_spans()] == ["shipped"]
    provider.shutdown()


def test_an_unknown_exporter_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="FREEHOURS_TRACES='jaeger'"):
        tracer_provider("jaeger", "freehours-test")
