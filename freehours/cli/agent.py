"""``freehours agent``: the meter agent, sending NEM12 files and simulated meters' reads to the API.

Logs are JSON lines on stderr (on a terminal, readable lines with a progress line under them);
traces go where FREEHOURS_TRACES says. The summary goes to stdout at exit (``--json``: as one JSON
object). Exit status 1 when reads were still spooled at the end of a run that should have sent
them all (the drain timeout passed), or when the API refused the key.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from types import FrameType
from typing import Annotated, Any, cast

import annotated_types
import typer
from pydantic import ValidationError
from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn
from rich.table import Table

from freehours.agent.meter_agent import Ending, MeterAgent, RunSummary, Simulation, Snapshot
from freehours.agent.settings import AgentSettings
from freehours.cli import app, err_console
from freehours.cli.nem12 import summary_console
from freehours.cli.options import MetricsHost, MetricsPort
from freehours.cli.progress import ProgressDisplay
from freehours.clock import SystemClock
from freehours.domain.time import NEM_TIME
from freehours.errors import ConfigurationError, InputError
from freehours.observability.exposition import forget_process, serve_metrics
from freehours.observability.logging import LEVELS, configure_logging
from freehours.observability.tracing import configure_tracing
from freehours.settings import get_settings, settings_problems

_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
#: The settings' defaults, which the options show and default to (no environment read).
_DEFAULTS = AgentSettings.model_construct()


def _setting(name: str, flag: str, metavar: str) -> Any:
    """The option ``flag`` for the agent setting ``name``, with the setting's help and bounds."""
    field = AgentSettings.model_fields[name]
    low = next((rule.ge for rule in field.metadata if isinstance(rule, annotated_types.Ge)), None)
    high = next((rule.le for rule in field.metadata if isinstance(rule, annotated_types.Le)), None)
    # Numbers (a Field's ge and le), which annotated_types types only as comparable.
    return typer.Option(
        flag,
        metavar=metavar,
        help=field.description,
        min=cast("float | None", low),
        max=cast("float | None", high),
    )


