"""``freehours db``: the database's schema."""

from __future__ import annotations

import typer
from rich.console import Console

from freehours.cli import app
from freehours.cli.dbguard import needs_database
from freehours.settings import get_settings

db_app = typer.Typer(
    name="db",
    help="The database at FREEHOURS_DATABASE_URL (default sqlite:///./freehours.db).",
    no_args_is_help=True,
)
app.add_typer(db_app)


@db_app.command("upgrade")
def upgrade() -> None:
    """Apply every migration the database does not have yet, in one transaction.

    A new database is migrated by whichever command opens it first; an existing one is upgraded
    only here, so that a release's migrations run when an operator says so. Without
    FREEHOURS_DATABASE_URL, this is the command that creates ./freehours.db: the others that
    work on a database refuse while it is not there.
    """
    from dataclasses import replace

    from freehours.store import schema
    from freehours.store.engine import create_engine
    from freehours.store.timeouts import Timeouts

    settings = get_settings()
    # A migration may rewrite a large table: no statement timeout of the API's size here.
    timeouts = replace(Timeouts.from_settings(settings), statement=24 * 3600.0)
    engine = create_engine(settings.database_url, timeouts)
    try:
        applied, revision = schema.migrate(engine)
    finally:
        engine.dispose()
    where = engine.url.render_as_string(hide_password=True)
    if applied:
        said = f"applied {', '.join(applied)}: database at {where} is at schema revision {revision}"
    else:
        said = f"database at {where} is at schema revision {revision} already: nothing to apply"
    Console().print(said, highlight=False)


@db_app.command("status")
@needs_database
def status() -> None:
    """Say the database's schema revision, this freehours' newest and the migrations between.

    Exit 0 when the database is at this freehours' revision; 1 when it is behind (or has no
    freehours schema yet): `freehours db upgrade` applies what is pending. Nothing is changed.
    """
    from freehours.store import schema
    from freehours.store.engine import create_engine
    from freehours.store.timeouts import Timeouts

    settings = get_settings()
    engine = create_engine(settings.database_url, Timeouts.from_settings(settings))
    try:
        found = schema.status(engine)
    finally:
        engine.dispose()
    where = engine.url.render_as_string(hide_password=True)
    console = Console()
    current = found.current or "none (no freehours schema)"
    console.print(f"database at {where}", highlight=False)
    console.print(f"schema revision: {current}", highlight=False)
    console.print(f"this freehours:  {found.head}", highlight=False)
    if found.is_current:
        console.print("up to date", highlight=False)
        return
    console.print(
        f"pending: {', '.join(found.pending)} (run `freehours db upgrade`)", highlight=False
    )
    raise typer.Exit(1)
