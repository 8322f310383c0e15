"""API keys remembered in memory, so that a request does not pay a database round trip for its
key: at most ``ttl`` seconds (a revocation takes effect within it), at most ``size`` secrets,
the least recently used forgotten first."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Literal

from fastapi.concurrency import run_in_threadpool

from freehours.api.keys import ApiKey, find_key
from freehours.clock import Clock
from freehours.store.database import Store


class KeyCache:
    """Keys looked up by their secret's hash, remembered for ``ttl``. A flood of unknown secrets
    pushes out only its own entries, never a working key used since."""

    def __init__(self, store: Store, clock: Clock, ttl: float, size: int = 10_000) -> None:
        self._store = store
        self._clock = clock
        self._ttl = ttl
        self._size = size
        self._known: OrderedDict[str, tuple[float, ApiKey | None]] = OrderedDict()
        self._lock = threading.Lock()

    def cached(self, secret: str) -> ApiKey | Literal[False] | None:
        """The key of ``secret`` while it is fresh in memory (None: known to be unknown), else
        False (it takes a lookup)."""
        now = self._clock.monotonic()
        with self._lock:
            hit = self._known.get(secret)
            if hit is None or hit[0] <= now:
                return False
            self._known.move_to_end(secret)
            return hit[1]

    async def load(self, secret: str) -> ApiKey | None:
        """The key of ``secret`` from the database (in a worker thread: the event loop never
        waits on the database), remembered."""
        now = self._clock.monotonic()
        key = await run_in_threadpool(self._load, secret)
        with self._lock:
            self._known[secret] = (now + self._ttl, key)
            self._known.move_to_end(secret)
            while len(self._known) > self._size:
                self._known.popitem(last=False)
        return key

    def __len__(self) -> int:
        return len(self._known)

    def _load(self, secret: str) -> ApiKey | None:
        with self._store.read() as unit:
            return find_key(unit.keys, secret)
