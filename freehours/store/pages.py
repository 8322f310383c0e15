"""Customers' own pages (``unit.pages``): the random id a signed link names, by NMI, and its
revocation (docs/invoices.md, Each customer's page)."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa

from freehours.domain.page_links import new_page_id
from freehours.store.repository import Repository
from freehours.store.tables import customer_pages


class Pages(Repository):
    __slots__ = ()

    def page_for(self, nmi: str, *, at: datetime) -> str:
        """The customer's page id that is not revoked, made now if they have none."""
        c = customer_pages.c
        found = self._conn.execute(
            sa.select(c.page_id)
            .where(c.nmi == nmi, c.revoked_at.is_(None))
            .order_by(c.created_at.desc())
            .limit(1)
        ).scalar_one_or_none()
        if found is not None:
            return str(found)
        page_id = new_page_id()
        self._conn.execute(customer_pages.insert().values(page_id=page_id, nmi=nmi, created_at=at))
        return page_id

    def nmi_of(self, page_id: str) -> str | None:
        """The NMI whose page ``page_id`` is, None where there is none or it is revoked."""
        c = customer_pages.c
        found = self._conn.execute(
            sa.select(c.nmi).where(c.page_id == page_id, c.revoked_at.is_(None))
        ).scalar_one_or_none()
        return None if found is None else str(found)

    def revoke(self, nmi: str, *, at: datetime) -> int:
        """Every link to the customer's page stops opening: the pages revoked."""
        c = customer_pages.c
        done = self._conn.execute(
            customer_pages.update()
            .where(c.nmi == nmi, c.revoked_at.is_(None))
            .values(revoked_at=at)
        )
        return int(done.rowcount or 0)
