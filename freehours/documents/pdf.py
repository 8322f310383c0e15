"""A document as PDF (A4), drawn with ReportLab's canvas: text in the standard Helvetica
fonts (nothing embedded, so a document is a few kilobytes and renders in milliseconds), the
daily-use chart in vector rectangles.

Page 1 holds the Tier 1 information of the AER's Better Bills Guideline and the free window's
figures with the chart (docs/invoices.md, "The document", maps each item to its place); the
pages after it hold the detail (Tier 2): the charges, the account, the plan, every day's use.
A document of up to ``TWO_PAGE_LINES`` lines and 92 days is two pages; more lines continue on a
third.

The standard fonts write Windows-1252 (Latin-1 and a few more): a character outside it is
written without its accents where it has a plain form ("Nguyễn" as "Nguyen") and as "?"
otherwise. The HTML document has no such limit.
"""

from __future__ import annotations

import io
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from reportlab.lib.pagesizes import A4
from reportlab.lib.utils import simpleSplit
from reportlab.pdfbase.pdfmetrics import stringWidth
from reportlab.pdfgen.canvas import Canvas

from freehours.documents import wording
from freehours.documents.chart import chart
from freehours.documents.model import InvoiceDocument, Line


class LayoutError(RuntimeError):
    """A document the layout cannot hold: the model's limits make it impossible."""


#: The most rows of charges whose document stays two pages (with 92 days of daily use, and
#: the longest plan name the model allows): ``charge_rows`` counts them.
TWO_PAGE_LINES = 12

WIDTH, HEIGHT = A4
MARGIN = 40.0
CONTENT = WIDTH - 2 * MARGIN
#: Where flowing content may go down to, above the footer.
BOTTOM = HEIGHT - 56.0

REGULAR = "Helvetica"
BOLD = "Helvetica-Bold"

Colour = tuple[float, float, float]
INK: Colour = (0.1, 0.1, 0.1)
MUTED: Colour = (0.3, 0.3, 0.3)
ACCENT: Colour = (0.043, 0.31, 0.424)  # #0b4f6c: 8.6:1 on white
FREE: Colour = (0.706, 0.325, 0.035)  # #b45309: 5.0:1 on white
USE: Colour = ACCENT
PANEL: Colour = (0.953, 0.965, 0.973)
HIGHLIGHT: Colour = (0.992, 0.953, 0.906)
RULE: Colour = (0.75, 0.75, 0.75)
NO_DATA: Colour = (0.89, 0.89, 0.89)  # #e3e3e3: a day without meter data, its whole height


def render_pdf(document: InvoiceDocument) -> bytes:
    """The document as the bytes of a PDF file."""
    buffer = io.BytesIO()
    canvas = Canvas(
        buffer,
        pagesize=A4,
        pageCompression=1,
        invariant=1,  # the same document makes the same bytes: no time stamp, no random id
        lang="en-AU",
    )
    title = f"{document.kind.label} {document.number}"
    canvas.setTitle(_pdf(title))
    canvas.setAuthor(_pdf(document.retailer.name))
    canvas.setSubject(_pdf(f"{title}, NMI {document.nmi}, {wording.period(document)}"))
    layout = _first_page_layout(document)
    detail = _detail_pages(document, chart=not layout.chart_here)
    pages = 1 + len(detail)
    _first_page(Page(canvas), document, layout)
    _footer(Page(canvas), document, 1, pages)
    canvas.showPage()
    for number, blocks in enumerate(detail, start=2):
        page = Page(canvas)
        for top, block in blocks:
            block.draw(page, top)
        _footer(page, document, number, pages)
        canvas.showPage()
    canvas.save()
    return buffer.getvalue()


