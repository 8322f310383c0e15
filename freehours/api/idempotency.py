"""Idempotency-Key for the ingest routes, as the IETF httpapi idempotency-key draft describes.

Atomic phases with a recovery point (after brandur's rocket-rides-atomic):

1. ``begin`` in its own short transaction records the key as in flight, or finds it: the same
   payload already answered -> replay; a different payload -> 422; still in flight -> 409 with
   the seconds until its lease runs out; its lease run out (its request died) -> taken over.
2. While the work runs, its process renews the key's lease (``InFlight``, ``renew`` of
   ``unit.idempotency``: every third
   of ``in_flight_timeout``), so a key stays held however long its request takes; only a
   request that died stops renewing, and its key is taken over one lease after its last renewal.
3. The caller does the work and calls ``unit.idempotency.finish`` in the same transaction as
   the work, so the stored answer exists exactly when the work does.
4. On an unexpected failure the caller calls ``unit.idempotency.forget``, so the client's retry
   runs afresh.

The statements are ``freehours.store.idempotency``'s.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

from freehours.api.problems import Problem
from freehours.store.idempotency import Idempotency, SavedResponse


def fingerprint(method: str, path: str, body: bytes) -> str:
    """What makes two requests "the same payload": method, path and body bytes."""
    digest = hashlib.sha256()
    digest.update(f"{method} {path}\n".encode())
    digest.update(body)
    return digest.hexdigest()


def begin(
    keys: Idempotency,
    *,
    principal: str,
    key: str,
    request_hash: str,
    now: datetime,
    in_flight_timeout: timedelta,
) -> SavedResponse | None:
    """Record the key as in flight (None: go ahead) or return the saved answer to replay."""
    if keys.insert_if_absent(principal=principal, key=key, fingerprint=request_hash, now=now):
        return None
    row = keys.locked(principal=principal, key=key)
    if row.fingerprint != request_hash:
        raise Problem(
            422,
            "idempotency-key-reused",
            "Idempotency-Key reused with a different payload",
            f"key {key!r} was first used for another request; use a new key for a new request",
        )
    if row.response is not None:
        return row.response
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
    keys.take_over(principal=principal, key=key, now=now)
    return None


class InFlight:
    """The Idempotency-Keys whose requests run in this process, for one loop to renew together
    (``unit.idempotency.renew``): one statement a period, however many requests run."""

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


def json_response(status_code: int, payload: object) -> SavedResponse:
    return SavedResponse(status_code, json.dumps(payload), "application/json")
