"""Whole-process figures: a command timed as a user runs it, from its start to its exit.

The in-process figures time the work alone; whoever runs ``freehours nem12 inspect`` waits for
Python to start, the imports, the work and the output as well. Here a command runs as a process
of its own, its output thrown away, and its best wall-clock and CPU time (user and system, of
that process alone: what other work on a shared machine changes least) of a few runs are kept.

A command runs from compiled bytecode, as it does from any install (pip compiles a package when
it installs it; an editable install compiles each module when first imported). A shell with
``PYTHONDONTWRITEBYTECODE`` set, as some CI images have, never writes it, and every run would
compile freehours anew while its dependencies run from their bytecode: ``freehours`` is compiled
once (``compileall``) before the first timed run.

The reference for reading the benchmark's file is nemreader's own command line on it,
``nemreader list-nmis FILE``: it parses the whole file (``NEMFile.nem_data()``) and lists its
NMIs and channels, which is what ``freehours nem12 inspect`` does with more to say. It takes
about 20 s a run, so it runs twice, between three rounds of the command it is compared with.
"""

from __future__ import annotations

import compileall
import functools
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

#: Where the virtual environment's commands are: ``freehours``, ``nemreader``.
BIN = Path(sys.executable).parent
#: Runs of each command in a round, its best kept; the reference (about 20 s a run) runs once
#: between rounds, ``REFERENCE_RUNS`` times.
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
    """The argv of a ``freehours`` command, as a user types it, its package compiled."""
    _compiled()
    return [str(BIN / "freehours"), *args]


@functools.cache
def _compiled() -> None:
    """The freehours package compiled to bytecode, as an install leaves it (see above)."""
    import freehours  # noqa: PLC0415 - only to find where the package is

    if not compileall.compile_dir(Path(freehours.__file__).parent, quiet=1):
        raise SystemExit("freehours does not compile")


def against_nemreader(argv: list[str], path: Path) -> tuple[Timing, Timing]:
    """``argv`` and nemreader's whole process reading ``path`` (``nemreader list-nmis``), timed
    in turns: a few runs of ``argv``, one of nemreader, and again, each one's best kept. This
    machine's speed drifts by a third over minutes; runs side by side in time see the same
    machine, where runs minutes apart would compare two."""
    ours: list[Timing] = []
    theirs: list[Timing] = []
    for _ in range(REFERENCE_RUNS):
        ours.append(best_of(argv, RUNS))
        theirs.append(best_of([str(BIN / "nemreader"), "list-nmis", str(path)], 1))
    ours.append(best_of(argv, RUNS))
    return _best(ours), _best(theirs)


def _best(timings: list[Timing]) -> Timing:
    return Timing(min(t.wall for t in timings), min(t.cpu for t in timings))
