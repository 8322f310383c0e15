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
from datetime import date
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from freehours.cli import app, err_console
from freehours.cli.options import Nem12Option, day_option
from freehours.domain.bill import decimal_text, kwh_text
from freehours.domain.comparison import MAX_PLANS, Rated, compare_days
from freehours.domain.plan import Plan

#: The CDR plan document read, at most (as ``plans import-cdr`` reads one).
CDR_MAX_BYTES = 1 << 20


class CompareFormat(StrEnum):
    TABLE = "table"
    JSON = "json"
    CSV = "csv"


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
    from freehours.cli.billing import print_notes
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
    if not days:
        whose = "" if nmi is None else f" for NMI {nmi}"
        raise InputError(f"{nem12}: no consumption or export data{whose}")
    results, notes = compare_days(loaded, days, start, end, nem12)
    print_notes(notes)
    chosen = output or (CompareFormat.TABLE if sys.stdout.isatty() else CompareFormat.JSON)
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
