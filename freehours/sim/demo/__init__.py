"""``freehours demo``: the whole system end to end on the embedded default, under injected faults.

1. **API**: a SQLite database in ``--out``, the HTTP API (``freehours serve``'s application) on a
   free 127.0.0.1 port, behind a gateway that can fail; an admin key and an ingest key.
2. **Catalogue**: the four built-in plans, and the customers, spread over every region, put
   through the API with the admin key.
3. **Meters**: ``freehours agent --simulate`` runs as a process of its own: its simulated meters
   read every half-hour of the demo's days (in the past, so every day is due at once; simulated
   time runs fast) and it posts them. The API is down as the agent starts (503 for
   ``OUTAGE_SECONDS`` from its first request): its breaker opens, it waits for a trial call,
   then sends what it spooled.
   Now and then the gateway loses an answer after the API stored the batch: the agent resends it
   and the API replays its first answer.
4. **Settlement**: settlement jobs were enqueued with the reads. One worker dies right after it
   claims a job and locks its quota; the worker pool starts, the rescuer finds the dead worker's
   job once its lease runs out and the quota's lock is taken over. Some first attempts meet a
   database error before the final write (released, retried), some cache writes fail, and one
   quota has a stale "pending" cache entry. The pool starts once the meters' reads are in: a read
   that lands after its day is settled opens the next version of the day, which step 5 shows.
5. **Invoices**: an invoice run (``freehours invoices run``'s), its jobs run by the worker pool,
   as of the moment the demo's billing period (July, monthly from the 1st) closed: its last
   day's data deadline passed (``invoice_as_of``). The demo's clock is the machine's and its days
   are the offer's first, in the past; a run as of now would also invoice every month since, for
   which the demo has no meter data, at the daily supply charge alone. The period's days without
   data (the demo reads ``--days`` of them) are billed as invoicing bills a day that got no data
   by its deadline: supply, no energy.
6. **Revision**: the meter data provider revises one invoiced day (half its reads: an estimate
   replaced by the actual), a NEM12 file that ``freehours agent --nem12-dir`` sends: the quota
   reopens as version 2 and books the difference. A second run, a day after the first, credits
   exactly the difference on a credit note that names the invoice.
7. **Answers and bills**: every quota asked once more over HTTP (a replay, 200), every
   customer's bill fetched over HTTP.
8. **Documents**: every invoice and credit note written as PDF and HTML to ``--out``/documents;
   each of a customer who chose email sent by the mail worker to the demo's own SMTP server
   (``mailbox.py``; the messages in ``--out``/mail), with the link to the customer's page.

A region whose customers had no free energy on a day is told why (``no_free_days``): what its
meters imported and exported inside that day's window, read back from the store.

Then the invariants are checked: every customer-day settled (or aborted with its reason), one
credit per quota version and the ledger summing to the settled free energy, bills agreeing with
the settlements, no meter data left behind; one invoice per customer and period, each day's free
energy on its documents the ledger's to the 0.001 kWh, the credit note's total the difference
between the period's bill after the revision and its invoice, numbers without a gap.

Leases and settlement locks are 5 s here instead of 30 s, so that the dead worker's job is rescued
within seconds; everything else runs as configured.
"""

from freehours.sim.demo.console import ConsoleServer, console_server
from freehours.sim.demo.model import (
    DemoConfig,
    DemoDocument,
    DemoProgress,
    DemoResult,
    counted,
    invoice_as_of,
    kwh_figure,
)
from freehours.sim.demo.run import run_demo

__all__ = [
    "ConsoleServer",
    "DemoConfig",
    "DemoDocument",
    "DemoProgress",
    "DemoResult",
    "console_server",
    "counted",
    "invoice_as_of",
    "kwh_figure",
    "run_demo",
]
