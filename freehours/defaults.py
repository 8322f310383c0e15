"""The defaults that a setting and the object it configures share: written once, with their reasons.

An operator changes them through ``Settings`` (``FREEHOURS_*``), which maps itself onto the
policies in one place (``freehours.operations.runtime``: ``settlement_policy``, ``worker_config``,
``retry_policy``); tests and simulations build the policies directly and get the same values.
Both read this table, so a default cannot drift between the two. Stdlib only: the settings, the
settlement service, the job queue and the agent all import it.
"""

from __future__ import annotations

from datetime import timedelta

#: Every Redis key starts with it, so that deployments can share one Redis.
REDIS_PREFIX = "freehours:"

# --- settlement (``SettlementPolicy``; its lock, ``LOCK_TIMEOUT``, is a job lease: below) ---

#: Five failed attempts of one quota mean a persistent fault, not bad luck: stop and say so.
SETTLEMENT_MAX_ATTEMPTS = 5
#: Reads for the window's last interval arrive minutes after it ends; wait that long first.
SETTLEMENT_GRACE = timedelta(minutes=15)
#: Meter data providers may take days to deliver; after three, settle with what there is.
DATA_DEADLINE = timedelta(days=3)

# --- jobs and workers (``WorkerConfig``, ``RetryPolicy``) ---

#: Handlers run at once by one worker. Settlement handlers wait on the database, so threads
#: suffice.
WORKER_CONCURRENCY = 4
#: The worker queues of freehours' jobs: each has runners of its own (as many as
#: ``WORKER_CONCURRENCY`` unless sized otherwise), so that a slow kind, a webhook receiver that
#: never answers, cannot take the runners of the settlements or of an invoice run.
SETTLE_QUEUE = "settle"
INVOICE_QUEUE = "invoice"  # both kinds of an invoice run: its plan and its batches
WEBHOOK_QUEUE = "webhook"
MAIL_QUEUE = "mail"  # documents sent by email: its runners wait on the mail server
WORKER_QUEUES = (SETTLE_QUEUE, INVOICE_QUEUE, WEBHOOK_QUEUE, MAIL_QUEUE)
#: Queues that yield: while a worker holds jobs of its other queues (a day's settlements, an
#: invoice run), it claims for these at most once every ``BACKGROUND_CLAIM_EVERY``. Runners of
#: their own keep a silent receiver from holding a settlement's thread; yielding keeps the
#: webhooks' work (fanning out, postponing, sending) from taking the settlement's CPU and
#: database: on the 2-core machine, 50 endpoints' deliveries beside a day of settlements slowed
#: it by half (``python -m benchmarks bulkheads``). Their jobs wait for the burst, never for
#: ever: a claim every 5 s goes on meanwhile.
BACKGROUND_QUEUES = frozenset({WEBHOOK_QUEUE, MAIL_QUEUE})
BACKGROUND_CLAIM_EVERY = timedelta(seconds=5)
#: A claimed job's lease: renewed every third of it (a second: one UPDATE per worker per second,
#: by a keeper thread that does nothing else), so two missed heartbeats in a row still keep it. A
#: SIGKILLed worker's jobs run out of lease within 3 s, are rescued within ``JOB_RESCUE_EVERY``
#: more and start again on another worker at once (a first rescue waits no backoff:
#: ``freehours.workers.rescuer.after_rescue``): within 5 s of the kill. A worker paused longer (GC,
#: a slow database) loses its jobs to the rescuer, and the fences refuse what it writes late
#: (docs/jobs.md).
JOB_LEASE = timedelta(seconds=3)
#: How often each worker's keeper looks for jobs whose lease ran out: one indexed read of the
#: running jobs, cheap enough twice a second, and half a second is what it adds to a rescue.
JOB_RESCUE_EVERY = timedelta(seconds=0.5)
#: A settlement holder's quota lock (settlement section above), as long as a job's lease: a
#: settlement reads two day rows and writes two, so seconds are ample, and a settle job whose
#: worker died is rescued once its lease runs out, when the quota lock it took has run out too
#: or does within a heartbeat (it was taken after the lease's last renewal at the latest): its
#: successor takes the quota over with the next fence after a second at most, instead of
#: waiting out a longer lock (at 30 s it did: the incident replay's settle p99 was 40.7 s). A
#: holder slower than this is taken over only if something claims the quota (its rescued job,
#: an API request), and then the fence refuses its late write.
LOCK_TIMEOUT = JOB_LEASE
#: The longest an idle worker waits before it looks for due jobs: on PostgreSQL a NOTIFY and the
#: next job's due time wake it sooner, so this only bounds a lost notification or a job enqueued
#: on SQLite by another process.
JOB_POLL = timedelta(seconds=1)
#: The first retry of a job waits up to a second: long enough for a blip (a dropped connection, a
#: failover) to pass, short enough that a one-off failure costs nobody a noticeable delay.
JOB_RETRY_BASE = timedelta(seconds=1)
#: Ten minutes at most between a job's attempts: ten attempts then span an hour or so, and a
#: fault that is fixed is noticed within minutes.
JOB_RETRY_CAP = timedelta(minutes=10)
#: Finished jobs are kept a week: time to look into a discarded one; the table holds the recent
#: past only.
JOB_RETENTION = timedelta(days=7)

# --- partitions (PostgreSQL: freehours.store.partitions) ---

#: Months of partitions created ahead of the current one: three months of slack before an insert
#: would land in a default partition, if the upkeep stopped running.
PARTITIONS_AHEAD_MONTHS = 3
#: Billing history (meter data, quotas, ledger, quota events) is kept seven years, beyond the
#: five the tax law asks for; older months are detached (kept as tables of their own, to
#: archive), never deleted by freehours.
HISTORY_RETENTION_MONTHS = 84

# --- uploads (the API's limit, and the agent's, which keeps to it) ---

#: The largest NEM12 upload the API takes (413 past it). The agent keeps to it by default: a larger
#: file would only be refused, after the agent had read and spooled all of it.
MAX_UPLOAD_BYTES = 100 * 1024 * 1024

# --- webhooks (``freehours.webhooks.sender.HttpSender``) ---

#: The whole of a webhook attempt (connect, TLS, the request sent, the answer read). Receivers
#: are asked to answer at once and act later (Standard Webhooks' advice; its reference services
#: wait 15 s): longer only lets a slow receiver hold a worker thread.
WEBHOOK_DEADLINE = timedelta(seconds=15)
