"""Start-up: ``freehours --help`` as a whole process, beside Python's own start.

Every command pays for Python's start and for what ``freehours.cli`` imports before it runs;
``--help`` pays for nothing more than Typer's help (the commands are listed from one table, none
imported). The goal: under 0.3 s. Best of five runs, wall-clock and CPU.
"""

from __future__ import annotations

import sys

from benchmarks.processes import best_of, freehours
from benchmarks.scale import size

#: ``freehours --help``, in seconds of wall-clock.
GOAL = 0.3
RUNS = size(5, 1)


def run() -> None:
    python = best_of([sys.executable, "-c", "pass"], RUNS)
    help_ = best_of(freehours("--help"), RUNS)
    print(
        f"start-up: freehours --help {help_.wall:.3f} s (goal < {GOAL} s), cpu {help_.cpu:.3f} s;"
        f" Python alone {python.wall:.3f} s, cpu {python.cpu:.3f} s (best of {RUNS})"
    )
