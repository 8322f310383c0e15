"""``freehours invoices``: start an invoice run (and run its jobs here), list the documents, show
one as text or JSON and write it as PDF or HTML.

A run is the same row and durable jobs as ``POST /v1/invoice-runs`` makes
(``freehours.invoicing.service``): ``run --no-wait`` leaves its jobs to ``freehours worker``;
``run`` runs them in this process as a worker would, and waits for the run to finish whoever
runs them.
The database, the runtime and the renderers are imported when a command runs.
"""

from __future__ import annotations

import json
import time
from datetime import date, datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from freehours.cli import app, err_console
from freehours.cli.dbguard import needs_database
from freehours.cli.listing import FormatOption, ListFormat, chosen, print_json
from freehours.cli.logs import quiet_logging
from freehours.cli.options import day_option

if TYPE_CHECKING:
    from freehours.operations.runtime import Runtime
    from freehours.store.invoices import InvoiceRun, StoredDocument

invoices_app = typer.Typer(
    name="invoices",
    help="Invoices and credit notes: run the invoicing, list the documents, show one (PDF, HTML).",
    no_args_is_help=True,
)
app.add_typer(invoices_app)

#: How long ``run`` waits between looks at its run while another worker holds its jobs, or a
#: failed attempt waits for its retry.
_POLL_SECONDS = 0.2
#: Documents read per page by ``list``.
_PAGE = 500


class ShowFormat(StrEnum):
    TEXT = "text"
    JSON = "json"


def _as_of(text: str | None) -> datetime | None:
    from freehours.errors import InputError

    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InputError(
            f"--as-of: {text[:40]!r} is not an ISO 8601 date and time, e.g. 2026-08-05T00:00+10:00"
        ) from None
    if moment.tzinfo is None:
        raise InputError(f"--as-of: {text!r} has no UTC offset, e.g. 2026-08-05T00:00+10:00")
    return moment


@invoices_app.command("run")
@needs_database
def run(
    as_of: Annotated[
        str | None,
        typer.Option(
            "--as-of",
            metavar="DATETIME",
            help="invoice the billing periods ended before this moment, ISO 8601 with an offset"
            " (default: now); it is the documents' issue date",
            show_default=False,
        ),
    ] = None,
    wait: Annotated[
        bool,
        typer.Option(
            "--wait/--no-wait",
            help="run the run's jobs here and wait for it (--no-wait: print the run id and"
            " leave them to 'freehours worker')",
        ),
    ] = True,
) -> None:
    """Start an invoice run: every billing period that ended before --as-of, and every invoiced
    period with a revised day, invoiced (or corrected) exactly once.

    With --wait (the default) its jobs run in this process, progress on stderr, and the run's
    counts and notes are printed; with --no-wait its id alone is printed. Exit status 1 when the
    database cannot be reached or a job of the run is discarded.
    """
    from freehours.operations.runtime import Runtime
    from freehours.settings import get_settings

    moment = _as_of(as_of)
    settings = get_settings()
    quiet_logging(settings)
    runtime = Runtime.open(settings)
    try:
        started = runtime.invoicing.start_run(as_of=moment)
        if not wait:
            typer.echo(started.run_id)
            return
        finished = _wait(runtime, started)
    finally:
        runtime.close()
    _print_run(finished)


