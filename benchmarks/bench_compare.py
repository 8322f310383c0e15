"""``freehours compare`` of a year of 5-minute data (one NMI, 105,120 values) against 50 plans,
as a whole process (issue 34: under 5 s). The file and the plans (the four built-in plans in
turn, each under its own id) are generated into ./bench-out/compare/ when missing."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from benchmarks.scale import size
from freehours.domain.reads import IntervalDay
from freehours.domain.time import NEM_TIME
from freehours.meterdata.writer import write_nem12
from freehours.plans import BUILTIN_IDS, builtin_document
from freehours.plans.writer import plan_toml

GOAL_SECONDS = 5.0
PLANS = size(50, 3)
FOLDER = Path("bench-out") / "compare"


def inputs() -> tuple[Path, list[Path]]:
    """The year's NEM12 file and the plan files, made once."""
    nem12 = FOLDER / "year-5min.csv"
    plans = [FOLDER / f"plan-{n}.toml" for n in range(PLANS)]
    if not nem12.exists():
        FOLDER.mkdir(parents=True, exist_ok=True)
        rng = random.Random(34)
        first = date(2025, 7, 1)
        stamp = (first + timedelta(days=400)).isoformat()
        days = [
            IntervalDay(
                "4103000001",
                "E1",
                first + timedelta(days=n),
                5,
                tuple(Decimal(rng.randint(0, 400)).scaleb(-3) for _ in range(288)),
                "A" * 288,
                datetime.fromisoformat(stamp).replace(tzinfo=NEM_TIME),
            )
            for n in range(365)
        ]
        write_nem12(days, nem12)
        for n, path in enumerate(plans):
            document = builtin_document(BUILTIN_IDS[n % len(BUILTIN_IDS)])
            path.write_text(plan_toml({**document, "id": f"plan-{n}"}))
    return nem12, plans


def run() -> None:
    nem12, plans = inputs()
    freehours = str(Path(sys.executable).with_name("freehours"))
    command = [freehours, "compare", "--nem12", str(nem12), *(f"--plan={p}" for p in plans)]
    started = time.perf_counter()
    done = subprocess.run([*command, "--format", "json"], capture_output=True, check=True)
    seconds = time.perf_counter() - started
    if done.stdout.count(b'"rank"') != PLANS:
        raise RuntimeError("compare: not every plan ranked")
    print(
        f"compare: a year of 5-minute data against {PLANS} plans in {seconds:.2f} s (a whole"
        f" process): {GOAL_SECONDS / seconds:.2f}x goal (<= {GOAL_SECONDS:.0f} s)"
    )
