"""Documents sent by email (docs/invoices.md, Delivery by email): the message (a short text and
HTML body, the document's PDF attached) and one delivery's attempt.

An attempt is two short transactions around the SMTP conversation, never one held open across
it: ``begin`` (counted, marked in flight), the message sent, then ``sent`` or ``failed``. A
worker that dies after the server accepted the message and before the second commit leaves the
delivery in flight; run again, the attempt sends the message a second time, with the same
Message-ID (a mail client shows one), and marks it ``possible_duplicate`` (counted:
``freehours_mail_possible_duplicates_total``).
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from datetime import datetime
from email.charset import QP, Charset
from email.header import Header
from email.message import Message
from email.mime.application import MIMEApplication
from email.mime.multipart import MIMEMultipart
from email.mime.nonmultipart import MIMENonMultipart
from email.utils import format_datetime, formataddr
from enum import StrEnum

import structlog
from prometheus_client import Counter

from freehours.clock import Clock
from freehours.documents import wording
from freehours.documents.model import DocumentKind, InvoiceDocument
from freehours.domain.contacts import Contact, Delivery
from freehours.domain.page_links import sign
from freehours.faults import Faults, NoFaults
from freehours.invoicing.documents import document_of
from freehours.invoicing.smtp import NotSent, Refused, SmtpClient, SmtpServer
from freehours.store.database import Store
from freehours.store.invoices import StoredDocument
from freehours.store.mail import MailDelivery

log = structlog.get_logger(__name__)

#: The bodies' text, quoted-printable: readable as it is sent, as mail filters like it.
_UTF8 = Charset("utf-8")
_UTF8.body_encoding = QP

MAIL_ATTEMPTS_TOTAL = Counter(
    "freehours_mail_attempts_total",
    "Attempts to send a document by email, by outcome (sent, retry, refused)",
    ["outcome"],
)
MAIL_POSSIBLE_DUPLICATES = Counter(
    "freehours_mail_possible_duplicates_total",
    "Documents sent again after an attempt died between the server's acceptance and its commit",
)


@dataclass(frozen=True, slots=True)
class PageLinks:
    """Links to customers' own pages in their emails: under ``public_url``, signed with
    ``secret``, opening for ``days``."""

    public_url: str
    secret: bytes
    days: int

    def link(self, page_id: str, now: datetime) -> str:
        expires = int(now.timestamp()) + self.days * 86_400
        return f"{self.public_url.rstrip('/')}/my/{sign(page_id, expires, self.secret)}"


@dataclass(frozen=True, slots=True)
class Sender:
    """Who documents come from, through which server, and the links to pages they carry."""

    server: SmtpServer | None
    address: str
    links: PageLinks | None = None

    @property
    def domain(self) -> str:
        return self.address.rpartition("@")[2] or "localhost"


def message_id(delivery: MailDelivery, domain: str) -> str:
    """The delivery's Message-ID: the same on every attempt of it."""
    return f"<{delivery.number}.{delivery.sequence}@{domain}>"


def compose(
    stored: StoredDocument,
    contact: Contact,
    delivery: MailDelivery,
    sender: Sender,
    *,
    at: datetime,
    link: str | None = None,
) -> Message:
    """The email of ``stored`` to ``contact``: a short text and HTML body (what the document is,
    the amount, when it is due, the free energy it had) and its PDF attached.

    Built with the ``email.mime`` classes, whose headers are written as given (non-ASCII ones
    encoded here): a third of the cost of ``EmailMessage``, which parses every header it is
    given (2.1 ms a message against 0.7, beside a PDF of 4)."""
    assert contact.email is not None
    document = document_of(stored)
    retailer = document.retailer
    paragraphs = body(document, contact.name, link)
    alternative = MIMEMultipart("alternative")
    alternative.attach(_text("\n\n".join(paragraphs) + "\n", "plain"))
    alternative.attach(_text(_html(paragraphs, document, link), "html"))
    from freehours.documents.pdf import render_pdf  # noqa: PLC0415 - reportlab, only to send

    attachment = MIMEApplication(render_pdf(document), "pdf")
    attachment.add_header("Content-Disposition", "attachment", filename=f"{document.number}.pdf")
    message = MIMEMultipart("mixed", _subparts=[alternative, attachment])
    message["From"] = formataddr((retailer.name, sender.address), "utf-8")
    message["To"] = formataddr((contact.name, contact.email), "utf-8")
    message["Subject"] = _header(subject(document))
    message["Date"] = format_datetime(at)
    message["Message-ID"] = message_id(delivery, sender.domain)
    message["Auto-Submitted"] = "auto-generated"
    return message


def _header(text: str) -> str:
    return text if text.isascii() else Header(text, "utf-8").encode()


def _text(content: str, subtype: str) -> MIMENonMultipart:
    part = MIMENonMultipart("text", subtype)
    part.set_payload(content, _UTF8)
    return part


def subject(document: InvoiceDocument) -> str:
    what = "credit note" if document.kind is DocumentKind.CREDIT_NOTE else "bill"
    return f"Your {document.retailer.name} {what} {document.number}"