def _wait(runtime: Runtime, started: InvoiceRun) -> InvoiceRun:
    """Run the invoicing jobs due here until ``started`` is finished; the run as it ended."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from freehours.errors import FreehoursError
    from freehours.invoicing.model import BATCH_KIND, PLAN_KIND
    from freehours.jobs.job import JobState
    from freehours.operations.runtime import retry_policy, worker_config
    from freehours.store.errors import DatabaseError
    from freehours.workers.invoice import invoicing_tasks
    from freehours.workers.worker import Worker

    settings = runtime.settings
    # Only the invoicing jobs: settling days is the settlement workers' business.
    worker = Worker(
        runtime.store,
        invoicing_tasks(runtime.invoicing),
        config=worker_config(settings),
        clock=runtime.clock,
        retry=retry_policy(settings, runtime.clock),
    )
    progress = Progress(
        TextColumn("invoice run {task.fields[run]}: batches"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[detail]}"),
        console=err_console,
        transient=True,
    )
    run_id = started.run_id
    try:
        with progress:
            task = progress.add_task("run", total=None, run=run_id[:8], detail="planning")
            while True:
                ran = worker.run_due()
                with runtime.store.read() as unit:
                    current = unit.invoices.get_run(run_id)
                    jobs = unit.jobs.history(PLAN_KIND, run_id)
                    batches = current.batches if current is not None else None
                    for batch in range(batches or 0):
                        jobs += unit.jobs.history(BATCH_KIND, f"{run_id}:{batch}")
                assert current is not None, "a run's row is never deleted"
                counts = current.counts
                progress.update(
                    task,
                    total=current.batches,
                    completed=current.batches_done,
                    detail=f"{counts.invoices} invoices, {counts.credit_notes} credit notes",
                )
                if current.finished:
                    return current
                discarded = [job for job in jobs if job.state is JobState.DISCARDED]
                if discarded:
                    job = discarded[0]
                    raise FreehoursError(
                        f"invoice run {run_id}: job {job.kind} {job.key} was discarded after"
                        f" {job.attempts} attempts: {job.error or job.outcome}"
                    )
                if not ran:
                    failed = [job for job in jobs if job.state is JobState.RETRYABLE]
                    if failed:
                        progress.update(task, detail=f"retrying: {failed[0].error}")
                    time.sleep(_POLL_SECONDS)
    except DatabaseError as exc:
        raise FreehoursError(
            f"invoice run {run_id}: the database failed while it ran ({type(exc).__name__});"
            " its jobs are durable: 'freehours worker' finishes them"
        ) from exc


def _print_run(run: InvoiceRun) -> None:
    counts = run.counts
    typer.echo(
        f"invoice run {run.run_id} as of {run.as_of.isoformat()}: {run.state},"
        f" {run.batches_done} of {run.batches} batches"
    )
    typer.echo(
        f"accounts {counts.accounts}, invoices {counts.invoices}, credit notes"
        f" {counts.credit_notes}, adjustment invoices {counts.adjustment_invoices}, waiting"
        f" {counts.waiting}, held {counts.held}"
    )
    if run.notes:
        typer.echo("notes (periods waiting or held, and why):")
        for note in run.notes:
            typer.echo(f"  {note}")


@invoices_app.command("list")
@needs_database
def list_(
    nmi: Annotated[
        str | None, typer.Option("--nmi", metavar="NMI", help="this NMI's documents only")
    ] = None,
    start: Annotated[
        date | None,
        day_option("--from", "documents whose period ends on or after this local day"),
    ] = None,
    end: Annotated[
        date | None,
        day_option("--to", "documents whose period starts on or before this local day"),
    ] = None,
    credit_notes: Annotated[
        bool, typer.Option("--credit-notes", help="credit notes only (their own number series)")
    ] = False,
    output: FormatOption = None,
) -> None:
    """The finalised documents, oldest period first: number, type, NMI, period, total, free kWh,
    issue and due dates, and the document a correction corrects (a table on a terminal, JSON
    when piped)."""
    from freehours.domain import reads as rules
    from freehours.domain.invoicing import Series
    from freehours.errors import InputError
    from freehours.settings import get_settings
    from freehours.store.database import Store

    first = start
    last = end
    if nmi is not None:
        try:
            rules.check_nmi(nmi, "--nmi")
        except rules.RangeError as exc:
            raise InputError(str(exc)) from None
    if first is not None and last is not None and first > last:
        raise InputError(f"--from: {first} is after --to {last}")
    output = chosen(output)
    found: list[StoredDocument] = []
    corrected: dict[str, list[str]] = {}
    with Store.open(get_settings().database_url) as store, store.read() as unit:
        after = None
        while page := unit.invoices.list_documents(
            nmi=nmi,
            first=first,
            last=last,
            series=Series.CREDIT_NOTE if credit_notes else None,
            after=after,
            limit=_PAGE,
        ):
            found += page
            if output is ListFormat.JSON:
                corrected.update(unit.invoices.corrections_of([d.number for d in page]))
            tail = page[-1]
            after = (tail.period_start, tail.nmi, tail.sequence)
    if output is ListFormat.JSON:
        from freehours.store.document_json import summary

        # The API's items (GET /v1/invoices), key for key: one writing of a document's JSON.
        print_json([summary(d, corrected[d.number]) for d in found])
        return
    _print_list(found)


#: A document type as a table cell: short enough that the list fits 80 columns.
_TYPE_CELLS = {
    "invoice": "invoice",
    "credit_note": "credit note",
    "adjustment_invoice": "adjustment",
}


def _print_list(found: list[StoredDocument]) -> None:
    from freehours.cli.listing import counted, print_table
    from freehours.cli.tables import Column
    from freehours.domain.bill import kwh_text, money_text

    columns = [
        Column("number", no_wrap=True),
        Column("type", no_wrap=True, drop=4),
        Column("NMI", no_wrap=True),
        Column("period", no_wrap=True),
        Column("total", "right", no_wrap=True),
        Column("free kWh", "right", no_wrap=True, drop=5),
        Column("issued", no_wrap=True, drop=2),
        Column("due", no_wrap=True, drop=3),
        Column("corrects", no_wrap=True, drop=1),
    ]
    rows = [
        [
            document.number,
            _TYPE_CELLS[document.document_type.value],
            document.nmi,
            f"{document.period_start} to {document.period_end}",
            money_text(document.figures.total),
            kwh_text(document.figures.free_kwh),
            document.issue_date.isoformat(),
            document.due_date.isoformat() if document.due_date else "",
            document.corrects or "",
        ]
        for document in found
    ]
    title = "Invoices and credit notes (totals in AUD, GST included)"
    print_table(title, columns, rows, counted=counted(len(found), "document"))


@invoices_app.command("print-batch")
@needs_database
def print_batch_(
    run_id: Annotated[str, typer.Argument(metavar="RUN", help="the invoice run's id")],
    out: Annotated[
        Path,
        typer.Option("--out", metavar="DIR", help="where to write the batch", file_okay=False),
    ] = Path("."),
) -> None:
    """The run's print batch: the documents of its customers who chose post, as PDFs of at most
    500 documents each (print-RUN-1.pdf, ...) in print order, and the mail house's manifest
    (print-RUN.csv: part, sequence, number, name, address lines). Exit status 1 for a run not
    stored."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from freehours.errors import FreehoursError
    from freehours.invoicing.print_batch import (
        MANIFEST_HEADER,
        manifest_rows,
        print_batch,
        render_part,
    )
    from freehours.settings import get_settings
    from freehours.store.database import Store

    with Store.open(get_settings().database_url) as store:
        with store.read() as unit:
            if unit.invoices.get_run(run_id) is None:
                raise FreehoursError(f"no invoice run {run_id!r}")
        batch = print_batch(store, run_id)
        counts = batch.counts()
        out.mkdir(parents=True, exist_ok=True)
        manifest = out / f"print-{run_id}.csv"
        progress = Progress(
            TextColumn("print batch: parts"),
            BarColumn(),
            MofNCompleteColumn(),
            console=err_console,
            transient=True,
        )
        # One pass: each part's PDF and its rows of the manifest.
        with progress, manifest.open("w", encoding="utf-8", newline="") as written:
            task = progress.add_task("parts", total=counts.parts)
            written.write(MANIFEST_HEADER)
            for part, documents in enumerate(batch.parts(), 1):
                path = out / f"print-{run_id}-{part}.pdf"
                path.write_bytes(render_part(store, documents))
                written.write(manifest_rows(part, documents))
                progress.advance(task)
    typer.echo(
        f"{counts.posted} document(s) to post in {counts.parts} part(s): {manifest}"
        + (
            f"; {counts.without_address} without an address to post to"
            if counts.without_address
            else ""
        )
    )


