"""``freehours nem12 ...``: NEM12 files. ``inspect`` says what a file holds, without a database."""

from __future__ import annotations

import json
import os
import sys
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer

from freehours.cli import app
from freehours.cli.tables import Column, plain_console, plain_table, plain_text, rich_table
from freehours.meterdata.nem12 import NEM12Reader, ReadStats

if TYPE_CHECKING:
    from rich.console import Console

#: Width of the summary when the output is not a terminal: a row of the table is about 130.
_PIPE_WIDTH = 160
_ZERO = Decimal(0)

nem12_app = typer.Typer(
    help="NEM12 interval meter data files (CSV, zip or gzip).", no_args_is_help=True
)
app.add_typer(nem12_app, name="nem12")


@nem12_app.command("inspect")
def inspect(
    file: Annotated[
        Path,
        typer.Argument(
            metavar="FILE",
            help="A NEM12 file: CSV, a zip of them, or gzip.",
            exists=True,
            dir_okay=False,
        ),
    ],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the summary as JSON instead of a table.")
    ] = False,
) -> None:
    """NMIs, channels, interval lengths, dates, quality counts and superseded revisions."""
    reader = NEM12Reader(file, future=True)  # simulated and reference data, warned of
    summary = summarize(reader)
    if warning := reader.ahead_warning():
        from freehours.cli import err_console  # Rich, only to warn

        err_console.print(f"[yellow]warning:[/] {warning}", highlight=False, soft_wrap=True)
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
    elif not _printed_plainly(summary):
        print_summary(summary, summary_console())


def summarize(reader: NEM12Reader) -> dict[str, Any]:
    """Read ``reader``'s source to the end and say what it holds, as plain JSON-ready data.

    Raises ``NEM12Error`` (which the command line turns into exit status 2) for a bad file.
    """
    totals: dict[tuple[str, str], Decimal] = {}
    for day in reader.days():
        key = (day.nmi, day.suffix)
        total = totals.get(key, _ZERO)
        try:
            # Most days miss nothing: their values go straight onto the channel's total, one
            # addition each (exact, like any Decimal sum here: the totals are far from 28 digits).
            totals[key] = sum(cast("tuple[Decimal, ...]", day.values), total)
        except TypeError:  # a missing value (None) adds nothing
            totals[key] = total + day.total()
    return _as_json(reader.stats, totals)


def _as_json(stats: ReadStats, totals: dict[tuple[str, str], Decimal]) -> dict[str, Any]:
    channels = [
        {
            "nmi": channel.nmi,
            "suffix": channel.suffix,
            "units": sorted(channel.units),
            "interval_minutes": sorted(channel.interval_minutes),
            "from": channel.first_day.isoformat(),
            "to": channel.last_day.isoformat(),
            "days": channel.days,
            "rows": channel.rows,
            "superseded": channel.superseded,
            "intervals": channel.intervals,
            "missing": channel.missing,
            "qualities": dict(sorted(channel.qualities.items())),
            "total": str(totals.get((channel.nmi, channel.suffix), Decimal(0))),
        }
        for channel in sorted(stats.channels.values(), key=lambda c: (c.nmi, c.suffix))
    ]
    return {
        "source": stats.source,
        "members": stats.members,
        "created": stats.created.isoformat() if stats.created else None,
        "nmis": stats.nmis,
        "from": min((str(c["from"]) for c in channels), default=None),
        "to": max((str(c["to"]) for c in channels), default=None),
        "rows": stats.rows,
        "days": stats.days,
        "superseded": stats.superseded,
        "intervals": stats.intervals,
        "missing": stats.missing,
        "qualities": dict(sorted(stats.qualities.items())),
        "joined_lines": stats.joined_lines,
        "channels": channels,
    }


def summary_console() -> Console:
    """Standard output: a terminal's own width, or, for a pipe or a file, wide enough that each
    channel of the summary keeps to one line (Rich would assume 80 columns and fold every cell)."""
    from rich.console import Console

    console = Console()
    return console if console.is_terminal else Console(width=_PIPE_WIDTH)


def _printed_plainly(summary: dict[str, Any]) -> bool:
    """``summary`` printed as ``print_summary`` prints it into a pipe or a file, without Rich
    (a quarter of ``inspect``'s start-up): True when done; False, nothing printed, where Rich
    could print other characters (a terminal, an environment that makes Rich act as one, an
    encoding not UTF, a cell that is not plain text). ``tests/meterdata/test_cli_nem12.py``
    holds the two to the same output."""
    forced = ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")
    if any(os.environ.get(name) for name in forced) or sys.stdout.isatty():
        return False
    if not (getattr(sys.stdout, "encoding", None) or "").lower().startswith("utf"):
        return False
    columns, rows = _table(summary)
    drawn = plain_table(summary["source"], columns, rows, width=_PIPE_WIDTH)
    notes = plain_text(_notes(summary), width=_PIPE_WIDTH)
    if drawn is None or notes is None:
        return False
    sys.stdout.write(drawn + notes)
    return True


def print_summary(summary: dict[str, Any], console: Console) -> None:
    """``summary`` (from ``summarize``) as a Rich table with a line of totals under it."""
    columns, rows = _table(summary)
    drawn = None
    if plain_console(console):
        drawn = plain_table(summary["source"], columns, rows, width=console.width)
    if drawn is not None:
        console.file.write(drawn)
    else:
        console.print(rich_table(summary["source"], columns, rows))
    console.print(_notes(summary), highlight=False)


def _table(summary: dict[str, Any]) -> tuple[list[Column], list[list[str]]]:
    """The summary's table: its columns, and a row per channel."""
    columns = [
        *(
            Column(name, min_width=len(name), no_wrap=True)
            for name in ("NMI", "suffix", "unit", "min", "from", "to")
        ),
        Column("days", "right", no_wrap=True),
        Column("superseded", "right", no_wrap=True),
        Column("qualities"),
        Column("missing", "right", no_wrap=True),
        Column("total", "right", no_wrap=True),
    ]
    rows = [
        [
            channel["nmi"],
            channel["suffix"],
            ", ".join(channel["units"]),
            ", ".join(str(minutes) for minutes in channel["interval_minutes"]),
            channel["from"],
            channel["to"],
            f"{channel['days']:,}",
            f"{channel['superseded']:,}",
            _qualities(channel["qualities"]),
            f"{channel['missing']:,}",
            channel["total"],
        ]
        for channel in summary["channels"]
    ]
    return columns, rows


def _notes(summary: dict[str, Any]) -> str:
    """The line of totals under the table."""
    notes = [
        f"{len(summary['nmis']):,} NMIs",
        f"{len(summary['channels']):,} channels",
        f"{summary['from']} to {summary['to']}",
        f"{summary['days']:,} channel-days from {summary['rows']:,} rows",
        f"{summary['superseded']:,} superseded by a later revision",
        f"{summary['intervals']:,} intervals ({_qualities(summary['qualities'])})",
        f"{summary['missing']:,} missing",
    ]
    if summary["joined_lines"]:
        notes.append(f"{summary['joined_lines']:,} broken lines joined to their 300 record")
    return "; ".join(notes)


def _qualities(counts: dict[str, int]) -> str:
    return " ".join(f"{flag} {count:,}" for flag, count in counts.items())