class Page:
    """The canvas with the origin at the top left and y growing down, as a page is read."""

    def __init__(self, canvas: Canvas) -> None:
        self.canvas = canvas

    def text(
        self,
        x: float,
        top: float,
        text: str,
        *,
        size: float = 9,
        font: str = REGULAR,
        colour: Colour = INK,
        align: str = "left",
    ) -> None:
        """One line of text whose baseline is ``top`` points down the page."""
        canvas = self.canvas
        canvas.setFillColorRGB(*colour)
        canvas.setFont(font, size)
        value = _pdf(text)
        if align == "right":
            canvas.drawRightString(x, HEIGHT - top, value)
        elif align == "centre":
            canvas.drawCentredString(x, HEIGHT - top, value)
        else:
            canvas.drawString(x, HEIGHT - top, value)

    def lines(
        self,
        x: float,
        top: float,
        text: str,
        width: float,
        *,
        size: float = 9,
        font: str = REGULAR,
        colour: Colour = INK,
        leading: float | None = None,
        max_lines: int = 99,
    ) -> float:
        """``text`` wrapped to ``width`` (at most ``max_lines``, the last cut with an ellipsis),
        the first baseline at ``top``. Returns the baseline after the last line."""
        step = leading or size * 1.3
        for line in wrap(text, font, size, width, max_lines):
            self.text(x, top, line, size=size, font=font, colour=colour)
            top += step
        return top

    def box(
        self,
        x: float,
        top: float,
        width: float,
        height: float,
        fill: Colour,
        *,
        radius: float = 0,
        stroke: Colour | None = None,
    ) -> None:
        canvas = self.canvas
        canvas.setFillColorRGB(*fill)
        if stroke is not None:
            canvas.setStrokeColorRGB(*stroke)
            canvas.setLineWidth(0.75)
        if radius:
            canvas.roundRect(
                x,
                HEIGHT - top - height,
                width,
                height,
                radius,
                stroke=int(stroke is not None),
                fill=1,
            )
        else:
            canvas.rect(
                x, HEIGHT - top - height, width, height, stroke=int(stroke is not None), fill=1
            )

    def rule(self, x: float, top: float, width: float, colour: Colour = RULE) -> None:
        canvas = self.canvas
        canvas.setStrokeColorRGB(*colour)
        canvas.setLineWidth(0.5)
        canvas.line(x, HEIGHT - top, x + width, HEIGHT - top)


# --- page 1: Tier 1 ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FirstPage:
    """Where page 1's parts go, worked out before it is drawn: the account's facts and the
    messages as wrapped lines, the free window's panel (with the chart, or without it when the
    messages and the help leave it too little room: the chart then opens page 2), the help."""

    facts: list[tuple[str, list[str]]]
    notices: list[list[str]]
    notices_top: float
    panel_top: float
    panel_height: float
    chart_here: bool
    help_items: list[tuple[str, list[str]]]


#: Page 1's fixed places: the amount box, the facts beside it, the columns' bottom.
_BOX_TOP = 100.0
_BOX_WIDTH = 176.0
_FACTS_X = MARGIN + _BOX_WIDTH + 16
_FACT_LABEL = 72.0
_FACT_WIDTH = WIDTH - MARGIN - _FACTS_X - _FACT_LABEL
_COLUMN = (CONTENT - 16) / 2
_COLUMNS_BOTTOM = 714.0
_LEADING = 9 * 1.3
#: The free window's panel: its height with the chart when the page has room, the least it may
#: be with the chart, and its height without it.
PANEL_MOST = 238.0
PANEL_LEAST = 150.0
PANEL_COMPACT = 74.0


def _first_page_layout(document: InvoiceDocument) -> FirstPage:
    facts = [
        (label, wrap(value, REGULAR, 9, _FACT_WIDTH, 3)) for label, value in wording.facts(document)
    ]
    facts_end = _BOX_TOP + 12 + sum(len(lines) * _LEADING + 2 for _, lines in facts)
    top = max(_BOX_TOP + 116, facts_end)
    messages = wording.notices(document)
    # A correction's whole text is in the detail too: here it may be cut to two lines.
    notices = [
        wrap(message, BOLD, 9, CONTENT, 2 if message == wording.correction(document) else 4)
        for message in messages
    ]
    notices_end = top + sum(4 + len(lines) * _LEADING for lines in notices)
    help_items = [
        (label, wrap(value, REGULAR, 8.5, _COLUMN, 2))
        for label, value in wording.help_items(document)
    ]
    help_height = 26 + sum(14 + 11 * len(lines) for _, lines in help_items)
    panel_top = max(notices_end, 226.0) + 4
    room = _COLUMNS_BOTTOM - help_height - 12 - panel_top
    chart_here = room >= PANEL_LEAST
    height = min(PANEL_MOST, room) if chart_here else PANEL_COMPACT
    if room < PANEL_COMPACT:
        raise LayoutError(f"{document.number}: page 1 leaves the free energy {room:.0f} pt")
    return FirstPage(facts, notices, top, panel_top, height, chart_here, help_items)


