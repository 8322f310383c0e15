"""Invoice runs as durable jobs: ``invoice-run`` plans a run into batches, ``invoice-batch``
invoices one batch of accounts (``freehours.invoicing.service``).

Both are safe to run again: a run planned before plans nothing, and a batch done before is rolled
back whole (``Invoicing.invoice_batch``), so a worker that dies after its commit and before its
job is marked done costs a second look, never a second invoice. An exception (the database
unreachable, say) is a failed attempt, retried with backoff like any job's.
"""

from __future__ import annotations

import structlog

from freehours import defaults
from freehours.invoicing.model import BATCH_KIND, PLAN_KIND
from freehours.invoicing.service import Invoicing
from freehours.jobs.job import Done, Job, Task


class PlanTask:
    """The ``invoice-run`` handler."""

    queue = defaults.INVOICE_QUEUE

    def __init__(self, invoicing: Invoicing) -> None:
        self.invoicing = invoicing

    def __call__(self, job: Job) -> Done:
        run_id = str(job.payload["run_id"])
        structlog.contextvars.bind_contextvars(run_id=run_id)
        batches = self.invoicing.plan(run_id)
        return Done("planned before" if batches is None else f"planned: {batches} batches")


class BatchTask:
    """The ``invoice-batch`` handler."""

    #: Batch jobs one worker holds at once (``freehours.jobs.job.hold_limit``). A batch runs for
    #: a second or more, so a worker claiming its usual 68 would take a whole run of 10,000
    #: accounts (20 batches) and leave the other workers idle. Two: one drafting while the
    #: other waits on the database; a batch is mostly Python, and one process's threads share
    #: one core. Measured (bench invoicing, 10,000 accounts, two workers): 4 gave 564/s and
    #: 380 MiB a worker, 2 gave 631/s and 260 MiB.
    hold = 2
    queue = defaults.INVOICE_QUEUE

    def __init__(self, invoicing: Invoicing) -> None:
        self.invoicing = invoicing

    def __call__(self, job: Job) -> Done:
        run_id, batch = str(job.payload["run_id"]), int(job.payload["batch"])
        structlog.contextvars.bind_contextvars(run_id=run_id, batch=batch)
        outcome = self.invoicing.invoice_batch(run_id, batch, list(job.payload["nmis"]))
        if outcome.replayed:
            return Done("done before")
        counts = outcome.counts
        return Done(
            f"invoices {counts.invoices}, credit notes {counts.credit_notes}, adjustment"
            f" invoices {counts.adjustment_invoices}, waiting {counts.waiting}, held {counts.held}"
        )


def invoicing_tasks(invoicing: Invoicing) -> dict[str, Task]:
    """The tasks that carry out invoice runs: what ``Worker`` takes, beside the settlement's."""
    return {PLAN_KIND: PlanTask(invoicing), BATCH_KIND: BatchTask(invoicing)}
