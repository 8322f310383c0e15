"""Documents sent by email as durable jobs: ``mail-delivery`` attempts one delivery
(``freehours.invoicing.mail.DocumentMail.attempt``), in the ``mail`` queue of its own, so that a
mail server that never answers holds only the mail runners (each attempt within
``FREEHOURS_SMTP_DEADLINE_SECONDS``), never a settlement's or an invoice run's.

A temporary failure (no connection, a timeout, a 4xx reply) fails the job's attempt, retried by
the job's own policy (full jitter, at most ``MAIL_ATTEMPTS``, within ``MAIL_DEADLINE``); its last
attempt fails the delivery for good, as a permanent refusal (5xx) does at once: a job done, the
failure the delivery's, with its webhook event.
"""

from __future__ import annotations

import structlog

from freehours import defaults
from freehours.errors import FreehoursError
from freehours.invoicing.mail import DocumentMail
from freehours.jobs.job import Done, Job, Task
from freehours.store.mail import MAIL_KIND


class MailNotSent(FreehoursError):
    """A delivery's attempt failed for now: its job is retried."""


class MailTask:
    """The ``mail-delivery`` handler."""

    queue = defaults.MAIL_QUEUE

    def __init__(self, mail: DocumentMail) -> None:
        self.mail = mail

    def __call__(self, job: Job) -> Done:
        delivery_id = int(job.payload["delivery_id"])
        structlog.contextvars.bind_contextvars(delivery=delivery_id)
        last = job.attempts + 1 >= job.max_attempts
        outcome = self.mail.attempt(delivery_id, last=last)
        if outcome.retry:
            raise MailNotSent(f"mail delivery {delivery_id}: {outcome.what}")
        return Done(outcome.what)


def mail_tasks(mail: DocumentMail) -> dict[str, Task]:
    """The task that sends documents by email: what ``Worker`` takes, beside the others."""
    return {MAIL_KIND: MailTask(mail)}
