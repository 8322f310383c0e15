"""A document as one HTML page: rendered on the server from the package's template
(``templates/document.html``, the standard library's ``string.Template``) with its style
written in, the chart an inline SVG: nothing is fetched, no script runs.

The page is laid out as the PDF is, for A4 when printed: ``<section id="page-1">`` is the first
sheet and holds the Tier 1 information and the free window's figures, ``<section id="page-2">``
the detail. The markup is semantic for assistive technology: headings in order, a description
list for the account's facts, tables with captions and header cells, and the chart an image
with a text description whose numbers are in the daily-use table.
"""

from __future__ import annotations

import base64
import hashlib
from functools import lru_cache
from html import escape
from importlib.resources import files
from string import Template

from freehours.documents import wording
from freehours.documents.chart import chart
from freehours.documents.model import InvoiceDocument

# The chart's drawing, in SVG user units.
_WIDTH, _HEIGHT = 720.0, 200.0
_LEFT, _RIGHT, _TOP, _BOTTOM = 34.0, 6.0, 12.0, 30.0
#: A day without meter data: its whole height in a light grey (the legend's "none" swatch).
NO_DATA_FILL = "#e3e3e3"


@lru_cache(maxsize=1)
def _template() -> tuple[Template, str]:
    folder = files("freehours.documents") / "templates"
    page = Template((folder / "document.html").read_text(encoding="utf-8"))
    style = (folder / "document.css").read_text(encoding="utf-8")
    return page, style


def style_source() -> str:
    """The ``sha256-...`` source of the page's one ``<style>`` element, the same on every page:
    what a Content-Security-Policy names to let it, and no other style, apply."""
    page, style = _template()
    _, opening, rest = page.template.partition("<style>")
    written, closing, _ = rest.partition("</style>")
    assert opening, "the template has a <style> element"
    assert closing, "the template's <style> element is closed"
    text = Template(written).substitute(style=style)
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


def render_html(document: InvoiceDocument) -> str:
    """The document as an HTML page (text, UTF-8 when written)."""
    page, style = _template()
    retailer = document.retailer
    headline = wording.headline(document)
    notice = wording.example_notice(document)
    footer = f"{retailer.name}, {', '.join(retailer.postal_address)}. ABN {retailer.abn}."
    return page.substitute(
        title=_e(f"{document.kind.label} {document.number}, {retailer.name}"),
        style=style,
        retailer_name=_e(retailer.name),
        retailer_abn=_e(retailer.abn),
        retailer_website=_e(retailer.website),
        kind_title=_e(document.kind.label),
        kind_lower=_e(document.kind.label.lower()),
        number_label=_e(wording.number_label(document)),
        number=_e(document.number),
        issue_date=_e(wording.long_date(document.issue_date)),
        example_notice=f'<p class="example">{_e(notice)}</p>' if notice else "",
        headline_label=_e(headline.label),
        headline_amount=_e(headline.amount),
        headline_due=_e(headline.due),
        facts="\n".join(
            f"<dt>{_e(label)}</dt><dd>{_e(value)}</dd>" for label, value in wording.facts(document)
        ),
        notices="\n".join(
            f'<p class="notice">{_e(message)}</p>' for message in wording.notices(document)
        ),
        free_energy=_free_energy(document),
        chart=_chart(document),
        payment_heading=_e(wording.payment_heading(document)),
        payment_methods=_payment_methods(document),
        help="\n".join(
            f"<dt>{_e(label)}</dt><dd>{_e(value)}</dd>"
            for label, value in wording.help_items(document)
        ),
        better_offer_heading=_e(wording.BETTER_OFFER_HEADING),
        better_offer=_e(wording.better_offer(document)),
        footer=_e(footer),
        lines="\n".join(
            "<tr>"
            f"<td>{_e(line.description)}</td>"
            f'<td class="num">{_e(wording.quantity(line.quantity, line.unit))}</td>'
            f'<td class="num">{_e(wording.rate(line.unit_price, line.unit))}</td>'
            f'<td class="num">{_e(wording.money(line.amount))}</td>'
            "</tr>"
            for line in document.lines
        ),
        totals=_totals(document),
        account=_account(document),
        plan=_plan(document),
        usage=_usage(document),
        daily=_daily(document),
        credit_note=_paragraph(wording.credit_note_note(document)),
    )


