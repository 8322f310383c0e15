"""The audit log as stored: one row per operator action or sign-in, inserted in the action's own
transaction, never changed. What the actions are is ``freehours.operations.actions``'."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from freehours.store.repository import Repository
from freehours.store.tables import audit_log


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """Who did what to what, when, and the state before and after (JSON objects, or None)."""

    id: int
    at: datetime
    key_id: str
    key_name: str
    action: str
    target: str
    outcome: str
    reason: str | None
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    trace_id: str | None


class Audit(Repository):
    """The audit log, in the unit of work's transaction."""

    __slots__ = ()

    def record(
        self,
        *,
        at: datetime,
        key_id: str,
        key_name: str,
        action: str,
        target: str,
        outcome: str,
        reason: str | None = None,
        before: dict[str, Any] | None = None,
        after: dict[str, Any] | None = None,
        trace_id: str | None = None,
    ) -> int:
        """Add an entry; its id."""
        entry_id: int = self._conn.execute(
            audit_log.insert()
            .values(
                at=at,
                key_id=key_id,
                key_name=key_name,
                action=action,
                target=target,
                outcome=outcome,
                reason=reason,
                before=_json(before),
                after=_json(after),
                trace_id=trace_id,
            )
            .returning(audit_log.c.id)
        ).scalar_one()
        return entry_id

    def page(
        self, *, limit: int, before_id: int | None = None, target: str | None = None
    ) -> list[AuditEntry]:
        """Up to ``limit`` entries, newest first, older than ``before_id``; of ``target`` only
        when given."""
        c = audit_log.c
        query = sa.select(audit_log).order_by(c.id.desc()).limit(limit)
        if before_id is not None:
            query = query.where(c.id < before_id)
        if target is not None:
            query = query.where(c.target == target)
        return [_entry(row) for row in self._conn.execute(query)]

    def done(self, action: str, target: str) -> AuditEntry | None:
        """The latest entry that did ``action`` to ``target``, or None."""
        c = audit_log.c
        row = self._conn.execute(
            sa.select(audit_log)
            .where(c.target == target, c.action == action, c.outcome == "done")
            .order_by(c.id.desc())
            .limit(1)
        ).first()
        return None if row is None else _entry(row)


def _json(value: dict[str, Any] | None) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True, default=str)


def _entry(row: sa.Row[Any]) -> AuditEntry:
    m = row._mapping
    return AuditEntry(
        id=m["id"],
        at=m["at"],
        key_id=m["key_id"],
        key_name=m["key_name"],
        action=m["action"],
        target=m["target"],
        outcome=m["outcome"],
        reason=m["reason"],
        before=None if m["before"] is None else json.loads(m["before"]),
        after=None if m["after"] is None else json.loads(m["after"]),
        trace_id=m["trace_id"],
    )
