"""API keys remembered in memory, so that a request does not pay a database round trip for its
key: at most ``ttl`` seconds (a revocation takes effect within it), at most ``size`` secrets,
the least recently used forgotten first.

Beside them, the hashes of every live key (``may_be_live``): what a key from a client address
over its unknown-key limit is checked against before it is refused, so that guesses from an
address (or from every address behind one proxy) never lock out the valid keys sent from it.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from typing import Literal

from fastapi.concurrency import run_in_threadpool

from freehours.api.keys import ApiKey, find_key, hash_secret
from freehours.clock import Clock
from freehours.store.database import Store

#: How often, at most, the live keys' hashes are read again for ``may_be_live``: a flood of
#: guesses from addresses over their limit then costs the database one small query a second,
#: whatever its size; and a key made less than this long ago, sent from such an address before
#: the next reading, is the only valid key that can be refused (a 429 whose retry succeeds).
LIVE_HASHES_SECONDS = 1.0


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
        self._live: frozenset[str] = frozenset()
        self._live_read_at: float | None = None
        self._reading_live = asyncio.Lock()

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

    async def may_be_live(self, secret: str) -> bool:
        """Whether ``secret`` is a live key's, as the live keys' hashes read at most
        ``LIVE_HASHES_SECONDS`` ago say (read again, once for every caller waiting, when it is
        not among them and they are older)."""
        key_hash = hash_secret(secret)
        if key_hash in self._live:
            return True
        async with self._reading_live:
            read_at = self._live_read_at
            if read_at is None or self._clock.monotonic() - read_at >= LIVE_HASHES_SECONDS:
                self._live_read_at = self._clock.monotonic()
                self._live = await run_in_threadpool(self._load_live)
        return key_hash in self._live

    def __len__(self) -> int:
        return len(self._known)

    def _load(self, secret: str) -> ApiKey | None:
        with self._store.read() as unit:
            return find_key(unit.keys, secret)

    def _load_live(self) -> frozenset[str]:
        with self._store.read() as unit:
            return unit.keys.live_hashes()
