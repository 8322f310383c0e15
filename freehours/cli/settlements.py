"""``freehours settlements schedule``: the days an operator names scheduled to settle, as
``POST /v1/settlements/schedule`` does (``Ingestion.schedule_unsettled``)."""

from __future__ import annotations

from datetime import date
from typing import Annotated

import typer

from freehours.cli import app
from freehours.cli.dbguard import needs_database
from freehours.cli.logs import quiet_logging
from freehours.cli.options import day_option

settlements_app = typer.Typer(
    name="settlements",
    help="Settlements: schedule the days with reads that no job settles.",
    no_args_is_help=True,
)
app.add_typer(settlements_app)


@settlements_app.command("schedule")
@needs_database
def schedule(
    *,
    first: Annotated[
        date,
        day_option("--from", "the first local day"),
    ],
    last: Annotated[
        date,
        day_option("--to", "the last local day: a year at most from --from"),
    ],
    nmi: Annotated[
        str | None,
        typer.Option(
            "--nmi",
            metavar="NMI",
            help="one customer's NMI (default: every customer)",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Schedule the settlement of the days with reads and no final quota, from --from to --to.

    Every day with meter data and no COMPLETED or ABORTED quota, of one customer (--nmi) or of
    every customer, gets its settlement job, due at once when its window has passed, which a
    worker runs (settled with what there is past its data deadline). Prints how many days were
    scheduled; run again, it schedules nothing twice. Exit status 2 for a date out of range,
    --to before --from or over a year after it, or an NMI without a customer, the message naming
    the option.
    """
    from freehours.domain import reads as rules
    from freehours.domain.time import NEM_TIME
    from freehours.errors import InputError
    from freehours.operations.runtime import Runtime
    from freehours.settings import get_settings
    from freehours.store.catalog import UnknownCustomer

    if nmi is not None:
        try:
            rules.check_nmi(nmi, "--nmi")
        except rules.RangeError as exc:
            raise InputError(str(exc)) from None
    settings = get_settings()
    quiet_logging(settings)
    runtime = Runtime.open(settings)
    try:
        today = runtime.clock.now().astimezone(NEM_TIME).date()
        try:
            rules.check_schedule_range(first, last, today, ("--from", "--to"))
        except rules.RangeError as exc:
            raise InputError(str(exc)) from None
        try:
            scheduled = runtime.ingestion.schedule_unsettled(nmi, first, last)
        except UnknownCustomer as exc:
            raise InputError(f"--{exc}") from None
    finally:
        runtime.close()
    whose = f"customer {nmi}" if nmi is not None else "every customer"
    typer.echo(f"{scheduled} days scheduled to settle, {first} to {last}, of {whose}")
