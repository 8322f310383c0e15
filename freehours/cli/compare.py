"""``freehours compare``: a household's own NEM12 data rated under several plans, cheapest first.

Each plan's figures are its bill's, made as ``freehours bill --plan`` makes it (the same days,
the same lines, the same total to the cent: ``freehours.cli.billing``), and ranked by the total
over the data. Beside the total: the cost per year (the total over the days billed, times 365),
the free energy the plan gives and what it would have cost, and the energy used outside the
free window on days whose cap still had room for it, which a household could have moved into
the window for nothing (docs/cli.md, Comparisons).
"""

from __future__ import annotations

import csv
import json
import sys
from dataclasses import dataclass
from datetime import date
from decimal import ROUND_HALF_UP, Decimal
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from freehours.cli import app, err_console
from freehours.cli.options import Nem12Option, day_option
from freehours.domain.bill import Bill, decimal_text, kwh_text
from freehours.domain.plan import Plan

#: Plans one comparison rates: each is a pass over the data.
MAX_PLANS = 50
#: The CDR plan document read, at most (as ``plans import-cdr`` reads one).
CDR_MAX_BYTES = 1 << 20
_CENT = Decimal("0.01")
_YEAR = 365


class CompareFormat(StrEnum):
    TABLE = "table"
    JSON = "json"
    CSV = "csv"


@dataclass(frozen=True, slots=True)
class Rated:
    """One plan's figures for one NMI: its bill, and what a comparison adds to it."""

    plan: Plan
    bill: Bill
    per_year: Decimal
    room_kwh: Decimal | None  # None: the plan has no free window

    def as_json(self, rank: int) -> dict[str, object]:
        return {
            "rank": rank,
            "plan_id": self.plan.id,
            "plan_name": self.plan.name,
            "region": self.plan.region,
            "from": self.bill.start.isoformat(),
            "to": self.bill.end.isoformat(),
            "days": len(self.bill.days),
            "total": decimal_text(self.bill.total),
            "per_year": decimal_text(self.per_year),
            "free_kwh": kwh_text(self.bill.free_kwh),
            "free_value": decimal_text(self.bill.free_energy_value),
            "room_kwh": None if self.room_kwh is None else kwh_text(self.room_kwh),
        }


def rated(plan: Plan, bill: Bill) -> Rated:
    """``bill`` (under ``plan``) with the year's cost and the window's unused room."""
    per_year = (bill.total * _YEAR / len(bill.days)).quantize(_CENT, ROUND_HALF_UP)
    window = plan.free_window
    room = None
    if window is not None:
        room = sum(
            (
                min(day.outside_window_kwh, window.cap_kwh - day.free_kwh)
                for day in bill.days
                if day.free_kwh < window.cap_kwh
            ),
            Decimal(0),
        )
    return Rated(plan, bill, per_year, room)


def ranked(rows: list[Rated]) -> list[Rated]:
    """Cheapest over the data first; a tie by plan id."""
    return sorted(rows, key=lambda row: (row.bill.total, row.plan.id))


def load_compared_plan(reference: str) -> Plan:
    """A built-in plan by id, a TOML plan file, or a CDR plan document (JSON)."""
    from freehours.plans import BUILTIN_IDS, load_plan

    path = Path(reference)
    if reference not in BUILTIN_IDS and path.suffix.lower() == ".json":
        from freehours.errors import PlanError
        from freehours.plans.cdr import plan_document_from_cdr, read_json
        from freehours.plans.document import parse_plan

        try:
            with path.open("rb") as file:
                data = file.read(CDR_MAX_BYTES + 1)
        except OSError as exc:
            raise PlanError(f"cannot read it: {exc.strerror}", source=reference) from None
        document = read_json(data, source=reference, limit=CDR_MAX_BYTES)
        return parse_plan(plan_document_from_cdr(document, source=reference), source=reference)
    return load_plan(reference)


