"""Webhook deliveries as durable jobs: ``webhook-fanout`` writes the deliveries of the events
one state change's transaction published (``freehours.webhooks.service.Webhooks.fan_out``), and
``webhook-delivery`` attempts one delivery (``freehours.webhooks.service.Webhooks.attempt``).

The fan-out is the settlement's outbox carried on: the job is enqueued with its events, so a
worker that dies before it runs, or while it runs, leaves it to run again, writing only the
deliveries still missing (one per event and endpoint, a unique key).

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
from freehours.store.webhooks import DELIVERY_KIND, FANOUT_KIND
from freehours.webhooks.service import Webhooks


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


class FanOutTask:
    """The ``webhook-fanout`` handler."""

    #: Beside the deliveries it writes: never in the way of a settlement's or an invoice run's
    #: runners, however many endpoints there are.
    queue = defaults.WEBHOOK_QUEUE

    def __init__(self, webhooks: Webhooks) -> None:
        self.webhooks = webhooks

    def __call__(self, job: Job) -> Done:
        events = [str(ident) for ident in job.payload["events"]]
        endpoints = {
            str(kind): [str(ident) for ident in idents]
            for kind, idents in job.payload["endpoints"].items()
        }
        written = self.webhooks.fan_out(events, endpoints)
        return Done(f"{written} deliveries of {len(events)} events")


def webhook_tasks(webhooks: Webhooks) -> dict[str, Task]:
    """The tasks that deliver webhooks: what ``Worker`` takes, beside the others."""
    return {FANOUT_KIND: FanOutTask(webhooks), DELIVERY_KIND: DeliveryTask(webhooks)}
