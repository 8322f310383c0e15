"""API keys: made once, shown once, stored only as a hash, each with its scopes.

A key is ``fh_`` and 32 random bytes (URL-safe base64). Keys carry that much entropy, so one
SHA-256 is the right hash: a slow password hash would only slow every request.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

import sqlalchemy as sa

from freehours.errors import InputError
from freehours.store.tables import api_keys


class Scope(StrEnum):
    """What a key may do."""

    INGEST = "ingest"  # send meter reads and NEM12 files
    SETTLE = "settle"  # ask for settlements
    READ = "read"  # read quotas, bills and metrics
    ADMIN = "admin"  # everything, including plans and customers


@dataclass(frozen=True, slots=True)
class ApiKey:
    """A stored key, never its secret."""

    id: str
    name: str
    scopes: frozenset[Scope]
    created_at: datetime
    revoked_at: datetime | None

    def allows(self, scope: Scope) -> bool:
        return Scope.ADMIN in self.scopes or scope in self.scopes


def parse_scopes(names: list[str]) -> frozenset[Scope]:
    """Scope names as given on the command line; an unknown one is an InputError naming it."""
    if not names:
        raise InputError("--scope: at least one scope is needed (ingest, settle, read, admin)")
    scopes = set()
    for name in names:
        try:
            scopes.add(Scope(name.strip().lower()))
        except ValueError:
            raise InputError(
                f"--scope: unknown scope {name!r} (ingest, settle, read, admin)"
            ) from None
    return frozenset(scopes)


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def create_key(
    conn: sa.Connection, scopes: frozenset[Scope], name: str, now: datetime
) -> tuple[ApiKey, str]:
    """Store a new key; return it and its secret, which is never stored or shown again."""
    secret = "fh_" + secrets.token_urlsafe(32)
    key = ApiKey(
        id="key_" + secrets.token_hex(6),
        name=name,
        scopes=scopes,
        created_at=now,
        revoked_at=None,
    )
    conn.execute(
        api_keys.insert().values(
            id=key.id,
            name=name,
            key_hash=hash_secret(secret),
            scopes=" ".join(sorted(scopes)),
            created_at=now,
        )
    )
    return key, secret


def list_keys(conn: sa.Connection) -> list[ApiKey]:
    rows = conn.execute(sa.select(api_keys).order_by(api_keys.c.created_at, api_keys.c.id))
    return [_key(row) for row in rows]


def revoke_key(conn: sa.Connection, key_id: str, now: datetime) -> bool:
    """Revoke a key; False when there is no such live key."""
    result = conn.execute(
        api_keys.update()
        .where(api_keys.c.id == key_id, api_keys.c.revoked_at.is_(None))
        .values(revoked_at=now)
    )
    return result.rowcount == 1


def find_key(conn: sa.Connection, secret: str) -> ApiKey | None:
    """The live key with this secret, or None."""
    row = conn.execute(
        sa.select(api_keys).where(
            api_keys.c.key_hash == hash_secret(secret), api_keys.c.revoked_at.is_(None)
        )
    ).first()
    return None if row is None else _key(row)


def _key(row: sa.Row[tuple[object, ...]]) -> ApiKey:
    m = row._mapping
    return ApiKey(
        id=m["id"],
        name=m["name"],
        scopes=frozenset(Scope(s) for s in m["scopes"].split()),
        created_at=m["created_at"],
        revoked_at=m["revoked_at"],
    )
