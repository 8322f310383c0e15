"""``freehours db``: the database's schema."""

from __future__ import annotations

import typer
from rich.console import Console

from freehours.cli import app
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
        revision = schema.upgrade(engine)
    finally:
        engine.dispose()
    where = engine.url.render_as_string(hide_password=True)
    Console().print(f"database at {where} is at schema revision {revision}", highlight=False)