def _e(text: str) -> str:
    return escape(text, quote=True)


def _free_energy(document: InvoiceDocument) -> str:
    figures = wording.free_energy(document)
    if figures is None:
        return (
            '<h2 id="free-heading">Your daily use</h2>'
            f"<p>{_e(wording.no_free_window(document))}</p>"
        )
    energy, value, how = figures
    return (
        '<h2 id="free-heading">Your free energy</h2>'
        f'<p class="free-energy">{_e(energy)}</p>'
        f'<p class="free-value">{_e(value)}</p>'
        f"<p>{_e(how)}</p>"
    )


def _chart(document: InvoiceDocument) -> str:
    drawing = chart(document)
    plot_width = _WIDTH - _LEFT - _RIGHT
    plot_height = _HEIGHT - _TOP - _BOTTOM

    def y(fraction: float) -> float:
        return _TOP + (1 - fraction) * plot_height

    parts = []
    for fraction, label in drawing.ticks:
        parts.append(
            f'<line x1="{_LEFT:.1f}" y1="{y(fraction):.1f}" x2="{_WIDTH - _RIGHT:.1f}" '
            f'y2="{y(fraction):.1f}" stroke="#bfbfbf" stroke-width="0.5"/>'
            f'<text x="{_LEFT - 4:.1f}" y="{y(fraction) + 2.5:.1f}" text-anchor="end">'
            f"{_e(label)}</text>"
        )
    slot = plot_width / max(len(drawing.bars), 1)
    bar = slot * 0.7
    for index, day in enumerate(drawing.bars):
        x = _LEFT + index * slot + (slot - bar) / 2
        if day.unmetered:  # the whole height shaded: no meter data, not a day of no use
            parts.append(
                f'<rect x="{x:.2f}" y="{_TOP:.2f}" width="{bar:.2f}" height="{plot_height:.2f}"'
                f' fill="{NO_DATA_FILL}"/>'
            )
        for low, high, colour in (
            (day.use_low, day.use_high, "#0b4f6c"),
            (day.free_low, day.free_high, "#b45309"),
        ):
            if high > low:
                parts.append(
                    f'<rect x="{x:.2f}" y="{y(high):.2f}" width="{bar:.2f}" '
                    f'height="{(high - low) * plot_height:.2f}" fill="{colour}"/>'
                )
    zero = y(drawing.zero)
    parts.append(
        f'<line x1="{_LEFT:.1f}" y1="{zero:.1f}" x2="{_WIDTH - _RIGHT:.1f}" y2="{zero:.1f}" '
        'stroke="#1a1a1a" stroke-width="0.8"/>'
    )
    parts.extend(
        f'<text x="{_LEFT + (index + 0.5) * slot:.1f}" y="{_HEIGHT - _BOTTOM + 10:.1f}" '
        f'text-anchor="middle">{drawing.bars[index].day.day}</text>'
        for index in drawing.labelled
    )
    parts.append(f'<text x="{_LEFT - 30:.1f}" y="{_TOP - 3:.1f}">kWh</text>')
    parts.append(
        f'<text x="{_LEFT:.1f}" y="{_HEIGHT - 6:.1f}">Days of {_e(wording.period(document))}</text>'
    )
    free = document.free_energy is not None
    description = (
        "One bar a day: its height is the energy used that day"
        + (", and the lower, orange part the energy used free in the window" if free else "")
        + (
            ". A grey band is a day without meter data"
            if any(day.unmetered for day in drawing.bars)
            else ""
        )
        + ". Every day's figures are in the table Your daily use on page 2."
    )
    legend = "".join(
        f'<li><span class="swatch {bar}-bar"></span>{_e(label)}</li>'
        for bar, label in wording.legend(document)
    )
    return (
        f'<svg class="chart" viewBox="0 0 {_WIDTH:.0f} {_HEIGHT:.0f}" role="img" '
        'aria-labelledby="chart-title chart-description" xmlns="http://www.w3.org/2000/svg">'
        '<title id="chart-title">Your daily use</title>'
        f'<desc id="chart-description">{_e(description)}</desc>'
        + "".join(parts)
        + f'</svg><ul class="legend" aria-hidden="true">{legend}</ul>'
    )


