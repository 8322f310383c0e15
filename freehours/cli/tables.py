"""A Rich table (and a line of text) drawn without Rich, where that gives the same characters:
for long tables.

``freehours nem12 inspect`` prints a row per channel: 2,000 rows for the reference file of the
benchmarks, which Rich lays out and renders in 4-5 s of CPU, three times what reading the
20 MB file takes. Where the console has no colours (a pipe, a file) and every cell is plain
ASCII text that fits, Rich's table is a fixed pattern: the ``HEAVY_HEAD`` box, a space of
padding either side of each cell, each column as wide as its widest cell, the title left-aligned
over the table's width. ``plain_table`` draws that pattern with string operations, and answers
``None`` wherever Rich would do something else (fold a cell or the title, read markup or an
emoji code, substitute ASCII for the box characters, colour the header), so that the caller
prints through Rich there. A test holds the two to the same output.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table


@dataclass(frozen=True, slots=True)
class Column:
    """A column as ``rich.table.Table.add_column`` takes it: a header, a side to justify to,
    the least width, and whether a cell may be folded (never, where ``plain_table`` draws).

    For a list that fits its console (``freehours.cli.listing``): ``drop``, the order in which
    columns are left out of a table wider than the console, lowest first (0: never); ``fold``,
    free text (a URL, a name) that may break over lines, where a figure never does."""

    header: str
    justify: Literal["left", "right"] = "left"
    min_width: int | None = None
    no_wrap: bool = False
    drop: int = 0
    fold: bool = False


def rich_table(title: str, columns: Sequence[Column], rows: Sequence[Sequence[str]]) -> Table:
    """The Rich table that ``plain_table`` draws the characters of."""
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(
            column.header,
            justify=column.justify,
            min_width=column.min_width,
            no_wrap=column.no_wrap,
            overflow="fold" if column.fold else "ellipsis",
        )
    for row in rows:
        table.add_row(*row)
    return table


def plain_console(console: Console) -> bool:
    """Whether ``console`` prints tables as characters alone: no colours, no styles, and the
    box characters as they are (not their ASCII or legacy Windows stand-ins)."""
    return (
        console.color_system is None
        and console.encoding.startswith("utf")
        and not console.legacy_windows
    )


def plain_table(
    title: str,
    columns: Sequence[Column],
    rows: Sequence[Sequence[str]],
    *,
    width: int,
) -> str | None:
    """The table as Rich prints it (``Table(title=title, title_justify="left")``, the
    columns and rows added as they are) on a ``width``-column console without colours, each
    line ending in a newline; None where Rich could print something else."""
    texts = [title, *(column.header for column in columns), *(cell for row in rows for cell in row)]
    if not all(_plain(text) for text in texts):
        return None
    if not title:
        return None
    widths = [max(len(column.header), column.min_width or 0) for column in columns]
    for row in rows:
        if len(row) != len(columns):
            return None
        for n, cell in enumerate(row):
            widths[n] = max(widths[n], len(cell))
    table_width = sum(widths) + 3 * len(widths) + 1
    if table_width > width or len(title) > table_width:
        return None

    def line(left: str, cells: Sequence[str], divider: str, right: str) -> str:
        return f"{left}{divider.join(cells)}{right}\n"

    def cells(values: Sequence[str]) -> list[str]:
        return [
            f" {value.rjust(w) if column.justify == 'right' else value.ljust(w)} "
            for value, column, w in zip(values, columns, widths, strict=True)
        ]

    out = [
        f"{title.ljust(table_width)}\n",
        line("┏", ["━" * (w + 2) for w in widths], "┳", "┓"),
        line("┃", cells([column.header for column in columns]), "┃", "┃"),
        line("┡", ["━" * (w + 2) for w in widths], "╇", "┩"),
        *(line("│", cells(row), "│", "│") for row in rows),
        line("└", ["─" * (w + 2) for w in widths], "┴", "┘"),
    ]
    return "".join(out)


def plain_text(text: str, *, width: int) -> str | None:
    """``text`` as Rich prints it (``console.print(text, highlight=False)``) on a
    ``width``-column console without colours: its words wrapped as Rich wraps them (a line
    keeps the spaces after its last word, up to the width), each line ending in a newline; None
    where Rich could print something else (a word longer than a line, which Rich folds its own
    way; markup, an emoji code)."""
    if not _plain(text) or max(map(len, text.split()), default=0) > width:
        return None
    lines: list[str] = []
    line = ""
    for chunk in _CHUNKS.findall(text):
        if line and len(line) + len(chunk.rstrip()) > width:
            lines.append(line[:width])
            line = ""
        line += chunk
    lines.append(line[:width])
    return "".join(f"{line}\n" for line in lines)


#: A word and the spaces after it.
_CHUNKS = re.compile(r"\S+\s*")


def _plain(text: str) -> bool:
    """Text that Rich prints as it is: printable ASCII, no markup (``[``), no emoji code
    (``:smile:``), nothing it would fold or strip."""
    return (
        text.isascii()
        and text.isprintable()
        and "[" not in text
        and ":" not in text
        and text == text.strip()
    )
