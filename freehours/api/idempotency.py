"""Idempotency-Key for the ingest routes, as the IETF httpapi idempotency-key draft describes.

Atomic phases with a recovery point (after brandur's rocket-rides-atomic):

1. ``begin`` in its own short transaction records the key as in flight, or finds it: the same
   payload already answered -> replay; a different payload -> 422; still in flight -> 409; in
   flight for longer than ``in_flight_timeout`` (its request died) -> taken over.
2. The caller does the work and calls ``finish`` in the same transaction as the work, so the
   stored answer exists exactly when the work does.
3. On an unexpected failure the caller calls ``forget``, so the client's retry runs afresh.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from freehours.api.problems import Problem
from freehours.store.tables import idempotency_keys


@dataclass(frozen=True, slots=True)
class SavedResponse:
    """The first answer to a key, replayed to every repeat."""

    status_code: int
    body: str
    media_type: str


def fingerprint(method: str, path: str, body: bytes) -> str:
    """What makes two requests "the same payload": method, path and body bytes."""
    digest = hashlib.sha256()
    digest.update(f"{method} {path}\n".encode())
    digest.update(body)
    return digest.hexdigest()


def begin(
    conn: sa.Connection,
    *,
    principal: str,
    key: str,
    request_hash: str,
    now: datetime,
    in_flight_timeout: timedelta,
) -> SavedResponse | None:
    """Record the key as in flight (None: go ahead) or return the saved answer to replay."""
    t = idempotency_keys
    inserted = conn.execute(_insert_if_absent(conn, principal, key, request_hash, now)).first()
    if inserted is not None:
        return None
    row = conn.execute(
        sa.select(t).where(t.c.principal == principal, t.c.key == key).with_for_update()
    ).one()
    if row.fingerprint != request_hash:
        raise Problem(
            422,
            "idempotency-key-reused",
            "Idempotency-Key reused with a different payload",
            f"key {key!r} was first used for another request; use a new key for a new request",
        )
    if row.status_code is not None:
        return SavedResponse(row.status_code, row.response_body, row.media_type)
    if row.locked_at > now - in_flight_timeout:
        raise Problem(
            409,
            "idempotency-key-in-flight",
            "A request with this Idempotency-Key is still being processed",
            f"key {key!r} is in flight; retry once it has finished",
            headers={"Retry-After": "1"},
        )
    conn.execute(
        sa.update(t).where(t.c.principal == principal, t.c.key == key).values(locked_at=now)
    )
    return None


def finish(
    conn: sa.Connection, *, principal: str, key: str, response: SavedResponse, now: datetime
) -> None:
    """Save the answer, in the transaction that did the work."""
    t = idempotency_keys
    conn.execute(
        sa.update(t)
        .where(t.c.principal == principal, t.c.key == key)
        .values(
            status_code=response.status_code,
            response_body=response.body,
            media_type=response.media_type,
            completed_at=now,
        )
    )


def forget(conn: sa.Connection, *, principal: str, key: str) -> None:
    """Drop an unfinished key after an unexpected failure, so a retry starts afresh."""
    t = idempotency_keys
    conn.execute(
        sa.delete(t).where(t.c.principal == principal, t.c.key == key, t.c.status_code.is_(None))
    )


def purge(conn: sa.Connection, *, older_than: datetime) -> int:
    """Delete keys first seen before ``older_than``; returns how many."""
    t = idempotency_keys
    return conn.execute(sa.delete(t).where(t.c.created_at < older_than)).rowcount


def _insert_if_absent(
    conn: sa.Connection, principal: str, key: str, request_hash: str, now: datetime
) -> sa.Executable:
    values = {
        "principal": principal,
        "key": key,
        "fingerprint": request_hash,
        "locked_at": now,
        "created_at": now,
    }
    insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    # RETURNING says whether the row went in: psycopg reports no rowcount for this insert.
    return (
        insert(idempotency_keys)
        .values(values)
        .on_conflict_do_nothing()
        .returning(idempotency_keys.c.key)
    )


def json_response(status_code: int, payload: object) -> SavedResponse:
    return SavedResponse(status_code, json.dumps(payload), "application/json")
