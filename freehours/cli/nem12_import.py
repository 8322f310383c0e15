"""``freehours nem12 import``: bulk-load NEM12 files into the database, each file all or nothing.

One transaction per file: a file with a bad line is not stored at all (its error names the file
and line), and the files around it are imported all the same; the exit status is then 2.

What the import needs (the runtime and its database, Rich's progress and tables) is imported when
it runs: the ``nem12`` group loads this module for ``nem12 inspect`` too, which needs none of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from freehours import cli
from freehours.cli.dbguard import needs_database
from freehours.cli.gcpause import cyclic_gc_paused
from freehours.cli.nem12 import nem12_app, summary_console
from freehours.domain.reads import IntervalDay
from freehours.errors import InputError
from freehours.meterdata.nem12 import read_days

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID
    from rich.table import Table

    from freehours.operations.runtime import Runtime
    from freehours.store.meter import IngestCounts

#: Days between progress updates: often enough to watch, rare enough to cost nothing.
_PROGRESS_EVERY = 1_000


def _no_counts() -> IngestCounts:
    from freehours.store.meter import IngestCounts

    return IngestCounts()


@dataclass(slots=True)
class FileImport:
    """What importing one file did: what was read, what the store made of it, or why not."""

    path: Path
    days: int = 0  # channel-days read (NEM12 300 rows, the winning revision of each)
    values: int = 0  # their interval values
    seconds: float = 0.0
    counts: IngestCounts = field(default_factory=_no_counts)
    error: str | None = None


@nem12_app.command("import")
@needs_database
def import_files(
    files: Annotated[
        list[Path],
        typer.Argument(
            metavar="FILE",
            help="NEM12 files (CSV, zip or gzip)",
            exists=True,
            dir_okay=False,
            readable=True,
            show_default=False,
        ),
    ],
) -> None:
    """Load NEM12 files into the database at FREEHOURS_DATABASE_URL, each file all or nothing.

    A stored day is replaced only by a later UpdateDateTime, or the same stamp with other values.

    Exit status 2 when a file was not stored (its error names the file and line; the other files
    are stored all the same), 130 when interrupted: the summary says which files landed.
    """
    from freehours.operations.runtime import Runtime
    from freehours.settings import get_settings

    runtime = Runtime.open(get_settings())
    imports: list[FileImport] = []
    interrupted: Path | None = None
    try:
        with _progress() as progress:
            overall = progress.add_task("files", total=len(files), days=0)
            for path in files:
                interrupted = path
                progress.update(overall, description=path.name)
                with cyclic_gc_paused():
                    imports.append(_import(runtime, path, progress, overall))
                progress.advance(overall)
            interrupted = None
    except KeyboardInterrupt:
        pass  # said below, after what landed: the file being read rolled back whole
    finally:
        runtime.close()
    if imports:
        summary_console().print(_summary(imports))
    if interrupted is not None:
        waiting = len(files) - len(imports) - 1
        cli.err_console.print(
            f"[bold red]interrupted:[/] nothing of {interrupted} was stored (each file is all or"
            f" nothing); {waiting} more file{'' if waiting == 1 else 's'} not started",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(130)
    if any(result.error for result in imports):
        raise typer.Exit(2)


def _progress() -> Progress:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[days]:,} channel-days"),
        TimeElapsedColumn(),
        console=cli.err_console,
        transient=True,
    )


def _import(runtime: Runtime, path: Path, progress: Progress, task: TaskID) -> FileImport:
    from freehours.settlement.ingest import Arrival

    result = FileImport(path)
    clock = runtime.clock
    started = clock.monotonic()
    try:
        limits = runtime.settings.nem12_limits()
        days = _tallied(read_days(path, limits=limits), result, progress, task)
        arrival = Arrival("import", path.stat().st_size, name=path.name)
        result.counts = runtime.ingestion.file(days, arrival).counts.numbers()
    except InputError as exc:
        result.error = str(exc)
        cli.err_console.print(
            f"[bold red]error:[/] {exc}; nothing of {path} was stored",
            highlight=False,
            soft_wrap=True,
        )
    result.seconds = clock.monotonic() - started
    return result


def _tallied(
    days: Iterable[IntervalDay], result: FileImport, progress: Progress, task: TaskID
) -> Iterator[IntervalDay]:
    for day in days:
        result.days += 1
        result.values += len(day.values)
        if result.days % _PROGRESS_EVERY == 0:
            progress.update(task, days=result.days)
        yield day


def _summary(imports: list[FileImport]) -> Table:
    from rich.table import Table

    table = Table(title="NEM12 import, in channel-days (one channel's NEM day, a 300 row)")
    table.add_column("file")
    # The unit of each figure in its heading: the API's answer names the same four counts
    # channel_days_accepted, ..._superseded, ..._unchanged and ..._stale.
    headings = (
        "channel-days",
        "intervals",
        "new",
        "superseded",
        "unchanged",
        "stale",
        "seconds",
    )
    for heading in headings:
        table.add_column(heading, justify="right")
    total = FileImport(Path("total"))
    stored = 0
    for result in imports:
        if result.error:
            # The error itself went to stderr as it happened, with its file and line.
            table.add_row(result.path.name, "[red]not stored[/]")
            continue
        stored += 1
        table.add_row(result.path.name, *_cells(result))
        total.days += result.days
        total.values += result.values
        total.seconds += result.seconds
        total.counts += result.counts
    if len(imports) > 1:
        table.add_section()
        table.add_row("total", *_cells(total))
    table.caption = f"{stored} of {len(imports)} files stored; counts in channel-days"
    return table


def _cells(result: FileImport) -> list[str]:
    counts = result.counts
    return [
        f"{result.days:,}",
        f"{result.values:,}",
        f"{counts.accepted:,}",
        f"{counts.superseded:,}",
        f"{counts.unchanged:,}",
        f"{counts.stale:,}",
        f"{result.seconds:.1f}",
    ]