def _first_page(page: Page, document: InvoiceDocument, layout: FirstPage) -> None:
    retailer = document.retailer
    right = WIDTH - MARGIN
    page.lines(MARGIN, 52, retailer.name, 290, size=15, font=BOLD, colour=ACCENT, max_lines=1)
    page.text(MARGIN, 66, f"ABN {retailer.abn}   {retailer.website}", size=8.5, colour=MUTED)
    page.text(right, 52, document.kind.label, size=20, font=BOLD, align="right")
    page.text(
        right, 68, f"{wording.number_label(document)} {document.number}", size=10, align="right"
    )
    page.text(right, 81, f"Issued {wording.long_date(document.issue_date)}", size=9, align="right")
    notice = wording.example_notice(document)
    if notice:
        page.text(MARGIN, 92, notice, size=8, font=BOLD, colour=FREE)

    # The amount box and, beside it, the account's facts.
    top = _BOX_TOP
    headline = wording.headline(document)
    page.box(MARGIN, top, _BOX_WIDTH, 104, HIGHLIGHT, radius=6)
    page.text(MARGIN + 12, top + 22, headline.label, size=11, font=BOLD)
    size = 28.0  # smaller for an amount too wide for the box at 28 points
    while size > 14 and stringWidth(headline.amount, BOLD, size) > _BOX_WIDTH - 24:
        size -= 1
    page.text(MARGIN + 12, top + 56, headline.amount, size=size, font=BOLD, colour=ACCENT)
    page.lines(
        MARGIN + 12, top + 76, headline.due, _BOX_WIDTH - 24, size=10, font=BOLD, max_lines=2
    )
    row = top + 12
    for label, lines in layout.facts:
        page.text(_FACTS_X, row, label, size=8.5, colour=MUTED)
        for line in lines:
            page.text(_FACTS_X + _FACT_LABEL, row, line)
            row += _LEADING
        row += 2
    row = layout.notices_top
    for lines in layout.notices:
        row += 4
        for line in lines:
            page.text(MARGIN, row, line, font=BOLD)
            row += _LEADING

    _free_energy_panel(page, document, layout)
    top = layout.panel_top + layout.panel_height + 12

    # How to pay, beside who to call, above the better offer.
    column = _COLUMN
    bottom = _COLUMNS_BOTTOM
    help_items = layout.help_items
    page.text(
        MARGIN, top + 10, wording.payment_heading(document), size=11, font=BOLD, colour=ACCENT
    )
    row = top + 26
    credit = wording.credit_text(document)
    methods = () if credit is not None else document.payment_methods or ()
    for text in credit or ():
        row = page.lines(MARGIN, row, text, column, size=8.5, leading=11, max_lines=3) + 3
    if not methods and credit is None:
        row = page.lines(MARGIN, row, f"Call {retailer.phone} to pay.", column, size=8.5)
    for shown, method in enumerate(methods):
        detail = wrap(method.detail, REGULAR, 8.5, column, 2)
        # Room for this method, and for the line saying more follow when it is not the last.
        needed = 11 * (1 + len(detail)) + (14 if shown < len(methods) - 1 else 0)
        if row + needed > bottom:
            more = len(methods) - shown
            page.text(
                MARGIN,
                row,
                f"{more} more way{'s' if more > 1 else ''} to pay: call {retailer.phone}",
                size=8.5,
            )
            break
        page.text(MARGIN, row, method.name, size=8.5, font=BOLD)
        row = page.lines(MARGIN, row + 11, method.detail, column, size=8.5, max_lines=2) + 3
    x = MARGIN + column + 16
    page.text(x, top + 10, "Need help?", size=11, font=BOLD, colour=ACCENT)
    row = top + 26
    for label, lines in help_items:
        page.text(x, row, label, size=8.5, font=BOLD)
        row += 11
        for line in lines:
            page.text(x, row, line, size=8.5)
            row += 11
        row += 3

    page.box(MARGIN, bottom, CONTENT, 62, PANEL, radius=4)
    page.text(MARGIN + 10, bottom + 15, wording.BETTER_OFFER_HEADING, size=9.5, font=BOLD)
    page.lines(
        MARGIN + 10,
        bottom + 29,
        wording.better_offer(document),
        CONTENT - 20,
        size=8.5,
        max_lines=3,
    )


