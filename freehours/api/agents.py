"""What meter agents say of themselves: the ``Freehours-Agent`` header, read leniently, and
recorded in the ``agents`` table at most once per ``REPORT_EVERY`` per agent name per process.

    Freehours-Agent: name=meter-gw-3; breaker=half-open; trips=2

A header that does not parse is ignored, never an error: it is a report, not a request's
meaning. Its name is at most ``NAME_LENGTH`` characters of letters, digits, ``.``, ``_`` and
``-``; ``breaker`` is ``closed``, ``half-open`` or ``open``; ``trips`` (how often the agent's
breaker opened since it started) a whole number below 2^31. The agent's version comes from its
``User-Agent`` (``freehours-agent/X``). A report is written on a thread of its own after the
request's work, so that it never holds a request up, and a failure to write it is logged, never
the request's (docs/agent.md#what-the-agent-says-of-itself).
"""

from __future__ import annotations

import contextlib
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta

import structlog

from freehours.clock import Clock
from freehours.store.agents import AgentReport
from freehours.store.database import Store

log = structlog.get_logger("freehours.api")

HEADER = "freehours-agent"
#: The longest name, version and address kept (the ``agents`` table's columns).
NAME_LENGTH = 100
VERSION_LENGTH = 40
ADDRESS_LENGTH = 64
#: A header longer than this is not read at all.
HEADER_LENGTH = 300
BREAKER_STATES = frozenset({"closed", "half-open", "open"})
TRIPS_LIMIT = 2**31
#: An agent's report is written at most this often per process.
REPORT_EVERY = timedelta(seconds=10)
#: Agent names whose last write this process remembers; past it, the oldest are forgotten.
REMEMBERED = 10_000

_NAME = re.compile(rf"[A-Za-z0-9._-]{{1,{NAME_LENGTH}}}")
_TRIPS = re.compile(r"[0-9]{1,10}")
_VERSION = re.compile(rf"freehours-agent/([A-Za-z0-9.+_-]{{1,{VERSION_LENGTH}}})")


@dataclass(frozen=True, slots=True)
class AgentHeader:
    """A ``Freehours-Agent`` header that parsed."""

    name: str
    breaker: str
    trips: int


def parse_header(value: str | None) -> AgentHeader | None:
    """The header's name, breaker state and trips; None for anything else (no header, too
    long, a part missing, unknown or repeated, or a value out of bounds)."""
    if value is None or len(value) > HEADER_LENGTH:
        return None
    fields: dict[str, str] = {}
    for part in value.split(";"):
        key, equals, text = part.partition("=")
        key = key.strip().lower()
        if not equals or key in fields or key not in ("name", "breaker", "trips"):
            return None
        fields[key] = text.strip()
    name, breaker, trips = fields.get("name", ""), fields.get("breaker", ""), fields.get("trips")
    if not _NAME.fullmatch(name) or breaker not in BREAKER_STATES:
        return None
    if trips is None or not _TRIPS.fullmatch(trips) or int(trips) >= TRIPS_LIMIT:
        return None
    return AgentHeader(name, breaker, int(trips))


def agent_version(user_agent: str | None) -> str:
    """``X`` of a ``User-Agent`` of ``freehours-agent/X`` (its first word), else ``unknown``."""
    first = (user_agent or "").split(" ", 1)[0]
    matched = _VERSION.fullmatch(first)
    return matched.group(1) if matched else "unknown"


class AgentReports:
    """Writes agents' reports to the store, each agent at most once per ``every``, on a thread
    of its own."""

    def __init__(self, store: Store, clock: Clock, every: timedelta = REPORT_EVERY) -> None:
        self._store = store
        self._clock = clock
        self._every = every.total_seconds()
        self._written: dict[str, float] = {}  # name -> monotonic time of its last write
        self._lock = threading.Lock()
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agent-reports")

    def heard(self, header: AgentHeader, *, user_agent: str | None, address: str | None) -> None:
        """The agent of ``header`` sent a request: its report is written, unless it was less
        than ``every`` ago in this process."""
        now = self._clock.monotonic()
        with self._lock:
            last = self._written.get(header.name)
            if last is not None and now - last < self._every:
                return
            if len(self._written) >= REMEMBERED:
                self._written = {n: t for n, t in self._written.items() if now - t < self._every}
                if len(self._written) >= REMEMBERED:
                    return  # so many agents at once: the rest wait for a place
            self._written[header.name] = now
        report = AgentReport(
            name=header.name,
            breaker=header.breaker,
            trips=header.trips,
            version=agent_version(user_agent),
            address=(address or "unknown")[:ADDRESS_LENGTH],
            last_seen_at=self._clock.now(),
        )
        with contextlib.suppress(RuntimeError):  # shut down: the process is stopping
            self._writer.submit(self._write, report)

    def _write(self, report: AgentReport) -> None:
        try:
            with self._store.write() as unit:
                unit.agents.report(report)
        except Exception as exc:  # noqa: BLE001 - a report never fails anything
            log.warning(
                "agent_report_failed", agent=report.name, error=f"{type(exc).__name__}: {exc}"
            )

    def flush(self) -> None:
        """Wait for the reports submitted so far to be written (tests, and shutdown)."""
        self._writer.submit(lambda: None).result()

    def close(self) -> None:
        """Write what was submitted, then take no more."""
        self._writer.shutdown(wait=True)
