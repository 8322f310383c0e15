"""``freehours customers``: ``put`` creates or updates a customer, its plan, region and billing
cycle, by the rules of ``PUT /v1/customers/{nmi}`` (a built-in plan is stored the first time a
customer is put on it, and the days whose reads came before the customer are scheduled to
settle); ``list`` shows them."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from freehours.cli import app
from freehours.cli.dbguard import needs_database
from freehours.cli.listing import FormatOption, ListFormat, chosen, counted, print_json, print_table
from freehours.cli.logs import quiet_logging
from freehours.cli.tables import Column

if TYPE_CHECKING:
    from freehours.domain.contacts import Contact

customers_app = typer.Typer(
    name="customers",
    help="Customers: the plan an NMI is on, its region, billing cycle and contact;"
    " put, import, list, forget, revoke-page.",
    no_args_is_help=True,
)
app.add_typer(customers_app)


class RegionChoice(StrEnum):
    NSW = "NSW"
    SEQ = "SEQ"
    SA = "SA"
    VIC = "VIC"


class CycleChoice(StrEnum):
    MONTHLY = "monthly"
    QUARTERLY = "quarterly"


#: Each cycle field, the option that sets it.
_OPTIONS = {
    "frequency": "--cycle",
    "anchor_day": "--anchor-day",
    "payment_term_days": "--payment-term-days",
}


@customers_app.command("put")
@needs_database
def put(
    *,
    nmi: Annotated[str, typer.Argument(metavar="NMI", help="the customer's NMI (10 characters)")],
    plan: Annotated[
        str,
        typer.Option(
            "--plan",
            metavar="ID",
            help="a stored plan's id, or a built-in one (sso-nsw, sso-seq, sso-sa, mps-vic)",
        ),
    ],
    region: Annotated[
        RegionChoice, typer.Option("--region", metavar="REGION", help="NSW, SEQ, SA or VIC")
    ],
    cycle: Annotated[
        CycleChoice | None,
        typer.Option(
            "--cycle",
            metavar="CYCLE",
            help="monthly or quarterly (default: as stored; monthly for a new customer)",
            show_default=False,
        ),
    ] = None,
    anchor_day: Annotated[
        int | None,
        typer.Option(
            "--anchor-day",
            metavar="N",
            help="the day of the month a billing period starts, 1 to 28 (default: as stored; 1)",
            show_default=False,
        ),
    ] = None,
    payment_term_days: Annotated[
        int | None,
        typer.Option(
            "--payment-term-days",
            metavar="N",
            help="days from issue to due date, 13 to 90 (default: as stored; 21)",
            show_default=False,
        ),
    ] = None,
    name: Annotated[
        str | None,
        typer.Option(
            "--name",
            metavar="NAME",
            help="the customer's name, as documents show it: with --supply-address, sets the"
            " contact (left out: the contact stored is kept)",
        ),
    ] = None,
    supply_address: Annotated[
        list[str] | None,
        typer.Option(
            "--supply-address", metavar="LINE", help="a line of the supply address; repeatable"
        ),
    ] = None,
    billing_address: Annotated[
        list[str] | None,
        typer.Option(
            "--billing-address",
            metavar="LINE",
            help="a line of the postal address, when not the supply address; repeatable",
        ),
    ] = None,
    email: Annotated[
        str | None,
        typer.Option("--email", metavar="ADDRESS", help="where documents are emailed"),
    ] = None,
    delivery: Annotated[
        str | None,
        typer.Option(
            "--delivery",
            metavar="HOW",
            help="email or post (default: email with --email, else post)",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Create or update a customer: its plan, region, billing cycle and contact, in one
    transaction.

    A built-in plan needs no 'plans put' first: it is stored the first time a customer is put on
    it. Cycle options not given keep what is stored. The days of reads that came before the
    customer are scheduled to settle, however old. Exit status 2 for a bad NMI, an unknown plan,
    a plan of another region or a cycle that cannot be, the message naming the option.
    """
    from freehours.domain import reads as rules
    from freehours.domain.invoicing import BillingCycle, CycleError, Frequency
    from freehours.domain.time import Region
    from freehours.errors import InputError
    from freehours.operations.runtime import Runtime
    from freehours.settings import get_settings
    from freehours.store.catalog import RegionMismatch, UnknownPlan

    try:
        rules.check_nmi(nmi, "NMI")
    except rules.RangeError as exc:
        raise InputError(str(exc)) from None
    changes: dict[str, object] = {}
    if cycle is not None:
        changes["frequency"] = Frequency(cycle.value)
    if anchor_day is not None:
        changes["anchor_day"] = anchor_day
    if payment_term_days is not None:
        changes["payment_term_days"] = payment_term_days
    try:
        BillingCycle(**changes)  # type: ignore[arg-type]
    except CycleError as exc:
        raise InputError(_named(str(exc))) from None
    given = _contact(name, supply_address, billing_address, email, delivery)
    settings = get_settings()
    quiet_logging(settings)
    runtime = Runtime.open(settings)
    try:
        billing = runtime.put_customer(
            nmi, plan_id=plan, region=Region(region.value), cycle=changes, contact=given
        )
    except UnknownPlan as exc:
        raise InputError(f"--plan: {exc}") from None
    except RegionMismatch as exc:
        raise InputError(f"--region: {exc}") from None
    finally:
        runtime.close()
    contact_note = "" if given is None else f"; its contact set, delivery by {given.delivery.value}"
    typer.echo(
        f"customer {nmi}: plan {plan!r}, {region.value}, billed {billing.frequency.value} from day"
        f" {billing.anchor_day}, due {billing.payment_term_days} days after issue{contact_note}"
    )