@app.command("compare")
def compare(
    *,
    nem12: Nem12Option,
    plans: Annotated[
        list[str] | None,
        typer.Option(
            "--plan",
            metavar="PLAN",
            help="a built-in plan id, a TOML plan file or a CDR plan (JSON); repeatable"
            " (default: every built-in plan)",
            show_default=False,
        ),
    ] = None,
    with_offers: Annotated[
        bool,
        typer.Option(
            "--offers",
            help="also every offer stored in the database (FREEHOURS_DATABASE_URL), its latest"
            " version",
        ),
    ] = False,
    nmi: Annotated[
        str | None,
        typer.Option("--nmi", metavar="NMI", help="this NMI only (default: every NMI)"),
    ] = None,
    start: Annotated[
        date | None,
        day_option("--from", "first local day rated (default: the first day of its data)"),
    ] = None,
    end: Annotated[
        date | None,
        day_option("--to", "last local day rated (default: the last day of its data)"),
    ] = None,
    output: Annotated[
        CompareFormat | None,
        typer.Option(
            "--format",
            metavar="FORMAT",
            help="table, json or csv (default: table on a terminal, else json)",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Rate a NEM12 file under several plans, cheapest first: each plan's total and cost per
    year, its free energy and value, and the energy its free window still had room for."""
    from freehours.cli.billing import billable, bills_of, print_notes
    from freehours.domain.rating import rate_meters
    from freehours.errors import InputError
    from freehours.meterdata.nem12 import NEM12Reader
    from freehours.plans import BUILTIN_IDS

    references = list(dict.fromkeys(plans or ([] if with_offers else BUILTIN_IDS)))
    if len(references) > MAX_PLANS:  # before any is read
        raise InputError(f"--plan: {len(references)} plans, at most {MAX_PLANS} in one comparison")
    if start is not None and end is not None and start > end:
        raise typer.BadParameter(f"--from {start} is after --to {end}")
    loaded = [load_compared_plan(reference) for reference in references]
    if with_offers:
        loaded += _stored_offers()
    if len(loaded) > MAX_PLANS:
        raise InputError(
            f"--offers: {len(loaded)} plans with the offers, at most {MAX_PLANS} in one comparison"
        )
    if not loaded:
        raise InputError("--offers: no offers stored; 'freehours offers import' stores them")
    reader = NEM12Reader(nem12, future=True)
    days = [day for day in reader.days() if nmi is None or day.nmi == nmi]
    if warning := reader.ahead_warning():
        err_console.print(f"[yellow]warning:[/] {warning}", highlight=False, soft_wrap=True)
    by_nmi: dict[str, list[Rated]] = {}
    notes: list[str] = []
    for plan in loaded:
        ratings, plan_notes = billable(plan, rate_meters(plan, days), nem12, nmi)
        for bill in bills_of(plan, ratings, start, end, nem12, notes=plan_notes):
            by_nmi.setdefault(bill.nmi, []).append(rated(plan, bill))
        notes += [note for note in plan_notes if note not in notes]
    print_notes(notes)
    chosen = output or (CompareFormat.TABLE if sys.stdout.isatty() else CompareFormat.JSON)
    results = {meter: ranked(rows) for meter, rows in sorted(by_nmi.items())}
    if chosen is CompareFormat.JSON:
        typer.echo(
            json.dumps(
                [
                    {"nmi": meter, "plans": [row.as_json(n) for n, row in enumerate(rows, 1)]}
                    for meter, rows in results.items()
                ],
                indent=2,
            )
        )
    elif chosen is CompareFormat.CSV:
        writer = csv.writer(sys.stdout, lineterminator="\n")
        keys = list(next(iter(results.values()))[0].as_json(1))
        writer.writerow(["nmi", *keys])
        for meter, rows in results.items():
            for n, row in enumerate(rows, 1):
                writer.writerow([meter, *("" if v is None else v for v in row.as_json(n).values())])
    else:
        _print_tables(results)


def _stored_offers() -> list[Plan]:
    """The plan of every offer stored, its latest version, each under its offer's id."""
    from freehours.cli.dbguard import require_database
    from freehours.plans.document import parse_plan
    from freehours.settings import get_settings
    from freehours.store.database import Store

    require_database()
    with Store.open(get_settings().database_url) as store, store.read() as unit:
        offers = unit.catalog.current_offers()
    return [
        parse_plan({**offer.document, "id": offer.offer_id}, source=f"offer {offer.offer_id}")
        for offer in offers
    ]


def _print_tables(results: dict[str, list[Rated]]) -> None:
    from freehours.cli.listing import print_table
    from freehours.cli.tables import Column

    columns = [
        Column("#", "right", no_wrap=True),
        Column("plan", no_wrap=True),
        Column("total $", "right", no_wrap=True),
        Column("a year $", "right", no_wrap=True),
        Column("free kWh", "right", no_wrap=True, drop=3),
        Column("free $", "right", no_wrap=True, drop=2),
        Column("room kWh", "right", no_wrap=True, drop=1),
    ]
    for meter, rows in results.items():
        first = rows[0].bill
        title = (
            f"NMI {meter}: {first.start} to {first.end}, {len(first.days)} days, cheapest first"
            " (GST included)"
        )
        cells = [
            [
                str(n),
                row.plan.id,
                decimal_text(row.bill.total),
                decimal_text(row.per_year),
                kwh_text(row.bill.free_kwh),
                decimal_text(row.bill.free_energy_value),
                "" if row.room_kwh is None else kwh_text(row.room_kwh),
            ]
            for n, row in enumerate(rows, 1)
        ]
        caption = "room kWh: energy used outside the free window on days its cap still had room for"
        print_table(title, columns, cells, counted=caption)