def _free_energy_panel(page: Page, document: InvoiceDocument, layout: FirstPage) -> None:
    top, height = layout.panel_top, layout.panel_height
    page.box(MARGIN, top, CONTENT, height, PANEL, radius=6)
    x = MARGIN + 12
    figures = wording.free_energy(document)
    if figures is None:
        page.text(x, top + 20, "Your daily use", size=12, font=BOLD, colour=ACCENT)
        page.text(x, top + 36, wording.no_free_window(document), size=9)
        chart_top = top + 50
    elif layout.chart_here:
        energy, value, how = figures
        page.text(x, top + 20, "Your free energy", size=12, font=BOLD, colour=ACCENT)
        page.text(x, top + 40, energy, size=13, font=BOLD, colour=FREE)
        page.text(x, top + 57, value, size=11, font=BOLD)
        # Room for two lines, and a third when it says why there is no free energy.
        end = page.lines(x, top + 72, how, CONTENT - 24, size=8.5, leading=11, max_lines=3)
        chart_top = max(top + 96, end + 13)
    else:
        energy, value, _ = figures
        page.text(x, top + 20, "Your free energy", size=12, font=BOLD, colour=ACCENT)
        page.text(x, top + 38, energy, size=12, font=BOLD, colour=FREE)
        page.text(x, top + 53, value, size=10, font=BOLD)
    if not layout.chart_here:
        page.text(x, top + height - 8, wording.CHART_ON_PAGE_2, size=8.5)
        return
    _chart(page, document, (x + 26, chart_top, CONTENT - 24 - 26, top + height - 28 - chart_top))
    _legend(page, top + height - 9, document)


def _chart_block(document: InvoiceDocument) -> Block:
    """The chart at the head of the detail, for a first page without room for it."""
    height = 190.0

    def paint(page: Page, top: float) -> None:
        page.box(MARGIN, top + 10, CONTENT, height - 10, PANEL, radius=6)
        page.text(
            MARGIN + 12, top + 30, "Your daily use, as a chart", size=12, font=BOLD, colour=ACCENT
        )
        _chart(page, document, (MARGIN + 38, top + 48, CONTENT - 50, height - 48 - 28))
        _legend(page, top + height - 9, document)

    return Block(height, paint)


def _chart(page: Page, document: InvoiceDocument, area: tuple[float, float, float, float]) -> None:
    """The daily-use chart in ``area``: (left, top, width, height) of its plot."""
    left, top, width, height = area
    drawing = chart(document)
    canvas = page.canvas
    base = HEIGHT - top - height  # the plot's bottom, in the canvas's coordinates
    canvas.setLineWidth(0.4)
    for fraction, label in drawing.ticks:
        y = base + fraction * height
        canvas.setStrokeColorRGB(*RULE)
        canvas.line(left, y, left + width, y)
        canvas.setFillColorRGB(*MUTED)
        canvas.setFont(REGULAR, 7)
        canvas.drawRightString(left - 4, y - 2.5, label)
    canvas.setFont(REGULAR, 6.5)
    canvas.drawString(left - 26, base + height + 6, "kWh")
    slot = width / max(len(drawing.bars), 1)
    bar = slot * 0.7
    for index, day in enumerate(drawing.bars):
        x = left + index * slot + (slot - bar) / 2
        if day.unmetered:  # the whole height shaded: no meter data, not a day of no use
            canvas.setFillColorRGB(*NO_DATA)
            canvas.rect(x, base, bar, height, stroke=0, fill=1)
        for colour, low, high in (
            (USE, day.use_low, day.use_high),
            (FREE, day.free_low, day.free_high),
        ):
            if high > low:
                canvas.setFillColorRGB(*colour)
                canvas.rect(x, base + low * height, bar, (high - low) * height, stroke=0, fill=1)
    canvas.setStrokeColorRGB(*INK)
    canvas.setLineWidth(0.6)
    zero = base + drawing.zero * height
    canvas.line(left, zero, left + width, zero)
    canvas.setFillColorRGB(*MUTED)
    canvas.setFont(REGULAR, 6.5)
    for index in drawing.labelled:
        label = str(drawing.bars[index].day.day)
        canvas.drawCentredString(left + (index + 0.5) * slot, base - 9, label)
    canvas.drawString(left, base - 18, _pdf(f"Days of {wording.period(document)}"))


