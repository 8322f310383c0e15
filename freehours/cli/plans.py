"""``freehours plans``: check a plan file, store one in the database, list the built-in plans."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import typer

from freehours.cli import app
from freehours.cli.dbguard import needs_database
from freehours.cli.listing import FormatOption, ListFormat, chosen, counted, print_json, print_table
from freehours.cli.tables import Column
from freehours.domain.bill import kwh_text
from freehours.domain.plan import Band, Plan
from freehours.plans import builtin_plans, load_document
from freehours.plans.document import parse_plan

#: A plan to check or store: a plan file, or a built-in plan by id.
PlanArgument = Annotated[
    str,
    typer.Argument(metavar="PLAN", help="a TOML plan file, or a built-in plan id (sso-nsw, ...)"),
]

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
def list_(output: FormatOption = None) -> None:
    """The built-in plans: id, region, clock, free window and cap (their prices are examples;
    a table on a terminal, JSON when piped)."""
    plans = builtin_plans()
    if chosen(output) is ListFormat.JSON:
        print_json(
            [
                {
                    "id": plan.id,
                    "region": plan.region,
                    "time_zone": plan.zone_name,
                    "free_window": None if plan.free_window is None else plan.free_window.label,
                    "cap_kwh": None
                    if plan.free_window is None
                    else kwh_text(plan.free_window.cap_kwh),
                    "description": plan.description,
                }
                for plan in plans
            ]
        )
        return
    columns = [
        Column("id", no_wrap=True),
        Column("region", no_wrap=True),
        Column("time zone", no_wrap=True, drop=1),
        Column("free window", fold=True),
        Column("description", fold=True),
    ]
    rows = [
        [plan.id, plan.region, plan.zone_name, _window(plan), plan.description] for plan in plans
    ]
    print_table("Built-in plans", columns, rows, counted=counted(len(rows), "plan"))


@plans_app.command("validate")
def validate(
    plan: PlanArgument,
) -> None:
    """Check a plan. Prints what it holds, or its problems naming the file and keys (exit 2)."""
    document = load_document(plan)
    loaded = parse_plan(document, source=plan)
    by_type: dict[str, list[Band]] = {}
    for band in loaded.bands:
        by_type.setdefault(band.type, []).append(band)
    bands = ", ".join(_band(of_type) for of_type in by_type.values())
    feed_in = "none" if loaded.feed_in is None else f"{loaded.feed_in.unit_price}/kWh"
    load = loaded.controlled_load
    controlled = (
        ""
        if load is None
        else (
            f"; controlled load on {', '.join(load.suffixes)} at {load.unit_price}/kWh"
            + ("" if load.daily_supply_charge is None else f" + {load.daily_supply_charge}/day")
        )
    )
    typer.echo(
        f"{plan}: valid plan {loaded.id!r}: {loaded.region} on {loaded.zone_name}; "
        f"free window {_window(loaded)}; bands {bands}; "
        f"supply {loaded.daily_supply_charge}/day; feed-in {feed_in}{controlled}; "
        f"GST {loaded.gst_rate}"
    )
    for line in document.get("information", ()):
        typer.echo(f"  information: {line}")


def _band(bands: list[Band]) -> str:
    """A band type as ``plans validate`` shows it: price, steps, and its seasons where it has
    them."""
    band = bands[0]
    text = f"{band.type} {band.unit_price}"
    if band.steps is not None:
        steps = ", ".join(f"{s.unit_price} from {s.after_kwh} kWh" for s in band.steps.steps)
        text += f" ({steps} per {band.steps.period})"
    periods = [period for each in bands for period in each.periods]
    if all(period.dates is not None for period in periods):
        seasons = sorted({period.dates for period in periods if period.dates is not None})
        text += " in " + ", ".join(
            f"{a // 100:02d}-{a % 100:02d} to {b // 100:02d}-{b % 100:02d}" for a, b in seasons
        )
    return text


@plans_app.command("put")
@needs_database
def put(
    plan: PlanArgument,
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


#: The most bytes ``import-cdr`` reads: a real CDR plan is a few kilobytes.
CDR_MAX_BYTES = 1 << 20


@plans_app.command("import-cdr")
def import_cdr(
    file: Annotated[
        str, typer.Argument(metavar="FILE", help="a CDR EnergyPlanDetailV3 (JSON), or - for stdin")
    ],
    region: Annotated[
        str | None,
        typer.Option(
            metavar="REGION", help="NSW, SEQ, SA or VIC, where the plan's geography names none"
        ),
    ] = None,
    plan_id: Annotated[
        str | None,
        typer.Option("--id", metavar="ID", help="the plan's id (default: its CDR planId)"),
    ] = None,
    controlled_load: Annotated[
        list[str] | None,
        typer.Option(
            metavar="SUFFIX", help="the channel suffix of its controlled load (repeat for several)"
        ),
    ] = None,
) -> None:
    """Turn a CDR energy plan into a plan file (TOML on stdout), or name what cannot be rated
    by its JSON path (exit 2)."""
    import sys

    from freehours.domain.time import Region
    from freehours.errors import PlanError
    from freehours.plans.cdr import plan_document_from_cdr, read_json
    from freehours.plans.writer import plan_toml

    if region is not None and region not in Region.__members__:
        raise PlanError(f"--region {region!r}: expected NSW, SEQ, SA or VIC", source=file)
    data = _read_bounded(file)
    document = plan_document_from_cdr(
        read_json(data, source=file, limit=CDR_MAX_BYTES),
        source=file,
        plan_id=plan_id,
        region=None if region is None else Region(region),
        controlled_load_suffixes=tuple(controlled_load or ("E2",)),
    )
    sys.stdout.write(plan_toml(document))


def _read_bounded(file: str) -> bytes:
    """A file's bytes (stdin for ``-``), refused past ``CDR_MAX_BYTES``."""
    import sys

    from freehours.errors import PlanError

    try:
        if file == "-":
            data = sys.stdin.buffer.read(CDR_MAX_BYTES + 1)
        else:
            with open(file, "rb") as stream:
                data = stream.read(CDR_MAX_BYTES + 1)
    except OSError as exc:
        raise PlanError(f"cannot read it: {exc.strerror}", source=file) from None
    if len(data) > CDR_MAX_BYTES:
        raise PlanError(f"over {CDR_MAX_BYTES} bytes: not a CDR plan", source=file)
    return data


