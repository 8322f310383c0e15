"""The database's failures, named for the code outside ``freehours.store`` that handles them.

Repositories raise SQLAlchemy's exceptions (``freehours.store.prepared`` raises them too, for
its own statements); the API maps them to answers and the worker logs them, without importing
SQLAlchemy, through these names.
"""

from __future__ import annotations

import sqlalchemy as sa

#: Any failure of the database or of talking to it.
DatabaseError = sa.exc.SQLAlchemyError
#: The database refused a value (out of its column type's range): the request's fault, a 422.
DataError = sa.exc.DataError
#: The database cannot be reached, did not answer in time, or no pooled connection was free: a
#: 503 with Retry-After.
UNAVAILABLE: tuple[type[Exception], ...] = (
    sa.exc.OperationalError,
    sa.exc.TimeoutError,
    sa.exc.DisconnectionError,
)


def connection_lost(statement: str, why: str) -> Exception:
    """The error a statement raises when its connection is lost: for fault injection."""
    return sa.exc.OperationalError(statement, None, Exception(why))
