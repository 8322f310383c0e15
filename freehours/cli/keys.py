"""``freehours keys``: API keys, made once and shown once."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer
from rich.console import Console

from freehours.api.keys import create_key, list_keys, parse_scopes, revoke_key
from freehours.cli import app
from freehours.cli.dbguard import needs_database
from freehours.cli.listing import FormatOption, ListFormat, chosen, counted, print_json, print_table
from freehours.cli.tables import Column
from freehours.clock import SystemClock
from freehours.domain.webhooks import iso
from freehours.errors import InputError
from freehours.settings import get_settings
from freehours.store.database import Store

keys_app = typer.Typer(
    name="keys",
    help="API keys for the HTTP API (scopes: ingest, settle, read, admin).",
    no_args_is_help=True,
)
app.add_typer(keys_app)


@keys_app.command("create")
@needs_database
def create(
    scope: Annotated[
        list[str],
        typer.Option(
            "--scope",
            metavar="SCOPE",
            help="ingest, settle, read or admin (implies all); repeatable",
        ),
    ],
    name: Annotated[
        str, typer.Option("--name", metavar="NAME", help="who or what the key is for")
    ] = "",
) -> None:
    """Make a key and print it alone on stdout, once: only its hash is stored."""
    scopes = parse_scopes(scope)
    with Store.open(get_settings().database_url) as store, store.write() as unit:
        _, secret = create_key(unit.keys, scopes, name or "unnamed", SystemClock().now())
    typer.echo(secret)


@keys_app.command("list")
@needs_database
def list_(output: FormatOption = None) -> None:
    """Every key: id, name, scopes, created, revoked (a table on a terminal, JSON when piped).
    Never a secret: only its hash is stored."""
    with Store.open(get_settings().database_url) as store, store.read() as unit:
        keys = list_keys(unit.keys)
    if chosen(output) is ListFormat.JSON:
        print_json(
            [
                {
                    "id": key.id,
                    "name": key.name,
                    "scopes": sorted(scope.value for scope in key.scopes),
                    "created_at": iso(key.created_at),
                    "revoked_at": None if key.revoked_at is None else iso(key.revoked_at),
                }
                for key in keys
            ]
        )
        return
    columns = [
        Column("id", no_wrap=True),
        Column("name", fold=True),
        Column("scopes", fold=True),
        Column("created (UTC)", no_wrap=True, drop=2),
        Column("revoked (UTC)", no_wrap=True, drop=1),
    ]
    rows = [
        [
            key.id,
            key.name,
            " ".join(sorted(scope.value for scope in key.scopes)),
            _minute(key.created_at),
            "" if key.revoked_at is None else _minute(key.revoked_at),
        ]
        for key in keys
    ]
    print_table("API keys", columns, rows, counted=counted(len(rows), "key"))


def _minute(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M")


@keys_app.command("revoke")
@needs_database
def revoke(
    key_id: Annotated[str, typer.Argument(metavar="ID", help="the key's id, as `keys list` shows")],
) -> None:
    """Revoke a key: API processes refuse it within FREEHOURS_API_KEY_CACHE_SECONDS."""
    with Store.open(get_settings().database_url) as store, store.write() as unit:
        if not revoke_key(unit.keys, key_id, SystemClock().now()):
            raise InputError(f"no live key with id {key_id!r}")
    Console(stderr=True).print(f"revoked {key_id}")
