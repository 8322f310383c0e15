"""Log lines to a file while a command shows its own output (the simulations and the demo): their
injected faults make many warnings, and the terminal is for progress and figures."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TextIO

import structlog


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
