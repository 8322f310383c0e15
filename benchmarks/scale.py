"""How large ``make bench`` measures: each section's sizes, or, with ``FREEHOURS_BENCH_SMOKE=1``,
small ones, so that every section runs to its end in seconds (``tests/test_bench_smoke.py`` runs
them all in ``make ci``: a section that breaks fails the suite, not the next ``make bench``).

A smoke run checks that a section works (its set-up, its measurement, its own checks of what it
measured), not how fast: its figures are printed, and a goal it misses does not fail it.
"""

from __future__ import annotations

import os
from typing import TypeVar

SMOKE = os.environ.get("FREEHOURS_BENCH_SMOKE") == "1"

T = TypeVar("T")


def size(full: T, smoke: T) -> T:
    """``full`` (a count, the sizes of a series, a duration), or ``smoke`` in a smoke run."""
    return smoke if SMOKE else full


def goal_missed(message: str) -> None:
    """A goal not met: the section fails (``SystemExit``), but in a smoke run, where the sizes
    are too small for its figure to mean anything, it is printed."""
    if SMOKE:
        print(f"(smoke run, not failed) {message}")
        return
    raise SystemExit(message)