def _legend(page: Page, top: float, document: InvoiceDocument) -> None:
    colours = {"free": FREE, "use": USE, "none": NO_DATA}
    items = [(colours[bar], label) for bar, label in wording.legend(document)]
    widths = [stringWidth(label, REGULAR, 7.5) + 18 for _, label in items]
    x = WIDTH - MARGIN - 12 - sum(widths)
    for (colour, label), width in zip(items, widths, strict=True):
        page.box(x, top - 6.5, 8, 8, colour, stroke=RULE if colour == NO_DATA else None)
        page.text(x + 11, top, label, size=7.5, colour=INK)
        x += width


def _footer(page: Page, document: InvoiceDocument, number: int, pages: int) -> None:
    retailer = document.retailer
    top = HEIGHT - 30
    page.rule(MARGIN, top - 12, CONTENT)
    address = ", ".join(retailer.postal_address)
    page.lines(
        MARGIN,
        top,
        f"{retailer.name}, {address}. ABN {retailer.abn}.",
        CONTENT - 80,
        size=7,
        colour=MUTED,
        max_lines=1,
    )
    page.text(
        WIDTH - MARGIN, top, f"Page {number} of {pages}", size=7.5, colour=MUTED, align="right"
    )


# --- the pages after: Tier 2 ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Block:
    """A piece of the detail pages: its height, how to draw it with its top at ``top``, and the
    header to repeat above it when it starts a page (a table's heading row)."""

    height: float
    paint: Callable[[Page, float], None]
    repeat: Block | None = None

    def draw(self, page: Page, top: float) -> None:
        self.paint(page, top)


def _detail_pages(
    document: InvoiceDocument, *, chart: bool = False
) -> list[list[tuple[float, Block]]]:
    """The detail's blocks placed on pages: (top, block) for each page after the first; the
    chart first when page 1 had no room for it."""
    pages: list[list[tuple[float, Block]]] = [[]]
    start = MARGIN + 10
    top = start
    blocks = _detail_blocks(document)
    if chart:
        blocks.insert(0, _chart_block(document))
    for block in blocks:
        if top + block.height > BOTTOM and top > start:
            pages.append([])
            top = start
            if block.repeat is not None:
                pages[-1].append((top, block.repeat))
                top += block.repeat.height
        pages[-1].append((top, block))
        top += block.height
    return pages


def _detail_blocks(document: InvoiceDocument) -> list[Block]:
    blocks: list[Block] = [_heading("Your bill in detail", gap=0)]
    correction = wording.correction(document)
    if correction:
        blocks.append(_paragraph(correction))
    blocks.extend(_charges(document))
    note = wording.credit_note_note(document)
    if note:
        blocks.append(_paragraph(note))
    blocks.append(_account_and_plan(document))
    usage = wording.usage_rows(document)
    if usage:
        blocks.append(_heading("Your use compared"))
        blocks.append(_usage(usage))
    if document.days:
        blocks.append(_heading("Your daily use"))
        if document.kind.corrects_another:
            blocks.append(_paragraph("The change each revised day made."))
        blocks.append(_daily(document))
        note = wording.no_data_note(document)
        if note:
            blocks.append(_paragraph(note))
    return blocks


def _heading(text: str, *, x: float = MARGIN, width: float = CONTENT, gap: float = 10) -> Block:
    def paint(page: Page, top: float) -> None:
        _heading_at(page, x, top + gap, width, text)

    return Block(gap + 24, paint)


def _heading_at(page: Page, x: float, top: float, width: float, text: str) -> None:
    page.text(x, top + 12, text, size=13, font=BOLD, colour=ACCENT)
    page.rule(x, top + 17, width, ACCENT)