@plans_app.command("export-cdr")
def export_cdr(
    plan: Annotated[
        str,
        typer.Argument(
            metavar="ID",
            help="a plan stored in the database, a built-in plan id or a TOML plan file",
        ),
    ],
    brand: Annotated[str, typer.Option(metavar="ID", help="the CDR brand id")] = "freehours",
    brand_name: Annotated[
        str, typer.Option(metavar="NAME", help="the CDR brand's display name")
    ] = "freehours",
) -> None:
    """Write a plan as a CDR EnergyPlanDetailV3 (JSON on stdout), valid against CDS 1.36.0."""
    import json
    import sys
    from datetime import UTC, datetime
    from pathlib import Path

    from freehours.plans import BUILTIN_IDS
    from freehours.plans.cdr import cdr_from_plan

    updated = datetime(2026, 7, 1, tzinfo=UTC)  # the built-in plans' prices
    if plan in BUILTIN_IDS or Path(plan).exists():
        document = load_document(plan)
        if Path(plan).exists():
            updated = datetime.fromtimestamp(Path(plan).stat().st_mtime, UTC)
    else:
        document, updated = _stored_document(plan)
    checked = parse_plan(document, source=plan)
    cdr = cdr_from_plan(
        checked,
        last_updated=updated,
        brand=brand,
        brand_name=brand_name,
        information=document.get("information", ()),
    )
    sys.stdout.write(json.dumps(cdr, indent=2, ensure_ascii=False) + "\n")


def _stored_document(plan_id: str) -> tuple[dict[str, Any], datetime]:
    """A plan stored in the database, and when it was put; a ``PlanError`` naming where it was
    looked for (and the built-in id it is close to) where it is nowhere, a database or none."""
    from difflib import get_close_matches

    from freehours.cli.dbguard import require_database
    from freehours.errors import ConfigurationError, PlanError
    from freehours.plans import BUILTIN_IDS
    from freehours.settings import get_settings
    from freehours.store.database import Store

    close = get_close_matches(plan_id, BUILTIN_IDS, n=1)
    looked = f"not a plan file, not a built-in plan ({', '.join(BUILTIN_IDS)})"
    hint = f"; did you mean {close[0]}?" if close else ""
    try:
        require_database()
    except ConfigurationError:
        raise PlanError(
            f"no such plan ({looked}, and no database to look in: FREEHOURS_DATABASE_URL is not"
            f" set and ./freehours.db does not exist){hint}",
            source=plan_id,
        ) from None
    with Store.open(get_settings().database_url) as store, store.read() as unit:
        stored = unit.catalog.get_plan(plan_id)
    if stored is None:
        raise PlanError(
            f"no such plan ({looked}, nor stored in the database){hint}", source=plan_id
        )
    return stored.document, stored.updated_at
