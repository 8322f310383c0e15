"""Plots of the simulations, drawn with matplotlib's object interface: no pyplot, so no display
and no global state; the Agg renderer writes PNG."""

from __future__ import annotations

import itertools
from datetime import timedelta
from pathlib import Path

from matplotlib.figure import Figure

from freehours.sim.incident import IncidentReplay

#: One colour per series, the same in every plot: legacy and freehours, then the regions.
_COLOURS = ("#c0392b", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b")
_DPI = 110


def incident_plot(replay: IncidentReplay, path: Path) -> None:
    """Retries per simulated minute and in all, both designs, against local time."""
    workload = replay.workload
    figure = Figure(figsize=(10, 6.5), layout="constrained")
    per_minute, total = figure.subplots(2, 1, sharex=True)
    runs = (("legacy model", replay.legacy), ("freehours", replay.freehours))
    for (name, run), colour in zip(runs, _COLOURS, strict=False):
        minutes = run.retries_per_minute
        per_minute.step(range(len(minutes)), minutes, where="post", color=colour, label=name)
        total.plot(
            range(len(minutes)), list(itertools.accumulate(minutes)), color=colour, label=name
        )
    window_end = workload.seconds(workload.window_end) / 60
    for axes in (per_minute, total):
        axes.set_yscale("symlog", linthresh=1)
        axes.set_ylim(bottom=0)
        axes.axvspan(0, window_end, color="#f4d03f", alpha=0.15)
        axes.axvline(workload.seconds(workload.due) / 60, color="grey", linestyle="--")
        axes.grid(visible=True, alpha=0.3)
        axes.legend(loc="upper left")
    per_minute.set_title(
        f"Retries, {workload.meters} meters, seed {workload.seed}: free window shaded,"
        " quota due at the dashed line"
    )
    per_minute.set_ylabel("retries per minute")
    total.set_ylabel("retries so far")
    ticks = range(0, int(workload.seconds(workload.horizon) // 60) + 1, 30)
    total.set_xticks(
        list(ticks),
        [f"{workload.window_start + timedelta(minutes=tick):%H:%M}" for tick in ticks],
    )
    total.set_xlabel(f"{workload.day.isoformat()}, local time ({workload.window_start.tzinfo})")
    figure.savefig(path, dpi=_DPI)
