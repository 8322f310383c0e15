"""Named locks held to the end of a transaction, for work that must not interleave with another's
although the two may share no row.

The settlement completes a quota from the day's meter rows; an ingest that changes those rows
then checks the quota (and reopens it if it is settled). The quota row's lock orders the two
when the row exists, but a revision whose ingest checked before the quota was first claimed
finds no row to lock: on PostgreSQL its rows could commit after the settlement read the day and
before it completed, and be settled by nobody. So the settlement's completing transaction holds
its quota day's name exclusively, from its ``BEGIN``, and an ingest holds the names of the quota
days it touches, shared, before it checks their quotas: one waits for the other's commit.

Held with ``Store.write(lock=name)`` (exclusively, from the ``BEGIN``) and ``unit.hold_shared``.
PostgreSQL: advisory transaction locks on a 64-bit hash of the name (a collision only makes two
unrelated days wait for each other). SQLite needs none: every write transaction holds the
database's one write lock.
"""

from __future__ import annotations

import hashlib


def key(name: str) -> int:
    """The advisory lock key of ``name``: a signed 64-bit hash."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), signed=True)