@invoices_app.command("show")
@needs_database
def show(
    number: Annotated[
        str, typer.Argument(metavar="NUMBER", help="the document's number, e.g. INV-00000001")
    ],
    pdf: Annotated[
        Path | None,
        typer.Option(
            "--pdf", metavar="FILE", help="write the document as PDF to FILE", dir_okay=False
        ),
    ] = None,
    html: Annotated[
        Path | None,
        typer.Option(
            "--html", metavar="FILE", help="write the document as HTML to FILE", dir_okay=False
        ),
    ] = None,
    output: Annotated[
        ShowFormat, typer.Option("--format", metavar="FORMAT", help="text or json")
    ] = ShowFormat.TEXT,
) -> None:
    """One document: its lines, totals, and each day with the quota version it billed; --pdf and
    --html write it as the household reads it. Exit status 1 for a number not stored."""
    from freehours.errors import FreehoursError
    from freehours.settings import get_settings
    from freehours.store.database import Store

    with Store.open(get_settings().database_url) as store, store.read() as unit:
        document = unit.invoices.get_document(number)
        corrected_by = [] if document is None else unit.invoices.corrections_of([number])[number]
    if document is None:
        raise FreehoursError(f"no invoice or credit note numbered {number!r}")
    if pdf is not None or html is not None:
        _write(document, pdf, html)
    if output is ShowFormat.JSON:
        from freehours.store.document_json import whole

        # What GET /v1/invoices/{number} answers, key for key.
        typer.echo(json.dumps(whole(document, corrected_by), indent=2))
        return
    _print_document(document, corrected_by)


