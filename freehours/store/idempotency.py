"""Idempotency keys as stored: one row per (principal, key), in flight until its answer is saved.

The protocol (begin, renew the lease, finish in the work's transaction, forget on failure) is
the API's (``freehours.api.idempotency``); these are its statements.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa

from freehours.store.repository import Repository
from freehours.store.tables import idempotency_keys


@dataclass(frozen=True, slots=True)
class SavedResponse:
    """The first answer to a key, replayed to every repeat."""

    status_code: int
    body: str
    media_type: str


@dataclass(frozen=True, slots=True)
class StoredIdempotencyKey:
    """A key's row: the request it was first used for, its lease, and its answer once saved."""

    fingerprint: str
    locked_at: datetime
    response: SavedResponse | None


_t = idempotency_keys


def _this(principal: str, key: str) -> tuple[sa.ColumnElement[bool], sa.ColumnElement[bool]]:
    return _t.c.principal == principal, _t.c.key == key


class Idempotency(Repository):
    """The idempotency keys, in the unit of work's transaction."""

    __slots__ = ()

    def insert_if_absent(
        self, *, principal: str, key: str, fingerprint: str, now: datetime
    ) -> bool:
        """Record the key as in flight from ``now``; False (nothing written) when it exists."""
        values = {
            "principal": principal,
            "key": key,
            "fingerprint": fingerprint,
            "locked_at": now,
            "created_at": now,
        }
        # RETURNING says whether the row went in: psycopg reports no rowcount for this insert.
        inserted = self._conn.execute(
            self._driver.insert_or_ignore(_t).values(values).returning(_t.c.key)
        ).first()
        return inserted is not None

    def locked(self, *, principal: str, key: str) -> StoredIdempotencyKey:
        """The key's row, locked for this transaction (it must exist)."""
        row = self._conn.execute(
            sa.select(_t).where(*_this(principal, key)).with_for_update()
        ).one()
        response = (
            None
            if row.status_code is None
            else SavedResponse(row.status_code, row.response_body, row.media_type)
        )
        return StoredIdempotencyKey(row.fingerprint, row.locked_at, response)

    def take_over(self, *, principal: str, key: str, now: datetime) -> None:
        """Start the key's lease afresh from ``now`` (its request died)."""
        self._conn.execute(sa.update(_t).where(*_this(principal, key)).values(locked_at=now))

    def renew(self, held: Sequence[tuple[str, str]], *, now: datetime) -> int:
        """Renew the leases of ``held`` (principal, key) pairs still in flight; how many."""
        if not held:
            return 0
        return self._conn.execute(
            sa.update(_t)
            .where(sa.tuple_(_t.c.principal, _t.c.key).in_(held), _t.c.status_code.is_(None))
            .values(locked_at=now)
        ).rowcount

    def finish(self, *, principal: str, key: str, response: SavedResponse, now: datetime) -> None:
        """Save the answer, in the transaction that did the work."""
        self._conn.execute(
            sa.update(_t)
            .where(*_this(principal, key))
            .values(
                status_code=response.status_code,
                response_body=response.body,
                media_type=response.media_type,
                completed_at=now,
            )
        )

    def forget(self, *, principal: str, key: str) -> None:
        """Drop an unfinished key, so that a retry starts afresh."""
        self._conn.execute(sa.delete(_t).where(*_this(principal, key), _t.c.status_code.is_(None)))

    def purge(self, *, older_than: datetime) -> int:
        """Delete keys first seen before ``older_than``; how many."""
        return self._conn.execute(sa.delete(_t).where(_t.c.created_at < older_than)).rowcount

    def count(self) -> int:
        """How many keys are stored."""
        return int(self._conn.scalar(sa.select(sa.func.count()).select_from(_t)) or 0)