@app.command("agent")
def agent(
    ctx: typer.Context,
    *,
    api: Annotated[
        str, typer.Option("--api", metavar="URL", help="the API's base URL, e.g. http://host:8000")
    ],
    api_key: Annotated[
        str,
        typer.Option(
            "--api-key",
            envvar="FREEHOURS_API_KEY",
            metavar="KEY",
            help="an API key with the ingest scope",
        ),
    ],
    nem12_dir: Annotated[
        Path | None,
        typer.Option(
            "--nem12-dir",
            file_okay=False,
            metavar="DIR",
            help="send every NEM12 file that appears here; moved to done/ or rejected/ after",
        ),
    ] = None,
    once: Annotated[
        bool, typer.Option("--once", help="send the files in --nem12-dir now, then exit")
    ] = False,
    simulate: Annotated[
        int,
        typer.Option(
            "--simulate", min=0, metavar="N", help="simulated smart meters (E1 and B1, 30 min)"
        ),
    ] = 0,
    seed: Annotated[
        int, typer.Option("--seed", metavar="N", help="the same seed, the same reads")
    ] = 1,
    speed: Annotated[
        float,
        typer.Option(
            "--speed",
            min=0.001,
            max=1e6,
            metavar="FACTOR",
            help="simulated time per real time (360: 1 h in 10 s)",
        ),
    ] = 1.0,
    start: Annotated[
        str | None,
        typer.Option(
            "--start",
            metavar="DATETIME",
            help="when the simulation starts, ISO 8601 (no offset: NEM time); default now",
            show_default=False,
        ),
    ] = None,
    duration: Annotated[
        str,
        typer.Option(
            "--duration", metavar="DURATION", help="simulated time to run, e.g. 1d, 6h, 1h30m"
        ),
    ] = "1d",
    spool: Annotated[
        Path | None,
        typer.Option(
            "--spool",
            dir_okay=False,
            metavar="FILE",
            help=(
                "the spool file; it belongs to one API (default: one per API and inbox,"
                " $XDG_STATE_HOME/freehours/agent-spool-HASH.db)"
            ),
            show_default=False,
        ),
    ] = None,
    metrics_port: MetricsPort = None,
    metrics_host: MetricsHost = "127.0.0.1",
    name: Annotated[str | None, _setting("name", "--name", "NAME")] = _DEFAULTS.name,
    breaker_failures: Annotated[
        int, _setting("breaker_failures", "--breaker-failures", "N")
    ] = _DEFAULTS.breaker_failures,
    breaker_reset: Annotated[
        float, _setting("breaker_reset", "--breaker-reset", "SECONDS")
    ] = _DEFAULTS.breaker_reset,
    breaker_name: Annotated[str, _setting("breaker_name", "--breaker-name", "NAME")] = (
        _DEFAULTS.breaker_name
    ),
    connect_timeout: Annotated[
        float, _setting("connect_timeout", "--connect-timeout", "SECONDS")
    ] = _DEFAULTS.connect_timeout,
    read_timeout: Annotated[
        float, _setting("read_timeout", "--read-timeout", "SECONDS")
    ] = _DEFAULTS.read_timeout,
    deadline: Annotated[float, _setting("deadline", "--deadline", "SECONDS")] = _DEFAULTS.deadline,
    drain_timeout: Annotated[
        float, _setting("drain_timeout", "--drain-timeout", "SECONDS")
    ] = _DEFAULTS.drain_timeout,
    max_file_bytes: Annotated[
        int, _setting("max_file_bytes", "--max-file-bytes", "BYTES")
    ] = _DEFAULTS.max_file_bytes,
    settle_seconds: Annotated[
        float, _setting("settle_seconds", "--settle-seconds", "SECONDS")
    ] = _DEFAULTS.settle_seconds,
    as_json: Annotated[bool, typer.Option("--json", help="the summary as JSON")] = False,
    log_level: Annotated[
        str | None,
        typer.Option(
            "--log-level",
            metavar="LEVEL",
            help="debug, info, warning or error (default: FREEHOURS_LOG_LEVEL, info)",
            show_default=False,
        ),
    ] = None,
) -> None:
    """The meter agent: sends reads to the API, spools to disk when it cannot.

    Each batch is spooled before it is sent, until the API has it; resent, it keeps its key.

    The circuit breaker's state is shared through Redis when FREEHOURS_REDIS_URL is set.
    """
    tuning = _agent_settings(ctx)
    if nem12_dir is None and not simulate:
        raise InputError("give --nem12-dir DIR, --simulate N, or both")
    if log_level is not None and log_level not in LEVELS:
        raise InputError(f"--log-level {log_level!r}: one of {', '.join(LEVELS)}")
    settings = get_settings()
    clock = SystemClock()
    simulation = None
    if simulate:
        from freehours.sim.agent_meters import SimulatedMeters

        simulation = Simulation(
            meters=partial(SimulatedMeters, simulate, seed),
            start=parse_start(start) if start else clock.now().astimezone(NEM_TIME),
            duration=parse_duration(duration),
            speed=speed,
        )
    config = tuning.agent_config(
        api_url=api,
        api_key=api_key,
        spool_path=spool or default_spool_path(api, nem12_dir),
        nem12_dir=nem12_dir,
        once=once,
        simulation=simulation,
        redis_url=settings.redis_url,
        redis_prefix=settings.redis_prefix,
    )
    configure_logging(log_level or settings.log_level)
    configure_tracing(settings.traces, service="freehours-agent")
    if spool is None:
        _mention_shared_spool(config.spool_path.with_name("agent-spool.db"))
    metrics_server = None if metrics_port is None else serve_metrics(metrics_port, metrics_host)
    try:
        with _Display(err_console, simulation) as display:
            meter_agent = MeterAgent(config, clock=clock)
            for signum in (signal.SIGINT, signal.SIGTERM):
                signal.signal(signum, _stopper(meter_agent))
            summary = meter_agent.run(display.show)
    finally:
        if metrics_server is not None:
            metrics_server.shutdown()
        forget_process()
    _print_summary(summary, as_json)
    if summary.ending is Ending.DRAIN_TIMEOUT and summary.pending:
        err_console.print(
            f"[bold red]error:[/] {summary.pending} batches are still in the spool at"
            f" {config.spool_path}; the next run sends them",
            highlight=False,
        )
        raise typer.Exit(1)


