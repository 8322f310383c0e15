"""Documents sent by email (``unit.mail``): each send of a finalised document to a customer who
chose email, its attempts' outcome, and resends (docs/invoices.md, Delivery by email).

A first send is written with its document, in the document's own transaction
(``Invoices.insert_documents`` calls ``queue_for``), with one ``mail-delivery`` job: a document
that committed has its send queued, one that rolled back has none. The job's attempt is two
short transactions around the SMTP conversation (``begin``, then ``sent`` or ``failed``), so a
worker that dies between the server's acceptance and the second commit leaves
``attempt_started_at`` set: the attempt run again by the rescuer sends the message again (same
Message-ID) and marks the delivery ``possible_duplicate``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

import sqlalchemy as sa

from freehours.domain.webhooks import EventType
from freehours.store.jobs import Jobs, NewJob
from freehours.store.repository import Repository
from freehours.store.tables import customer_contacts, mail_deliveries
from freehours.store.webhooks import NewEvent, Webhooks

#: The job kind of one delivery's attempt.
MAIL_KIND = "mail-delivery"
#: How long a delivery is tried before it fails for good: a mail relay down for longer is an
#: incident, and the customer's document is still on their page.
MAIL_DEADLINE = timedelta(days=2)
#: Attempts of one delivery (retried with full-jitter backoff on temporary failures).
MAIL_ATTEMPTS = 12


class MailStatus(StrEnum):
    QUEUED = "queued"
    SENT = "sent"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class MailDelivery:
    """One send of a document by email."""

    id: int
    number: str
    nmi: str
    sequence: int
    status: MailStatus
    attempts: int
    created_at: datetime
    attempt_started_at: datetime | None
    finished_at: datetime | None
    last_code: int | None
    last_error: str | None
    possible_duplicate: bool
    requested_by: str | None

    def as_json(self) -> dict[str, Any]:
        """As the API and the console show it: no address, no name."""
        return {
            "id": self.id,
            "number": self.number,
            "sequence": self.sequence,
            "status": self.status.value,
            "attempts": self.attempts,
            "created_at": _iso(self.created_at),
            "finished_at": _iso(self.finished_at),
            "last_code": self.last_code,
            "last_error": self.last_error,
            "possible_duplicate": self.possible_duplicate,
            "resend": self.requested_by is not None,
        }


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat().replace("+00:00", "Z")


class Mail(Repository):
    """The ``mail_deliveries`` table and the jobs that send them."""

    __slots__ = ()

    def queue_for(self, documents: Sequence[tuple[str, str]], *, at: datetime) -> list[int]:
        """A first send of each document (number, NMI) whose customer chose email, with its
        job, in the caller's transaction: the ids written."""
        if not documents:
            return []
        nmis = sorted({nmi for _, nmi in documents})
        c = customer_contacts.c
        by_email = set(
            self._conn.execute(
                sa.select(c.nmi).where(c.nmi.in_(nmis), c.delivery == "email")
            ).scalars()
        )
        wanted = [(number, nmi) for number, nmi in documents if nmi in by_email]
        return self._queue([(number, nmi, 1, None) for number, nmi in wanted], at=at)

    def resend(self, number: str, nmi: str, *, actor: str, at: datetime) -> MailDelivery:
        """Another send of document ``number``, asked for by ``actor``: a new delivery (the next
        sequence) and its job, in the caller's transaction."""
        d = mail_deliveries.c
        last = self._conn.execute(
            sa.select(sa.func.max(d.sequence)).where(d.number == number)
        ).scalar_one()
        (ident,) = self._queue([(number, nmi, (last or 0) + 1, actor)], at=at)
        found = self.get(ident)
        assert found is not None
        return found

    def _queue(
        self, rows: Sequence[tuple[str, str, int, str | None]], *, at: datetime
    ) -> list[int]:
        """Write ``rows`` (number, NMI, sequence, actor) queued, and a job for each, in a few
        statements however many (a batch of an invoice run has a thousand): their ids."""
        if not rows:
            return []
        self._conn.execute(
            mail_deliveries.insert(),
            [
                {
                    "number": number,
                    "nmi": nmi,
                    "sequence": sequence,
                    "status": MailStatus.QUEUED.value,
                    "attempts": 0,
                    "created_at": at,
                    "possible_duplicate": False,
                    "requested_by": actor,
                }
                for number, nmi, sequence, actor in rows
            ],
        )
        d = mail_deliveries.c
        wanted = {(number, sequence) for number, _, sequence, _ in rows}
        found = self._conn.execute(
            sa.select(d.id, d.number, d.sequence).where(
                d.number.in_(sorted({number for number, *_ in rows}))
            )
        )
        written = sorted(int(i) for i, number, seq in found if (number, seq) in wanted)
        Jobs(self._conn, self._driver).enqueue_many(
            [
                NewJob(
                    MAIL_KIND,
                    f"mail:{ident}",
                    {"delivery_id": ident},
                    at,
                    at + MAIL_DEADLINE,
                    MAIL_ATTEMPTS,
                )
                for ident in written
            ],
            now=at,
        )
        return written

    def get(self, ident: int) -> MailDelivery | None:
        row = self._conn.execute(
            sa.select(mail_deliveries).where(mail_deliveries.c.id == ident)
        ).one_or_none()
        return None if row is None else _delivery(row)

    def of_document(self, number: str) -> list[MailDelivery]:
        """Document ``number``'s deliveries, first send first."""
        d = mail_deliveries.c
        rows = self._conn.execute(
            sa.select(mail_deliveries).where(d.number == number).order_by(d.sequence)
        )
        return [_delivery(row) for row in rows]

    def latest_of(self, numbers: Sequence[str]) -> dict[str, MailDelivery]:
        """The newest delivery of each of ``numbers`` that has one (one statement)."""
        if not numbers:
            return {}
        d = mail_deliveries.c
        rows = self._conn.execute(
            sa.select(mail_deliveries)
            .where(d.number.in_(sorted(set(numbers))))
            .order_by(d.number, d.sequence)
        )
        return {row.number: _delivery(row) for row in rows}  # the last read is the newest

    def begin(self, ident: int, *, at: datetime) -> MailDelivery | None:
        """An attempt of delivery ``ident`` begins: counted, and marked in flight, the delivery
        as it was before (None: not queued any more, nothing to send). One found in flight
        already was attempted by a worker that died: this attempt may send it a second time."""
        d = mail_deliveries.c
        row = self._conn.execute(
            sa.select(mail_deliveries).where(d.id == ident).with_for_update()
        ).one_or_none()
        if row is None or row.status != MailStatus.QUEUED.value:
            return None
        before = _delivery(row)
        self._conn.execute(
            mail_deliveries.update()
            .where(d.id == ident)
            .values(
                attempts=d.attempts + 1,
                attempt_started_at=at,
                possible_duplicate=(
                    before.possible_duplicate or before.attempt_started_at is not None
                ),
            )
        )
        return before

    def sent(self, ident: int, *, code: int, at: datetime) -> None:
        d = mail_deliveries.c
        self._conn.execute(
            mail_deliveries.update()
            .where(d.id == ident)
            .values(
                status=MailStatus.SENT.value,
                attempt_started_at=None,
                finished_at=at,
                last_code=code,
                last_error=None,
            )
        )

    def failed(
        self, ident: int, *, code: int | None, error: str, at: datetime, final: bool
    ) -> None:
        """An attempt failed: for good (``final``: the delivery failed, and its webhook event
        is published in this transaction), or to be tried again."""
        d = mail_deliveries.c
        values: dict[str, Any] = {
            "attempt_started_at": None,
            "last_code": code,
            "last_error": error,
        }
        if final:
            values.update(status=MailStatus.FAILED.value, finished_at=at)
        self._conn.execute(mail_deliveries.update().where(d.id == ident).values(**values))
        if final:
            found = self.get(ident)
            assert found is not None
            Webhooks(self._conn, self._driver).publish(
                [
                    NewEvent(
                        EventType.DOCUMENT_DELIVERY_FAILED.value,
                        at,
                        {
                            "number": found.number,
                            "nmi": found.nmi,
                            "delivery_id": found.id,
                            "sequence": found.sequence,
                            "code": code,
                            "error": error,
                        },
                    )
                ]
            )

    def sent_between(self) -> tuple[datetime, datetime]:
        """When the first delivery sent finished, and the last (a benchmark's rate)."""
        d = mail_deliveries.c
        first, last = self._conn.execute(
            sa.select(
                sa.func.min(d.finished_at, type_=d.finished_at.type),
                sa.func.max(d.finished_at, type_=d.finished_at.type),
            ).where(d.status == MailStatus.SENT.value)
        ).one()
        return first, last

    def counts(self) -> dict[str, int]:
        """Deliveries by status."""
        d = mail_deliveries.c
        rows = self._conn.execute(sa.select(d.status, sa.func.count()).group_by(d.status))
        found = dict.fromkeys((s.value for s in MailStatus), 0)
        found.update({status: int(count) for status, count in rows})
        return found


def _delivery(row: sa.Row[Any]) -> MailDelivery:
    return MailDelivery(
        id=int(row.id),
        number=row.number,
        nmi=row.nmi,
        sequence=row.sequence,
        status=MailStatus(row.status),
        attempts=row.attempts,
        created_at=row.created_at,
        attempt_started_at=row.attempt_started_at,
        finished_at=row.finished_at,
        last_code=row.last_code,
        last_error=row.last_error,
        possible_duplicate=bool(row.possible_duplicate),
        requested_by=row.requested_by,
    )
