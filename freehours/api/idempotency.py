"""Idempotency-Key for the ingest routes, as the IETF httpapi idempotency-key draft describes.

Atomic phases with a recovery point (after brandur's rocket-rides-atomic):

1. ``begin`` in its own short transaction records the key as in flight, or finds it: the same
   payload already answered -> replay; a different payload -> 422; still in flight -> 409 with
   the seconds until its lease runs out; its lease run out (its request died) -> taken over.
2. While the work runs, its process renews the key's lease (``InFlight``, ``renew``: every third
   of ``in_flight_timeout``), so a key stays held however long its request takes; only a
   request that died stops renewing, and its key is taken over one lease after its last renewal.
3. The caller does the work and calls ``finish`` in the same transaction as the work, so the
   stored answer exists exactly when the work does.
4. On an unexpected failure the caller calls ``forget``, so the client's retry runs afresh.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
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
    lease_left = (row.locked_at + in_flight_timeout - now).total_seconds()
    if lease_left > 0:
        # The true wait: the request finishes within it, or (having died) stops renewing its
        # lease, and the key is taken over when it runs out.
        raise Problem(
            409,
            "idempotency-key-in-flight",
            "A request with this Idempotency-Key is still being processed",
            f"key {key!r} is in flight; retry once it has finished",
            headers={"Retry-After": str(max(1, math.ceil(lease_left)))},
        )
    conn.execute(
        sa.update(t).where(t.c.principal == principal, t.c.key == key).values(locked_at=now)
    )
    return None


def renew(conn: sa.Connection, held: list[tuple[str, str]], *, now: datetime) -> int:
    """Renew the leases of ``held`` (principal, key) pairs still in flight; returns how many."""
    if not held:
        return 0
    t = idempotency_keys
    return conn.execute(
        sa.update(t)
        .where(sa.tuple_(t.c.principal, t.c.key).in_(held), t.c.status_code.is_(None))
        .values(locked_at=now)
    ).rowcount


class InFlight:
    """The Idempotency-Keys whose requests run in this process, for one loop to renew together
    (``renew``): one statement a period, however many requests run."""

    def __init__(self) -> None:
        self._held: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()

    @contextmanager
    def hold(self, principal: str, key: str) -> Iterator[None]:
        """Keep the key's lease renewed while the block runs."""
        pair = (principal, key)
        with self._lock:
            self._held[pair] += 1
        try:
            yield
        finally:
            with self._lock:
                self._held[pair] -= 1
                if self._held[pair] <= 0:
                    del self._held[pair]

    def held(self) -> list[tuple[str, str]]:
        with self._lock:
            return list(self._held)


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
