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
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn
from rich.table import Table

from freehours.agent.breaker import BreakerConfig
from freehours.agent.http import Timeouts
from freehours.agent.inbox import MAX_FILE_BYTES, SETTLE_SECONDS
from freehours.agent.meter_agent import (
    DRAIN_TIMEOUT,
    AgentConfig,
    Ending,
    MeterAgent,
    RunSummary,
    Simulation,
    Snapshot,
)
from freehours.cli import MetricsHost, MetricsPort, ProgressDisplay, app, err_console
from freehours.cli.nem12 import summary_console
from freehours.clock import SystemClock
from freehours.domain.time import NEM_TIME
from freehours.errors import InputError
from freehours.observability.exposition import forget_process, serve_metrics
from freehours.observability.logging import LEVELS, configure_logging
from freehours.observability.tracing import configure_tracing
from freehours.settings import get_settings

_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_BREAKER = BreakerConfig()
_TIMEOUTS = Timeouts()
#: A file is read into memory and spooled as one SQLite BLOB, whose limit is a billion bytes.
_MAX_FILE_BYTES_CEILING = 512 * 1024 * 1024


@app.command("agent")
def agent(
    *,
    api: Annotated[str, typer.Option("--api", help="the API's base URL, e.g. http://host:8000")],
    api_key: Annotated[
        str,
        typer.Option(
            "--api-key", envvar="FREEHOURS_API_KEY", help="an API key with the ingest scope"
        ),
    ],
    nem12_dir: Annotated[
        Path | None,
        typer.Option(
            "--nem12-dir",
            file_okay=False,
            help="send every NEM12 file that appears here; moved to done/ or rejected/ after",
        ),
    ] = None,
    once: Annotated[
        bool, typer.Option("--once", help="send the files in --nem12-dir now, then exit")
    ] = False,
    simulate: Annotated[
        int, typer.Option("--simulate", min=0, help="simulated smart meters (E1 and B1, 30 min)")
    ] = 0,
    seed: Annotated[int, typer.Option("--seed", help="the same seed, the same reads")] = 1,
    speed: Annotated[
        float,
        typer.Option(
            "--speed", min=0.001, max=1e6, help="simulated time per real time (360: 1 h in 10 s)"
        ),
    ] = 1.0,
    start: Annotated[
        str | None,
        typer.Option(
            "--start",
            help="when the simulation starts, ISO 8601 (no offset: NEM time); default now",
            show_default=False,
        ),
    ] = None,
    duration: Annotated[
        str, typer.Option("--duration", help="simulated time to run, e.g. 1d, 6h, 1h30m")
    ] = "1d",
    spool: Annotated[
        Path | None,
        typer.Option(
            "--spool",
            dir_okay=False,
            help=(
                "the spool file; it belongs to one API [default: one per API and inbox,"
                " $XDG_STATE_HOME/freehours/agent-spool-HASH.db]"
            ),
            show_default=False,
        ),
    ] = None,
    metrics_port: MetricsPort = None,
    metrics_host: MetricsHost = "127.0.0.1",
    breaker_failures: Annotated[
        int, typer.Option("--breaker-failures", min=1, help="failures in a row that open it")
    ] = _BREAKER.fail_max,
    breaker_reset: Annotated[
        float, typer.Option("--breaker-reset", min=0.1, help="seconds open before a trial call")
    ] = _BREAKER.reset_timeout,
    breaker_name: Annotated[
        str, typer.Option("--breaker-name", help="agents with one name share one breaker (Redis)")
    ] = _BREAKER.name,
    connect_timeout: Annotated[
        float, typer.Option("--connect-timeout", min=0.01, help="seconds to connect")
    ] = _TIMEOUTS.connect,
    read_timeout: Annotated[
        float, typer.Option("--read-timeout", min=0.01, help="seconds to wait for data")
    ] = _TIMEOUTS.read,
    deadline: Annotated[
        float, typer.Option("--deadline", min=0.01, help="seconds one request may take in all")
    ] = _TIMEOUTS.total,
    drain_timeout: Annotated[
        float,
        typer.Option("--drain-timeout", min=0, help="seconds to empty the spool after the sources"),
    ] = DRAIN_TIMEOUT,
    max_file_bytes: Annotated[
        int,
        typer.Option(
            "--max-file-bytes",
            min=1,
            max=_MAX_FILE_BYTES_CEILING,
            help="larger NEM12 files go to rejected/ unread (keep it <= the API's limit)",
        ),
    ] = MAX_FILE_BYTES,
    settle_seconds: Annotated[
        float,
        typer.Option(
            "--settle-seconds",
            min=0,
            help="a file modified more recently than this is still being written: left for later",
        ),
    ] = SETTLE_SECONDS,
    as_json: Annotated[bool, typer.Option("--json", help="the summary as JSON")] = False,
    log_level: Annotated[
        str | None,
        typer.Option(
            "--log-level",
            help="debug, info, warning or error [default: FREEHOURS_LOG_LEVEL, info]",
            show_default=False,
        ),
    ] = None,
) -> None:
    """The meter agent: sends reads to the API, spools to disk when it cannot.

    Each batch is spooled before it is sent, until the API has it; resent, it keeps its key.

    The circuit breaker's state is shared through Redis when FREEHOURS_REDIS_URL is set.
    """
    if nem12_dir is None and not simulate:
        raise InputError("give --nem12-dir DIR, --simulate N, or both")
    if log_level is not None and log_level not in LEVELS:
        raise InputError(f"--log-level {log_level!r}: one of {', '.join(LEVELS)}")
    settings = get_settings()
    clock = SystemClock()
    simulation = None
    if simulate:
        simulation = Simulation(
            meters=simulate,
            seed=seed,
            start=parse_start(start) if start else clock.now().astimezone(NEM_TIME),
            duration=parse_duration(duration),
            speed=speed,
        )
    config = AgentConfig(
        api_url=api,
        api_key=api_key,
        spool_path=spool or default_spool_path(api, nem12_dir),
        nem12_dir=nem12_dir,
        once=once,
        simulation=simulation,
        timeouts=Timeouts(connect=connect_timeout, read=read_timeout, total=deadline),
        breaker=BreakerConfig(
            fail_max=breaker_failures, reset_timeout=breaker_reset, name=breaker_name
        ),
        drain_timeout=drain_timeout,
        settle_seconds=settle_seconds,
        max_file_bytes=max_file_bytes,
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