def _paragraph(text: str) -> Block:
    lines = wrap(text, REGULAR, 8.5, CONTENT, 6)

    def paint(page: Page, top: float) -> None:
        row = top + 14
        for line in lines:
            page.text(MARGIN, row, line, size=8.5)
            row += 11

    return Block(8 + 11 * len(lines), paint)


# Columns of the charges table: description, quantity, rate, amount (right edges for numbers).
_QUANTITY = MARGIN + CONTENT * 0.62
_RATE = MARGIN + CONTENT * 0.80
_AMOUNT = MARGIN + CONTENT
_DESCRIPTION = CONTENT * 0.62 - 100


def charge_rows(document: InvoiceDocument) -> int:
    """The rows the charges table takes: a line's description wraps to at most three."""
    return sum(len(wrap(line.description, REGULAR, 9, _DESCRIPTION, 3)) for line in document.lines)


def _charges(document: InvoiceDocument) -> list[Block]:
    def header(page: Page, top: float) -> None:
        for x, label, align in (
            (MARGIN, "Charge", "left"),
            (_QUANTITY, "Quantity", "right"),
            (_RATE, "Rate (excl. GST)", "right"),
            (_AMOUNT, "Amount", "right"),
        ):
            page.text(x, top + 10, label, size=8.5, font=BOLD, colour=MUTED, align=align)
        page.rule(MARGIN, top + 14, CONTENT)

    head = Block(18, header)
    blocks = [head]
    for line in document.lines:
        description = wrap(line.description, REGULAR, 9, _DESCRIPTION, 3)

        def paint(
            page: Page, top: float, line: Line = line, description: list[str] = description
        ) -> None:
            for index, text in enumerate(description):
                page.text(MARGIN, top + 10 + index * 11, text)
            page.text(
                _QUANTITY, top + 10, wording.quantity(line.quantity, line.unit), align="right"
            )
            page.text(_RATE, top + 10, wording.rate(line.unit_price, line.unit), align="right")
            page.text(_AMOUNT, top + 10, wording.money(line.amount), align="right")

        blocks.append(Block(2 + 11 * len(description), paint, repeat=head))
    for label, amount, bold in wording.totals(document):

        def total(
            page: Page, top: float, label: str = label, amount: str = amount, bold: bool = bold
        ) -> None:
            font = BOLD if bold else REGULAR
            if bold:
                page.rule(_RATE - 120, top + 2, _AMOUNT - _RATE + 120)
            page.text(_RATE, top + 12, label, font=font, align="right")
            page.text(_AMOUNT, top + 12, amount, font=font, align="right")

        blocks.append(Block(15, total))
    return blocks


def _account_and_plan(document: InvoiceDocument) -> Block:
    """The account summary and, beside it, the plan; the plan alone across the page when the
    document has no account summary."""
    account = wording.account_rows(document)
    column = (CONTENT - 20) / 2 if account else CONTENT
    plan_x = MARGIN + column + 20 if account else MARGIN
    label_width = 70.0
    plan = [
        (label, wrap(value, REGULAR, 9, column - label_width, 5))
        for label, value in wording.plan_rows(document)
    ]
    plan_height = sum(12 * len(lines) + 2 for _, lines in plan)
    height = 10 + 24 + max(plan_height, 15 * len(account)) + 4

    def paint(page: Page, top: float) -> None:
        if account:
            _heading_at(page, MARGIN, top + 10, column, "Your account")
            row = top + 46
            for label, value, bold in account:
                font = BOLD if bold else REGULAR
                if bold:
                    page.rule(MARGIN, row - 10, column)
                page.text(MARGIN, row, label, font=font)
                page.text(MARGIN + column, row, value, font=font, align="right")
                row += 15
        _heading_at(page, plan_x, top + 10, column, "Your plan")
        row = top + 46
        for label, lines in plan:
            page.text(plan_x, row, label, size=8.5, colour=MUTED)
            for line in lines:
                page.text(plan_x + label_width, row, line)
                row += 12
            row += 2

    return Block(height, paint)


