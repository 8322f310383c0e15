"""Invoice documents: rendering a month-long invoice as PDF and as HTML, one core.

The document is the sample household's July invoice (``freehours.documents.sample``: rated and
billed by the domain, 31 days of daily use for the chart and the table) with four more lines,
ten in all, as a retailer's bill with a metering charge, GreenPower and two rebates has. It is
rendered ``PDF_RUNS`` times as PDF and ``HTML_RUNS`` times as HTML, in turn, twice, and the best
round of each kept, in documents per second of CPU time (what the renderer costs one core,
whatever else the machine runs) and of wall-clock time.

The goal: at least 20 PDF documents a second per core (issue 16). HTML has no goal; its figure
is printed. Then what importing the PDF renderer (ReportLab) adds to a process's start, which
a command that makes PDFs pays once.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import replace
from decimal import Decimal

from benchmarks.processes import best_of
from benchmarks.scale import size
from freehours.documents.html import render_html
from freehours.documents.model import InvoiceDocument, Line
from freehours.documents.pdf import render_pdf
from freehours.documents.sample import sample_invoice

#: PDF documents per second of one core's CPU time.
PDF_GOAL = 20
PDF_RUNS = size(200, 5)
HTML_RUNS = size(500, 5)
ROUNDS = size(2, 1)


def month_invoice() -> InvoiceDocument:
    """The sample invoice with ten lines."""
    document = sample_invoice()
    extra = (
        Line("METERING", "Metering charge", Decimal(31), "day", Decimal("0.2500"), Decimal("7.75")),
        Line(
            "GREENPOWER",
            "GreenPower 10%",
            Decimal("445.301"),
            "kWh",
            Decimal("0.0080"),
            Decimal("3.56"),
        ),
        Line(
            "REBATE",
            "NSW Low Income Household Rebate",
            Decimal(31),
            "day",
            Decimal("-0.7500"),
            Decimal("-23.25"),
        ),
        Line(
            "RELIEF",
            "Energy Bill Relief Fund rebate",
            Decimal(1),
            "each",
            Decimal("-75.00"),
            Decimal("-75.00"),
        ),
    )
    lines = document.lines + extra
    subtotal = sum((line.amount for line in lines), Decimal(0))
    gst = (subtotal * document.gst_rate).quantize(Decimal("0.01"))
    total = subtotal + gst
    assert document.account is not None
    due = document.account.previous_balance - document.account.payments + total
    return replace(document, lines=lines, subtotal=subtotal, gst=gst, total=total, amount_due=due)


def run() -> None:
    document = month_invoice()
    if (len(document.lines), len(document.days)) != (10, 31):
        raise SystemExit("documents: the benchmark's invoice is not 10 lines and 31 days")
    size = len(render_pdf(document))
    (pdf_cpu, pdf_wall), (html_cpu, html_wall) = _best(
        (lambda: render_pdf(document), PDF_RUNS), (lambda: render_html(document), HTML_RUNS)
    )
    print(
        f"documents: PDF {PDF_RUNS / pdf_cpu:,.0f} documents/s per core (cpu; goal >= {PDF_GOAL}):"
        f" {PDF_RUNS / pdf_cpu / PDF_GOAL:.1f}x the goal; wall {PDF_RUNS / pdf_wall:,.0f}/s;"
        f" {1000 * pdf_cpu / PDF_RUNS:.1f} ms and {size / 1024:.1f} KiB a document"
        f" (10 lines, 31 days, 2 pages)"
    )
    print(
        f"documents: HTML {HTML_RUNS / html_cpu:,.0f} documents/s per core (cpu), wall"
        f" {HTML_RUNS / html_wall:,.0f}/s; {1000 * html_cpu / HTML_RUNS:.2f} ms a document"
    )
    bare = best_of([sys.executable, "-c", "import freehours.documents.model"], 5)
    loaded = best_of([sys.executable, "-c", "import freehours.documents.pdf"], 5)
    print(
        f"documents: importing the PDF renderer (ReportLab) adds {loaded.wall - bare.wall:.3f} s"
        f" to a process's start ({bare.wall:.3f} s -> {loaded.wall:.3f} s, best of 5); the model"
        " and HTML load none of it"
    )


def _best(*works: tuple[Callable[[], object], int]) -> list[tuple[float, float]]:
    """For each (work, times), the best CPU and wall-clock seconds of ``ROUNDS`` rounds of
    running it ``times`` times, the works in turn."""
    cpus: list[list[float]] = [[] for _ in works]
    walls: list[list[float]] = [[] for _ in works]
    for _ in range(ROUNDS):
        for (work, times), cpu, wall in zip(works, cpus, walls, strict=True):
            started, used = time.perf_counter(), time.process_time()
            for _ in range(times):
                work()
            cpu.append(time.process_time() - used)
            wall.append(time.perf_counter() - started)
    return [(min(cpu), min(wall)) for cpu, wall in zip(cpus, walls, strict=True)]
