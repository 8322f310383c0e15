"""``freehours plans``: check a plan file, store one in the database, list the built-in plans."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.table import Column, Table

from freehours.cli import app, needs_database
from freehours.domain.plan import Plan
from freehours.plans import builtin_plans, load_document, load_plan
from freehours.plans.document import parse_plan

plans_app = typer.Typer(
    name="plans",
    help="Tariff plans: check a plan file (TOML), store a plan, list the built-in plans.",
    no_args_is_help=True,
)
app.add_typer(plans_app)


def _window(plan: Plan) -> str:
    if plan.free_window is None:
        return "none"
    return f"{plan.free_window.label} up to {plan.free_window.cap_kwh} kWh a day"


@plans_app.command("list")
def list_() -> None:
    """The built-in plans: id, region, clock, free window and cap (their prices are examples)."""
    table = Table(
        Column("id", no_wrap=True),
        Column("region"),
        Column("time zone", no_wrap=True),
        Column("free window"),
        Column("description"),
    )
    for plan in builtin_plans():
        table.add_row(plan.id, plan.region, plan.zone_name, _window(plan), plan.description)
    Console().print(table)


@plans_app.command("validate")
def validate(
    plan: Annotated[
        str,
        typer.Argument(
            metavar="PLAN", help="a TOML plan file, or a built-in plan id (sso-nsw, ...)"
        ),
    ],
) -> None:
    """Check a plan. Prints what it holds, or its problems naming the file and keys (exit 2)."""
    loaded = load_plan(plan)
    bands = ", ".join(dict.fromkeys(f"{band.type} {band.unit_price}" for band in loaded.bands))
    feed_in = "none" if loaded.feed_in is None else f"{loaded.feed_in.unit_price}/kWh"
    typer.echo(
        f"{plan}: valid plan {loaded.id!r}: {loaded.region} on {loaded.zone_name}; "
        f"free window {_window(loaded)}; bands {bands}; "
        f"supply {loaded.daily_supply_charge}/day; feed-in {feed_in}; GST {loaded.gst_rate}"
    )


@plans_app.command("put")
@needs_database
def put(
    plan: Annotated[
        str,
        typer.Argument(
            metavar="PLAN", help="a TOML plan file, or a built-in plan id (sso-nsw, ...)"
        ),
    ],
) -> None:
    """Store a plan in the database under its id, as PUT /v1/plans/{id} does (exit 2: problems)."""
    # The database, for this command only: validate and list start without it.
    from freehours.clock import SystemClock
    from freehours.settings import get_settings
    from freehours.store.database import Store

    document = load_document(plan)
    checked = parse_plan(document, source=plan)
    with Store.open(get_settings().database_url) as store, store.write() as unit:
        unit.catalog.put_plan(checked.id, document, updated_at=SystemClock().now())
    typer.echo(f"{plan}: stored plan {checked.id!r}")