def _agent_settings(ctx: typer.Context) -> AgentSettings:
    """The agent's settings: ``FREEHOURS_AGENT_*``, overridden by the options given."""
    given = {name: ctx.params[name] for name in AgentSettings.model_fields if _given(ctx, name)}
    try:
        return AgentSettings(**given)
    except ValidationError as exc:
        raise ConfigurationError(settings_problems(exc, "FREEHOURS_AGENT_")) from None


def _given(ctx: typer.Context, name: str) -> bool:
    """Whether the option ``name`` was given on the command line (not left at its default)."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name == "COMMANDLINE"


def _stopper(meter_agent: MeterAgent) -> Callable[[int, FrameType | None], None]:
    def handle(signum: int, frame: FrameType | None) -> None:
        meter_agent.stop()

    return handle


def parse_start(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise InputError(f"--start {text!r}: not an ISO 8601 date and time") from exc
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=NEM_TIME)


def parse_duration(text: str) -> timedelta:
    """``1d``, ``6h``, ``90m``, ``1h30m``, ``45s``."""
    parts = _DURATION.findall(text)
    if not parts or "".join(number + unit for number, unit in parts) != text:
        raise InputError(f"--duration {text!r}: write it like 1d, 6h, 90m or 1h30m")
    return timedelta(seconds=sum(float(number) * _UNITS[unit] for number, unit in parts))


def default_spool_path(api: str, nem12_dir: Path | None) -> Path:
    """``$XDG_STATE_HOME/freehours/agent-spool-HASH.db`` (``~/.local/state`` when unset), or
    ``./agent-spool-HASH.db`` without a home directory.

    HASH is made of the API's base URL and the inbox, so that agents of one user for different
    APIs (or different inboxes) each have a spool of their own, and the same agent started again
    finds its own.
    """
    from freehours.agent.spool import api_identity

    inbox = "" if nem12_dir is None else str(nem12_dir.resolve())
    digest = hashlib.sha256(f"{api_identity(api)}\n{inbox}".encode()).hexdigest()[:16]
    name = f"agent-spool-{digest}.db"
    state = os.environ.get("XDG_STATE_HOME")
    if state:
        return Path(state) / "freehours" / name
    try:
        return Path.home() / ".local" / "state" / "freehours" / name
    except RuntimeError:
        return Path(name)


def _mention_shared_spool(path: Path) -> None:
    """Say so when the spool that earlier agents shared by default is there: what waits in it
    is not sent by this agent, whose default spool is its API's own."""
    if path.exists():
        import structlog

        structlog.get_logger("freehours.agent").warning(
            "shared_spool_found",
            spool=str(path),
            note=(
                "the default spool of older agents, shared by all of this user's agents; this"
                " agent uses one of its own. To send what waits in it, run the agent for that"
                " API with --spool pointing at it (it refuses to start for another API)"
            ),
        )


class _Display(ProgressDisplay):
    """On a terminal: a progress line (simulated time, counts, breaker state). Elsewhere: none."""

    def __init__(self, console: Console, simulation: Simulation | None) -> None:
        self._simulation = simulation
        super().__init__(
            Progress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                BarColumn(),
                TextColumn("{task.fields[counts]}"),
                console=console,
                disable=not console.is_terminal,
            )
        )
        total = None if simulation is None else simulation.duration.total_seconds()
        self._task = self._progress.add_task("starting", total=total, counts="")

    def show(self, snapshot: Snapshot) -> None:
        counts = snapshot.counts
        text = (
            f"spooled {counts.spooled}  sent {counts.sent}  pending {snapshot.pending}  "
            f"retried {counts.retried}  rejected {counts.rejected}  breaker {snapshot.breaker}"
        )
        description = "watching"
        completed = 0.0
        if self._simulation is not None and snapshot.simulated_now is not None:
            description = f"{snapshot.simulated_now.astimezone(NEM_TIME):%Y-%m-%d %H:%M} AEST"
            completed = (snapshot.simulated_now - self._simulation.start).total_seconds()
        self._progress.update(self._task, description=description, completed=completed, counts=text)


def _print_summary(summary: RunSummary, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(summary.as_dict()))
        return
    table = Table(title="freehours agent")
    table.add_column("")
    table.add_column("count", justify="right")
    for name, value in summary.as_dict().items():
        table.add_row(name.replace("_", " "), str(value))
    summary_console().print(table)
