"""The quota cache: in-process or Redis behind one interface.

Only terminal states (COMPLETED, ABORTED) may be answered from the cache alone. Entries are
ordered by (version, revision), so an older state can never overwrite a newer one, atomically on
Redis. Non-terminal entries live at most as long as the lock timeout.
"""

from __future__ import annotations

from freehours.cache.quota import MemoryQuotaCache, QuotaCache, RedisQuotaCache, open_quota_cache

__all__ = ["MemoryQuotaCache", "QuotaCache", "RedisQuotaCache", "open_quota_cache"]
