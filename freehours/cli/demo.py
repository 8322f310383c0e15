"""``freehours demo``: the whole system end to end on the embedded default, under injected faults.

The steps are ``freehours.sim.demo``'s; this command shows their progress, prints the summary and
writes ``report.html`` (the summary and the plots) to ``--out``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn
from rich.table import Table

from freehours.cli import app, err_console
from freehours.cli.logs import log_lines_to
from freehours.cli.progress import ProgressDisplay
from freehours.settings import get_settings

if TYPE_CHECKING:
    from freehours.sim.demo import DemoResult


@app.command("demo")
def demo(
    *,
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            metavar="DIR",
            help="Directory for the demo's database, log and report.",
            file_okay=False,
        ),
    ] = Path("out/demo"),
    customers: Annotated[
        int,
        typer.Option(
            "--customers",
            min=4,
            metavar="N",
            help="Households with a smart meter, over 4 regions.",
        ),
    ] = 8,
    days: Annotated[
        int, typer.Option("--days", min=1, metavar="N", help="Days of meter data.")
    ] = 3,
    seed: Annotated[
        int, typer.Option("--seed", metavar="N", help="Seed: the same seed, the same run.")
    ] = 1,
    serve: Annotated[
        bool,
        typer.Option(
            "--serve",
            help="Then serve the API, the operations console and the customers' pages over the"
            " demo's data until interrupted.",
        ),
    ] = False,
    port: Annotated[
        int,
        typer.Option(
            "--port", min=1, max=65535, metavar="PORT", help="The console's port, with --serve."
        ),
    ] = 8765,
) -> None:
    """Run freehours end to end: a real HTTP API on 127.0.0.1, plans and customers in every
    region, the meter agent's simulated meters, settlement workers, settlements under injected
    faults, bills, invoices and a credit note for a late revision. Prints a summary and writes
    report.html (linking every document's PDF and HTML in --out/documents) to --out; exit status
    1 when an invariant fails (a duplicate credit, an unsettled quota without a reason, bills and
    settlements disagreeing, meter data left behind, a second invoice for a period, a document's
    free energy not the ledger's, a credit note not the difference, a gap in the numbers).
    """
    from freehours.sim.demo import DemoConfig, run_demo
    from freehours.sim.report import demo_plots, html_report

    config = DemoConfig(out=out, customers=customers, days=days, seed=seed, port=port)
    out.mkdir(parents=True, exist_ok=True)
    console = Console()
    console.print(
        f"[bold]freehours demo[/]: {customers} customers, {days} days, seed {seed};"
        f" log lines in {out / 'demo.log'}",
        highlight=False,
    )
    with (
        (out / "demo.log").open("w", encoding="utf-8") as log,
        log_lines_to(log),
        _Steps(console) as steps,
    ):
        result = run_demo(config, get_settings(), steps)
    summary = Console(record=True, width=100)
    _print_summary(result, summary)
    report = out / "report.html"
    html_report(
        "freehours demo",
        summary.export_text(),
        demo_plots(result, out),
        report,
        documents=result.documents,
        compared=result.compared,
    )
    console.print(f"report: {report}", highlight=False)
    if result.failures:
        for failure in result.failures:
            err_console.print(f"[bold red]invariant broken:[/] {failure}", highlight=False)
        raise typer.Exit(1)
    if not serve:
        console.print(
            f"console: `freehours demo --serve` (or `make demo SERVE=1`) serves it over this"
            f" demo's data at http://127.0.0.1:{port}/console/",
            highlight=False,
        )
        return
    from freehours.sim.demo import console_server

    server = console_server(out, get_settings(), port)
    console.print(
        f"[bold]console[/]: {server.url} (sign in with the key {server.key});"
        " serving until interrupted (Ctrl-C)",
        highlight=False,
    )
    if result.page_link:
        console.print(f"[bold]a customer's page[/]: {result.page_link}", highlight=False)
    server.run()


class _Steps(ProgressDisplay):
    """The demo's steps, one progress bar each on a terminal; a line each elsewhere."""

    def __init__(self, console: Console) -> None:
        self._console = console
        super().__init__(
            Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[detail]}"),
                console=console,
                disable=not console.is_terminal,
            )
        )
        self._task: TaskID | None = None
        self._count = 0

    def phase(self, title: str, total: float | None = None) -> None:
        self._count += 1
        if self._progress.disable:
            self._console.print(f"{self._count}. {title}", highlight=False)
        self._task = self._progress.add_task(f"{self._count}. {title}", total=total, detail="")

    def update(self, done: float, detail: str = "") -> None:
        if self._task is not None:
            self._progress.update(self._task, completed=done, detail=detail)


