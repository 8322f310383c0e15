"""What each meter agent last said of itself: its circuit breaker's state and how often it
opened, its version, where it was heard from and when (its ``Freehours-Agent`` header, as the
API records it: ``freehours.api.agents``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa

from freehours.store.repository import Repository
from freehours.store.tables import agents


@dataclass(frozen=True, slots=True)
class AgentReport:
    """An agent's last report."""

    name: str
    breaker: str
    trips: int
    version: str
    address: str
    last_seen_at: datetime


_COLUMNS = ("breaker", "trips", "version", "address", "last_seen_at")


class Agents(Repository):
    """The agents' reports, in the unit of work's transaction."""

    __slots__ = ()

    def report(self, report: AgentReport) -> None:
        """Store ``report`` as its agent's last, unless one seen later is stored already."""
        upsert = self._driver.upsert(
            agents,
            key=["name"],
            update=_COLUMNS,
            where=lambda incoming: agents.c.last_seen_at <= incoming.last_seen_at,
        )
        self._conn.execute(
            upsert.values(
                name=report.name,
                breaker=report.breaker,
                trips=report.trips,
                version=report.version,
                address=report.address,
                last_seen_at=report.last_seen_at,
            )
        )

    def every(self) -> list[AgentReport]:
        """Every agent's last report, by name."""
        rows = self._conn.execute(sa.select(agents).order_by(agents.c.name))
        return [
            AgentReport(r.name, r.breaker, r.trips, r.version, r.address, r.last_seen_at)
            for r in rows
        ]
