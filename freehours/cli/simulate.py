"""``freehours simulate incident``: the retry storm replayed, legacy design against freehours."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn
from rich.table import Table

from freehours.cli import app, err_console
from freehours.cli.logs import log_lines_to
from freehours.cli.progress import ProgressDisplay
from freehours.settings import get_settings

if TYPE_CHECKING:
    from freehours.sim.incident import IncidentReplay

simulate_app = typer.Typer(
    help="Simulations that replay what freehours is built to survive.", no_args_is_help=True
)
app.add_typer(simulate_app, name="simulate")

#: The rows of the table, in order: the JSON key and what the table calls it.
_ROWS = {
    "requests": "requests",
    "retries": "retries",
    "retries_per_quota": "retries per quota",
    "duplicate_credits": "duplicate credits",
    "jobs_stuck_over_20s": "jobs stuck over 20 s",
    "quotas_settled": "quotas settled",
    "quotas_unsettled": "quotas unsettled",
    "settle_seconds_p50": "time to settle p50 (s)",
    "settle_seconds_p99": "time to settle p99 (s)",
    "job_runs": "job runs",
    "breaker_trips": "breaker trips",
}


@simulate_app.command("incident")
def incident(
    meters: Annotated[
        int,
        typer.Option(
            "--meters",
            min=3,
            metavar="N",
            help="Smart meters posting during the free window.",
        ),
    ] = 100,
    seed: Annotated[
        int,
        typer.Option("--seed", metavar="N", help="Seed of the meters' reads and of the faults."),
    ] = 1,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="Print one JSON object: legacy, freehours, retry_reduction."),
    ] = False,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            file_okay=False,
            metavar="DIR",
            help="Also write incident.json, retries.png and the log lines here.",
        ),
    ] = None,
    database_url: Annotated[
        str | None,
        typer.Option(
            "--database-url",
            metavar="URL",
            help="An empty database for the freehours replay (e.g. PostgreSQL);"
            " default: SQLite in a temporary directory.",
        ),
    ] = None,
) -> None:
    """Replay the retailer's retry storm: one workload and one set of faults, on a model of the
    broken design and on freehours itself (on simulated time). Exit status 1 when freehours
    breaks a must-hold: retry_reduction under 0.95, a duplicate credit, a job stuck over 20 s,
    or an unsettled quota.
    """
    from freehours.sim.incident import replay_incident
    from freehours.sim.report import incident_plot

    with tempfile.TemporaryDirectory(prefix="freehours-incident-") as scratch:
        work_dir = Path(scratch)
        settings = get_settings().model_copy(
            update={
                "database_url": database_url or f"sqlite:///{work_dir / 'freehours.db'}",
                "redis_url": None,
            }
        )
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
        log_path = (out or work_dir) / "incident.log"
        with log_path.open("w", encoding="utf-8") as log, log_lines_to(log), _Display() as display:
            replay = replay_incident(meters, seed, settings, work_dir, display.show)
    figures = replay.as_json()
    if out is not None:
        (out / "incident.json").write_text(json.dumps(figures, indent=2) + "\n", "utf-8")
        incident_plot(replay, out / "retries.png")
    if as_json:
        typer.echo(json.dumps(figures))
    else:
        _print(replay, figures, Console(), out)
    failures = replay.failures()
    if failures:
        err_console.print(f"[bold red]must-hold broken:[/] {'; '.join(failures)}")
        raise typer.Exit(1)


class _Display(ProgressDisplay):
    """A progress bar per design on a terminal's stderr; nothing elsewhere."""

    def __init__(self) -> None:
        super().__init__(
            Progress(
                TextColumn("{task.description:>9}"),
                BarColumn(),
                TextColumn("{task.percentage:>3.0f}% of the simulated hours"),
                console=err_console,
                disable=not err_console.is_terminal,
            )
        )
        self._tasks: dict[str, TaskID] = {}

    def show(self, design: str, share: float) -> None:
        if design not in self._tasks:
            self._tasks[design] = self._progress.add_task(design, total=1.0)
        self._progress.update(self._tasks[design], completed=share)


def _print(
    replay: IncidentReplay, figures: dict[str, Any], console: Console, out: Path | None
) -> None:
    workload = replay.workload
    table = Table(
        title=f"The incident replayed: {workload.meters} meters, seed {workload.seed},"
        f" {workload.window_start:%H:%M}-{workload.horizon:%H:%M} on {workload.day}"
    )
    table.add_column("")
    table.add_column("legacy model", justify="right")
    table.add_column("freehours", justify="right")
    for key, label in _ROWS.items():
        table.add_row(label, _cell(figures["legacy"][key]), _cell(figures["freehours"][key]))
    console.print(table)
    console.print(
        f"retry_reduction: {figures['retry_reduction']:.4f}"
        f" (the incident report's fix: 0.95; goal 0.99)",
        highlight=False,
    )
    if out is not None:
        console.print(f"figures and plot written to {out}", highlight=False)


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)