def _print_summary(result: DemoResult, console: Console) -> None:
    from freehours.sim.demo import kwh_figure

    config = result.config
    console.print(
        f"\nfreehours demo: {config.customers} customers, {config.days} days from"
        f" {result.first_day}, seed {config.seed}, in {result.elapsed:.1f} s",
        highlight=False,
    )
    revised = ""
    if result.revised is not None:
        key, before, after = result.revised
        revised = (
            f"; {key} revised after settlement: {kwh_figure(before)} -> {kwh_figure(after)}"
            " free kWh"
        )
    console.print(
        f"quotas settled: {result.settled} of {result.customer_days} customer-days"
        f" ({result.versions} quota versions{revised})",
        highlight=False,
    )
    regions = Table(title="Free energy by region (from the bills)")
    for column in ("region", "customers", "free kWh", "its value (AUD, ex GST)"):
        regions.add_column(column, justify="left" if column == "region" else "right")
    for region, totals in sorted(result.regions.items()):
        regions.add_row(
            region, str(totals.customers), kwh_figure(totals.free_kwh), f"{totals.free_value}"
        )
    console.print(regions)
    for explained in result.no_free:
        console.print(explained.sentence(), highlight=False)
    agent = result.agent
    faults = result.faults
    lines = [
        (
            "retries",
            f"agent: {agent.retried} of {agent.attempts} attempts were re-sends"
            f" ({agent.failed_attempts} failed, {agent.budget_exhausted} refused by the retry"
            f" budget); jobs: {result.job_retries} runs after a job's first, of"
            f" {result.job_runs}; settlement attempts failed: {result.failed_settlement_attempts}",
        ),
        ("breaker trips", f"{agent.breaker_trips} (the agent's)"),
        (
            "faults injected",
            f"{faults['outage_refused']} requests refused while the API was down;"
            f" {faults['answers_lost']} answers"
            f" lost after the API stored the batch; a worker died holding"
            f" {faults['worker_died_holding']}; {faults['database_errors']} database errors"
            f" before the final write; {faults['cache_write_failures']} cache writes failed;"
            f" a stale cache entry for {faults['stale_cache_entry']}",
        ),
        (
            "discarded",
            "; ".join(result.discarded + result.aborted + _rejected(result)) or "nothing",
        ),
        (
            "asked again",
            ", ".join(f"{count} x HTTP {status}" for status, count in sorted(result.asks.items())),
        ),
        *_invoicing_lines(result),
        *_compared_lines(result),
        *_webhook_lines(result),
        ("invariants", "; ".join(result.failures) or "all hold"),
    ]
    if result.invoicing:
        console.print(result.invoicing, highlight=False)
    table = Table(show_header=False, box=None)
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for name, text in lines:
        table.add_row(name, text)
    console.print(table)


def _compared_lines(result: DemoResult) -> list[tuple[str, str]]:
    """The summary's line on the offers compared on one customer's data."""
    if result.compared is None:
        return []
    nmi, rows = result.compared
    ranked = ", ".join(f"{row['plan_id']} {row['total']}" for row in rows)
    return [("plans compared", f"NMI {nmi}'s data under the {len(rows)} offers: {ranked} AUD")]


