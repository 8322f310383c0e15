"""What meter data arrived: one row per NEM12 upload, JSON read batch or imported file, with
what the ingest made of it, written in the ingest's own transaction
(``freehours.settlement.ingest``), so a batch that is refused or rolled back leaves no row.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from freehours.store.meter import IngestCounts
from freehours.store.repository import Repository
from freehours.store.tables import ingestions

#: What ``source`` says: an upload (``nem12``), a JSON batch (``reads``), ``freehours nem12
#: import`` (``import``).
SOURCES = ("nem12", "reads", "import")
_NAME_LENGTH = 255


@dataclass(frozen=True, slots=True)
class IngestionRecord:
    """One arrival of meter data and its counts (as ``IngestCounts`` has them)."""

    id: int
    received_at: datetime
    source: str
    name: str | None
    key_id: str | None
    agent: str | None
    bytes: int
    accepted: int
    superseded: int
    unchanged: int
    stale: int
    trace_id: str | None


class Ingestions(Repository):
    """The ingestion log, in the unit of work's transaction."""

    __slots__ = ()

    def record(
        self,
        *,
        received_at: datetime,
        source: str,
        size: int,
        counts: IngestCounts,
        name: str | None = None,
        key_id: str | None = None,
        agent: str | None = None,
        trace_id: str | None = None,
    ) -> int:
        """Record an arrival of ``size`` bytes and its ``counts``; its id. A ``name`` longer
        than the column keeps its last 255 characters (the file's own name is at the end)."""
        if source not in SOURCES:
            raise ValueError(f"ingestion source {source!r} is not one of {', '.join(SOURCES)}")
        row = {
            "received_at": received_at,
            "source": source,
            "name": None if name is None else name[-_NAME_LENGTH:],
            "key_id": key_id,
            "agent": agent,
            "bytes": size,
            "accepted": counts.accepted,
            "superseded": counts.superseded,
            "unchanged": counts.unchanged,
            "stale": counts.stale,
            "trace_id": trace_id,
        }
        inserted = self._conn.execute(ingestions.insert().values(row).returning(ingestions.c.id))
        return int(inserted.scalar_one())

    def recent(self, *, limit: int, before_id: int | None = None) -> list[IngestionRecord]:
        """The newest ``limit`` arrivals, newest first; with ``before_id``, those before it
        (the next page: the last id of this one)."""
        c = ingestions.c
        query = sa.select(ingestions).order_by(c.id.desc()).limit(limit)
        if before_id is not None:
            query = query.where(c.id < before_id)
        return [_record(row) for row in self._conn.execute(query)]


def _record(row: sa.Row[Any]) -> IngestionRecord:
    return IngestionRecord(
        id=row.id,
        received_at=row.received_at,
        source=row.source,
        name=row.name,
        key_id=row.key_id,
        agent=row.agent,
        bytes=row.bytes,
        accepted=row.accepted,
        superseded=row.superseded,
        unchanged=row.unchanged,
        stale=row.stale,
        trace_id=row.trace_id,
    )
