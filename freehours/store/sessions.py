"""Console sessions as stored: the token's hash (never the token), its key, its CSRF token and
its expiry. What a session may do, and how its tokens are made, is the console's
(``freehours.api.console.session``); this is its table."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa

from freehours.store.repository import Repository
from freehours.store.tables import api_keys, console_sessions


@dataclass(frozen=True, slots=True)
class StoredSession:
    """A live session and the key it signed in with."""

    key_id: str
    key_name: str
    scopes: frozenset[str]
    csrf_token: str
    expires_at: datetime


class Sessions(Repository):
    """The console's sessions, in the unit of work's transaction."""

    __slots__ = ()

    def add(
        self,
        token_hash: str,
        *,
        key_id: str,
        csrf_token: str,
        created_at: datetime,
        expires_at: datetime,
    ) -> None:
        self._conn.execute(
            console_sessions.insert().values(
                token_hash=token_hash,
                key_id=key_id,
                csrf_token=csrf_token,
                created_at=created_at,
                expires_at=expires_at,
            )
        )

    def live(self, token_hash: str, now: datetime) -> StoredSession | None:
        """The session of ``token_hash`` while it has not expired and its key is not revoked."""
        s, k = console_sessions.c, api_keys.c
        row = self._conn.execute(
            sa.select(s.key_id, k.name, k.scopes, s.csrf_token, s.expires_at)
            .join_from(console_sessions, api_keys, k.id == s.key_id)
            .where(s.token_hash == token_hash, s.expires_at > now, k.revoked_at.is_(None))
        ).first()
        if row is None:
            return None
        return StoredSession(row[0], row[1], frozenset(row[2].split()), row[3], row[4])

    def end(self, token_hash: str) -> bool:
        """Sign a session out; False when there was no such session."""
        c = console_sessions.c
        return (
            self._conn.execute(console_sessions.delete().where(c.token_hash == token_hash)).rowcount
            == 1
        )

    def end_for_key(self, key_id: str) -> int:
        """End every session of a key (it was revoked); how many."""
        c = console_sessions.c
        return self._conn.execute(console_sessions.delete().where(c.key_id == key_id)).rowcount

    def purge(self, *, expired_before: datetime) -> int:
        """Delete the sessions that expired before ``expired_before``; how many."""
        c = console_sessions.c
        return self._conn.execute(
            console_sessions.delete().where(c.expires_at < expired_before)
        ).rowcount
