"""Alembic's environment: migrates the connection ``freehours.store.schema`` hands it.

There is no alembic.ini: ``freehours db upgrade`` (or the first command to open a new database)
drives Alembic from Python, inside one write transaction (see ``freehours.store.schema``).
SQLite migrations run in batch mode, since SQLite alters most things by copying the table.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context

from freehours.errors import ConfigurationError
from freehours.store.tables import metadata

connection = context.config.attributes.get("connection")
if not isinstance(connection, sa.Connection):
    raise ConfigurationError(
        "freehours migrations run on a connection from freehours.store.schema, "
        "not offline or from the alembic command line: use `freehours db upgrade`"
    )
context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
