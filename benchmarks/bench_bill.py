"""``freehours bill`` end to end on the reader benchmark's file, against reading it alone.

The file is the reader benchmark's (1,000 NMIs x 31 days x E1+B1 at 30 minutes: 2,976,000
values), written into ./bench-out/ when missing. The bill is timed through the command itself
(plan ``sso-nsw``, JSON out, one bill per NMI): reading, rating, billing and writing the JSON.
Reading alone is the same ``read_days`` loop, only counting the values. Each is run twice, in
turn (read, bill, read, bill) so that a change in the load of a shared machine weighs on both
alike, and its best time kept, in wall-clock and in CPU time (which other work on the machine
changes least).

The goals: rating and billing add no more time than reading takes (a bill throughput of at least
half the reader's), and rate at least 1.2 million values per second on top of reading, the
reader's own target.

Then ``freehours bill`` as a user runs it, a whole process with its start-up and its output,
against nemreader's whole process only reading the same file (``benchmarks.processes``): at
least five times faster.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from typer.testing import CliRunner

from benchmarks.bench_nem12 import bench_file
from benchmarks.processes import against_nemreader, freehours
from benchmarks.scale import size
from freehours.cli import app
from freehours.meterdata.nem12 import read_days

#: Bill throughput over read throughput: rating and billing add no more time than reading.
RATIO_GOAL = 0.5
#: Values per second that rating and billing must sustain on top of reading.
ADDED_GOAL = 1_200_000
#: ``freehours bill`` as a whole process, against nemreader's reading the file.
PROCESS_GOAL = 5.0
RUNS = size(2, 1)


def run() -> None:
    path = bench_file()
    values = 0

    def read() -> None:
        nonlocal values
        values = sum(len(day.values) for day in read_days(path))

    (read_wall, read_cpu), (bill_wall, bill_cpu) = _best(read, lambda: _bill(path))
    for clock, read_seconds, bill_seconds in (
        ("wall", read_wall, bill_wall),
        ("cpu", read_cpu, bill_cpu),
    ):
        added = values / (bill_seconds - read_seconds)
        print(
            f"bill ({clock}): {values / bill_seconds:,.0f} values/s end to end "
            f"({bill_seconds:.1f} s) vs read alone {values / read_seconds:,.0f} values/s: "
            f"{read_seconds / bill_seconds:.2f} (goal >= {RATIO_GOAL}); rating and billing "
            f"{added:,.0f} values/s on top of reading (goal >= {ADDED_GOAL:,})"
        )
    whole, reference = against_nemreader(
        freehours("bill", "--plan", "sso-nsw", "--nem12", str(path), "--format", "json"), path
    )
    print(whole.ratio_line("bill", reference, PROCESS_GOAL))


def _bill(path: Path) -> None:
    result = CliRunner().invoke(
        app, ["bill", "--plan", "sso-nsw", "--nem12", str(path), "--format", "json"]
    )
    if result.exit_code != 0:
        raise SystemExit(f"bill: freehours bill failed: {result.output}")


def _best(*works: Callable[[], None]) -> list[tuple[float, float]]:
    """For each of ``works``, the best wall-clock and CPU seconds of ``RUNS`` runs, the works
    run in turn."""
    walls: list[list[float]] = [[] for _ in works]
    cpus: list[list[float]] = [[] for _ in works]
    for _ in range(RUNS):
        for work, work_walls, work_cpus in zip(works, walls, cpus, strict=True):
            wall, cpu = time.perf_counter(), time.process_time()
            work()
            work_walls.append(time.perf_counter() - wall)
            work_cpus.append(time.process_time() - cpu)
    return [(min(wall), min(cpu)) for wall, cpu in zip(walls, cpus, strict=True)]
