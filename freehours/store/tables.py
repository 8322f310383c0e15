"""The database schema as SQLAlchemy Core tables: one ``metadata``, the source of every migration.

``meter_days`` holds NEM12's own unit, one row per (NMI, suffix, NEM date): the 300 record. A
row per interval would be 48 times as many rows, and its keyed upsert alone cannot reach the
ingest goal on this hardware (DESIGN.md section 5). A day's values are one text column,
``interval_values``: the exact decimals as written (``str(Decimal)``, which ``Decimal()`` reads
back exactly, trailing zeros included), comma-joined, an empty field where the interval has no
value. ``COPY`` loads that text as is; a ``numeric[]`` column took twice as long to ``COPY`` and
half as much again on disk. ``qualities`` has one NEM12 quality character per interval.

Every timestamp is stored in UTC (``UtcDateTime``): on SQLite the column is text, and only one
fixed offset keeps its string order chronological.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect

from freehours.domain import reads
from freehours.domain.contacts import MAX_EMAIL
from freehours.domain.fields import MAX_CUSTOMER_NAME

#: Constraint and index names, fixed so that migrations can name what they alter or drop.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_N_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = sa.MetaData(naming_convention=NAMING_CONVENTION)


class UtcDateTime(sa.TypeDecorator[datetime]):
    """An aware datetime, stored in UTC and read back as an aware UTC datetime.

    A naive datetime is refused: NEM time and local clocks differ by hours, so a time without its
    offset would be a guess.
    """

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"naive datetime {value.isoformat()} cannot be stored")
        utc = value.astimezone(UTC)
        return utc.replace(tzinfo=None) if dialect.name == "sqlite" else utc

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if not isinstance(value, datetime):
            raise TypeError(f"expected a datetime from the database, got {type(value).__name__}")
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


#: A NMI is 10 characters (AEMO's NMI procedure); the checksum digit is not part of it.
NMI_LENGTH = reads.NMI_LENGTH
#: Plan ids are chosen by people (``sso-nsw``, ``acme-solar-2026-v3``): room to be descriptive.
PLAN_ID_LENGTH = 100
#: NEM12 UOM: the longest the NEM12 specification lists is KVARH.
UOM_LENGTH = 5

meter_days = sa.Table(
    "meter_days",
    metadata,
    sa.Column("nmi", sa.String(NMI_LENGTH), primary_key=True),
    # NEM12 NMISuffix: two characters, E1, B1, Q1, ...
    sa.Column("suffix", sa.String(2), primary_key=True),
    # The NEM date (AEST) of the 300 record.
    sa.Column("day", sa.Date, primary_key=True),
    sa.Column("interval_minutes", sa.SmallInteger, nullable=False),
    # NEM12 UOM, upper-cased; values of a "KWH" row are in kWh (the reader normalises MWh, Wh).
    sa.Column("uom", sa.String(UOM_LENGTH), nullable=False),
    sa.Column("interval_values", sa.Text, nullable=False),
    sa.Column("qualities", sa.Text, nullable=False),
    # The revision's stamp: NEM12 UpdateDateTime, or for JSON reads the time they were received.
    # NULL (a 300 record without one) is older than any stamp.
    sa.Column("update_datetime", UtcDateTime, nullable=True),
    # When this revision reached freehours.
    sa.Column("received_at", UtcDateTime, nullable=False),
    sa.CheckConstraint("interval_minutes IN (5, 15, 30)", name="interval_minutes"),
    sa.CheckConstraint("length(qualities) * interval_minutes = 1440", name="whole_day"),
    # Which NMIs have data on a date: what the settlement scheduler asks.
    sa.Index(None, "day"),
)

plans = sa.Table(
    "plans",
    metadata,
    sa.Column("plan_id", sa.String(PLAN_ID_LENGTH), primary_key=True),
    # The plan as JSON (the plan file's fields), canonical: sorted keys, decimals as strings.
    sa.Column("document", sa.Text, nullable=False),
    sa.Column("updated_at", UtcDateTime, nullable=False),
)

customers = sa.Table(
    "customers",
    metadata,
    sa.Column("nmi", sa.String(NMI_LENGTH), primary_key=True),
    sa.Column("plan_id", sa.String(PLAN_ID_LENGTH), sa.ForeignKey(plans.c.plan_id), nullable=False),
    # A ``Region`` value: NSW, SEQ, SA or VIC.
    sa.Column("region", sa.String(3), nullable=False),
    sa.Column("updated_at", UtcDateTime, nullable=False),
    # The billing cycle (``freehours.domain.invoicing.BillingCycle``): monthly or quarterly from
    # an anchor day of the month (1 to 28), the amount due so many days after issue.
    sa.Column("billing_frequency", sa.String(9), nullable=False, server_default="monthly"),
    sa.Column("anchor_day", sa.SmallInteger, nullable=False, server_default="1"),
    sa.Column("payment_term_days", sa.SmallInteger, nullable=False, server_default="21"),
    sa.CheckConstraint("billing_frequency IN ('monthly', 'quarterly')", name="billing_frequency"),
    sa.CheckConstraint("anchor_day BETWEEN 1 AND 28", name="anchor_day"),
    sa.CheckConstraint("payment_term_days BETWEEN 13 AND 90", name="payment_term_days"),
    sa.Index(None, "plan_id"),
)

#: A customer's personal data (``freehours.domain.contacts.Contact``), apart from the customer
#: row that settlement and invoicing read on every request: name, addresses (JSON arrays of
#: lines), email address and delivery preference. Printed on the customer's documents and used
#: to send them; erased with the customer's contact (docs/security.md, Personal data).
customer_contacts = sa.Table(
    "customer_contacts",
    metadata,
    sa.Column("nmi", sa.String(NMI_LENGTH), sa.ForeignKey(customers.c.nmi), primary_key=True),
    sa.Column("name", sa.String(MAX_CUSTOMER_NAME), nullable=False),
    sa.Column("supply_address", sa.Text, nullable=False),
    sa.Column("billing_address", sa.Text, nullable=False),
    sa.Column("email", sa.String(MAX_EMAIL), nullable=True),
    sa.Column("delivery", sa.String(5), nullable=False),
    sa.Column("updated_at", UtcDateTime, nullable=False),
    sa.CheckConstraint("delivery IN ('email', 'post')", name="delivery"),
    sa.CheckConstraint("delivery = 'post' OR email IS NOT NULL", name="email_delivery"),
)


#: The retailer's offers (``freehours.domain.offers``), every version: a new one each time an
#: offer's plan or terms change, none ever changed or deleted, so that a better offer check made
#: against a version can be explained later.
offers = sa.Table(
    "offers",
    metadata,
    sa.Column("offer_id", sa.String(PLAN_ID_LENGTH), primary_key=True),
    sa.Column("version", sa.Integer, primary_key=True),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("source", sa.String(4), nullable=False),
    sa.Column("region", sa.String(3), nullable=False),
    # JSON: the distributors' names (an empty list: every one in the region).
    sa.Column("distributors", sa.Text, nullable=False),
    sa.Column("controlled_load", sa.Boolean, nullable=False),
    sa.Column("effective_from", sa.Date, nullable=True),
    sa.Column("effective_to", sa.Date, nullable=True),
    # The offer's plan as JSON (the plan file's fields), canonical as ``plans.document``.
    sa.Column("document", sa.Text, nullable=False),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.CheckConstraint("source IN ('cdr', 'plan')", name="source"),
    sa.Index(None, "region"),
)


class DecimalText(sa.TypeDecorator[Decimal]):
    """An exact decimal stored as its text (``str(Decimal)``), identical on every backend.

    SQLite has no decimal type (its NUMERIC is a float), and money and energy must come back
    exactly as written; nothing sums these columns in SQL.
    """

    impl = sa.Text
    cache_ok = True

    def process_bind_param(self, value: Decimal | None, dialect: Dialect) -> str | None:
        if value is None:
            return None
        if not isinstance(value, Decimal):
            raise TypeError(f"expected a Decimal, got {type(value).__name__}")
        return str(value)

    def process_result_value(self, value: Any, dialect: Dialect) -> Decimal | None:
        return None if value is None else Decimal(value)


#: Quota states, as ``freehours.domain.settlement.QuotaStatus`` names them.
QUOTA_STATUSES = ("PENDING", "LOCKED", "COMPLETED", "ABORTED")

quotas = sa.Table(
    "quotas",
    metadata,
    sa.Column("nmi", sa.String(NMI_LENGTH), primary_key=True),
    # The customer's local date whose free window this quota settles.
    sa.Column("day", sa.Date, primary_key=True),
    # 1, then one more for every revision of the day's data that arrives after COMPLETED.
    sa.Column("version", sa.Integer, primary_key=True),
    sa.Column("status", sa.String(9), nullable=False),
    sa.Column("fence", sa.Integer, nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("locked_until", UtcDateTime, nullable=True),
    sa.Column("free_kwh", DecimalText, nullable=True),
    sa.Column("free_value", DecimalText, nullable=True),
    sa.Column("completed_at", UtcDateTime, nullable=True),
    sa.Column("reason", sa.Text, nullable=True),
    sa.Column("revision", sa.Integer, nullable=False),
    sa.CheckConstraint(f"status IN {QUOTA_STATUSES}", name="status"),
    sa.CheckConstraint("attempts >= 0 AND fence >= 0 AND version >= 1", name="counters"),
)

# One credit per quota version, refused a second time by the key: the database itself keeps a
# quota from being booked twice, whatever the code above it does.
ledger_entries = sa.Table(
    "ledger_entries",
    metadata,
    sa.Column("nmi", sa.String(NMI_LENGTH), primary_key=True),
    sa.Column("day", sa.Date, primary_key=True),
    sa.Column("version", sa.Integer, primary_key=True),
    # This version's free energy less what earlier versions booked: an adjustment after v1.
    sa.Column("kwh", DecimalText, nullable=False),
    sa.Column("amount", DecimalText, nullable=False),
    sa.Column("booked_at", UtcDateTime, nullable=False),
    sa.ForeignKeyConstraint(
        ["nmi", "day", "version"], [quotas.c.nmi, quotas.c.day, quotas.c.version]
    ),
)

api_keys = sa.Table(
    "api_keys",
    metadata,
    sa.Column("id", sa.String(16), primary_key=True),
    sa.Column("name", sa.String(100), nullable=False),
    # SHA-256 of the secret, hex: the secret itself is never stored.
    sa.Column("key_hash", sa.String(64), nullable=False, unique=True),
    # Space-separated scope names.
    sa.Column("scopes", sa.String(100), nullable=False),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("revoked_at", UtcDateTime, nullable=True),
)

#: The IETF draft suggests keys of at most a UUID's length; 255 leaves room for any client's.
IDEMPOTENCY_KEY_LENGTH = 255

idempotency_keys = sa.Table(
    "idempotency_keys",
    metadata,
    # The API key's id: one client's Idempotency-Key never collides with another's.
    sa.Column("principal", sa.String(16), primary_key=True),
    sa.Column("key", sa.String(IDEMPOTENCY_KEY_LENGTH), primary_key=True),
    # SHA-256 of method, path and body: "the same payload".
    sa.Column("fingerprint", sa.String(64), nullable=False),
    sa.Column("locked_at", UtcDateTime, nullable=False),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("completed_at", UtcDateTime, nullable=True),
    # The saved answer, NULL while the first request is in flight.
    sa.Column("status_code", sa.SmallInteger, nullable=True),
    sa.Column("response_body", sa.Text, nullable=True),
    sa.Column("media_type", sa.String(100), nullable=True),
    sa.Index(None, "created_at"),
)

#: Job states, as ``freehours.jobs.job.JobState`` names them.
JOB_STATES = ("AVAILABLE", "RUNNING", "RETRYABLE", "COMPLETED", "DISCARDED", "CANCELLED")
#: The states of a job that is not finished: at most one per (kind, key).
UNFINISHED_JOB_STATES = ("AVAILABLE", "RUNNING", "RETRYABLE")
#: Job kinds are short names chosen in code (``settle``).
JOB_KIND_LENGTH = 50
#: A job keeps its last so many failed attempts' errors (``errors``).
JOB_ERRORS_KEPT = 20
#: A W3C traceparent is exactly 55 characters (version 00).
TRACEPARENT_LENGTH = 55

# The durable jobs (``freehours.jobs``), in the same database as the state they act on, so that a
# job is enqueued in the transaction that makes it necessary. ``runs`` is the fence: every claim
# bumps it, and a worker's result is written only while it still matches.
jobs = sa.Table(
    "jobs",
    metadata,
    # SQLite makes only INTEGER PRIMARY KEY the rowid; PostgreSQL gets a bigint.
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True),
    sa.Column("kind", sa.String(JOB_KIND_LENGTH), nullable=False),
    # What the job works on (``"{nmi}:{date}"`` for a settlement); unique among unfinished jobs.
    sa.Column("key", sa.String(IDEMPOTENCY_KEY_LENGTH), nullable=False),
    # The handler's arguments: a JSON object.
    sa.Column("payload", sa.Text, nullable=False),
    sa.Column("state", sa.String(9), nullable=False),
    # When the job may next run (AVAILABLE, RETRYABLE).
    sa.Column("run_at", UtcDateTime, nullable=False),
    # After this the job never starts again: it is DISCARDED instead.
    sa.Column("deadline", UtcDateTime, nullable=False),
    # Attempts that failed or whose worker died; a snooze is not one.
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("max_attempts", sa.Integer, nullable=False),
    sa.Column("snoozes", sa.Integer, nullable=False),
    # Claims so far: the fence.
    sa.Column("runs", sa.Integer, nullable=False),
    # The worker holding a RUNNING job, and until when unless it renews the lease.
    sa.Column("worker", sa.String(100), nullable=True),
    sa.Column("lease_until", UtcDateTime, nullable=True),
    # A duplicate enqueue found the job RUNNING: run it once more from then, since what it works
    # on changed after it started.
    sa.Column("rerun_at", UtcDateTime, nullable=True),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("attempted_at", UtcDateTime, nullable=True),
    sa.Column("finalized_at", UtcDateTime, nullable=True),
    # COMPLETED: what the handler found; DISCARDED: the reason; CANCELLED: "cancelled".
    sa.Column("outcome", sa.Text, nullable=True),
    # The last failure, as ``Type: message``.
    sa.Column("error", sa.Text, nullable=True),
    # Every failed attempt's error, oldest first, the last ``JOB_ERRORS_KEPT``: a JSON array of
    # ``{"attempt", "at", "error"}`` (migration 0005).
    sa.Column("errors", sa.Text, nullable=True),
    sa.Column("traceparent", sa.String(TRACEPARENT_LENGTH), nullable=True),
    sa.CheckConstraint(f"state IN {JOB_STATES}", name="state"),
    sa.CheckConstraint(
        "attempts >= 0 AND max_attempts >= 1 AND snoozes >= 0 AND runs >= 0", name="counters"
    ),
    # At most one unfinished job per (kind, key): a duplicate enqueue finds this one.
    sa.Index(
        "uq_jobs_kind_key_unfinished",
        "kind",
        "key",
        unique=True,
        postgresql_where=sa.text(f"state IN {UNFINISHED_JOB_STATES}"),
        sqlite_where=sa.text(f"state IN {UNFINISHED_JOB_STATES}"),
    ),
    # What claiming walks: a kind's waiting jobs in the order they fall due, so that a claim
    # reads its batch off the index in order instead of sorting every due job.
    sa.Index(
        "ix_jobs_due",
        "kind",
        "run_at",
        "id",
        postgresql_where=sa.text("state IN ('AVAILABLE', 'RETRYABLE')"),
        sqlite_where=sa.text("state IN ('AVAILABLE', 'RETRYABLE')"),
    ),
    # What the heartbeat and the rescuer walk: the running jobs by lease.
    sa.Index(
        "ix_jobs_leased",
        "lease_until",
        postgresql_where=sa.text("state = 'RUNNING'"),
        sqlite_where=sa.text("state = 'RUNNING'"),
    ),
)


#: Document series, as ``freehours.domain.invoicing.Series`` names them.
SERIES = ("invoice", "credit_note")
#: Document types, as ``freehours.domain.invoicing.DocumentType`` names them.
DOCUMENT_TYPES = ("invoice", "credit_note", "adjustment_invoice")
#: A document number: its series' prefix and the sequence number ("INV-000123").
DOCUMENT_NUMBER_LENGTH = 40
RUN_ID_LENGTH = 32

# The next number of each series. Taken by an UPDATE in the transaction that finalises the
# documents that use it: the row stays locked until that commits, and a rollback gives the
# numbers back, so a number is never skipped or used twice.
document_counters = sa.Table(
    "document_counters",
    metadata,
    sa.Column("series", sa.String(20), primary_key=True),
    sa.Column("next_number", sa.BigInteger, nullable=False),
    sa.CheckConstraint(f"series IN {SERIES}", name="series"),
    sa.CheckConstraint("next_number >= 1", name="next_number"),
)

# An invoice run: asked for once (``POST /v1/invoice-runs``, ``freehours invoices run``), done by
# durable jobs: a plan job pages the customers into batches, a job per batch invoices them.
invoice_runs = sa.Table(
    "invoice_runs",
    metadata,
    sa.Column("run_id", sa.String(RUN_ID_LENGTH), primary_key=True),
    # RUNNING, then COMPLETED when its last batch is done.
    sa.Column("state", sa.String(9), nullable=False),
    sa.Column("requested_at", UtcDateTime, nullable=False),
    # Periods that ended before this moment (on each customer's clock) are invoiced.
    sa.Column("as_of", UtcDateTime, nullable=False),
    # Set by the plan job: how many batches it made (NULL until then).
    sa.Column("batches", sa.Integer, nullable=True),
    sa.Column("batches_done", sa.Integer, nullable=False),
    sa.Column("accounts", sa.Integer, nullable=False),
    sa.Column("invoices", sa.Integer, nullable=False),
    sa.Column("credit_notes", sa.Integer, nullable=False),
    sa.Column("adjustment_invoices", sa.Integer, nullable=False),
    # Periods that ended but could not be invoiced yet (days not settled), and why.
    sa.Column("waiting", sa.Integer, nullable=False),
    sa.Column("held", sa.Integer, nullable=False),
    sa.Column("notes", sa.Text, nullable=False),
    sa.Column("finished_at", UtcDateTime, nullable=True),
    sa.CheckConstraint("state IN ('RUNNING', 'COMPLETED')", name="state"),
    sa.Index(None, "requested_at"),
)

# One row per batch of a run that has been done: written in the batch's own transaction, so that
# a batch run again (its worker died after the commit) adds nothing to the run's counts.
invoice_run_batches = sa.Table(
    "invoice_run_batches",
    metadata,
    sa.Column(
        "run_id", sa.String(RUN_ID_LENGTH), sa.ForeignKey(invoice_runs.c.run_id), primary_key=True
    ),
    sa.Column("batch", sa.Integer, primary_key=True),
    sa.Column("done_at", UtcDateTime, nullable=False),
)

# One row per customer and billing period that has a document: the lock every run takes before
# it decides anything about the period (so two runs never both invoice it), and what the
# period's documents have billed so far, day by day (``versions``: the quota version each local
# date was billed at, a JSON object). It is bookkeeping, not a document: it changes.
billing_periods = sa.Table(
    "billing_periods",
    metadata,
    sa.Column("nmi", sa.String(NMI_LENGTH), primary_key=True),
    sa.Column("period_start", sa.Date, primary_key=True),
    sa.Column("period_end", sa.Date, nullable=False),
    sa.Column("documents", sa.Integer, nullable=False),
    sa.Column("versions", sa.Text, nullable=False),
    # A digest of the meter data the documents rated (``freehours.domain.invoicing.data_stamp``):
    # a revision that settles no new quota version (a read outside the window) still shows.
    sa.Column("data_stamp", sa.String(64), nullable=False),
    # When a run last looked at the period: revisions received since (less a margin) are looked
    # at again.
    sa.Column("checked_at", UtcDateTime, nullable=False),
    # What the period's invoice keeps of its usage for later better offer checks and usage
    # compared (``freehours.domain.better_offer.PeriodUsage``); null until invoiced, and again
    # once corrected (a later check rates the revised data).
    sa.Column("usage", sa.Text, nullable=True),
)

# Invoices, credit notes and adjustment invoices, finalised: inserted once and never changed or
# deleted (triggers refuse it, on both databases: ``freehours.store.invoices``). A correction is a
# new row naming the document it corrects; ``sequence`` orders a period's documents (0: the
# invoice), and the key (nmi, period_start, sequence) is what makes a second invoice impossible.
documents = sa.Table(
    "documents",
    metadata,
    sa.Column("number", sa.String(DOCUMENT_NUMBER_LENGTH), primary_key=True),
    sa.Column("series", sa.String(20), nullable=False),
    # The number within its series (the number without its prefix).
    sa.Column("serial", sa.BigInteger, nullable=False),
    sa.Column("document_type", sa.String(20), nullable=False),
    sa.Column("nmi", sa.String(NMI_LENGTH), nullable=False),
    sa.Column("period_start", sa.Date, nullable=False),
    sa.Column("period_end", sa.Date, nullable=False),
    sa.Column("sequence", sa.Integer, nullable=False),
    sa.Column("corrects", sa.String(DOCUMENT_NUMBER_LENGTH), nullable=True),
    sa.Column("run_id", sa.String(RUN_ID_LENGTH), sa.ForeignKey(invoice_runs.c.run_id)),
    sa.Column("issue_date", sa.Date, nullable=False),
    sa.Column("due_date", sa.Date, nullable=True),
    sa.Column("finalised_at", UtcDateTime, nullable=False),
    sa.Column("plan_id", sa.String(PLAN_ID_LENGTH), nullable=False),
    sa.Column("region", sa.String(3), nullable=False),
    sa.Column("time_zone", sa.String(64), nullable=False),
    sa.Column("subtotal", DecimalText, nullable=False),
    sa.Column("gst", DecimalText, nullable=False),
    sa.Column("total", DecimalText, nullable=False),
    sa.Column("consumption_kwh", DecimalText, nullable=False),
    sa.Column("free_kwh", DecimalText, nullable=False),
    sa.Column("free_value", DecimalText, nullable=False),
    sa.Column("over_cap_kwh", DecimalText, nullable=False),
    sa.Column("export_kwh", DecimalText, nullable=False),
    # Why a correction was made.
    sa.Column("reason", sa.Text, nullable=True),
    # JSON: the lines; each local day with its quota version; the plan as it was billed (its
    # document), and the retailer's details printed on it.
    sa.Column("lines", sa.Text, nullable=False),
    sa.Column("days", sa.Text, nullable=False),
    sa.Column("plan_document", sa.Text, nullable=False),
    sa.Column("retailer", sa.Text, nullable=False),
    # JSON: the customer's name and addresses as printed (their contact then), or NULL.
    sa.Column("customer", sa.Text, nullable=True),
    # An invoice's better offer check and usage compared, as JSON (docs/invoices.md).
    sa.Column("better_offer", sa.Text, nullable=True),
    sa.Column("usage", sa.Text, nullable=True),
    sa.CheckConstraint(f"series IN {SERIES}", name="series"),
    sa.CheckConstraint(f"document_type IN {DOCUMENT_TYPES}", name="document_type"),
    sa.CheckConstraint("(sequence = 0) = (corrects IS NULL)", name="corrects"),
    sa.ForeignKeyConstraint(["corrects"], ["documents.number"]),
    sa.UniqueConstraint("series", "serial"),
    sa.UniqueConstraint("nmi", "period_start", "sequence"),
    # A run's documents, in number order: its print batch reads them page by page.
    sa.Index(None, "run_id", "number"),
    sa.Index(None, "period_start"),
    # What corrects a document: its credit notes and adjustment invoices.
    sa.Index(None, "corrects"),
)


# --- The operations console (docs/console.md) ------------------------------------------------

#: A console session's token and CSRF token: 32 random bytes, URL-safe base64 (43 characters);
#: only the token's SHA-256 is stored.
SESSION_HASH_LENGTH = 64
TRACE_ID_LENGTH = 32

# A signed-in operator: the session cookie's token, hashed, and the key it signed in with. A
# session ends at its expiry, at sign-out (the row deleted), or when its key is revoked.
console_sessions = sa.Table(
    "console_sessions",
    metadata,
    sa.Column("token_hash", sa.String(SESSION_HASH_LENGTH), primary_key=True),
    sa.Column("key_id", sa.String(16), sa.ForeignKey(api_keys.c.id), nullable=False),
    # Sent back in every form of the session's pages: an action without it is refused.
    sa.Column("csrf_token", sa.String(SESSION_HASH_LENGTH), nullable=False),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("expires_at", UtcDateTime, nullable=False),
    sa.Index(None, "key_id"),
    sa.Index(None, "expires_at"),
)

# Every action an operator takes (console or API), and every sign-in: who, when, what, the state
# before and after (JSON), and how it ended. Inserted in the action's own transaction, so an
# action is never done without its entry nor recorded without being done.
audit_log = sa.Table(
    "audit_log",
    metadata,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True),
    sa.Column("at", UtcDateTime, nullable=False),
    sa.Column("key_id", sa.String(16), nullable=False),
    sa.Column("key_name", sa.String(100), nullable=False),
    # ``job.retry``, ``job.cancel``, ``quota.reopen``, ``key.revoke``, ``session.sign_in``, ...
    sa.Column("action", sa.String(40), nullable=False),
    # What it acted on: ``job:123``, ``quota:NMI:date``, ``key:key_...``.
    sa.Column("target", sa.String(200), nullable=False),
    # ``done``, or ``conflict`` when the state had changed meanwhile and nothing was done.
    sa.Column("outcome", sa.String(20), nullable=False),
    sa.Column("reason", sa.Text, nullable=True),
    sa.Column("before", sa.Text, nullable=True),
    sa.Column("after", sa.Text, nullable=True),
    sa.Column("trace_id", sa.String(TRACE_ID_LENGTH), nullable=True),
    sa.Index(None, "target", "id"),
)

# Each state a quota version was written in, with the trace of the request or job that wrote it:
# a quota's history (its claims, attempts, fences, releases, completion), and the settlement
# rate, latency and retries of a day. Written by the quota repository with every quota it saves.
quota_events = sa.Table(
    "quota_events",
    metadata,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True),
    sa.Column("nmi", sa.String(NMI_LENGTH), nullable=False),
    sa.Column("day", sa.Date, nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("at", UtcDateTime, nullable=False),
    sa.Column("status", sa.String(9), nullable=False),
    sa.Column("fence", sa.Integer, nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("reason", sa.Text, nullable=True),
    sa.Column("trace_id", sa.String(TRACE_ID_LENGTH), nullable=True),
    sa.Index(None, "nmi", "day", "id"),
    sa.Index(None, "at"),
)

# What meter data arrived: one row per upload, read batch or imported file, with its counts.
ingestions = sa.Table(
    "ingestions",
    metadata,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True),
    sa.Column("received_at", UtcDateTime, nullable=False),
    # ``nem12`` (an upload), ``reads`` (a JSON batch), ``import`` (``freehours nem12 import``).
    sa.Column("source", sa.String(10), nullable=False),
    sa.Column("name", sa.String(255), nullable=True),
    sa.Column("key_id", sa.String(16), nullable=True),
    sa.Column("agent", sa.String(100), nullable=True),
    sa.Column("bytes", sa.BigInteger, nullable=False),
    sa.Column("accepted", sa.Integer, nullable=False),
    sa.Column("superseded", sa.Integer, nullable=False),
    sa.Column("unchanged", sa.Integer, nullable=False),
    sa.Column("stale", sa.Integer, nullable=False),
    sa.Column("trace_id", sa.String(TRACE_ID_LENGTH), nullable=True),
    sa.Index(None, "received_at"),
)

# What each meter agent last said of itself (its ``Freehours-Agent`` header): its circuit
# breaker's state and trips, and when it was last heard from.
agents = sa.Table(
    "agents",
    metadata,
    sa.Column("name", sa.String(100), primary_key=True),
    sa.Column("breaker", sa.String(9), nullable=False),
    sa.Column("trips", sa.Integer, nullable=False),
    sa.Column("version", sa.String(40), nullable=False),
    sa.Column("address", sa.String(64), nullable=False),
    sa.Column("last_seen_at", UtcDateTime, nullable=False),
)

# Webhooks (docs/webhooks.md): the endpoints events are sent to, with their signing secrets
# (kept to sign with, so not hashable: the database's own protection is theirs); the outbox of
# events, written in the transaction of the state change that caused each; a delivery per event
# and subscribed endpoint, carried out by a ``webhook-delivery`` job; and every attempt's answer.
webhook_endpoints = sa.Table(
    "webhook_endpoints",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("url", sa.String(2048), nullable=False),
    sa.Column("description", sa.String(200), nullable=False),
    # Space-separated event types.
    sa.Column("events", sa.String(200), nullable=False),
    sa.Column("secret", sa.String(64), nullable=False),
    # The secret a rotation replaced, signing beside the new one until ``previous_until``.
    sa.Column("previous_secret", sa.String(64), nullable=True),
    sa.Column("previous_until", UtcDateTime, nullable=True),
    sa.Column("enabled", sa.Boolean, nullable=False),
    sa.Column("disabled_at", UtcDateTime, nullable=True),
    sa.Column("disabled_reason", sa.Text, nullable=True),
    # Since when every attempt has failed (None: the last one succeeded), and the deliveries in
    # a row failed for good.
    sa.Column("failing_since", UtcDateTime, nullable=True),
    sa.Column("final_failures", sa.Integer, nullable=False),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("updated_at", UtcDateTime, nullable=False),
)

webhook_events = sa.Table(
    "webhook_events",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("type", sa.String(40), nullable=False),
    sa.Column("created_at", UtcDateTime, nullable=False),
    # The body every attempt sends, exactly (freehours.domain.webhooks.payload).
    sa.Column("payload", sa.Text, nullable=False),
    sa.Index(None, "created_at"),
)

webhook_deliveries = sa.Table(
    "webhook_deliveries",
    metadata,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True),
    sa.Column("event_id", sa.String(40), sa.ForeignKey("webhook_events.id"), nullable=False),
    sa.Column(
        "endpoint_id",
        sa.String(32),
        sa.ForeignKey("webhook_endpoints.id"),
        nullable=False,
    ),
    # ``pending``, ``succeeded`` or ``failed``.
    sa.Column("status", sa.String(9), nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("created_at", UtcDateTime, nullable=False),
    # Since when it is tried: its event's time, or its last replay's.
    sa.Column("started_at", UtcDateTime, nullable=False),
    sa.Column("next_attempt_at", UtcDateTime, nullable=True),
    sa.Column("finished_at", UtcDateTime, nullable=True),
    sa.Column("last_status_code", sa.Integer, nullable=True),
    sa.Column("last_error", sa.Text, nullable=True),
    sa.Column("replays", sa.Integer, nullable=False),
    sa.UniqueConstraint("event_id", "endpoint_id"),
    sa.Index(None, "endpoint_id", "id"),
)

webhook_attempts = sa.Table(
    "webhook_attempts",
    metadata,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True),
    sa.Column(
        "delivery_id",
        sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
        sa.ForeignKey("webhook_deliveries.id"),
        nullable=False,
    ),
    sa.Column("at", UtcDateTime, nullable=False),
    # ``succeeded``, ``failed`` (a non-2xx answer) or ``error`` (no answer: refused, timed out).
    sa.Column("outcome", sa.String(9), nullable=False),
    sa.Column("status_code", sa.Integer, nullable=True),
    sa.Column("latency_ms", sa.Integer, nullable=False),
    # Why it failed: the error, or the start of the answer's body (bounded).
    sa.Column("error", sa.Text, nullable=True),
    sa.Index(None, "delivery_id", "id"),
)

#: Each time a finalised document is sent by email (docs/invoices.md, Delivery by email): the
#: first send, written in the document's own transaction for a customer who chose email, and
#: each resend. No address: the customer's contact is read when it is sent.
mail_deliveries = sa.Table(
    "mail_deliveries",
    metadata,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True),
    sa.Column(
        "number",
        sa.String(DOCUMENT_NUMBER_LENGTH),
        sa.ForeignKey("documents.number"),
        nullable=False,
    ),
    sa.Column("nmi", sa.String(NMI_LENGTH), nullable=False),
    # 1 for the first send, then one more for each resend.
    sa.Column("sequence", sa.Integer, nullable=False),
    # ``queued``, ``sent`` or ``failed`` (for good: a permanent refusal, or out of attempts).
    sa.Column("status", sa.String(6), nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("created_at", UtcDateTime, nullable=False),
    # When the attempt in flight began (None: none is): an attempt that died after the server
    # accepted the message, before its outcome was written, leaves it set.
    sa.Column("attempt_started_at", UtcDateTime, nullable=True),
    sa.Column("finished_at", UtcDateTime, nullable=True),
    # The server's last reply (its code, and text with the recipient's address taken out).
    sa.Column("last_code", sa.Integer, nullable=True),
    sa.Column("last_error", sa.Text, nullable=True),
    # Whether an earlier attempt may have been accepted before it died: sent perhaps twice.
    sa.Column("possible_duplicate", sa.Boolean, nullable=False),
    # Who asked for a resend (an audit actor); None for the first send.
    sa.Column("requested_by", sa.String(200), nullable=True),
    sa.CheckConstraint("status IN ('queued', 'sent', 'failed')", name="status"),
    sa.UniqueConstraint("number", "sequence"),
    sa.Index(None, "status", "id"),
)

#: Each customer's own page (docs/invoices.md, Each customer's page): its id, random, is what a
#: signed link names (never the NMI). Revoked, it opens no link signed for it; the next email
#: makes a new one.
customer_pages = sa.Table(
    "customer_pages",
    metadata,
    sa.Column("page_id", sa.String(22), primary_key=True),
    sa.Column("nmi", sa.String(NMI_LENGTH), sa.ForeignKey(customers.c.nmi), nullable=False),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("revoked_at", UtcDateTime, nullable=True),
    sa.Index(None, "nmi"),
)

# What the console's pages ask, by the indexes they walk (docs/console.md#speed).
sa.Index("ix_quotas_day_nmi", quotas.c.day, quotas.c.nmi)
sa.Index("ix_quotas_status_day_nmi", quotas.c.status, quotas.c.day, quotas.c.nmi)
sa.Index("ix_jobs_state_id", jobs.c.state, jobs.c.id)
sa.Index("ix_jobs_kind_id", jobs.c.kind, jobs.c.id)
sa.Index("ix_jobs_key_id", jobs.c.key, jobs.c.id)
