"""Plots of the simulations, drawn with matplotlib's object interface: no pyplot, so no display
and no global state; the Agg renderer writes PNG. And the demo's HTML report around them."""

from __future__ import annotations

import base64
import html
import itertools
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from freehours.domain.invoicing import DocumentType
from freehours.sim.demo import DemoDocument, DemoResult, counted
from freehours.sim.incident import IncidentReplay

if TYPE_CHECKING:
    from matplotlib.axes import Axes

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


def demo_plots(result: DemoResult, out: Path) -> list[Path]:
    """The demo's plots, written to ``out``: free energy per day by region, retries over time,
    settlement latency. Their paths."""
    plots = {
        out / "free-energy.png": free_energy_figure(result),
        out / "retries.png": retries_figure(result),
        out / "settlement-latency.png": latency_figure(result),
    }
    for path, figure in plots.items():
        figure.savefig(path, dpi=_DPI)
    return list(plots)


def _counted(axes: Axes) -> None:
    """An axis of counts (retries, customer-days): whole-number ticks only."""
    axes.yaxis.set_major_locator(MaxNLocator(integer=True))


def free_energy_figure(result: DemoResult) -> Figure:
    figure = Figure(figsize=(10, 4.5), layout="constrained")
    axes = figure.subplots()
    days = sorted({day for per_day in result.free_by_region_day.values() for day in per_day})
    regions = sorted(result.free_by_region_day.items())
    for (region, per_day), colour in zip(regions, _COLOURS[2:], strict=False):
        axes.plot(
            range(len(days)),
            [float(per_day.get(day, 0)) for day in days],
            marker="o",
            color=colour,
            label=f"{region} ({result.regions[region].customers} customers)",
        )
    axes.set_xticks(range(len(days)), [f"{day:%a %d %b}" for day in days])
    axes.set_title("Free energy per day, by region (from the bills)")
    axes.set_ylabel("kWh")
    axes.grid(visible=True, alpha=0.3)
    if regions:
        axes.legend()
    return figure


def retries_figure(result: DemoResult) -> Figure:
    figure = Figure(figsize=(10, 4.5), layout="constrained")
    axes = figure.subplots()
    seconds = [at for at, _, _ in result.retry_samples]
    agent = [retried for _, retried, _ in result.retry_samples]
    jobs = [reruns for _, _, reruns in result.retry_samples]
    axes.step(seconds, agent, where="post", color=_COLOURS[0], label="agent: batches re-sent")
    axes.step(seconds, jobs, where="post", color=_COLOURS[1], label="jobs: runs after the first")
    axes.set_title("Retries so far")
    axes.set_xlabel("seconds since the demo started")
    axes.set_ylabel("retries")
    _counted(axes)
    axes.grid(visible=True, alpha=0.3)
    axes.legend()
    return figure


def latency_figure(result: DemoResult) -> Figure:
    figure = Figure(figsize=(10, 4.5), layout="constrained")
    axes = figure.subplots()
    values = result.settle_seconds
    axes.hist(values, bins=max(5, min(40, len(values) // 2)), color=_COLOURS[1])
    axes.set_title("Settlement latency: from the worker pool's start to each first settlement")
    axes.set_xlabel("seconds")
    axes.set_ylabel("customer-days")
    _counted(axes)
    axes.grid(visible=True, alpha=0.3)
    return figure


def documents_section(documents: Sequence[DemoDocument]) -> str:
    """The report's list of documents: counts, and each one's PDF and HTML linked by its path
    relative to the report."""
    if not documents:
        return ""
    counts = {kind: sum(d.kind is kind for d in documents) for kind in DocumentType}
    rows = "\n".join(
        f"<tr><td>{html.escape(d.number)}</td><td>{d.kind.value.replace('_', ' ')}</td>"
        f"<td>{d.nmi}</td><td>{d.period.start} to {d.period.end}</td>"
        f'<td class="n">{d.total}</td><td class="n">{d.free_kwh}</td>'
        f"<td>{html.escape(d.corrects or '')}</td>"
        f"<td>{html.escape(d.offer_message)}</td>"
        f'<td><a href="{html.escape(d.pdf)}">PDF</a> <a href="{html.escape(d.html)}">HTML</a></td>'
        "</tr>"
        for d in documents
    )
    return f"""<h2>Invoices and credit notes</h2>
<p>{counted(counts[DocumentType.INVOICE], "invoice")},
{counted(counts[DocumentType.CREDIT_NOTE], "credit note")},
{counted(counts[DocumentType.ADJUSTMENT_INVOICE], "adjustment invoice")}: each as the household
reads it, in PDF and HTML.</p>
<table><thead><tr><th>number</th><th>type</th><th>NMI</th><th>period</th><th>total (AUD)</th>
<th>free kWh</th><th>corrects</th><th>better offer message</th><th>document</th></tr></thead>
<tbody>
{rows}
</tbody></table>
"""


def compared_section(compared: tuple[str, list[dict[str, object]]] | None) -> str:
    """The table ``freehours compare --offers`` prints, of one customer's data."""
    if compared is None:
        return ""
    nmi, rows = compared
    cells = "\n".join(
        f'<tr><td class="n">{row["rank"]}</td><td>{html.escape(str(row["plan_id"]))}</td>'
        f'<td class="n">{row["total"]}</td><td class="n">{row["per_year"]}</td>'
        f'<td class="n">{row["free_kwh"]}</td><td class="n">{row["free_value"]}</td>'
        f'<td class="n">{row["room_kwh"] or ""}</td></tr>'
        for row in rows
    )
    return f"""<h2>Plans compared</h2>
<p>NMI {html.escape(nmi)}'s data under the retailer's offers, cheapest first, as
<code>freehours compare --offers</code> ranks them: each total is the plan's own bill of the data
(GST included); <em>room</em> is the energy used outside the free window on days its cap still
had room for.</p>
<table><thead><tr><th>#</th><th>offer</th><th>total (AUD)</th><th>a year (AUD)</th>
<th>free kWh</th><th>free value (AUD)</th><th>room kWh</th></tr></thead>
<tbody>
{cells}
</tbody></table>
"""


def html_report(
    title: str,
    summary: str,
    plots: Sequence[Path],
    path: Path,
    *,
    documents: Sequence[DemoDocument] = (),
    compared: tuple[str, list[dict[str, object]]] | None = None,
) -> None:
    """A page with the ``summary`` text, the ``plots`` embedded, the ``documents`` linked and
    the plans ``compared`` on a customer's data."""
    images = "\n".join(
        f'<p><img alt="{html.escape(plot.stem)}" src="data:image/png;base64,'
        f'{base64.b64encode(plot.read_bytes()).decode("ascii")}"></p>'
        for plot in plots
    )
    path.write_text(
        f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>body{{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}}
pre{{background:#f6f8fa;padding:1em;overflow-x:auto}}img{{max-width:100%}}
table{{border-collapse:collapse}}th,td{{padding:.2em .6em;border-bottom:1px solid #ddd;
text-align:left}}td.n{{text-align:right}}</style></head>
<body><h1>{html.escape(title)}</h1>
<pre>{html.escape(summary)}</pre>
{documents_section(documents)}
{compared_section(compared)}
{images}
</body></html>
""",
        encoding="utf-8",
    )
