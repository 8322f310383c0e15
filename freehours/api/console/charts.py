"""The console's charts: inline SVG drawn on the server, no script and no library.

Each chart is an ``<svg role="img">`` with a title and a description an assistive technology
reads; the page shows the same figures as a table beside it. Every label is escaped.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal

from markupsafe import Markup, escape

#: The colour of each quota state: on white, each at least 4.5:1 (WCAG AA for text).
STATE_COLOURS = {
    "COMPLETED": "#1a7f37",
    "PENDING": "#57606a",
    "LOCKED": "#0550ae",
    "ABORTED": "#cf222e",
}
BAR = "#0550ae"
WINDOW = "#fff1c2"


def _svg(width: int, height: int, title: str, body: str) -> Markup:
    label = escape(title)
    # Every text in ``body`` was escaped where it was put in.
    return Markup(  # noqa: S704
        f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" aria-label="{label}"'
        f' preserveAspectRatio="xMidYMid meet"><title>{label}</title>{body}</svg>'
    )


def _number(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 or value == int(value) else f"{value:,.2f}"


def timeline(
    counts: Sequence[int], *, title: str, first: datetime, minutes: int, tick_every: int
) -> Markup:
    """Bars of ``counts``, one per ``minutes`` from ``first``, a time under every
    ``tick_every``-th bar."""
    width, height, left, bottom, top = 720, 180, 44, 22, 10
    plot_w, plot_h = width - left - 6, height - bottom - top
    peak = max(counts, default=0) or 1
    step = plot_w / max(len(counts), 1)
    parts = [
        f'<line x1="{left}" y1="{top + plot_h}" x2="{width - 6}" y2="{top + plot_h}"'
        ' stroke="#57606a"/>',
        f'<text x="{left - 4}" y="{top + 8}" text-anchor="end" class="axis">{_number(peak)}</text>',
        f'<text x="{left - 4}" y="{top + plot_h}" text-anchor="end" class="axis">0</text>',
    ]
    for i, count in enumerate(counts):
        if count:
            bar_h = plot_h * count / peak
            parts.append(
                f'<rect x="{left + i * step:.1f}" y="{top + plot_h - bar_h:.1f}"'
                f' width="{max(step - 1, 1):.1f}" height="{bar_h:.1f}" fill="{BAR}"/>'
            )
        if i % tick_every == 0:
            at = first.timestamp() + i * minutes * 60
            label = datetime.fromtimestamp(at, first.tzinfo).strftime("%H:%M")
            parts.append(
                f'<text x="{left + i * step:.1f}" y="{height - 6}" text-anchor="middle"'
                f' class="axis">{label}</text>'
            )
    return _svg(width, height, title, "".join(parts))


def stacked(rows: Sequence[tuple[str, dict[str, int]]], *, title: str) -> Markup:
    """A horizontal bar per row, stacked by quota state in ``STATE_COLOURS``' order."""
    width, left, bar_h, gap = 720, 60, 22, 10
    height = max(len(rows), 1) * (bar_h + gap) + 30
    total_max = max((sum(states.values()) for _, states in rows), default=0) or 1
    plot_w = width - left - 70
    parts = []
    for n, (name, states) in enumerate(rows):
        y = n * (bar_h + gap) + 4
        parts.append(
            f'<text x="{left - 6}" y="{y + 16}" text-anchor="end" class="axis">'
            f"{escape(name)}</text>"
        )
        x = float(left)
        for state, colour in STATE_COLOURS.items():
            count = states.get(state, 0)
            if count:
                w = plot_w * count / total_max
                parts.append(
                    f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{colour}">'
                    f"<title>{escape(name)} {state}: {count:,}</title></rect>"
                )
                x += w
        parts.append(
            f'<text x="{x + 6:.1f}" y="{y + 16}" class="axis">{sum(states.values()):,}</text>'
        )
    legend_y = height - 8
    for i, (state, colour) in enumerate(STATE_COLOURS.items()):
        x = left + i * 150
        parts.append(
            f'<rect x="{x}" y="{legend_y - 10}" width="10" height="10" fill="{colour}"/>'
            f'<text x="{x + 14}" y="{legend_y}" class="axis">{state}</text>'
        )
    return _svg(width, height, title, "".join(parts))


def reads(
    intervals: Sequence[tuple[datetime, Decimal]],
    *,
    title: str,
    day_start: datetime,
    day_end: datetime,
    window: tuple[datetime, datetime] | None,
    clock: str,
) -> Markup:
    """A day's interval reads (kWh) as bars on its local clock (``clock``: "ACST"), the free
    window shaded; each axis says its unit."""
    width, height, left, bottom, top = 720, 210, 62, 22, 20
    plot_w, plot_h = width - left - 6, height - bottom - top
    span = (day_end - day_start).total_seconds() or 1
    peak = max((float(kwh) for _, kwh in intervals), default=0.0) or 1.0

    def x_of(at: datetime) -> float:
        return left + plot_w * (at - day_start).total_seconds() / span

    parts = []
    if window is not None:
        x0, x1 = x_of(max(window[0], day_start)), x_of(min(window[1], day_end))
        parts.append(
            f'<rect x="{x0:.1f}" y="{top}" width="{max(x1 - x0, 0):.1f}" height="{plot_h}"'
            f' fill="{WINDOW}"><title>free window</title></rect>'
        )
    bar_w = plot_w / max(len(intervals), 48)
    for at, kwh in intervals:
        bar_h = plot_h * float(kwh) / peak
        parts.append(
            f'<rect x="{x_of(at):.1f}" y="{top + plot_h - bar_h:.1f}"'
            f' width="{max(bar_w - 1, 1):.1f}" height="{bar_h:.1f}" fill="{BAR}"/>'
        )
    parts.append(
        f'<line x1="{left}" y1="{top + plot_h}" x2="{width - 6}" y2="{top + plot_h}"'
        ' stroke="#57606a"/>'
        f'<text x="{left - 4}" y="{top + 8}" text-anchor="end" class="axis">{peak:.3f}</text>'
        f'<text x="{left - 4}" y="{top + plot_h}" text-anchor="end" class="axis">0</text>'
        f'<text x="{left - 4}" y="{top - 8}" text-anchor="end" class="axis">kWh</text>'
        f'<text x="4" y="{height - 6}" class="axis">{escape(clock)}</text>'
    )
    for hour in range(0, 24, 3):
        tick = day_start.timestamp() + hour * 3600
        if tick < day_end.timestamp():
            x = left + plot_w * (tick - day_start.timestamp()) / span
            # On the local clock: a daylight-saving day has 23 or 25 hours.
            label = datetime.fromtimestamp(tick, day_start.tzinfo).strftime("%H:%M")
            parts.append(
                f'<text x="{x:.1f}" y="{height - 6}" text-anchor="middle" class="axis">'
                f"{label}</text>"
            )
    return _svg(width, height, title, "".join(parts))
