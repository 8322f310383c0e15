"""Lists as the commands print them (``invoices list``, ``customers list``, ``keys list``,
``webhooks list``, ``webhooks deliveries``, ``plans list``): a table for a person at a terminal,
JSON for a program reading a pipe.

``--format table|json`` chooses; without it, a terminal gets the table and a pipe or a file the
JSON (as ``gh`` and ``kubectl`` do), so that ``freehours invoices list | jq`` needs no flag and
nobody parses a drawn table. The JSON is a list of objects, the API's where the API serves the
same list (``GET /v1/invoices``, ``GET /v1/webhook-endpoints``), key for key.

A table fits the console: figures and identifiers are never cut (``INV-000…``); free text such
as a URL breaks over lines; and where that is not enough, the columns of least use are left out,
in the order their ``drop`` gives, the caption naming them (``--format json`` has every field).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from enum import StrEnum
from typing import Annotated, Any

import typer

from freehours.cli.tables import Column

#: The least width a folding column is given when the table is measured: a URL or a name
#: breaks over lines rather than push a figure out.
FOLD_WIDTH = 16


class ListFormat(StrEnum):
    TABLE = "table"
    JSON = "json"


FormatOption = Annotated[
    ListFormat | None,
    typer.Option(
        "--format",
        metavar="FORMAT",
        help="table or json (default: a table on a terminal, JSON when piped)",
        show_default=False,
    ),
]


def chosen(output: ListFormat | None) -> ListFormat:
    """The format asked for, or the one that suits where stdout goes."""
    if output is not None:
        return output
    return ListFormat.TABLE if sys.stdout.isatty() else ListFormat.JSON


def print_json(items: Sequence[dict[str, Any]]) -> None:
    """The items as a JSON array on stdout, two spaces indented."""
    typer.echo(json.dumps(list(items), indent=2))


def fitting(columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int) -> list[int]:
    """The positions of the columns kept in a table ``width`` characters wide: all of them
    where they fit, else without the columns of lowest ``drop`` (never one of ``drop`` 0) until
    they do, or until only those remain."""
    kept = list(range(len(columns)))

    def needed() -> int:
        total = 1  # the left border; each column adds a space either side and its right border
        for n in kept:
            column = columns[n]
            widest = max([len(column.header), column.min_width or 0, *(len(r[n]) for r in rows)])
            total += 3 + (
                min(widest, max(FOLD_WIDTH, len(column.header))) if column.fold else widest
            )
        return total

    for n in sorted((n for n, c in enumerate(columns) if c.drop), key=lambda n: columns[n].drop):
        if needed() <= width:
            break
        kept.remove(n)
    return kept


def print_table(
    title: str,
    columns: Sequence[Column],
    rows: Sequence[Sequence[str]],
    *,
    counted: str,
) -> None:
    """The rows as a table that fits the console, ``counted`` (say, "3 documents") as its
    caption with the columns left out, if any."""
    from rich.console import Console

    from freehours.cli.tables import rich_table

    console = Console()
    kept = fitting(columns, rows, console.width)
    table = rich_table(title, [columns[n] for n in kept], [[row[n] for n in kept] for row in rows])
    left_out = [c.header for n, c in enumerate(columns) if n not in kept]
    table.caption = counted
    if left_out:
        table.caption += (
            f"; not shown at {console.width} columns: {', '.join(left_out)}"
            " (a wider terminal, or --format json, shows them)"
        )
    table.caption_justify = "left"
    console.print(table)


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and its noun: "1 document", "3 documents"."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"
