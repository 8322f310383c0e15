"""Finalised documents sent by email, end to end: an invoice run queues a send for each customer
who chose email (in the documents' transaction), the mail worker sends it through a real SMTP
server (STARTTLS, AUTH) and the message is read back: its headers, its body, its PDF's text."""

from __future__ import annotations

import io

import pypdf
import sqlalchemy as sa

from freehours.domain.contacts import Contact, Delivery
from freehours.invoicing.mail import MAIL_POSSIBLE_DUPLICATES, DocumentMail, Sender
from freehours.operations.actions import Actions, Operator
from freehours.store.database import Store
from freehours.store.mail import MailStatus
from freehours.store.tables import jobs, webhook_events
from freehours.workers.mail import mail_tasks
from freehours.workers.worker import Worker
from tests.invoicing.support import System
from tests.mail.conftest import Smtp

FROM = "billing@retailer.example"
JANE = Contact(
    "Jane Citizen",
    ("1 Sun Street", "Newtown NSW 2042"),
    email="jane.citizen@example.net",
    delivery=Delivery.EMAIL,
)
POSTED = Contact("Pat Post", ("2 Moon Road", "Newtown NSW 2042"), delivery=Delivery.POST)


def invoiced(store: Store) -> tuple[System, str, str]:
    """A run's invoices of two customers: one who chose email, one post."""
    system = System.on(store)
    emailed, posted = system.customers(2)
    with store.write() as unit:
        unit.catalog.put_contacts({emailed: JANE, posted: POSTED}, updated_at=system.clock.now())
    system.month([emailed, posted])
    system.run()
    return system, emailed, posted


def mailer(system: System, smtp: Smtp) -> Worker:
    mail = DocumentMail(system.store, system.clock, Sender(smtp.server, FROM))
    return Worker(system.store, mail_tasks(mail), clock=system.clock)


def test_an_invoice_is_emailed_once_with_its_pdf(store: Store, smtp: Smtp) -> None:
    system, emailed, posted = invoiced(store)
    documents = {d.nmi: d for d in system.documents()}
    invoice = documents[emailed]
    with store.read() as unit:
        (queued,) = unit.mail.of_document(invoice.number)
        assert unit.mail.of_document(documents[posted].number) == []  # post: not emailed
    assert (queued.status, queued.sequence, queued.attempts) == (MailStatus.QUEUED, 1, 0)

    worker = mailer(system, smtp)
    while worker.run_due():
        pass
    (message,) = smtp.messages()
    assert message["X-Envelope-To"] == JANE.email
    assert message["To"] == f"Jane Citizen <{JANE.email}>"
    assert message["From"].addresses[0].addr_spec == FROM
    assert message["Message-ID"] == f"<{invoice.number}.1@retailer.example>"
    assert message["Subject"].endswith(f"bill {invoice.number}")
    text = message.get_body(("plain",))
    assert text is not None
    words = " ".join(text.get_content().split())
    assert "Dear Jane Citizen," in words
    assert f"Your tax invoice {invoice.number} for 1 July 2026 to 31 July 2026" in words
    assert f"Amount due: ${invoice.figures.total:,.2f}." in words
    assert "Free energy used:" in words
    page = message.get_body(("html",))
    assert page is not None
    assert "Dear Jane Citizen," in page.get_content()
    (attachment,) = list(message.iter_attachments())
    assert attachment.get_filename() == f"{invoice.number}.pdf"
    pdf = pypdf.PdfReader(io.BytesIO(attachment.get_content()))
    first = pdf.pages[0].extract_text()
    assert invoice.number in first
    assert "Jane Citizen" in first

    with store.read() as unit:
        (sent,) = unit.mail.of_document(invoice.number)
    assert (sent.status, sent.attempts, sent.last_code) == (MailStatus.SENT, 1, 250)
    assert not sent.possible_duplicate
    # Sent once: the job is done, another pass sends nothing.
    system.clock.advance(3600)
    while worker.run_due():
        pass
    assert len(smtp.messages()) == 1


