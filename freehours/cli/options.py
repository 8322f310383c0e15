"""Options the commands share, and their parsers.

``parse_day`` reads a local day written ``YYYY-MM-DD`` and refuses anything else plainly, naming
the value and why, which Typer puts after the option's name: ``Invalid value for '--from':
'2004-13-01' is not a day (month must be in 1..12); write it YYYY-MM-DD, e.g. 2026-07-01``.
"""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path
from typing import Annotated, Any

import typer

_DAY_TEXT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_HOW = "write it YYYY-MM-DD, e.g. 2026-07-01"


def parse_day(text: str) -> date:
    if not _DAY_TEXT.fullmatch(text):
        raise typer.BadParameter(f"{text!r} is not a day; {_HOW}")
    try:
        return date.fromisoformat(text)
    except ValueError as exc:
        raise typer.BadParameter(f"{text!r} is not a day ({exc}); {_HOW}") from None


def day_option(name: str, help: str) -> Any:
    """A day option (``--from``, ``--to``) read by ``parse_day``: the ``typer.Option`` of an
    ``Annotated[date | None, ...]`` parameter."""
    return typer.Option(name, parser=parse_day, metavar="YYYY-MM-DD", help=help)


#: The NEM12 file an offline command reads (``bill``, ``compare``).
Nem12Option = Annotated[
    Path, typer.Option("--nem12", metavar="FILE", help="the NEM12 file (CSV, zip or gzip)")
]

#: The long-running commands' ``--metrics-port`` and ``--metrics-host``.
MetricsPort = Annotated[
    int | None,
    typer.Option("--metrics-port", metavar="PORT", help="serve Prometheus metrics on this port"),
]
MetricsHost = Annotated[
    str, typer.Option("--metrics-host", metavar="ADDRESS", help="address for --metrics-port")
]
