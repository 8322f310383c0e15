"""API keys: made once, shown once, stored only as a hash, each with its scopes.

A key is ``fh_`` and 32 random bytes (URL-safe base64). Keys carry that much entropy, so one
SHA-256 is the right hash: a slow password hash would only slow every request. The table is
``freehours.store.keys``'s (``unit.keys``).
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from freehours.errors import InputError
from freehours.store.keys import Keys, StoredKey


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
    keys: Keys, scopes: frozenset[Scope], name: str, now: datetime
) -> tuple[ApiKey, str]:
    """Store a new key; return it and its secret, which is never stored or shown again."""
    secret = "fh_" + secrets.token_urlsafe(32)
    stored = keys.add(
        "key_" + secrets.token_hex(6),
        name=name,
        key_hash=hash_secret(secret),
        scopes=frozenset(scope.value for scope in scopes),
        created_at=now,
    )
    return _key(stored), secret


def list_keys(keys: Keys) -> list[ApiKey]:
    return [_key(stored) for stored in keys.every()]


def revoke_key(keys: Keys, key_id: str, now: datetime) -> bool:
    """Revoke a key; False when there is no such live key."""
    return keys.revoke(key_id, now)


def find_key(keys: Keys, secret: str) -> ApiKey | None:
    """The live key with this secret, or None."""
    stored = keys.live_by_hash(hash_secret(secret))
    return None if stored is None else _key(stored)


def _key(stored: StoredKey) -> ApiKey:
    return ApiKey(
        id=stored.id,
        name=stored.name,
        scopes=frozenset(Scope(name) for name in stored.scopes),
        created_at=stored.created_at,
        revoked_at=stored.revoked_at,
    )
