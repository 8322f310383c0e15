"""``freehours demo``: the system end to end on the embedded default.

For now it runs the meter-data part: simulated households' smart meters deliver a NEM12 file
(with an estimate revised by an actual read and an outage day of mixed quality), which is written
to ``--out`` and read back, and what it holds is printed.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Annotated

import typer

from freehours.cli import app
from freehours.cli.nem12 import print_summary, summarize, summary_console
from freehours.meterdata.nem12 import NEM12Reader
from freehours.meterdata.writer import write_nem12
from freehours.sim.meters import sample_delivery


@app.command("demo")
def demo(
    out: Annotated[
        Path, typer.Option("--out", help="Directory for the demo's files.", file_okay=False)
    ] = Path("out/demo"),
    customers: Annotated[
        int, typer.Option("--customers", min=1, help="Households with a smart meter.")
    ] = 4,
    days: Annotated[int, typer.Option("--days", min=3, help="Days of meter data.")] = 7,
    seed: Annotated[int, typer.Option("--seed", help="Seed: the same seed, the same run.")] = 1,
) -> None:
    """Run freehours end to end on simulated customers and print what happened."""
    out.mkdir(parents=True, exist_ok=True)
    delivery = sample_delivery(customers, days, seed)
    stamps = [day.update_datetime for day in delivery if day.update_datetime is not None]
    nem12 = out / "meter-data.nem12.csv"
    # The file is made an hour after its last read: deterministic, like everything else here.
    write_nem12(delivery, nem12, created=max(stamps) + timedelta(hours=1))
    summary = summarize(NEM12Reader(nem12))
    (out / "meter-data.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    console = summary_console()
    console.print(
        f"Simulated {customers} households' smart meters for {days} days (seed {seed}):"
        f" NEM12 written to {nem12}, its summary to {out / 'meter-data.json'}",
        highlight=False,
    )
    print_summary(summary, console)