def _usage(rows: list[tuple[str, str, str, str]]) -> Block:
    """Usage compared: a row per period, its name, dates, average a day and free share."""
    dates, average, share = MARGIN + 130, MARGIN + CONTENT - 110, MARGIN + CONTENT

    def paint(page: Page, top: float) -> None:
        for x, text, align in (
            (MARGIN, "Bill", "left"),
            (dates, "Dates", "left"),
            (average, "Average a day", "right"),
            (share, "Share that was free", "right"),
        ):
            page.text(x, top + 10, text, size=8, font=BOLD, colour=MUTED, align=align)
        page.rule(MARGIN, top + 13, CONTENT)
        for index, (label, span, per_day, free) in enumerate(rows):
            y = top + 26 + index * 13
            page.text(MARGIN, y, label, font=BOLD)
            page.text(dates, y, span)
            page.text(average, y, per_day, align="right")
            page.text(share, y, free, align="right")

    return Block(20 + 13 * len(rows), paint)


def _daily(document: InvoiceDocument) -> Block:
    days = document.days
    columns = wording.daily_columns(len(days))
    rows = -(-len(days) // columns)
    width = CONTENT / columns
    free_column = document.free_energy is not None
    used, free = (72.0, 116.0) if columns == 4 else (100.0, 155.0)
    size = 7.0 if columns == 4 else 7.5

    def paint(page: Page, top: float) -> None:
        for column in range(columns):
            x = MARGIN + column * width
            page.text(x, top + 10, "Day", size=7.5, font=BOLD, colour=MUTED)
            page.text(x + used, top + 10, "Used", size=7.5, font=BOLD, colour=MUTED, align="right")
            if free_column:
                page.text(
                    x + free, top + 10, "Free", size=7.5, font=BOLD, colour=MUTED, align="right"
                )
        page.rule(MARGIN, top + 13, CONTENT)
        for index, day in enumerate(days):
            column, row = divmod(index, rows)
            x = MARGIN + column * width
            y = top + 23 + row * _DAY_ROW
            page.text(x, y, wording.short_date(day.day), size=size)
            if not day.metered:
                right = x + (free if free_column else used)
                page.text(right, y, wording.NO_DATA, size=size, colour=MUTED, align="right")
                continue
            page.text(x + used, y, wording.kwh(day.consumption_kwh), size=size, align="right")
            if free_column:
                page.text(x + free, y, wording.kwh(day.free_kwh), size=size, align="right")

    return Block(20 + rows * _DAY_ROW, paint)


#: The height of a row of the daily-use table.
_DAY_ROW = 9.5


# --- text -------------------------------------------------------------------------------------


def wrap(text: str, font: str, size: float, width: float, max_lines: int) -> list[str]:
    """``text`` in lines no wider than ``width``: split at spaces, a word wider than the line
    split where it must; past ``max_lines`` the last line ends in an ellipsis."""
    text = _pdf(text)
    lines: list[str] = []
    for split in simpleSplit(text, font, size, width) or [""]:
        rest = split
        while stringWidth(rest, font, size) > width:
            cut = _fitting(rest, font, size, width)
            lines.append(rest[:cut])
            rest = rest[cut:]
        lines.append(rest)
    if len(lines) > max_lines:
        last = lines[max_lines - 1]
        while last and stringWidth(last + "\u2026", font, size) > width:
            last = last[:-1]
        lines = [*lines[: max_lines - 1], last.rstrip() + "\u2026"]
    return lines


def _fitting(line: str, font: str, size: float, width: float) -> int:
    """How many of ``line``'s first characters fit in ``width`` (at least one)."""
    low, high = 1, len(line)
    while low < high:
        middle = (low + high + 1) // 2
        if stringWidth(line[:middle], font, size) <= width:
            low = middle
        else:
            high = middle - 1
    return low


@lru_cache(maxsize=4096)
def _pdf(text: str) -> str:
    """``text`` in the characters the standard fonts have (Windows-1252), on one line."""
    if text.isprintable():
        try:
            text.encode("cp1252")
        except UnicodeEncodeError:
            pass
        else:
            return text
    plain = []
    for character in unicodedata.normalize("NFC", text):
        if not character.isprintable():
            plain.append(" ")
            continue
        try:
            character.encode("cp1252")
        except UnicodeEncodeError:
            base = "".join(
                part
                for part in unicodedata.normalize("NFKD", character)
                if not unicodedata.combining(part)
            )
            try:
                base.encode("cp1252")
            except UnicodeEncodeError:
                base = "?"
            plain.append(base or "?")
        else:
            plain.append(character)
    return "".join(plain)