def _payment_methods(document: InvoiceDocument) -> str:
    credit = wording.credit_text(document)
    if credit is not None:
        return "".join(f"<p>{_e(text)}</p>" for text in credit)
    if not document.payment_methods:
        return f"<p>Call {_e(document.retailer.phone)} to pay.</p>"
    items = "".join(
        f"<li><strong>{_e(method.name)}</strong><br>{_e(method.detail)}</li>"
        for method in document.payment_methods
    )
    return f'<ul class="methods">{items}</ul>'


def _totals(document: InvoiceDocument) -> str:
    return "\n".join(
        f'<tr{_total(result)}><th scope="row" colspan="3">{_e(label)}</th>'
        f'<td class="num">{_e(amount)}</td></tr>'
        for label, amount, result in wording.totals(document)
    )


def _total(result: bool) -> str:
    return ' class="total"' if result else ""


def _account(document: InvoiceDocument) -> str:
    rows = wording.account_rows(document)
    if not rows:
        return ""
    body = "\n".join(
        f'<tr{_total(result)}><th scope="row">{_e(label)}</th><td class="num">{_e(value)}</td></tr>'
        for label, value, result in rows
    )
    return (
        '<section aria-labelledby="account-heading"><h2 id="account-heading">Your account</h2>'
        '<table class="account"><caption>Your account before and after this'
        f" {_e(document.kind.label.lower())}</caption><tbody>{body}</tbody></table></section>"
    )


def _plan(document: InvoiceDocument) -> str:
    return "\n".join(
        f"<dt>{_e(label)}</dt><dd>{_e(value)}</dd>" for label, value in wording.plan_rows(document)
    )


def _usage(document: InvoiceDocument) -> str:
    rows = wording.usage_rows(document)
    if not rows:
        return ""
    body = "".join(
        f'<tr><th scope="row">{_e(label)}</th><td>{_e(span)}</td>'
        f'<td class="num">{_e(average)}</td><td class="num">{_e(share)}</td></tr>'
        for label, span, average, share in rows
    )
    return (
        '<section aria-labelledby="usage-heading"><h2 id="usage-heading">Your use compared</h2>'
        '<table class="usage"><caption>Your average daily use and how much of it was free'
        '</caption><thead><tr><th scope="col">Bill</th><th scope="col">Dates</th>'
        '<th scope="col" class="num">Average a day</th>'
        '<th scope="col" class="num">Share that was free</th></tr></thead>'
        f"<tbody>{body}</tbody></table></section>"
    )


def _daily(document: InvoiceDocument) -> str:
    days = document.days
    if not days:
        return ""
    columns = wording.daily_columns(len(days))
    rows = -(-len(days) // columns)
    free = document.free_energy is not None
    span = ' colspan="2"' if free else ""
    head = '<tr><th scope="col">Day</th><th scope="col" class="num">Used</th>' + (
        '<th scope="col" class="num">Free</th></tr>' if free else "</tr>"
    )
    tables = []
    for start in range(0, len(days), rows):
        chunk = days[start : start + rows]
        body = "".join(
            f'<tr><th scope="row">{_e(wording.long_date(day.day))}</th>'
            + (
                f'<td class="num">{_e(wording.kwh(day.consumption_kwh))}</td>'
                + (f'<td class="num">{_e(wording.kwh(day.free_kwh))}</td>' if free else "")
                if day.metered
                else f'<td class="num no-data"{span}>{_e(wording.NO_DATA)}</td>'
            )
            + "</tr>"
            for day in chunk
        )
        caption = f"{wording.short_date(chunk[0].day)} to {wording.short_date(chunk[-1].day)}"
        tables.append(
            f"<table><caption>{_e(caption)}</caption><thead>{head}</thead>"
            f"<tbody>{body}</tbody></table>"
        )
    note = "<p>The change each revised day made.</p>" if document.kind.corrects_another else ""
    missing = wording.no_data_note(document)
    after = f'<p class="no-data-note">{_e(missing)}</p>' if missing else ""
    return f'<h2>Your daily use</h2>{note}<div class="daily">{"".join(tables)}</div>{after}'


def _paragraph(text: str | None) -> str:
    return f"<p>{_e(text)}</p>" if text else ""