def _webhook_lines(result: DemoResult) -> list[tuple[str, str]]:
    """The summary's line on the events the demo's webhook receiver got."""
    if not result.webhook_requests:
        return []
    counts = result.webhook_requests
    events = ", ".join(f"{count} {kind}" for kind, count in sorted(result.webhooks.items()))
    return [
        (
            "webhooks",
            f"{events or 'no events'} received, each webhook-id acted on once;"
            f" {counts['requests']} requests: {counts['refused']} answered 503 on purpose and"
            f" retried, {counts['duplicates']} duplicates, {counts['bad_signatures']} bad"
            f" signatures; {counts['pending']} deliveries pending, {counts['failed']} failed",
        )
    ]


def _rejected(result: DemoResult) -> list[str]:
    rejected = result.agent.rejected
    return [f"{rejected} batches refused by the API"] if rejected else []


def _invoicing_lines(result: DemoResult) -> list[tuple[str, str]]:
    """The summary's lines on the invoice runs and their documents."""
    from freehours.domain.invoicing import DocumentType
    from freehours.sim.demo import counted

    if not result.runs:
        return []
    runs = "; ".join(
        f"as of {run.as_of:%d %b %Y}: {counted(run.counts.invoices, 'invoice')},"
        f" {counted(run.counts.credit_notes, 'credit note')},"
        f" {counted(run.counts.adjustment_invoices, 'adjustment invoice')},"
        f" {run.counts.waiting} waiting, {run.counts.held} held"
        for run in result.runs
    )
    kinds = {kind: [d for d in result.documents if d.kind is kind] for kind in DocumentType}
    corrections = ", ".join(
        f"{d.number} corrects {d.corrects} by {d.total} AUD"
        for kind in (DocumentType.CREDIT_NOTE, DocumentType.ADJUSTMENT_INVOICE)
        for d in kinds[kind]
    )
    gapless = not any("numbers are not" in failure for failure in result.failures)
    documents = (
        f"{counted(len(kinds[DocumentType.INVOICE]), 'invoice')},"
        f" {counted(len(kinds[DocumentType.CREDIT_NOTE]), 'credit note')},"
        f" {counted(len(kinds[DocumentType.ADJUSTMENT_INVOICE]), 'adjustment invoice')};"
        f" numbers {'gapless' if gapless else 'NOT gapless'}"
        + (f"; {corrections}" if corrections else "")
        + f"; PDF and HTML of each in {result.config.out / 'documents'}"
    )
    invoices = [d for d in kinds[DocumentType.INVOICE] if d.offer_outcome is not None]
    outcomes = {
        outcome: [d for d in invoices if d.offer_outcome == outcome]
        for outcome in ("better_offer", "best_offer", "no_offers", "no_data")
    }
    checked = (
        f"{len(outcomes['better_offer'])} of {counted(len(invoices), 'invoice')} name a better"
        f" offer, {len(outcomes['best_offer']) + len(outcomes['no_offers'])} say the customer is"
        f" on the best plan for them"
    )
    for outcome in ("better_offer", "best_offer"):
        if outcomes[outcome]:
            example = outcomes[outcome][0]
            checked += f'; {example.number}: "{example.offer_message}"'
    lines = [("invoice runs", runs), ("documents", documents), ("better offer check", checked)]
    if result.mail:
        mail = result.mail
        lines.append(
            (
                "documents by email",
                f"{mail['sent']} sent once each, PDF attached, to the customers who chose email"
                f" ({mail['received']} received by the demo's mail server: each message in"
                f" {result.config.out / 'mail'}); the others go into each run's print batch",
            )
        )
    if result.page_link:
        lines.append(
            (
                "a customer's page",
                f"{result.page_link} (as their email links it; `make demo SERVE=1` serves it)",
            )
        )
    return lines
