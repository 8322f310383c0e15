"""Model-check verify/settlement.pml with Spin: the protocol's properties, and each mutant.

Independent of freehours (standard library only). For each run: ``spin -a`` with the run's
bounds as -D macros, ``pan.c`` compiled with ``cc``, then ``pan`` (safety: assertions and
invalid end states; liveness: acceptance cycles of the LTL claim ``terminates`` under weak
fairness, ``-a -f``). It prints, per run, errors, states stored and seconds; a mutant is
expected to fail, and its trail is replayed (``spin -t``) into the counterexample printed.

    python verify/check.py                 # the bounded configuration (make ci)
    python verify/check.py --config large  # the larger one (make verify)
    python verify/check.py --only MUTANT_NO_FENCE --trail
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

MODEL = Path(__file__).resolve().parent / "settlement.pml"


@dataclass(frozen=True)
class Run:
    """One check: ``name``, its -D macros, ``liveness`` or safety, and whether the checker must
    find an error (a mutant)."""

    name: str
    defines: dict[str, int] = field(default_factory=dict)
    liveness: bool = False
    expect_error: bool = False
    why: str = ""


@dataclass
class Result:
    run: Run
    errors: int
    states: int
    seconds: float
    depth: int
    output: str
    counterexample: str = ""

    @property
    def ok(self) -> bool:
        return (self.errors > 0) == self.run.expect_error and "Search not completed" not in (
            self.output if not self.run.expect_error else ""
        )


BOUNDED = {"NAPI": 1, "NWORKERS": 2, "NREV": 1, "FAULTS": 1, "CFAULTS": 1, "INITDATA": 0}
LIVE_BOUNDED = {"NAPI": 1, "NWORKERS": 1, "NREV": 1, "FAULTS": 1, "CFAULTS": 0, "JOBMAX": 3}
#: Two workers under weak fairness. With a lost cache write as well, the search did not finish
#: in 4 GB (17,958,036 states stored after 379 s); the cache fault is checked with one worker.
LIVE_LARGE = {
    "NAPI": 1,
    "NWORKERS": 2,
    "NREV": 1,
    "FAULTS": 1,
    "CFAULTS": 0,
    "JOBMAX": 3,
    "INITDATA": 0,
}

#: Each guard of freehours removed, or a bug of the incident put back: the checker must fail.
MUTANTS = [
    Run(
        "MUTANT_NO_FENCE",
        {**BOUNDED, "MUTANT_NO_FENCE": 1},
        expect_error=True,
        why="completion without the fence check: a stale holder books a second entry",
    ),
    Run(
        "MUTANT_ATTEMPTS_PER_JOB",
        {**BOUNDED, "MUTANT_ATTEMPTS_PER_JOB": 1},
        expect_error=True,
        why="the incident: the retry count reset by every new job",
    ),
    Run(
        "MUTANT_BREAKER_SUCCESS",
        {**BOUNDED, "NWORKERS": 1, "POISON": 1, "MUTANT_BREAKER_SUCCESS": 1},
        expect_error=True,
        why="the incident: a failure reported as a success (the breaker's finally): endless retry",
    ),
    Run(
        "MUTANT_CACHE_NONTERMINAL",
        {**BOUNDED, "MUTANT_CACHE_NONTERMINAL": 1},
        expect_error=True,
        why="a non-terminal cached state answered as terminal",
    ),
    Run(
        "MUTANT_BUSY_AS_SETTLED",
        {**BOUNDED, "MUTANT_BUSY_AS_SETTLED": 1},
        expect_error=True,
        why="the incident: 'in process' answered like 'settled'",
    ),
    Run(
        "MUTANT_NO_DAYLOCK",
        {**BOUNDED, "MUTANT_NO_DAYLOCK": 1},
        expect_error=True,
        why="completion without the day lock: a revision racing it is lost",
    ),
    Run(
        "MUTANT_CACHE_NO_CAS",
        {**BOUNDED, "MUTANT_CACHE_NO_CAS": 1},
        expect_error=True,
        why="cache writes without compare-and-set: a late write puts an older version back",
    ),
    Run(
        "MUTANT_JOB_TRUSTS_CACHE",
        {**BOUNDED, "MUTANT_JOB_TRUSTS_CACHE": 1},
        expect_error=True,
        why="the bug found (fixed): a settle job answered from the cache misses a new version",
    ),
    Run(
        "STRICT_SERVED",
        {**BOUNDED, "NAPI": 2, "NWORKERS": 1, "STRICT_SERVED": 1},
        expect_error=True,
        why="the literal 'never an older answer after a newer one' across the cache: "
        "fails by design (the cache is written after the commit)",
    ),
]

CONFIGS = {
    "bounded": [
        Run("safety", BOUNDED, why="every safety property, bounded"),
        Run(
            "safety-poison",
            {**BOUNDED, "NWORKERS": 1, "POISON": 1},
            why="a quota whose every attempt fails ends ABORTED in bounded work",
        ),
        Run(
            "liveness",
            {**LIVE_BOUNDED, "LIVENESS": 1},
            liveness=True,
            why="<>[] newest version terminal, weak fairness",
        ),
        *MUTANTS,
    ],
    "large": [
        Run(
            "safety-2-revisions",
            {**BOUNDED, "NREV": 2, "NWORKERS": 1},
            why="every safety property: two revisions",
        ),
        Run(
            "safety-2-requests",
            {**BOUNDED, "NAPI": 2, "NWORKERS": 1, "CFAULTS": 0},
            why="every safety property: two API requests beside a worker",
        ),
        Run(
            "safety-2-faults",
            {**BOUNDED, "NWORKERS": 1, "FAULTS": 2},
            why="every safety property: two faults (a job can be DISCARDED)",
        ),
        Run(
            "safety-poison",
            {**BOUNDED, "POISON": 1},
            why="a quota whose every attempt fails ends ABORTED in bounded work, two workers",
        ),
        Run(
            "liveness-2-workers",
            {**LIVE_LARGE, "LIVENESS": 1},
            liveness=True,
            why="<>[] newest version terminal, weak fairness, two workers",
        ),
        Run(
            "liveness-cache-fault",
            {**LIVE_BOUNDED, "CFAULTS": 1, "INITDATA": 0, "LIVENESS": 1},
            liveness=True,
            why="<>[] newest version terminal, weak fairness, a lost or late cache write",
        ),
        Run(
            "liveness-poison",
            {**LIVE_BOUNDED, "POISON": 1, "LIVENESS": 1},
            liveness=True,
            why="<>[] terminal when every attempt fails",
        ),
    ],
}


def spin_available() -> str | None:
    """Why the checker cannot run here, or None."""
    for tool in ("spin", "cc"):
        if shutil.which(tool) is None:
            return f"{tool} not found (Debian: apt-get install spin gcc)"
    return None


def _flags(defines: dict[str, int]) -> list[str]:
    return [f"-D{name}={value}" for name, value in sorted(defines.items())]


def check(run: Run, *, trail: bool = True, workdir: Path | None = None) -> Result:
    """Run one check; the counterexample replayed when an error was found and ``trail``."""
    with tempfile.TemporaryDirectory(prefix="freehours-spin-", dir=workdir) as tmp:
        here = Path(tmp)
        shutil.copy(MODEL, here / MODEL.name)
        flags = _flags(run.defines)
        _run(["spin", "-a", *flags, MODEL.name], here)
        # A mutant's search stops at its first error, within a second unoptimised, while -O2
        # takes 8 s to compile the verifier on the 2-core machine (-O0: 1 s); a run that must
        # explore every state searches twice as fast for it.
        optimise = "-O0" if run.expect_error else "-O2"
        cflags = [optimise, "-DMEMLIM=4096", "-DCOLLAPSE", "-DVECTORSZ=2048"]
        cflags += ["-DNFAIR=3"] if run.liveness else ["-DSAFETY"]
        _run(["cc", *cflags, "-o", "pan", "pan.c"], here)
        started = time.monotonic()
        # Liveness search revisits states many times over: a larger hash table keeps it fast.
        args = ["./pan", "-m400000"] + (["-w27", "-a", "-f"] if run.liveness else ["-w24"])
        done = subprocess.run(args, cwd=here, capture_output=True, text=True, check=False)  # noqa: S603 - our own verifier
        seconds = time.monotonic() - started
        output = done.stdout + done.stderr
        errors = _number(r"errors: (\d+)", output)
        states = _number(r"(\d+(?:\.\d+e\+\d+)?) states, stored", output)
        depth = _number(r"depth reached (\d+)", output)
        counterexample = ""
        if errors and trail and (here / f"{MODEL.name}.trail").exists():
            counterexample = _replay(here, flags)
        return Result(run, errors, states, seconds, depth, output, counterexample)


def _replay(here: Path, flags: list[str]) -> str:
    """The trail replayed: the steps of the counterexample (process, line, statement) and the
    property it broke."""
    done = _run(["spin", "-t", "-p", "-g", *flags, MODEL.name], here, check=False)
    lines = []
    for line in done.stdout.splitlines():
        if "PROPERTY VIOLATED" in line or "assertion violated" in line or "CYCLE" in line:
            lines.append(line.strip())
        elif re.match(r"\s*\d+:\s+proc\s+\d+ \(", line):
            lines.append(line.rstrip())
    return "\n".join(lines)


def _run(args: list[str], cwd: Path, *, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, check=False)  # noqa: S603 - spin, cc
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done


def _number(pattern: str, text: str) -> int:
    found = re.search(pattern, text)
    return int(float(found.group(1))) if found else 0


def violated(result: Result) -> str:
    """The property a counterexample broke, as the model says it."""
    for line in result.counterexample.splitlines():
        if "PROPERTY VIOLATED" in line:
            return line.strip()
    if "acceptance cycle" in result.output:
        return "acceptance cycle: the quota never ends terminal"
    if "invalid end state" in result.output:
        return "invalid end state (a deadlock)"
    return "assertion violated"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", choices=sorted(CONFIGS), default="bounded")
    parser.add_argument("--only", action="append", help="run only this run (repeatable)")
    parser.add_argument("--trail", action="store_true", help="print each counterexample")
    args = parser.parse_args(argv)
    missing = spin_available()
    if missing:
        print(f"check: {missing}", file=sys.stderr)
        return 1
    runs = [run for run in CONFIGS[args.config] if not args.only or run.name in args.only]
    failed = 0
    total = time.monotonic()
    print(f"{'run':28} {'expect':7} {'errors':>6} {'states':>12} {'depth':>7} {'seconds':>8}")
    for run in runs:
        result = check(run)
        verdict = "ok" if result.ok else "FAILED"
        failed += not result.ok
        expect = "error" if run.expect_error else "none"
        print(
            f"{run.name:28} {expect:7} {result.errors:>6} {result.states:>12,} "
            f"{result.depth:>7} {result.seconds:>8.1f}  {verdict}  ({run.why})",
            flush=True,
        )
        if result.errors:
            print(f"    {violated(result)}")
        if not result.ok and not result.errors:
            print(result.output)
        if args.trail and result.counterexample:
            print(result.counterexample)
    print(
        f"{len(runs)} runs, {failed} failed, {time.monotonic() - total:.1f} s in all "
        f"({os.cpu_count()} cores)"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
