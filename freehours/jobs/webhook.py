"""Webhook deliveries as durable jobs: ``webhook-delivery`` attempts one delivery
(``freehours.webhooks.Webhooks.attempt``).

The delivery's own schedule decides its retries (``freehours.domain.webhooks.next_attempt``): a
failed attempt raises ``RetryAfter`` with the schedule's wait, so the job is retried no sooner;
a delivery given up is a job done (its failure is the delivery's, recorded with its reason). A
worker that dies mid-attempt leaves the job to the rescuer, which runs it again: the delivery,
still pending, is sent again with the same ``webhook-id``. A delivery postponed without an
attempt (its endpoint's circuit open, or its attempts in flight at their cap) is a ``Snooze``:
no failure, no job attempt spent, so a long outage cannot run the job out of attempts.
"""

from __future__ import annotations

import structlog

from freehours import defaults
from freehours.jobs.job import Done, Job, RetryAfter, Snooze, Task
from freehours.store.webhooks import DELIVERY_KIND
from freehours.webhooks import Webhooks


class DeliveryTask:
    """The ``webhook-delivery`` handler."""

    #: Its runners wait on receivers, however slow; no other kind's runners do.
    queue = defaults.WEBHOOK_QUEUE

    def __init__(self, webhooks: Webhooks) -> None:
        self.webhooks = webhooks

    def __call__(self, job: Job) -> Done | Snooze:
        delivery_id = int(job.payload["delivery_id"])
        structlog.contextvars.bind_contextvars(delivery=delivery_id)
        outcome = self.webhooks.attempt(delivery_id)
        if outcome.postponed is not None:
            return Snooze(outcome.postponed.total_seconds(), outcome.what)
        if outcome.retry_in is not None:
            raise RetryAfter(
                outcome.retry_in.total_seconds(), f"webhook delivery {delivery_id}: {outcome.what}"
            )
        return Done(outcome.what)


def webhook_tasks(webhooks: Webhooks) -> dict[str, Task]:
    """The task that delivers webhooks: what ``Worker`` takes, beside the others."""
    return {DELIVERY_KIND: DeliveryTask(webhooks)}
