"""``freehours keys``: API keys, made once and shown once."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from freehours.api.keys import create_key, list_keys, parse_scopes, revoke_key
from freehours.cli import app, needs_database
from freehours.clock import SystemClock
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
def list_() -> None:
    """Every key: id, name, scopes, created, revoked."""
    with Store.open(get_settings().database_url) as store, store.read() as unit:
        keys = list_keys(unit.keys)
    table = Table("id", "name", "scopes", "created", "revoked")
    for key in keys:
        table.add_row(
            key.id,
            key.name,
            " ".join(sorted(key.scopes)),
            key.created_at.isoformat(timespec="seconds"),
            key.revoked_at.isoformat(timespec="seconds") if key.revoked_at else "",
        )
    Console().print(table)


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
