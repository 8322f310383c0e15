"""The daily-use chart's geometry, shared by the PDF (vector drawing) and the HTML (inline SVG):
one bar a day of the billing period, its whole height the day's consumption and, drawn over it
from the axis, the part that was free in the window. A correction's days are changes and may
go below the axis.

Everything here is layout in abstract units (a 0-1 fraction of the plot's height per bar and
tick); the renderers scale it to points or pixels. The figures stay ``Decimal``; floats are only
the drawing's positions.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal

from freehours.documents.model import ZERO, DailyUse, InvoiceDocument

#: Steps an axis may take, times a power of ten: ticks read 0, 5, 10 or 0, 2.5, 5, ...
_STEPS = (Decimal(1), Decimal("2"), Decimal("2.5"), Decimal(5))
#: At most this many intervals between ticks.
_MAX_TICKS = 5
#: The least height of a day's free part that is not zero, as a fraction of the plot's height:
#: a free part of 0.2 kWh under a bar of 20 is a line no reader sees (the legend and the daily
#: table give the figures).
MIN_FREE = 0.04


@dataclass(frozen=True, slots=True)
class Bar:
    """One day: where its bars start and end, as fractions of the plot's height from its
    bottom (``zero`` is the axis)."""

    day: date
    use_low: float
    use_high: float
    free_low: float
    free_high: float
    #: Whether the day has a reading at all (a day of the period without one is a gap).
    read: bool
    #: Whether the day is in the document without any meter data (drawn as a shaded gap).
    unmetered: bool = False


@dataclass(frozen=True, slots=True)
class Chart:
    bars: tuple[Bar, ...]
    #: The axis (zero kWh), as a fraction of the height from the bottom.
    zero: float
    #: (fraction from the bottom, label) for each gridline.
    ticks: tuple[tuple[float, str], ...]
    #: Which bars get a date under them (every one up to 31 days, then every seventh).
    labelled: tuple[int, ...]


def chart(document: InvoiceDocument) -> Chart:
    days = {day.day: day for day in document.days}
    every = [
        document.period_start + timedelta(days=offset) for offset in range(document.period_days)
    ]
    values = [ZERO]
    for reading in days.values():
        values.extend((reading.consumption_kwh, reading.free_kwh))
    low, high = min(values), max(values)
    step = _step(high - low)
    bottom = _floor(low, step)
    top = max(_ceil(high, step), bottom + step)
    span = top - bottom

    def at(value: Decimal) -> float:
        return float((value - bottom) / span)

    zero = at(ZERO)
    bars = []
    for day in every:
        use: DailyUse | None = days.get(day)
        if use is None or not use.metered:
            bars.append(Bar(day, zero, zero, zero, zero, read=False, unmetered=use is not None))
            continue
        consumption, free = at(use.consumption_kwh), at(use.free_kwh)
        free = _visible(zero, free, consumption)
        bars.append(
            Bar(
                day,
                min(zero, consumption),
                max(zero, consumption),
                min(zero, free),
                max(zero, free),
                read=True,
            )
        )
    ticks = []
    value = bottom
    while value <= top:
        ticks.append((at(value), _tick_text(value)))
        value += step
    label_every = 1 if len(every) <= 31 else 7
    labelled = tuple(range(0, len(every), label_every))
    return Chart(tuple(bars), zero, tuple(ticks), labelled)


def _visible(zero: float, free: float, use: float) -> float:
    """Where a free part ending at ``free`` is drawn to: at least ``MIN_FREE`` from the axis
    when it is not zero, but never past its bar's end ``use`` when on the same side."""
    if free == zero or abs(free - zero) >= MIN_FREE:
        return free
    side = 1 if free > zero else -1
    least = zero + side * MIN_FREE
    if (use - zero) * side > 0:
        least = min(least, use) if side > 0 else max(least, use)
    return least


def _step(span: Decimal) -> Decimal:
    """The smallest step from ``_STEPS`` x 10^k that divides ``span`` into at most
    ``_MAX_TICKS`` intervals."""
    if span <= 0:
        return Decimal(1)
    scale = Decimal(1).scaleb(span.adjusted() - 1)
    while True:
        for step in _STEPS:
            if span / (step * scale) <= _MAX_TICKS:
                return step * scale
        scale *= 10


def _floor(value: Decimal, step: Decimal) -> Decimal:
    return (value / step).to_integral_value(rounding="ROUND_FLOOR") * step


def _ceil(value: Decimal, step: Decimal) -> Decimal:
    return (value / step).to_integral_value(rounding="ROUND_CEILING") * step


def _tick_text(value: Decimal) -> str:
    return format(value.normalize() + 0, "f")