def body(document: InvoiceDocument, name: str, link: str | None = None) -> list[str]:
    """The paragraphs of the email, in plain words."""
    label = document.kind.label.lower()
    headline = wording.headline(document)
    lines = [
        f"Dear {name},",
        f"Your {label} {document.number} for {wording.period(document)} is attached as a PDF.",
        f"{headline.label}: {headline.amount}. {headline.due}.",
    ]
    free = wording.free_energy(document)
    if free is not None and not document.kind.corrects_another:
        lines.append(f"{free[0]}, {free[1][0].lower()}{free[1][1:]}.")
    if link is not None:
        lines.append(f"See each day's free energy, and all your bills, on your own page: {link}")
    retailer = document.retailer
    lines.append(
        f"Questions about this {label}? Call us on {retailer.phone} or visit {retailer.website}."
    )
    lines.append(f"{retailer.name}")
    return lines


def _html(paragraphs: list[str], document: InvoiceDocument, link: str | None) -> str:
    parts = ""
    for paragraph in paragraphs:
        text = html.escape(paragraph)
        if link is not None and paragraph.endswith(link):
            text = html.escape(paragraph[: -len(link)].rstrip(": ")) + (
                f': <a href="{html.escape(link)}">open your page</a>'
            )
        parts += f"<p>{text}</p>"
    title = html.escape(subject(document))
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{title}</title></head>"
        '<body style="font-family: sans-serif; font-size: 16px; line-height: 1.5">'
        f"{parts}</body></html>"
    )


@dataclass(frozen=True, slots=True)
class Attempt:
    """What one attempt did: ``retry_in`` None when it is over (sent, failed, or nothing to
    send)."""

    what: str
    retry: bool = False


class MailFaultPoint(StrEnum):
    """Where a test makes an attempt fail or hang (``freehours.faults``)."""

    #: The server has accepted the message; its outcome is not committed yet.
    ACCEPTED = "accepted"


class DocumentMail:
    """Sends a finalised document's email: one delivery's attempt at a time."""

    def __init__(
        self,
        store: Store,
        clock: Clock,
        sender: Sender,
        faults: Faults[MailFaultPoint, int] | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.sender = sender
        self.faults: Faults[MailFaultPoint, int] = faults or NoFaults()
        #: Each mail runner's connection, kept for its next message.
        self.client = None if sender.server is None else SmtpClient(sender.server)

    def attempt(self, delivery_id: int, *, last: bool = False) -> Attempt:
        """Try delivery ``delivery_id`` once; ``last``: its job has no attempt after this one,
        so a temporary failure fails it for good."""
        server = self.sender.server
        if server is None:
            return Attempt("no SMTP server configured (FREEHOURS_SMTP_HOST)", retry=True)
        links = self.sender.links
        link = None
        with self.store.write() as unit:
            now = self.clock.now()
            delivery = unit.mail.begin(delivery_id, at=now)
            if delivery is None:
                return Attempt("not queued")
            stored = unit.invoices.get_document(delivery.number)
            contact = unit.catalog.contacts([delivery.nmi]).get(delivery.nmi)
            if links is not None:
                link = links.link(unit.pages.page_for(delivery.nmi, at=now), now)
        assert stored is not None, "a delivery's document is kept by its foreign key"
        if delivery.attempt_started_at is not None:
            MAIL_POSSIBLE_DUPLICATES.inc()
            log.warning("mail_possible_duplicate", delivery=delivery_id, number=delivery.number)
        if contact is None or contact.email is None or contact.delivery is not Delivery.EMAIL:
            return self._failed(delivery, None, "the customer has no email delivery now", True)
        message = compose(stored, contact, delivery, self.sender, at=self.clock.now(), link=link)
        try:
            assert self.client is not None
            code = self.client.send(message, contact.email)
        except Refused as exc:
            return self._failed(delivery, exc.code, exc.reply, True)
        except NotSent as exc:
            return self._failed(delivery, exc.code, exc.reply, last)
        self.faults.check(MailFaultPoint.ACCEPTED, delivery_id)
        with self.store.write() as unit:
            unit.mail.sent(delivery_id, code=code, at=self.clock.now())
        MAIL_ATTEMPTS_TOTAL.labels("sent").inc()
        log.info("mail_sent", delivery=delivery_id, number=delivery.number)
        return Attempt(f"sent ({code})")

    def _failed(self, delivery: MailDelivery, code: int | None, reply: str, final: bool) -> Attempt:
        with self.store.write() as unit:
            unit.mail.failed(delivery.id, code=code, error=reply, at=self.clock.now(), final=final)
        MAIL_ATTEMPTS_TOTAL.labels("refused" if final else "retry").inc()
        log.warning(
            "mail_failed" if final else "mail_not_sent",
            delivery=delivery.id,
            number=delivery.number,
            code=code,
            reason=reply,
        )
        return Attempt(f"{'failed' if final else 'not sent'}: {reply}", retry=not final)