def test_a_temporary_refusal_is_tried_again_later(store: Store, smtp: Smtp) -> None:
    system, emailed, _ = invoiced(store)
    (invoice,) = [d for d in system.documents() if d.nmi == emailed]
    smtp.reply_next("rcpt", "451 4.7.1 Greylisted, come back later")
    worker = mailer(system, smtp)
    worker.run_due()
    with store.read() as unit:
        (waiting,) = unit.mail.of_document(invoice.number)
    assert (waiting.status, waiting.attempts, waiting.last_code) == (MailStatus.QUEUED, 1, 451)
    assert smtp.messages() == []
    system.clock.advance(3600)  # past the job's backoff
    while worker.run_due():
        pass
    with store.read() as unit:
        (sent,) = unit.mail.of_document(invoice.number)
    assert (sent.status, sent.attempts) == (MailStatus.SENT, 2)
    assert len(smtp.messages()) == 1


def test_a_permanent_refusal_fails_it_for_good_with_its_webhook_event(
    store: Store, smtp: Smtp
) -> None:
    system, emailed, _ = invoiced(store)
    (invoice,) = [d for d in system.documents() if d.nmi == emailed]
    with store.write() as unit:
        unit.webhooks.create_endpoint(
            url="https://hooks.retailer.example/mail",
            description="mail",
            events=("document.delivery_failed",),
            secret="whsec_" + "A" * 43,
            now=system.clock.now(),
        )
    smtp.reply_next("rcpt", f"550 5.1.1 <{JANE.email}>: Recipient address rejected")
    worker = mailer(system, smtp)
    while worker.run_due():
        pass
    with store.read() as unit:
        (failed,) = unit.mail.of_document(invoice.number)
        events = unit.connection.execute(sa.select(webhook_events.c.payload)).scalars().all()
        mail_jobs = unit.connection.execute(
            sa.select(jobs.c.state).where(jobs.c.kind == "mail-delivery")
        ).scalars()
        assert list(mail_jobs) == ["COMPLETED"]  # failed for good: not tried again
    assert (failed.status, failed.last_code) == (MailStatus.FAILED, 550)
    assert failed.last_error is not None
    assert JANE.email not in failed.last_error
    (event,) = events
    assert '"type":"document.delivery_failed"' in event
    assert invoice.number in event
    assert JANE.email not in event
    assert "Jane" not in event

    # Resent once the address is mended: a new delivery, audited.
    actions = Actions(store, system.clock, system.settlements)
    outcome = actions.resend_document(Operator("key_1", "ops"), invoice.number)
    assert outcome.done
    while worker.run_due():
        pass
    with store.read() as unit:
        first, second = unit.mail.of_document(invoice.number)
        (entry,) = unit.audit.page(limit=10)
    assert (first.status, second.status, second.sequence) == (
        MailStatus.FAILED,
        MailStatus.SENT,
        2,
    )
    assert second.requested_by == "ops"
    assert (entry.action, entry.target) == ("document.resend", f"document:{invoice.number}")
    (message,) = smtp.messages()
    assert message["Message-ID"] == f"<{invoice.number}.2@retailer.example>"


def test_an_attempt_that_died_after_sending_is_sent_again_and_counted(
    store: Store, smtp: Smtp
) -> None:
    """The worker dies after the server accepted, before its commit: in-process here (the
    delivery left in flight, as that worker's first transaction left it); with a real SIGKILL
    in ``test_killed.py``."""
    system, emailed, _ = invoiced(store)
    (invoice,) = [d for d in system.documents() if d.nmi == emailed]
    with store.read() as unit:
        (queued,) = unit.mail.of_document(invoice.number)
    with store.write() as unit:
        unit.mail.begin(queued.id, at=system.clock.now())  # the dead attempt's first commit
    before = MAIL_POSSIBLE_DUPLICATES._value.get()
    mail = DocumentMail(system.store, system.clock, Sender(smtp.server, FROM))
    assert mail.attempt(queued.id).what == "sent (250)"
    with store.read() as unit:
        (sent,) = unit.mail.of_document(invoice.number)
    assert (sent.status, sent.attempts, sent.possible_duplicate) == (MailStatus.SENT, 2, True)
    assert MAIL_POSSIBLE_DUPLICATES._value.get() == before + 1
