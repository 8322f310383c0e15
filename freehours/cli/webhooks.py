"""``freehours webhooks``: endpoints, their deliveries and attempts, replays (docs/webhooks.md)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Annotated

import typer
from rich.console import Console

from freehours.cli import app
from freehours.cli.dbguard import needs_database
from freehours.cli.listing import FormatOption, ListFormat, chosen, counted, print_json, print_table
from freehours.cli.logs import quiet_logging
from freehours.cli.tables import Column
from freehours.clock import SystemClock
from freehours.domain.webhooks import EVENT_TYPES, DeliveryStatus, InvalidEndpoint
from freehours.errors import InputError
from freehours.operations.runtime import configured_webhooks
from freehours.settings import get_settings
from freehours.store.database import Store
from freehours.webhooks.service import NotFound, TooManyEndpoints, Webhooks
from freehours.webhooks.views import delivery_view, endpoint_view

webhooks_app = typer.Typer(
    name="webhooks",
    help="Webhook endpoints: register, list, rotate, enable; deliveries and their attempts,"
    " replayed with the same webhook-id.",
    no_args_is_help=True,
)
app.add_typer(webhooks_app)


def _open() -> Store:
    """The database, the command's log lines on stderr (warnings only, unless
    FREEHOURS_LOG_LEVEL says otherwise): stdout is its answer."""
    settings = get_settings()
    quiet_logging(settings)
    return Store.open(settings.database_url)


def _webhooks(store: Store) -> Webhooks:
    """The webhooks over ``store`` as configured (the destination policy among the settings)."""
    return configured_webhooks(store, get_settings(), SystemClock())


@contextmanager
def _found(what: str) -> Iterator[None]:
    """The block, a ``NotFound`` in it told as "no webhook ``what``" (exit 2)."""
    try:
        yield
    except NotFound:
        raise InputError(f"no webhook {what}") from None


def _stamp(moment: datetime | None) -> str:
    """A time as a table shows it: UTC to the second (the JSON has it to the microsecond)."""
    return "" if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


@webhooks_app.command("add")
@needs_database
def add(
    url: Annotated[str, typer.Argument(metavar="URL", help="where events are POSTed")],
    event: Annotated[
        list[str],
        typer.Option(
            "--event", metavar="TYPE", help=f"one of {', '.join(EVENT_TYPES)}; repeatable"
        ),
    ],
    description: Annotated[
        str, typer.Option("--description", metavar="TEXT", help="what the endpoint is for")
    ] = "",
) -> None:
    """Register an endpoint; print its id, then its signing secret (shown this once)."""
    with _open() as store:
        try:
            made = _webhooks(store).register(url, event, description)
        except (InvalidEndpoint, TooManyEndpoints) as exc:
            raise InputError(str(exc)) from None
    typer.echo(made.endpoint.id)
    typer.echo(made.secret)


@webhooks_app.command("list")
@needs_database
def list_(output: FormatOption = None) -> None:
    """Every endpoint: id, URL, events, enabled (or why not), failures (a table on a terminal,
    JSON when piped: GET /v1/webhook-endpoints's items)."""
    with _open() as store, store.read() as unit:
        endpoints = unit.webhooks.endpoints()
    if chosen(output) is ListFormat.JSON:
        print_json([endpoint_view(e) for e in endpoints])
        return
    columns = [
        Column("id", no_wrap=True),
        Column("url", fold=True),
        Column("enabled", fold=True),
        Column("events", fold=True, drop=3),
        Column("failing since", no_wrap=True, drop=1),
        Column("failed in a row", "right", no_wrap=True, drop=2),
    ]
    rows = [
        [
            e.id,
            e.url,
            "yes" if e.enabled else f"no: {e.disabled_reason}",
            " ".join(e.events),
            _stamp(e.failing_since),
            str(e.final_failures),
        ]
        for e in endpoints
    ]
    print_table("Webhook endpoints", columns, rows, counted=counted(len(rows), "endpoint"))


@webhooks_app.command("deliveries")
@needs_database
def deliveries(
    endpoint_id: Annotated[str, typer.Argument(metavar="ENDPOINT_ID")],
    status: Annotated[
        DeliveryStatus | None,
        typer.Option("--status", metavar="STATUS", help="only those pending, succeeded or failed"),
    ] = None,
    limit: Annotated[
        int, typer.Option("--limit", metavar="N", min=1, max=1000, help="deliveries shown")
    ] = 20,
    output: FormatOption = None,
) -> None:
    """The endpoint's deliveries, newest first, each with its attempts (a table on a terminal,
    JSON when piped: GET /v1/webhook-endpoints/{endpoint_id}/deliveries's items)."""
    with _open() as store, store.read() as unit:
        if unit.webhooks.endpoint(endpoint_id) is None:
            raise InputError(f"no webhook endpoint {endpoint_id!r}")
        page = unit.webhooks.deliveries(endpoint_id=endpoint_id, status=status, limit=limit)
        attempts = unit.webhooks.attempts([d.id for d in page])
    if chosen(output) is ListFormat.JSON:
        print_json([delivery_view(d, attempts[d.id]) for d in page])
        return
    columns = [
        Column("id", "right", no_wrap=True),
        Column("type", no_wrap=True, drop=3),
        Column("status", no_wrap=True),
        Column("attempts", fold=True),
        Column("last answer", fold=True, drop=2),
        Column("webhook-id", no_wrap=True, drop=1),
    ]
    rows = [
        [
            str(d.id),
            d.event_type,
            d.status.value,
            "; ".join(
                f"{_stamp(a.at)} {a.status_code or a.outcome} {a.latency_ms} ms"
                for a in attempts[d.id]
            ),
            d.last_error or ("" if d.last_status_code is None else str(d.last_status_code)),
            d.event_id,
        ]
        for d in page
    ]
    title = f"Deliveries to {endpoint_id}, newest first"
    print_table(title, columns, rows, counted=counted(len(rows), "delivery", "deliveries"))


@webhooks_app.command("replay")
@needs_database
def replay(
    delivery_id: Annotated[int, typer.Argument(metavar="DELIVERY_ID", min=1)],
) -> None:
    """Send a delivery again, with the same webhook-id (the workers send it)."""
    with _open() as store, _found(f"delivery {delivery_id}"):
        delivery = _webhooks(store).replay(delivery_id)
    Console(stderr=True).print(f"delivery {delivery.id} ({delivery.event_id}) pending again")


@webhooks_app.command("enable")
@needs_database
def enable(endpoint_id: Annotated[str, typer.Argument(metavar="ENDPOINT_ID")]) -> None:
    """Enable an endpoint again (its run of failures forgotten)."""
    _set_enabled(endpoint_id, enabled=True)


@webhooks_app.command("disable")
@needs_database
def disable(endpoint_id: Annotated[str, typer.Argument(metavar="ENDPOINT_ID")]) -> None:
    """Disable an endpoint: nothing more is sent to it until it is enabled."""
    _set_enabled(endpoint_id, enabled=False)


def _set_enabled(endpoint_id: str, *, enabled: bool) -> None:
    with _open() as store, _found(f"endpoint {endpoint_id!r}"):
        _webhooks(store).update(endpoint_id, enabled=enabled)
    Console(stderr=True).print(f"{'enabled' if enabled else 'disabled'} {endpoint_id}")


@webhooks_app.command("rotate-secret")
@needs_database
def rotate_secret(endpoint_id: Annotated[str, typer.Argument(metavar="ENDPOINT_ID")]) -> None:
    """A new signing secret, printed once; the old one still signs for 24 hours."""
    with _open() as store, _found(f"endpoint {endpoint_id!r}"):
        made = _webhooks(store).rotate(endpoint_id)
    typer.echo(made.secret)
