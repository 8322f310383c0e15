"""``freehours offers``: the retailer's offers, imported from the CDR plans it publishes or from
plan files, and listed (docs/cli.md, Offers)."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Annotated

import typer

from freehours.cli import app
from freehours.cli.dbguard import needs_database
from freehours.cli.listing import FormatOption, ListFormat, chosen, counted, print_json, print_table
from freehours.cli.options import day_option
from freehours.cli.tables import Column

offers_app = typer.Typer(
    name="offers",
    help="The retailer's offers: import its published CDR plans or plan files, list them.",
    no_args_is_help=True,
)
app.add_typer(offers_app)


@offers_app.command("import")
@needs_database
def import_(
    paths: Annotated[
        list[Path],
        typer.Argument(
            metavar="FILE...",
            help="CDR plans (.json) and plan files (.toml), or folders of them",
        ),
    ],
    effective_from: Annotated[
        date | None,
        day_option("--from", "the day the plan files' offers apply from (default: open)"),
    ] = None,
    region: Annotated[
        str | None,
        typer.Option(
            "--region", metavar="REGION", help="a CDR plan's region where its geography names none"
        ),
    ] = None,
) -> None:
    """Store the offers of the files given, all in one transaction: a new version of each offer
    whose plan, name or terms changed. Every file is checked first: a bad one stores nothing,
    the message naming it and the JSON path or key (exit 2)."""
    from freehours.clock import SystemClock
    from freehours.domain.time import Region
    from freehours.errors import InputError
    from freehours.operations.offer_files import read_offers
    from freehours.settings import get_settings
    from freehours.store.database import Store

    if region is not None and region not in Region.__members__:
        raise InputError(f"--region: {region!r} is NSW, SEQ, SA or VIC")
    new = read_offers(
        paths, effective_from=effective_from, region=None if region is None else Region(region)
    )
    with Store.open(get_settings().database_url) as store, store.write() as unit:
        before = {
            o.offer_id: o.version
            for o in unit.catalog.current_offers(ids=[o.offer_id for o in new])
        }
        stored = unit.catalog.put_offers(new, at=SystemClock().now())
    for offer in stored:
        was = before.get(offer.offer_id)
        what = "new" if was is None else "unchanged" if was == offer.version else "changed"
        typer.echo(f"{offer.offer_id}: version {offer.version} ({what}), {offer.name}")


@offers_app.command("list")
@needs_database
def list_(
    region: Annotated[
        str | None, typer.Option("--region", metavar="REGION", help="only this region's offers")
    ] = None,
    output: FormatOption = None,
) -> None:
    """The offers, each its latest version: id, version, region, where and when it applies (a
    table on a terminal, JSON when piped: GET /v1/offers's items)."""
    from freehours.domain.time import Region
    from freehours.errors import InputError
    from freehours.settings import get_settings
    from freehours.store.database import Store

    if region is not None and region not in Region.__members__:
        raise InputError(f"--region: {region!r} is NSW, SEQ, SA or VIC")
    with Store.open(get_settings().database_url) as store, store.read() as unit:
        found = unit.catalog.current_offers(region=None if region is None else Region(region))
    if chosen(output) is ListFormat.JSON:
        print_json([offer.as_json() for offer in found])
        return
    columns = [
        Column("offer", no_wrap=True),
        Column("v", "right", no_wrap=True),
        Column("region", no_wrap=True),
        Column("name", fold=True),
        Column("from", no_wrap=True, drop=2),
        Column("to", no_wrap=True, drop=1),
        Column("networks", fold=True, drop=3),
    ]
    rows = [
        [
            offer.offer_id,
            str(offer.version),
            offer.terms.region.value,
            offer.name + (" (controlled load)" if offer.terms.controlled_load else ""),
            "" if offer.terms.effective_from is None else offer.terms.effective_from.isoformat(),
            "" if offer.terms.effective_to is None else offer.terms.effective_to.isoformat(),
            ", ".join(offer.terms.distributors) or "all",
        ]
        for offer in found
    ]
    print_table("Offers", columns, rows, counted=counted(len(rows), "offer"))