def _contact(
    name: str | None,
    supply: list[str] | None,
    billing: list[str] | None,
    email: str | None,
    delivery: str | None,
) -> Contact | None:
    """The contact the options give, checked, naming the option that is wrong; None where none
    of them is given."""
    from freehours.domain.contacts import contact
    from freehours.domain.reads import RangeError
    from freehours.errors import InputError

    if name is None and not supply and not billing and email is None and delivery is None:
        return None
    if name is None:
        raise InputError("--name: is required with the contact's other options")
    try:
        return contact(name, supply or [], billing or [], email, delivery)
    except RangeError as exc:
        option = "--" + exc.field.split("[")[0].replace("_", "-")
        raise InputError(f"{option}: {exc.reason}") from None


def _named(message: str) -> str:
    """A ``CycleError``'s message, its field named as the option that sets it."""
    field, _, rest = message.partition(":")
    return f"{_OPTIONS.get(field, field)}:{rest}"


#: Customers read per page by ``list``.
_PAGE = 1000


@customers_app.command("list")
@needs_database
def list_(
    plan: Annotated[
        str | None, typer.Option("--plan", metavar="ID", help="only the customers on this plan")
    ] = None,
    region: Annotated[
        RegionChoice | None,
        typer.Option("--region", metavar="REGION", help="only the customers in this region"),
    ] = None,
    output: FormatOption = None,
) -> None:
    """The customers, by NMI: plan, region and billing cycle (a table on a terminal, JSON when
    piped: each item as PUT /v1/customers/{nmi} answers)."""
    from freehours.domain.time import Region
    from freehours.settings import get_settings
    from freehours.store.database import Store

    found = []
    with Store.open(get_settings().database_url) as store, store.read() as unit:
        after = None
        while page := unit.invoices.accounts_after(
            after, _PAGE, plan_id=plan, region=None if region is None else Region(region.value)
        ):
            found += page
            after = page[-1].nmi
    if chosen(output) is ListFormat.JSON:
        print_json(
            [
                {
                    "nmi": account.nmi,
                    "plan_id": account.plan_id,
                    "region": account.region.value,
                    "billing_cycle": account.cycle.frequency.value,
                    "anchor_day": account.cycle.anchor_day,
                    "payment_term_days": account.cycle.payment_term_days,
                }
                for account in found
            ]
        )
        return
    columns = [
        Column("NMI", no_wrap=True),
        Column("plan", fold=True),
        Column("region", no_wrap=True),
        Column("billed", no_wrap=True),
        Column("from day", "right", no_wrap=True, drop=2),
        Column("due after", "right", no_wrap=True, drop=1),
    ]
    rows = [
        [
            account.nmi,
            account.plan_id,
            account.region.value,
            account.cycle.frequency.value,
            str(account.cycle.anchor_day),
            f"{account.cycle.payment_term_days} days",
        ]
        for account in found
    ]
    print_table("Customers", columns, rows, counted=counted(len(rows), "customer"))


@customers_app.command("import")
@needs_database
def import_(
    file: Annotated[
        Path,
        typer.Argument(
            metavar="FILE",
            help="a CSV file of customers, a header line naming its columns (docs/cli.md,"
            " Customer files)",
        ),
    ],
) -> None:
    """Create or update every customer in a CSV file, all in one transaction: plan, region,
    billing cycle and contact. The whole file is checked first: a bad row stores nothing, and
    the message names its line and column (exit 2)."""
    import time

    from freehours.operations.customer_csv import read_customers
    from freehours.operations.runtime import Runtime
    from freehours.settings import get_settings

    started = time.perf_counter()
    records = read_customers(file)
    settings = get_settings()
    quiet_logging(settings)
    runtime = Runtime.open(settings)
    try:
        runtime.import_customers(records)  # UnknownPlan, RegionMismatch: input errors, named
    finally:
        runtime.close()
    contacts = sum(1 for record in records if record.contact is not None)
    typer.echo(
        f"{file}: {counted(len(records), 'customer')} stored ({contacts:,} with a contact) in"
        f" {time.perf_counter() - started:.1f} s"
    )


@customers_app.command("forget")
@needs_database
def forget(
    nmi: Annotated[str, typer.Argument(metavar="NMI", help="the customer's NMI")],
) -> None:
    """Erase a customer's contact (name, addresses, email address): for a customer who has left.
    The customer, its meter data and the documents already issued stay."""
    from freehours.settings import get_settings
    from freehours.store.database import Store

    with Store.open(get_settings().database_url) as store, store.write() as unit:
        erased = unit.catalog.forget_contact(nmi)
    typer.echo(f"customer {nmi}: contact erased" if erased else f"customer {nmi}: no contact")


@customers_app.command("revoke-page")
@needs_database
def revoke_page(
    nmi: Annotated[str, typer.Argument(metavar="NMI", help="the customer's NMI")],
) -> None:
    """Stop every link to the customer's own page from opening (a lost phone, a forwarded
    email): their next email carries a link to a new page. Audited (page.revoke, by "command
    line"), as the API's DELETE /v1/customers/{nmi}/page. Exit status 2 for an unknown NMI."""
    from freehours.operations.actions import Actions, Operator
    from freehours.operations.runtime import Runtime
    from freehours.settings import get_settings

    settings = get_settings()
    quiet_logging(settings)
    runtime = Runtime.open(settings)
    try:
        actions = Actions(runtime.store, runtime.clock, runtime.settlements)
        outcome = actions.revoke_page(Operator("cli", "command line"), nmi)
    finally:
        runtime.close()
    typer.echo(outcome.message)
