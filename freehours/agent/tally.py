"""What one run of the agent did: the counts its summary and progress display show.

The Prometheus metrics count the same things for the whole process; the tally is this run's own,
so that the summary at exit (and a test) sees exactly what happened in it.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, field, replace


@dataclass(frozen=True, slots=True)
class Counts:
    """The run's counts at one moment."""

    spooled: int = 0  # batches accepted into the spool (written to disk before any send)
    sent: int = 0  # batches the API answered 200 to
    reads_sent: int = 0  # interval reads in those batches (JSON batches; files count as 0)
    files_done: int = 0  # NEM12 files moved to done/
    files_rejected: int = 0  # NEM12 files moved to rejected/ (by the agent, or after a refusal)
    attempts: int = 0  # HTTP attempts, first ones included
    failed_attempts: int = 0  # attempts without a 200 or a final refusal
    retried: int = 0  # attempts after a batch's first
    rejected: int = 0  # batches refused for good (or unsendable) and set aside
    breaker_trips: int = 0  # times the circuit breaker opened
    budget_exhausted: int = 0  # retries the retry budget refused

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass
class Tally:
    """Counts that the agent's threads add to."""

    _counts: Counts = field(default_factory=Counts)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, **increments: int) -> None:
        """Add to the named counts, e.g. ``add(sent=1, reads_sent=48)``."""
        with self._lock:
            current = self._counts
            self._counts = replace(
                current, **{name: getattr(current, name) + n for name, n in increments.items()}
            )

    def counts(self) -> Counts:
        with self._lock:
            return self._counts
