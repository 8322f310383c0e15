"""``spans``: the spans finished during a test, from the real OpenTelemetry SDK.

A process has one tracer provider, set once. The first test that asks for ``spans`` sets an SDK
provider (or, where one was set already, uses it) whose finished spans are kept in memory while
a test that asked for them runs; each such test sees only the spans of its own.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

_EXPORTER = InMemorySpanExporter()


class _WhileCollecting(SimpleSpanProcessor):
    """Keeps finished spans only while a test that asked for them runs: the others' spans (the
    provider stays for the rest of the session) would pile up in memory."""

    collecting = False

    def on_end(self, span: ReadableSpan) -> None:
        if self.collecting:
            super().on_end(span)


_PROCESSOR = _WhileCollecting(_EXPORTER)
_installed: list[bool] = []


def _install() -> None:
    if _installed:
        return
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(_PROCESSOR)
    _installed.append(True)


class Spans:
    """The spans finished so far in this test, oldest first."""

    def finished(self) -> list[ReadableSpan]:
        return list(_EXPORTER.get_finished_spans())

    def clear(self) -> None:
        """Forget the spans so far (a test's set-up)."""
        _EXPORTER.clear()

    def named(self, name: str) -> list[ReadableSpan]:
        return [span for span in self.finished() if span.name == name]

    def one(self, name: str) -> ReadableSpan:
        (span,) = self.named(name)
        return span

    def ancestors(self, span: ReadableSpan) -> list[str]:
        """The names of ``span``'s parent, its parent's parent, and so on, among these spans."""
        by_id = {found.context.span_id: found for found in self.finished()}
        names = []
        while span.parent is not None and span.parent.span_id in by_id:
            span = by_id[span.parent.span_id]
            names.append(span.name)
        return names


@pytest.fixture
def spans() -> Iterator[Spans]:
    _install()
    _EXPORTER.clear()
    _PROCESSOR.collecting = True
    yield Spans()
    _PROCESSOR.collecting = False
    _EXPORTER.clear()
