"""API keys as stored: a hash of the secret (never the secret), a name, scopes, and when revoked.

What a key may do, and how a secret is made and hashed, is the API's (``freehours.api.keys``);
this is its table.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from freehours.store.repository import Repository
from freehours.store.tables import api_keys


@dataclass(frozen=True, slots=True)
class StoredKey:
    """A key's row: its scopes as their names."""

    id: str
    name: str
    scopes: frozenset[str]
    created_at: datetime
    revoked_at: datetime | None


class Keys(Repository):
    """The API keys, in the unit of work's transaction."""

    __slots__ = ()

    def add(
        self, key_id: str, *, name: str, key_hash: str, scopes: frozenset[str], created_at: datetime
    ) -> StoredKey:
        """Store a new key under the hash of its secret."""
        self._conn.execute(
            api_keys.insert().values(
                id=key_id,
                name=name,
                key_hash=key_hash,
                scopes=" ".join(sorted(scopes)),
                created_at=created_at,
            )
        )
        return StoredKey(key_id, name, scopes, created_at, None)

    def every(self) -> list[StoredKey]:
        """Every key, live and revoked, oldest first."""
        rows = self._conn.execute(
            sa.select(api_keys).order_by(api_keys.c.created_at, api_keys.c.id)
        )
        return [_key(row) for row in rows]

    def get(self, key_id: str) -> StoredKey | None:
        """The key ``key_id``, live or revoked, or None."""
        row = self._conn.execute(sa.select(api_keys).where(api_keys.c.id == key_id)).first()
        return None if row is None else _key(row)

    def revoke(self, key_id: str, now: datetime) -> bool:
        """Revoke a key; False when there is no such live key."""
        result = self._conn.execute(
            api_keys.update()
            .where(api_keys.c.id == key_id, api_keys.c.revoked_at.is_(None))
            .values(revoked_at=now)
        )
        return result.rowcount == 1

    def live_hashes(self) -> frozenset[str]:
        """The hash of every live key's secret (the table holds a retailer's few keys)."""
        rows = self._conn.execute(
            sa.select(api_keys.c.key_hash).where(api_keys.c.revoked_at.is_(None))
        )
        return frozenset(row.key_hash for row in rows)

    def live_by_hash(self, key_hash: str) -> StoredKey | None:
        """The live key whose secret hashes to ``key_hash``, or None."""
        row = self._conn.execute(
            sa.select(api_keys).where(
                api_keys.c.key_hash == key_hash, api_keys.c.revoked_at.is_(None)
            )
        ).first()
        return None if row is None else _key(row)


def _key(row: sa.Row[Any]) -> StoredKey:
    m = row._mapping
    return StoredKey(
        id=m["id"],
        name=m["name"],
        scopes=frozenset(m["scopes"].split()),
        created_at=m["created_at"],
        revoked_at=m["revoked_at"],
    )
