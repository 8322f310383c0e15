"""``freehours bill``: a bill from a plan and a NEM12 file, offline (no database).

The file is read and rated in full before anything is written, so a bad plan or a bad file
leaves stdout empty: the error goes to stderr and the exit status is 2.

Nothing of the file is dropped without a word. By default each NMI is billed for every local day
its data touches (NEM12 days are in AEST, so in daylight saving the last hour of a NEM day is the
next local day's first); a first or last day that the data covers only in part is billed with its
missing intervals, and named on stderr. The output follows the file's NMIs (a JSON array when it
has several and no ``--nmi`` is given); an NMI that cannot be billed (no consumption or export
channel in kWh under the plan) is named on stderr with why, and the others are billed: exit 0
while at least one bill is made, 2 when none is.
"""

from __future__ import annotations

import csv
import sys
from datetime import date
from enum import StrEnum
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from freehours.cli import app, err_console
from freehours.cli.billing import billable_or_refused, print_notes
from freehours.cli.gcpause import cyclic_gc_paused
from freehours.cli.options import Nem12Option, day_option
from freehours.domain.bill import Bill, decimal_text, kwh_text
from freehours.domain.billing import bills_of
from freehours.domain.rating import rate_meters
from freehours.domain.reads import RangeError, check_date
from freehours.meterdata.nem12 import NEM12Reader
from freehours.plans import load_plan


class BillFormat(StrEnum):
    """How ``freehours bill`` writes its bills."""

    JSON = "json"  # the contract: one object, or an array for several NMIs
    CSV = "csv"  # the lines, then SUBTOTAL, GST, TOTAL and FREE_ENERGY_VALUE rows
    TABLE = "table"  # for people: days, lines and totals


@app.command("bill")
def bill(
    *,
    plan: Annotated[
        str,
        typer.Option(
            "--plan",
            metavar="PLAN",
            help="a TOML plan file, or a built-in plan id (sso-nsw, sso-seq, sso-sa, ...)",
        ),
    ],
    nem12: Nem12Option,
    nmi: Annotated[
        str | None,
        typer.Option("--nmi", metavar="NMI", help="bill this NMI only (default: every NMI)"),
    ] = None,
    start: Annotated[
        date | None,
        day_option("--from", "first local day billed (default: the first day of its data)"),
    ] = None,
    end: Annotated[
        date | None,
        day_option("--to", "last local day billed (default: the last day of its data)"),
    ] = None,
    output: Annotated[
        BillFormat | None,
        typer.Option(
            "--format",
            metavar="FORMAT",
            help="json, csv or table (default: table on a terminal, else json)",
        ),
    ] = None,
) -> None:
    """Bill each NMI in a NEM12 file under a plan: free energy in the window up to the daily cap,
    the rest at its time-of-use band, supply, feed-in and GST."""
    first = start
    last = end
    for option, bound in (("--from", first), ("--to", last)):
        if bound is not None:
            try:
                check_date(bound, option)
            except RangeError as exc:
                raise typer.BadParameter(str(exc)) from None
    if first is not None and last is not None and first > last:
        raise typer.BadParameter(f"--from {first} is after --to {last}")
    loaded = load_plan(plan)
    with cyclic_gc_paused(collect=False):
        reader = NEM12Reader(nem12, future=True)  # simulated and reference data, warned of
        days = reader.days()
        if nmi is not None:
            days = (day for day in days if day.nmi == nmi)
        meters = rate_meters(loaded, days)
        if warning := reader.ahead_warning():
            err_console.print(f"[yellow]warning:[/] {warning}", highlight=False, soft_wrap=True)
        ratings, notes = billable_or_refused(loaded, meters, nem12, nmi)
        # The shape follows the file's NMIs, billable or not: an array when it has several.
        several = len(meters) > 1
        bills = bills_of(loaded, ratings, first, last, nem12, notes=notes)
        chosen = output or (BillFormat.TABLE if sys.stdout.isatty() else BillFormat.JSON)
        if chosen is BillFormat.JSON:
            # Compact, as json.dumps writes it (a month of 1,000 meters is megabytes): each bill
            # is json.dumps(bill.as_json()), made faster; several are a JSON array of them. Each
            # bill is let go once its text is made (holding the 1,000 bills of the reader
            # benchmark's file made the command an eighth slower).
            documents = [one.json_text() for one in bills]
            print_notes(notes)
            typer.echo(f"[{', '.join(documents)}]" if several else documents[0])
        else:
            made = list(bills)
            print_notes(notes)
            if chosen is BillFormat.CSV:
                _write_csv(made)
            else:
                _print_tables(made)


def _write_csv(bills: list[Bill]) -> None:
    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(
        ["nmi", "from", "to", "code", "description", "quantity", "unit", "unit_price", "amount"]
    )
    for one in bills:
        period = [one.nmi, one.start.isoformat(), one.end.isoformat()]
        for line in one.lines:
            fields = line.as_json()
            keys = ("code", "description", "quantity", "unit", "unit_price", "amount")
            writer.writerow([*period, *(fields[key] for key in keys)])
        for code, amount in (
            ("SUBTOTAL", one.subtotal),
            ("GST", one.gst),
            ("TOTAL", one.total),
            ("FREE_ENERGY_VALUE", one.free_energy_value),
        ):
            writer.writerow([*period, code, "", "", "", "", decimal_text(amount)])


def _print_tables(bills: list[Bill]) -> None:
    console = Console()
    for one in bills:
        console.print(
            f"[bold]NMI {one.nmi}[/], plan {one.plan_id}: {one.start} to {one.end} "
            f"({one.time_zone})",
            highlight=False,
        )
        days = Table("date", "consumption kWh", "free kWh", "over cap kWh", "export kWh", "missing")
        for day in one.days:
            days.add_row(
                day.local_date.isoformat(),
                kwh_text(day.consumption_kwh),
                kwh_text(day.free_kwh),
                kwh_text(day.over_cap_kwh),
                kwh_text(day.export_kwh),
                str(day.missing_intervals),
            )
        days.add_row(
            "total",
            kwh_text(one.consumption_kwh),
            kwh_text(one.free_kwh),
            kwh_text(one.over_cap_kwh),
            kwh_text(one.export_kwh),
            str(sum(day.missing_intervals for day in one.days)),
            style="bold",
        )
        console.print(days)
        lines = Table("line", "quantity", "unit price", "amount")
        for line in one.lines:
            fields = line.as_json()
            quantity = f"{fields['quantity']} {fields['unit']}"
            lines.add_row(fields["description"], quantity, fields["unit_price"], fields["amount"])
        for label, amount in (("Subtotal", one.subtotal), ("GST", one.gst)):
            lines.add_row(label, "", "", decimal_text(amount))
        lines.add_row("Total", "", "", decimal_text(one.total), style="bold")
        console.print(lines)
        console.print(
            f"The free energy would have cost {decimal_text(one.free_energy_value)}.\n",
            highlight=False,
        )
