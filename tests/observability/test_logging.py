"""``configure_logging``: JSON lines (or a console on a terminal) with what the context bound and
the current trace; the standard library's records the same way; ``bind_fields`` for the
canonical line."""

from __future__ import annotations

import contextvars
import json
import logging
import os
import threading
from collections.abc import Iterator
from datetime import date
from decimal import Decimal
from typing import Any

import pytest
import structlog
from opentelemetry import trace
from opentelemetry.trace import format_span_id, format_trace_id

from freehours.observability.logging import bind_fields, canonical_line, configure_logging
from tests.tracing import Spans

log = structlog.get_logger("tests.observability")


@pytest.fixture(autouse=True)
def restored() -> Iterator[None]:
    """Each test configures logging for the process: put everything back afterwards."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    structlog.reset_defaults()
    structlog.contextvars.clear_contextvars()
    root.handlers[:] = handlers
    root.setLevel(level)


def lines(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    """What went to stderr, one JSON object per line (each line must be one)."""
    return [json.loads(line) for line in capsys.readouterr().err.splitlines()]


def test_lines_are_json_with_the_event_level_time_and_bound_fields(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging("info")  # stderr is not a terminal here: JSON
    structlog.contextvars.bind_contextvars(job_id=7, idempotency_key="4102000001:2026-07-01")
    log.info("job_finished", outcome="completed", attempt=1)
    (line,) = lines(capsys)
    timestamp = line.pop("timestamp")
    assert timestamp.endswith("Z")
    assert line == {
        "pid": os.getpid(),
        "event": "job_finished",
        "level": "info",
        "job_id": 7,
        "idempotency_key": "4102000001:2026-07-01",
        "outcome": "completed",
        "attempt": 1,
    }


def test_a_line_inside_a_span_carries_its_trace_and_span_ids(
    capsys: pytest.CaptureFixture[str], spans: Spans
) -> None:
    configure_logging("info", json=True)
    with trace.get_tracer("tests").start_as_current_span("work") as span:
        log.info("inside")
    log.info("outside")
    inside, outside = lines(capsys)
    context = span.get_span_context()
    assert (inside["trace_id"], inside["span_id"]) == (
        format_trace_id(context.trace_id),
        format_span_id(context.span_id),
    )
    assert "trace_id" not in outside


def test_values_json_cannot_hold_are_written_as_their_text(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging("info", json=True)
    log.info("quota_completed", date=date(2026, 7, 1), free_kwh=Decimal("2.400"))
    (line,) = lines(capsys)
    assert (line["date"], line["free_kwh"]) == ("2026-07-01", "2.400")


def test_lines_below_the_level_are_dropped(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("warning", json=True)
    log.info("quiet")
    log.warning("loud")
    assert [line["event"] for line in lines(capsys)] == ["loud"]


def test_an_exception_is_in_its_line(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("info", json=True)
    failure = ConnectionError("the database went away")
    log.error("worker_cycle_failed", exc_info=failure)
    (line,) = lines(capsys)
    assert (line["event"], line["level"]) == ("worker_cycle_failed", "error")
    assert "ConnectionError: the database went away" in line["exception"]


def test_a_terminal_gets_readable_lines(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("info", json=False)
    log.info("request_finished", status=200)
    err = capsys.readouterr().err
    assert not err.startswith("{")
    assert "request_finished" in err
    assert "status" in err


def test_the_standard_librarys_warnings_are_json_lines_too_and_its_information_is_not(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging("info", json=True)
    logging.getLogger("uvicorn.error").warning("worker %s died", 3)
    logging.getLogger("httpx").info("HTTP Request: POST ...")
    (line,) = lines(capsys)
    assert {name: line[name] for name in ("event", "level", "logger")} == {
        "event": "worker 3 died",
        "level": "warning",
        "logger": "uvicorn.error",
    }


def test_configuring_again_replaces_the_earlier_set_up(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("info", json=True)
    configure_logging("info", json=True)
    logging.getLogger("alembic").warning("once")
    assert [line["event"] for line in lines(capsys)] == ["once"]


def test_an_unknown_level_is_refused() -> None:
    with pytest.raises(ValueError, match="log level 'loud'"):
        configure_logging("loud")


def test_bind_fields_reach_the_canonical_line_from_a_copied_context_on_another_thread() -> None:
    with canonical_line() as fields:
        bind_fields(nmi="4102000001")
        # As Starlette runs a sync route: on a threadpool thread, in a copy of the context.
        worker = threading.Thread(
            target=contextvars.copy_context().run,
            args=(bind_fields,),
            kwargs={"quota_state": "LOCKED"},
        )
        worker.start()
        worker.join()
    assert fields == {"nmi": "4102000001", "quota_state": "LOCKED"}
    assert structlog.contextvars.get_contextvars() == {"nmi": "4102000001"}


def test_bind_fields_outside_a_canonical_line_only_binds() -> None:
    bind_fields(job_id=3)
    assert structlog.contextvars.get_contextvars() == {"job_id": 3}
