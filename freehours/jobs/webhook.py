"""Webhook deliveries as durable jobs: ``webhook-delivery`` attempts one delivery
(``freehours.webhooks.Webhooks.attempt``).

The delivery's own schedule decides its retries (``freehours.domain.webhooks.next_attempt``): a
failed attempt raises ``RetryAfter`` with the schedule's wait, so the job is retried no sooner;
a delivery given up is a job done (its failure is the delivery's, recorded with its reason). A
worker that dies mid-attempt leaves the job to the rescuer, which runs it again: the delivery,
still pending, is sent again with the same ``webhook-id``.
"""

from __future__ import annotations

import structlog

from freehours import defaults
from freehours.jobs.job import Done, Job, RetryAfter, Task
from freehours.store.webhooks import DELIVERY_KIND
from freehours.webhooks import Webhooks


class DeliveryTask:
    """The ``webhook-delivery`` handler."""

    #: Its runners wait on receivers, however slow; no other kind's runners do.
    queue = defaults.WEBHOOK_QUEUE

    def __init__(self, webhooks: Webhooks) -> None:
        self.webhooks = webhooks

    def __call__(self, job: Job) -> Done:
        delivery_id = int(job.payload["delivery_id"])
        structlog.contextvars.bind_contextvars(delivery=delivery_id)
        outcome, wait = self.webhooks.attempt(delivery_id)
        if wait is not None:
            raise RetryAfter(wait.total_seconds(), f"webhook delivery {delivery_id}: {outcome}")
        return Done(outcome)


def webhook_tasks(webhooks: Webhooks) -> dict[str, Task]:
    """The task that delivers webhooks: what ``Worker`` takes, beside the others."""
    return {DELIVERY_KIND: DeliveryTask(webhooks)}
