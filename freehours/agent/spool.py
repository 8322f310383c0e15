"""The spool: a SQLite file that holds every batch from the moment the agent accepts it until the
API has it.

A batch is written here (and synced to disk) before any attempt to send it, so an API outage or an
agent crash loses nothing; it is deleted only after the API answered 200, or set aside as
``rejected`` (with the API's problem details) after a refusal that resending cannot change.
Batches go out in the order they came in: FIFO by ``seq``, which SQLite never reuses.

A spool belongs to one API: the first agent to open it records its API's base URL (and its
inbox, for people to read). An agent for another API refuses to start on it (``SpoolOwned``),
naming the spool's API and what waits in it, rather than send that API's batches to its own.

Each thread opens its own ``Spool`` on the same file (WAL lets one write while another reads).
The connection that accepts batches syncs every commit (``synchronous=FULL``), so an accepted
read survives even a power cut; the sender's connection does not need to (a lost delete or
attempt count means one resend, which the Idempotency-Key makes harmless).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from freehours.agent.batch import Batch, Route
from freehours.errors import ConfigurationError

#: How long a statement waits for the other thread's write before failing: far longer than any
#: one of the spool's transactions takes.
BUSY_TIMEOUT_MS = 10_000

# All of the spool's SQL, named.
_SCHEMA = """
CREATE TABLE IF NOT EXISTS batches (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,   -- FIFO order; AUTOINCREMENT: never reused
    route TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    body BLOB NOT NULL,
    content_type TEXT NOT NULL,
    source TEXT NOT NULL,                    -- the NEM12 file's path; '' for meter reads
    reads INTEGER NOT NULL,
    trace_id TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'rejected', 'sent')),
    attempts INTEGER NOT NULL DEFAULT 0,
    spooled_at TEXT NOT NULL,
    status_code INTEGER,                     -- a rejected batch's answer
    problem TEXT,                            -- and its body (problem details)
    UNIQUE (idempotency_key, source)
);
CREATE INDEX IF NOT EXISTS batches_by_state ON batches (state, seq);
CREATE TABLE IF NOT EXISTS owner (           -- the API this spool's batches are for
    one INTEGER PRIMARY KEY CHECK (one = 1),
    api_url TEXT NOT NULL,
    inbox TEXT NOT NULL,                     -- the --nem12-dir it was made with; '' for none
    claimed_at TEXT NOT NULL
);
"""
_OWNER = "SELECT api_url, inbox, claimed_at FROM owner"
_CLAIM = "INSERT INTO owner (one, api_url, inbox, claimed_at) VALUES (1, ?, ?, ?)"
_ADD = """
INSERT INTO batches (route, idempotency_key, body, content_type, source, reads, trace_id,
                     spooled_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (idempotency_key, source) DO NOTHING
"""
_HEAD = """
SELECT seq, route, idempotency_key, body, content_type, source, reads, trace_id, attempts
FROM batches WHERE state = 'pending' ORDER BY seq LIMIT 1
"""
_COUNT_ATTEMPT = "UPDATE batches SET attempts = attempts + 1 WHERE seq = ?"
# A delivered batch of meter reads is kept as a tombstone (its key, no body), so that meters that
# produce the same batch again (a restarted run over the same hours) do not spool it twice; a
# NEM12 file's row goes, since the file itself moves to done/.
_DELIVERED_READS = "UPDATE batches SET state = 'sent', body = x'' WHERE seq = ? AND source = ''"
_DELIVERED_FILE = "DELETE FROM batches WHERE seq = ? AND source <> ''"
# Tombstones outlive the API's memory of the key (24 hours) only by a margin.
_FORGET_SENT = "DELETE FROM batches WHERE state = 'sent' AND spooled_at < ?"
SENT_RETENTION = timedelta(hours=48)
_SET_ASIDE = """
UPDATE batches SET state = 'rejected', status_code = ?, problem = ? WHERE seq = ?
"""
_COUNT = "SELECT count(*) FROM batches WHERE state = ?"
_REJECTED = """
SELECT seq, idempotency_key, source, status_code, problem FROM batches
WHERE state = 'rejected' ORDER BY seq
"""


@dataclass(frozen=True, slots=True)
class SpooledBatch:
    """A batch as the spool holds it: its place in line and how often it has been attempted."""

    seq: int
    batch: Batch
    attempts: int


@dataclass(frozen=True, slots=True)
class RejectedBatch:
    """A batch set aside: the API refused it with ``status_code`` and ``problem``, or (status
    None) no request could be made of it, ``problem`` saying why."""

    seq: int
    idempotency_key: str
    source: str
    status_code: int | None
    problem: str


@dataclass(frozen=True, slots=True)
class Owner:
    """The API a spool is for, and the inbox of the agent that first opened it."""

    api_url: str
    inbox: str
    claimed_at: str


class SpoolOwned(ConfigurationError):
    """The spool holds (or may hold) another API's batches."""


def api_identity(url: str) -> str:
    """The API base URL as a spool records it: ``http://host:8000/`` is ``http://host:8000``."""
    return url.strip().rstrip("/")


class Spool:
    """One connection to the spool file."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._conn = connection

    @classmethod
    def open(cls, path: Path, *, durable: bool = True) -> Spool:
        """Open (creating when new) the spool at ``path``; ``durable``: sync every commit.

        Raises ``ConfigurationError`` naming the file when it cannot be opened.
        """
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
            conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            conn.executescript(_SCHEMA)
            conn.execute(_FORGET_SENT, ((datetime.now(UTC) - SENT_RETENTION).isoformat(),))
        except (OSError, sqlite3.Error) as exc:
            raise ConfigurationError(f"spool {path}: cannot be opened ({exc})") from exc
        return cls(conn)

    def owner(self) -> Owner | None:
        """The API this spool belongs to; None for a new spool (or one an older agent made)."""
        row = self._conn.execute(_OWNER).fetchone()
        return None if row is None else Owner(*row)

    def claim(self, path: Path, api_url: str, inbox: str, now: datetime) -> Owner:
        """Make this spool ``api_url``'s if it is nobody's; return its owner.

        Raises ``SpoolOwned`` when it belongs to another API, saying which and what waits in it.
        """
        with self._transaction():
            owner = self.owner()
            if owner is None:
                owner = Owner(api_identity(api_url), inbox, now.isoformat())
                self._conn.execute(_CLAIM, (owner.api_url, owner.inbox, owner.claimed_at))
                return owner
        if owner.api_url == api_identity(api_url):
            return owner
        pending, rejected = self.pending(), len(self.rejected())
        raise SpoolOwned(
            f"spool {path} belongs to the API at {owner.api_url}"
            f" (inbox {owner.inbox or 'none'}, since {owner.claimed_at}):"
            f" {pending} batches wait in it to be sent there, {rejected} are set aside;"
            f" this agent is for {api_identity(api_url)}, and will not send them there nor start"
            " on it: give it a spool of its own (--spool), or leave --spool out for the default"
            " per API"
        )

    def add(self, batches: Iterable[Batch], now: datetime) -> int:
        """Accept ``batches`` in one transaction, in order; return how many were new (a batch
        already spooled from the same source is not added twice)."""
        stamp = now.isoformat()
        added = 0
        with self._transaction():
            for batch in batches:
                cursor = self._conn.execute(
                    _ADD,
                    (
                        batch.route.value,
                        batch.idempotency_key,
                        batch.body,
                        batch.content_type,
                        batch.source,
                        batch.reads,
                        batch.trace_id,
                        stamp,
                    ),
                )
                added += cursor.rowcount
        return added

    def head(self) -> SpooledBatch | None:
        """The oldest pending batch, or None when nothing waits."""
        row = self._conn.execute(_HEAD).fetchone()
        if row is None:
            return None
        seq, route, key, body, content_type, source, reads, trace_id, attempts = row
        batch = Batch(Route(route), key, bytes(body), content_type, source, reads, trace_id)
        return SpooledBatch(seq, batch, attempts)

    def count_attempt(self, seq: int) -> None:
        """One more attempt to send batch ``seq``."""
        self._conn.execute(_COUNT_ATTEMPT, (seq,))

    def delete(self, seq: int) -> None:
        """The API has batch ``seq``: never send it again."""
        with self._transaction():
            self._conn.execute(_DELIVERED_READS, (seq,))
            self._conn.execute(_DELIVERED_FILE, (seq,))

    def set_aside(self, seq: int, status_code: int | None, problem: str) -> None:
        """Batch ``seq`` can never be delivered (the API refused it for good, with
        ``status_code``; or, None, no request could be made of it): keep it, with the answer or
        the reason, out of the queue, but never resend it."""
        self._conn.execute(_SET_ASIDE, (status_code, problem, seq))

    def pending(self) -> int:
        """Batches waiting to be sent."""
        count: int = self._conn.execute(_COUNT, ("pending",)).fetchone()[0]
        return count

    def rejected(self) -> list[RejectedBatch]:
        """Every batch set aside, oldest first."""
        return [RejectedBatch(*row) for row in self._conn.execute(_REJECTED)]

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Spool:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT``, or ``ROLLBACK`` when the block raises."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")
