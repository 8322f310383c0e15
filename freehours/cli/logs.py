"""Where a one-shot command's log lines go: JSON on stderr, warnings only unless asked
(``quiet_logging``), or to a file while the command shows its own output (``log_lines_to``: the
simulations and the demo, whose injected faults make many warnings, and the terminal is for
progress and figures)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, TextIO

import structlog

if TYPE_CHECKING:
    from freehours.settings import Settings


@contextlib.contextmanager
def log_lines_to(stream: TextIO) -> Iterator[None]:
    """JSON log lines, warnings and worse, to ``stream`` inside the block; the logging set-up
    that was in force before, after it."""
    before = structlog.get_config()
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger("warning"),
        logger_factory=structlog.WriteLoggerFactory(stream),
        cache_logger_on_first_use=False,
    )
    try:
        yield
    finally:
        structlog.configure(**before)


def quiet_logging(settings: Settings) -> None:
    """Log lines as JSON on stderr, for a one-shot command whose stdout is its answer: at
    FREEHOURS_LOG_LEVEL when it is set, else warnings only (the jobs' canonical lines are noise
    beside a command's progress and summary)."""
    from freehours.observability.logging import configure_logging

    given = "log_level" in settings.model_fields_set
    configure_logging(settings.log_level if given else "warning")
