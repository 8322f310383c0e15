"""NEM12 reading: freehours against nemreader 0.9.2 on the same file, in the same run.

The file: 1,000 NMIs x 31 days x two channels (E1, B1) at 30 minutes, 2,976,000 interval values
(about 20 MB), written by freehours' own writer from simulated household meters (deterministic,
kWh to three decimals). It is kept in ./bench-out/ and reused while its parameters stay the same.

Each reader runs in its own process, so that its peak memory (ru_maxrss) is its own, and does the
same work: every interval's value, start time and quality made available, then the values summed
per NMI and channel. freehours yields one ``IntervalDay`` per 300 record (values, qualities, and
``interval_starts()``, the start of every interval); nemreader 0.9.2 builds a ``Reading`` per
interval (``read_value``, ``t_start``, ``quality_method``) with ``NEMFile(path).nem_data()``.
freehours sums its Decimals exactly; nemreader's values are floats, summed with ``math.fsum`` and
rounded to three decimals, which gives the exact decimal sum back for values that have three
decimals. The two readers' sums must agree exactly.

The readers run in turns, as ``benchmarks.processes`` runs whole processes: three runs of
freehours, one of nemreader (about 11 s), again, then three of freehours; each one's best time is
kept. This machine's speed drifts by a third over minutes, and a single run of each, a minute
apart, compared two machines. freehours reads its rows' values in C where its C part was compiled
at install (``_rows.c``); three runs without it, as a machine without a C compiler reads, are
printed beside.

Then the same file as a user reads it: ``freehours nem12 inspect FILE`` as a whole process,
start-up and output included, against nemreader's own command line (``benchmarks.processes``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import random
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path

from benchmarks.processes import against_nemreader, freehours
from benchmarks.scale import size
from freehours.domain.time import NEM_TIME
from freehours.meterdata.nem12 import NEM12Reader, common
from freehours.meterdata.writer import write_nem12
from freehours.sim.meters import households, meter_days
from tests.meterdata.pure import pure_python

NMIS = size(1_000, 20)
DAYS = 31
FIRST_DAY = date(2026, 7, 1)
SEED = 2026
OUT = Path("bench-out")
FILE = OUT / f"nem12-{NMIS}nmi-{DAYS}d-E1B1-30min-seed{SEED}.csv"
#: The goals (issue 36): at least fifteen times nemreader's values per second in process, at
#: most a tenth of its memory.
SPEED_GOAL = 15.0
MEMORY_GOAL = 0.10
#: ``freehours nem12 inspect`` as a whole process, against nemreader's (``benchmarks.processes``):
#: at least twelve times (issue 36).
PROCESS_GOAL = 12.0
#: Runs of freehours in a round, and rounds with one run of nemreader between them.
RUNS = size(3, 1)
REFERENCE_RUNS = size(2, 1)


def run() -> None:
    path = bench_file()
    size = path.stat().st_size
    print(
        f"nem12 file: {path} ({NMIS:,} NMIs x {DAYS} days x E1+B1 at 30 min, {size / 1e6:.1f} MB)"
    )
    ours_runs: list[_Run] = []
    theirs_runs: list[_Run] = []
    for _ in range(REFERENCE_RUNS):
        ours_runs += [_measure("freehours", path) for _ in range(RUNS)]
        theirs_runs.append(_measure("nemreader", path))
    ours_runs += [_measure("freehours", path) for _ in range(RUNS)]
    pure_runs = [_measure("freehours-python", path) for _ in range(RUNS)]
    for run in [*ours_runs, *theirs_runs, *pure_runs]:
        _agree(run, theirs_runs[0])
    ours, theirs, pure = _best(ours_runs), _best(theirs_runs), _best(pure_runs)
    how = "its rows read in C" if ours.compiled else "NOT COMPILED: its rows read in Python"
    print(
        f"nem12 read: freehours ({how}) {ours.rate:,.0f} values/s ({ours.seconds:.2f} s),"
        f" nemreader {theirs.rate:,.0f} values/s ({theirs.seconds:.1f} s):"
        f" {ours.rate / theirs.rate:.1f}x (goal >= {SPEED_GOAL:.0f}x:"
        f" {ours.rate / theirs.rate / SPEED_GOAL:.2f} of it)"
    )
    print(
        f"nem12 read without the C part (a machine without a C compiler): {pure.seconds:.2f} s,"
        f" {pure.rate / theirs.rate:.1f}x nemreader; with it"
        f" {pure.seconds / ours.seconds:.2f}x as fast"
    )
    print(
        f"cpu time: freehours {ours.cpu_seconds:.2f} s, nemreader {theirs.cpu_seconds:.1f} s:"
        f" {theirs.cpu_seconds / ours.cpu_seconds:.1f}x (the same ratio, less exposed to other"
        " work on the machine)"
    )
    print(
        f"peak memory: freehours {ours.peak_bytes / 1e6:,.0f} MB, nemreader"
        f" {theirs.peak_bytes / 1e6:,.0f} MB: {ours.peak_bytes / theirs.peak_bytes:.2f}"
        f" (goal <= {MEMORY_GOAL:.2f})"
    )
    print(
        f"sums: {len(ours.sums):,} NMI/channel totals of {ours.values:,} values agree exactly"
        " (nemreader's floats: math.fsum, rounded to 3 decimals)"
    )
    inspect, reference = against_nemreader(freehours("nem12", "inspect", str(path)), path)
    print(inspect.ratio_line("nem12 inspect", reference, PROCESS_GOAL))


def _agree(ours: _Run, theirs: _Run) -> None:
    """Stop the benchmark where two runs read different values or sums."""
    if ours.values != theirs.values or ours.sums != theirs.sums:
        differ = sum(ours.sums.get(key) != theirs.sums.get(key) for key in ours.sums | theirs.sums)
        raise SystemExit(
            f"nem12: the readers disagree: {ours.values:,} values against {theirs.values:,};"
            f" {differ:,} of the NMI/channel sums differ"
        )


def _best(runs: list[_Run]) -> _Run:
    """One reader's runs as one: the least time, wall and CPU each, and the most memory."""
    return dataclasses.replace(
        runs[0],
        seconds=min(run.seconds for run in runs),
        cpu_seconds=min(run.cpu_seconds for run in runs),
        peak_bytes=max(run.peak_bytes for run in runs),
    )