def _write(document: StoredDocument, pdf: Path | None, html: Path | None) -> None:
    from freehours.invoicing.documents import document_of

    readable = document_of(document)
    if pdf is not None:
        from freehours.documents.pdf import render_pdf

        pdf.write_bytes(render_pdf(readable))
        err_console.print(f"wrote {pdf}", highlight=False)
    if html is not None:
        from freehours.documents.html import render_html

        html.write_text(render_html(readable), encoding="utf-8")
        err_console.print(f"wrote {html}", highlight=False)


def _print_document(document: StoredDocument, corrected_by: list[str]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    figures = document.figures
    kind = document.document_type.value.replace("_", " ")
    console.print(
        f"[bold]{document.number}[/]: {kind} for NMI {document.nmi} ({document.region.value},"
        f" plan {document.plan_id}), period {_day(document.period_start)} to"
        f" {_day(document.period_end)}",
        highlight=False,
    )
    due = f", due {_day(document.due_date)}" if document.due_date else ", nothing to pay"
    console.print(f"issued {_day(document.issue_date)}{due}", highlight=False)
    if document.corrects:
        console.print(f"corrects {document.corrects}: {document.reason or ''}", highlight=False)
    if corrected_by:
        console.print(f"corrected by {', '.join(corrected_by)}", highlight=False)
    lines = Table(title="Lines (prices exclude GST)")
    lines.add_column("code", no_wrap=True)
    lines.add_column("description")
    for column in ("quantity", "unit", "unit price", "amount (AUD)"):
        lines.add_column(column, justify="left" if column == "unit" else "right")
    for line in figures.lines:  # in the bill's notation, as the document's JSON has them
        lines.add_row(*line.as_json().values())
    lines.add_section()
    lines.add_row("", "subtotal", "", "", "", str(figures.subtotal))
    lines.add_row("", "GST", "", "", "", str(figures.gst))
    lines.add_row("", "[bold]total[/]", "", "", "", f"[bold]{figures.total}[/]")
    console.print(lines)
    console.print(
        f"consumption {figures.consumption_kwh} kWh; free {figures.free_kwh} kWh worth"
        f" {figures.free_value} AUD (excl. GST); over the cap {figures.over_cap_kwh} kWh;"
        f" export {figures.export_kwh} kWh",
        highlight=False,
    )
    days = Table(title=f"Days ({document.time_zone}), each with the quota version billed")
    for column in ("date", "quota version", "consumption kWh", "free kWh", "export kWh"):
        days.add_column(column, justify="left" if column == "date" else "right")
    for day in figures.days:
        days.add_row(
            day.day.isoformat(),
            "none" if day.quota_version is None else str(day.quota_version),
            str(day.consumption_kwh),
            str(day.free_kwh),
            str(day.export_kwh),
        )
    if any(day.quota_version is None for day in figures.days):
        days.caption = (
            "none: billed without a quota (no free window, or no data by its data deadline)"
        )
    console.print(days)


def _day(day: date) -> str:
    return day.isoformat()
