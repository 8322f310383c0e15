"""The demo's documents by email: each invoice and credit note of a customer who chose email,
sent by the mail worker to the demo's own mail server (``mailbox.DemoMailbox``), each with the
link to the customer's page that ``make demo SERVE=1`` serves."""

from __future__ import annotations

import re
from email import message_from_bytes, policy
from email.message import EmailMessage

from freehours.invoicing.mail import DocumentMail, PageLinks, Sender
from freehours.invoicing.smtp import SmtpServer
from freehours.operations.runtime import Runtime
from freehours.sim.demo.mailbox import DemoMailbox
from freehours.sim.demo.model import DemoResult
from freehours.workers.mail import mail_tasks
from freehours.workers.worker import Worker

#: The key the demo signs its page links with: the demo's own, not a secret (``make demo
#: SERVE=1`` opens them with it). A deployment sets FREEHOURS_PAGE_SECRET to a secret of its own.
DEMO_PAGE_SECRET = "the-demo-signs-its-links-with-this-not-a-secret"  # noqa: S105 - not one
MAIL_DIR = "mail"
_LINK = re.compile(r"http://127\.0\.0\.1:\d+/my/\S+")


def send_mail(runtime: Runtime, result: DemoResult) -> None:
    """Send every queued document's email to the demo's mailbox, and check each was received
    once; the first customer's page link into the result."""
    settings = runtime.settings
    with DemoMailbox(result.config.out / MAIL_DIR) as box:
        links = PageLinks(settings.public_url, DEMO_PAGE_SECRET.encode(), settings.page_link_days)
        server = SmtpServer("127.0.0.1", box.port, "none", deadline_seconds=10)
        mail = DocumentMail(
            runtime.store, runtime.clock, Sender(server, "billing@example-energy.example", links)
        )
        worker = Worker(runtime.store, mail_tasks(mail), clock=runtime.clock)
        while worker.run_due():
            pass
        received = box.received
    with runtime.store.read() as unit:
        counts = unit.mail.counts()
    result.mail = {**counts, "received": received}
    if counts["queued"] or counts["failed"] or counts["sent"] != received:
        result.failures.append(
            f"documents by email: {counts['sent']} sent, {counts['queued']} still queued,"
            f" {counts['failed']} failed, {received} received by the mailbox"
        )
    for path in sorted((result.config.out / MAIL_DIR).glob("*.eml")):
        message = message_from_bytes(path.read_bytes(), policy=policy.default)
        assert isinstance(message, EmailMessage)
        plain = message.get_body(("plain",))
        found = None if plain is None else _LINK.search(plain.get_content())
        if found is not None:
            result.page_link = found.group(0)
            return
    if counts["sent"]:
        result.failures.append("documents by email: no email carried a link to the customer's page")