def bench_file() -> Path:
    """The benchmark's NEM12 file, written once: a rerun with the same parameters reuses it."""
    if FILE.exists():
        return FILE
    OUT.mkdir(exist_ok=True)
    rng = random.Random(SEED)
    meters = households(NMIS, rng)
    partial = FILE.with_suffix(".partial")
    started = time.perf_counter()
    write_nem12(
        (day for household in meters for day in meter_days(household, FIRST_DAY, DAYS, rng)),
        partial,
        participant="BENCHMDP",
        created=datetime(2026, 8, 1, 6, 0, tzinfo=NEM_TIME),
    )
    partial.replace(FILE)  # only a whole file is ever reused
    print(f"nem12 file written in {time.perf_counter() - started:.1f} s")
    return FILE


@dataclass(frozen=True)
class _Run:
    """One reader's figures, from its own process."""

    values: int
    seconds: float  # wall clock
    cpu_seconds: float  # this process's own CPU time: what a busy machine changes least
    peak_bytes: int
    sums: dict[str, str]  # "NMI/suffix" -> total, normalised
    compiled: bool = False  # freehours: its rows read by _rows.c

    @property
    def rate(self) -> float:
        return self.values / self.seconds


def _measure(reader: str, path: Path) -> _Run:
    """Run one reader in a fresh process; its figures come back as JSON on its stdout."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_nem12", reader, str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"nem12: the {reader} run failed:\n{done.stderr}")
    return _Run(**json.loads(done.stdout))


def _read_freehours(path: Path) -> tuple[int, dict[str, str]]:
    sums: dict[str, Decimal] = {}
    values = 0
    for day in NEM12Reader(path).days():
        day.interval_starts()  # every interval's start, in NEM time
        day.qualities  # noqa: B018 - every interval's quality flag, one character each
        key = f"{day.nmi}/{day.suffix}"
        sums[key] = sums.get(key, Decimal(0)) + day.total()
        values += len(day.values)
    return values, {key: str(total) for key, total in sums.items()}


def _read_nemreader(path: Path) -> tuple[int, dict[str, str]]:
    from nemreader import NEMFile  # noqa: PLC0415 - a bench extra, and only this process needs it

    sums: dict[str, str] = {}
    values = 0
    for nmi, channels in NEMFile(str(path)).nem_data().readings.items():
        for suffix, readings in channels.items():
            # Each Reading has read_value, t_start, t_end and quality_method already.
            present = [r.read_value for r in readings if r.read_value is not None]
            sums[f"{nmi}/{suffix}"] = str(Decimal(repr(round(math.fsum(present), 3))))
            values += len(readings)
    return values, sums


def _child(reader: str, path: Path) -> None:
    read = _read_nemreader if reader == "nemreader" else _read_freehours
    # "freehours-python": as installed without a C compiler (the tests' switch to it)
    with pure_python() if reader == "freehours-python" else contextlib.nullcontext():
        compiled = reader != "nemreader" and common._Table is not None
        started, cpu_started = time.perf_counter(), time.process_time()
        values, sums = read(path)
        seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: kilobytes
    # Sums compared as numbers: the same total may be written 12.5 by one and 12.500 by the other.
    exact = {key: str(Decimal(total).normalize()) for key, total in sums.items()}
    figures = {"values": values, "seconds": seconds, "cpu_seconds": cpu_seconds}
    figures["compiled"] = compiled
    print(json.dumps(figures | {"peak_bytes": peak, "sums": exact}))


if __name__ == "__main__":
    _child(sys.argv[1], Path(sys.argv[2]))
