"""Whole-process figures: a command timed as a user runs it, from its start to its exit.

The in-process figures time the work alone; whoever runs ``freehours nem12 inspect`` waits for
Python to start, the imports, the work and the output as well. Here a command runs as a process
of its own, its output thrown away, and its best wall-clock and CPU time (user and system, of
that process alone: what other work on a shared machine changes least) of a few runs are kept.

The reference for reading the benchmark's file is nemreader's own command line on it,
``nemreader list-nmis FILE``: it parses the whole file (``NEMFile.nem_data()``) and lists its
NMIs and channels, which is what ``freehours nem12 inspect`` does with more to say. It takes
about 20 s, so it is run once per ``make bench`` and shared by the benchmarks that compare
with it.
"""

from __future__ import annotations

import functools
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

#: Where the virtual environment's commands are: ``freehours``, ``nemreader``.
BIN = Path(sys.executable).parent
#: Runs of each command, its best kept: a few, since the reference takes about 20 s a run.
RUNS = 3
REFERENCE_RUNS = 2


@dataclass(frozen=True)
class Timing:
    """A command's best wall-clock and CPU seconds over its runs (each best on its own)."""

    wall: float
    cpu: float

    def ratio_line(self, what: str, reference: Timing, goal: float) -> str:
        """A line saying how many times faster than ``reference`` this is, against ``goal``."""
        return (
            f"{what} (whole process): {self.wall:.2f} s, nemreader list-nmis {reference.wall:.1f}"
            f" s: {reference.wall / self.wall:.1f}x (goal >= {goal:.0f}x); cpu {self.cpu:.2f} s"
            f" vs {reference.cpu:.1f} s: {reference.cpu / self.cpu:.1f}x"
        )


def best_of(argv: list[str], runs: int = RUNS) -> Timing:
    """Run ``argv`` ``runs`` times; its best wall-clock and CPU time."""
    walls: list[float] = []
    cpus: list[float] = []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False
        )
        walls.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr}")
    return Timing(min(walls), min(cpus))


def freehours(*args: str) -> list[str]:
    """The argv of a ``freehours`` command, as a user types it."""
    return [str(BIN / "freehours"), *args]


@functools.cache
def nemreader_process(path: Path) -> Timing:
    """nemreader's whole process reading ``path`` (``nemreader list-nmis``), once per run."""
    return best_of([str(BIN / "nemreader"), "list-nmis", str(path)], REFERENCE_RUNS)
