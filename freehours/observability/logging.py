"""One logging set-up for every freehours process: structlog, JSON lines or a readable console.

    configure_logging("info")              # once, at start-up: serve, worker, agent

Lines go to stderr: JSON lines (one object per line, ``event`` a stable snake_case name), or,
when stderr is a terminal, structlog's console renderer. Every line carries

- what the code around it bound with ``structlog.contextvars`` or ``bind_fields`` (a request's
  ``idempotency_key``, a job's ``job_id``, a settlement's ``quota_state``);
- inside a span, its ``trace_id`` and ``span_id`` (``add_trace_context``), so that a line leads
  to its trace and a trace to its lines;
- the ``pid`` of the process that wrote it: the API processes of ``serve --processes N`` share
  one stderr (and a journal stream names only the first of them).

The standard library's loggers (uvicorn, alembic) are rendered the same way, from WARNING up:
their information lines (an httpx line per request) would drown the canonical lines.

A request or a job logs one canonical line when it ends (``request_finished``, ``job_finished``)
with everything known about it by then. ``canonical_line()`` collects the fields for it:
``bind_fields`` adds to it from anywhere inside, also from the threadpool thread a sync FastAPI
route runs on (whose context is a copy, so a plain contextvar bound there never comes back).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import structlog
from opentelemetry import trace
from structlog.typing import EventDict, Processor, WrappedLogger

#: The level names ``FREEHOURS_LOG_LEVEL`` and ``--log-level`` take.
LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}

_CANONICAL: ContextVar[dict[str, Any] | None] = ContextVar("freehours_canonical", default=None)


def add_trace_context(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    """Add the current span's ``trace_id`` and ``span_id`` (W3C hex), unless the line has its
    own or there is no span."""
    context = trace.get_current_span().get_span_context()
    if context.is_valid:
        event_dict.setdefault("trace_id", trace.format_trace_id(context.trace_id))
        event_dict.setdefault("span_id", trace.format_span_id(context.span_id))
    return event_dict


def add_process_id(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    """Add the writing process's ``pid``."""
    event_dict["pid"] = os.getpid()
    return event_dict


@contextmanager
def canonical_line() -> Iterator[dict[str, Any]]:
    """The fields ``bind_fields`` adds inside this block, for the block's canonical line."""
    fields: dict[str, Any] = {}
    token = _CANONICAL.set(fields)
    try:
        yield fields
    finally:
        _CANONICAL.reset(token)


def bind_fields(**fields: Any) -> None:
    """Bind ``fields`` to the log lines that follow in this context, and to the canonical line
    of the request or job it belongs to."""
    structlog.contextvars.bind_contextvars(**fields)
    collected = _CANONICAL.get()
    if collected is not None:
        collected.update(fields)


class StderrLogger:
    """Writes each line to ``sys.stderr`` as it is when the line is written, so that a progress
    display that redirects stderr while it runs (Rich's) shows the lines above itself."""

    _lock = threading.Lock()

    def msg(self, message: str) -> None:
        with self._lock:
            stream = sys.stderr
            stream.write(message + "\n")
            stream.flush()

    debug = info = warning = warn = error = err = critical = fatal = exception = msg
    failure = log = msg


class _StderrHandler(logging.Handler):
    """The standard library's records, formatted by structlog, to ``StderrLogger``."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            StderrLogger().msg(self.format(record))
        except Exception:  # noqa: BLE001 - logging's own convention: report, never raise
            self.handleError(record)


_handler: _StderrHandler | None = None


def configure_logging(level: str, json: bool | None = None) -> None:
    """Set up structlog and the standard library's logging for this process.

    ``level``: one of ``LEVELS``. ``json``: JSON lines (True) or the console renderer (False);
    None: JSON unless stderr is a terminal. Calling it again replaces the earlier set-up.
    """
    if level not in LEVELS:
        raise ValueError(f"log level {level!r}: one of {', '.join(LEVELS)}")
    if json is None:
        json = not sys.stderr.isatty()
    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        add_trace_context,
        add_process_id,
    ]
    rendering: list[Processor] = (
        # str: dates, decimals and UUIDs as their text, not their repr.
        [structlog.processors.format_exc_info, structlog.processors.JSONRenderer(default=str)]
        if json
        else [structlog.dev.ConsoleRenderer()]
    )
    structlog.configure(
        processors=[*shared, *rendering],
        wrapper_class=structlog.make_filtering_bound_logger(LEVELS[level]),
        logger_factory=lambda *_: StderrLogger(),
        # Not cached: a logger bound before the set-up (at import) must follow it, and so must
        # structlog.testing.capture_logs.
        cache_logger_on_first_use=False,
    )
    global _handler  # noqa: PLW0603 - one handler per process, replaced by a new set-up
    root = logging.getLogger()
    if _handler is not None:
        root.removeHandler(_handler)
    _handler = _StderrHandler()
    _handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[structlog.stdlib.add_logger_name, *shared],
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *rendering],
        )
    )
    root.addHandler(_handler)
    root.setLevel(max(LEVELS[level], logging.WARNING))
