"""Settings: read once at start-up from ``FREEHOURS_*`` variables, typed, each default beside it."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from functools import lru_cache
from typing import TYPE_CHECKING, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from freehours import defaults
from freehours.domain.webhooks import Destinations
from freehours.errors import ConfigurationError

if TYPE_CHECKING:
    from freehours.meterdata.nem12 import ReadLimits

#: The schemes of the URLs redis-py opens.
REDIS_SCHEMES = ("redis", "rediss", "unix")

#: Hours in a ``timedelta``: the ``*_hours`` settings are read in them.
_HOUR = timedelta(hours=1)


class Settings(BaseSettings):
    """Every setting freehours reads. ``FREEHOURS_<NAME>`` sets ``<name>``."""

    model_config = SettingsConfigDict(env_prefix="FREEHOURS_", frozen=True)

    database_url: str = Field(
        default="sqlite:///./freehours.db",
        description="SQLAlchemy URL of the database; SQLite (embedded) or postgresql+psycopg://",
    )
    redis_url: str | None = Field(
        default=None,
        description="Redis for the quota cache, rate limits, breaker state; unset: in-process"
        " (the quota cache then holds at most 100,000 quotas a process)",
    )

    @field_validator("redis_url")
    @classmethod
    def _redis_scheme(cls, url: str | None) -> str | None:
        """A Redis URL redis-py can open (its own check comes only at the first connection)."""
        if url is not None and url.partition("://")[0] not in REDIS_SCHEMES:
            raise ValueError(
                f"not a Redis URL: its scheme must be one of {', '.join(REDIS_SCHEMES)}"
            )
        return url

    redis_prefix: str = Field(
        default=defaults.REDIS_PREFIX,
        description="Prefix of every Redis key, so deployments can share one",
    )
    redis_timeout_seconds: float = Field(
        default=0.1,
        gt=0,
        description="Connect and socket timeout of every Redis call (one try, no retries)",
    )
    redis_slow_seconds: float = Field(
        default=0.05,
        gt=0,
        description="A Redis call slower than this counts as a failure (Redis is then bypassed)",
    )
    redis_budget_seconds: float = Field(
        default=0.1,
        gt=0,
        description="Most Redis time one API request spends; past it, the request does without",
    )
    redis_retry_seconds: float = Field(
        default=5.0,
        gt=0,
        description="After Redis failed, how long it is bypassed before one call tries it again",
    )
    database_connect_timeout_seconds: int = Field(
        default=5,
        ge=2,
        description="PostgreSQL: longest wait for a new connection (libpq's connect_timeout)",
    )
    database_statement_timeout_seconds: float = Field(
        default=15.0,
        gt=0,
        description=(
            "PostgreSQL: longest statement (statement_timeout on the server; bulk ingest is "
            "exempt); the client gives up on an answer one second later (a black-holed server "
            "never cancels)"
        ),
    )
    database_pool_timeout_seconds: float = Field(
        default=5.0, gt=0, description="Longest wait for a free pooled connection"
    )
    database_pool_size: int = Field(
        default=16,
        ge=1,
        le=200,
        description=(
            "PostgreSQL connections each process keeps open (8 more are opened for a burst and "
            "closed after it); an API process runs at most this many requests' blocking work "
            "at once, the rest wait their turn, so its requests never open connections"
        ),
    )
    database_tcp_timeout_seconds: int = Field(
        default=15,
        ge=1,
        description=(
            "PostgreSQL: a connection whose sent data or keepalives go unacknowledged this long "
            "is dropped (tcp_user_timeout; keepalives after a third of it)"
        ),
    )

    # --- observability ---
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        default="info", description="Lowest level logged (JSON lines on stderr; readable on a tty)"
    )
    traces: Literal["off", "console", "otlp"] = Field(
        default="off",
        description="Where spans go: nowhere, stderr (JSON lines), or OTLP (OTEL_EXPORTER_OTLP_*)",
    )

    # --- settlement ---
    lock_timeout_seconds: float = Field(
        default=defaults.LOCK_TIMEOUT.total_seconds(),
        gt=0,
        description="How long a settlement holder's lock lasts before takeover",
    )
    settlement_max_attempts: int = Field(
        default=defaults.SETTLEMENT_MAX_ATTEMPTS,
        ge=1,
        description="Failed attempts after which a quota is ABORTED",
    )
    settlement_grace_seconds: float = Field(
        default=defaults.SETTLEMENT_GRACE.total_seconds(),
        ge=0,
        description="Wait after the free window ends before settling its day",
    )
    data_deadline_hours: float = Field(
        default=defaults.DATA_DEADLINE / _HOUR,
        gt=0,
        description="After this long past the window, settle with what data there is",
    )

    # --- jobs and workers ---
    worker_concurrency: int = Field(
        default=defaults.WORKER_CONCURRENCY,
        ge=1,
        description=(
            "Runner threads of each worker queue (settle, invoice, webhook) that "
            "FREEHOURS_WORKER_QUEUES does not size"
        ),
    )
    worker_queues: str | None = Field(
        default=None,
        description=(
            "Runner threads of the worker queues sized on their own, QUEUE=RUNNERS[,...] "
            "(settle=8,webhook=16); each queue's runners take only its jobs"
        ),
    )

    @field_validator("worker_queues")
    @classmethod
    def _worker_queues(cls, spec: str | None) -> str | None:
        if spec is not None:
            worker_queues(spec)
        return spec

    def queue_runners(self) -> dict[str, int]:
        """The runners of each queue ``worker_queues`` sizes."""
        return worker_queues(self.worker_queues or "")

    worker_grace_seconds: float = Field(
        default=25.0,
        ge=0,
        description="On SIGTERM, how long running jobs may finish before they are released",
    )
    job_lease_seconds: float = Field(
        default=defaults.JOB_LEASE.total_seconds(),
        gt=0,
        description="A running job's lease; renewed every third of it, rescued once it runs out",
    )
    job_poll_seconds: float = Field(
        default=defaults.JOB_POLL.total_seconds(),
        gt=0,
        description="Longest an idle worker waits before looking for due jobs again",
    )
    job_retry_base_seconds: float = Field(
        default=defaults.JOB_RETRY_BASE.total_seconds(),
        gt=0,
        description="Backoff after a job's first failed attempt, at most",
    )
    job_retry_cap_seconds: float = Field(
        default=defaults.JOB_RETRY_CAP.total_seconds(),
        gt=0,
        description="Longest backoff between a job's attempts",
    )
    job_retention_hours: float = Field(
        default=defaults.JOB_RETENTION / _HOUR,
        gt=0,
        description="How long finished jobs are kept (a week: time to look into a discarded one)",
    )
    partitions_ahead_months: int = Field(
        default=defaults.PARTITIONS_AHEAD_MONTHS,
        ge=1,
        le=24,
        description=(
            "PostgreSQL: months of partitions created ahead of the current one, by the hourly "
            "upkeep of every API process and worker"
        ),
    )
    history_retention_months: int = Field(
        default=defaults.HISTORY_RETENTION_MONTHS,
        ge=13,
        description=(
            "PostgreSQL: months of billing history (meter data, quotas, ledger) kept in the "
            "tables; older months are detached as tables of their own, to archive"
        ),
    )

    # --- invoicing ---
    invoice_prefix: str = Field(
        default="INV-",
        min_length=1,
        max_length=12,
        pattern=r"^[A-Za-z0-9/_-]+$",
        description="Prefix of invoice and adjustment invoice numbers (INV-00000001)",
    )
    credit_note_prefix: str = Field(
        default="CN-",
        min_length=1,
        max_length=12,
        pattern=r"^[A-Za-z0-9/_-]+$",
        description="Prefix of credit note numbers, a sequence of their own (CN-00000001)",
    )
    invoice_batch_size: int = Field(
        default=500,
        ge=1,
        le=10_000,
        description="Accounts one invoice batch job finalises in one transaction",
    )
    better_offer_check: bool = Field(
        default=True,
        description=(
            "Each invoice carries the better offer check and usage compared (docs/invoices.md);"
            " false: neither"
        ),
    )
    better_offer_threshold: Decimal = Field(
        default=Decimal("0.00"),
        ge=0,
        le=10_000,
        decimal_places=2,
        description=(
            "The better offer check: dollars a year an offer must save, more than this, for a"
            " bill to say so (docs/invoices.md, The better offer check)"
        ),
    )
    retailer_name: str | None = Field(
        default=None,
        description="The retailer named on invoices; unset: example details, marked as such",
    )
    retailer_abn: str | None = Field(default=None, description="The retailer's ABN (11 digits)")
    retailer_phone: str | None = Field(
        default=None, description="The retailer's phone for enquiries and complaints"
    )
    retailer_hardship_phone: str | None = Field(
        default=None, description="The retailer's phone for payment difficulty (default: phone)"
    )
    retailer_website: str | None = Field(default=None, description="The retailer's website")
    retailer_email: str | None = Field(default=None, description="The retailer's email")
    retailer_postal_address: str | None = Field(
        default=None, description="The retailer's postal address, lines separated by '|'"
    )

    # --- API ---
    max_batch_reads: int = Field(
        default=10_000, ge=1, description="Most reads in one POST /v1/meter-readings (413 past it)"
    )
    max_upload_bytes: int = Field(
        default=defaults.MAX_UPLOAD_BYTES,
        ge=1,
        description="Largest NEM12 upload in bytes (413 past it)",
    )
    max_batch_bytes: int | None = Field(
        default=None,
        ge=1,
        description=(
            "Largest POST /v1/meter-readings body in bytes, refused with 413 while it is read. "
            "Default: 512 bytes a read (one is about 80 as JSON) times max_batch_reads, plus 64 kB"
        ),
    )
    max_json_body_bytes: int = Field(
        default=1024 * 1024,
        ge=1,
        description=(
            "Largest body of PUT /v1/plans, PUT /v1/customers and POST"
            " /v1/free-energy/settlements in bytes (413 past it)"
        ),
    )
    nem12_max_bytes: int = Field(
        default=2 * 1024**3,
        ge=1,
        description=(
            "Most bytes a NEM12 source holds once decompressed, all zip members together (413 "
            "past it). A month of 5-minute data for 10,000 NMIs is about 560 MB a channel"
        ),
    )
    nem12_max_members: int = Field(
        default=10_000,
        ge=1,
        description="Most entries in a zipped NEM12 upload (413 past it): a file per NMI of 10,000",
    )
    nem12_max_lines: int = Field(
        default=2_000_000,
        ge=1,
        description=(
            "Most lines in a NEM12 source, blank ones included (413 past it). A month of "
            "5-minute data for 10,000 NMIs is 320,000 lines; a million with 400 and 500 records; "
            "a file just short of it costs the second pass about half a second of CPU"
        ),
    )
    nem12_max_line_chars: int = Field(
        default=100_000,
        ge=100,
        description=(
            "Longest line in a NEM12 source (422 naming it): a 5-minute 300 record is about "
            "2,000 characters"
        ),
    )
    upload_concurrency: int = Field(
        default=2,
        ge=1,
        description=(
            "NEM12 uploads one API process reads, checks and stores at once; past it, 503 with "
            "Retry-After. Each holds its body in memory, a database connection at the end, and "
            "the interpreter lock while it parses: more only slows the other requests"
        ),
    )
    settle_threads: int | None = Field(
        default=None,
        ge=1,
        le=64,
        description=(
            "Settlement threads of one API process; requests that arrive while all are busy "
            "wait on the event loop, and the next thread free settles them together as one "
            "batch. Default: 4 on PostgreSQL, 1 on SQLite (one writer at a time)"
        ),
    )
    rate_limit_per_client: str = Field(
        default="6000/minute", description="Requests one API key may make (limits syntax)"
    )
    rate_limit_per_nmi: str = Field(
        default="600/minute", description="Settlement requests for one NMI (limits syntax)"
    )
    api_key_cache_seconds: float = Field(
        default=10.0,
        ge=0,
        description="How long a looked-up API key is remembered (revocation delay)",
    )
    console_session_minutes: int = Field(
        default=480,
        ge=1,
        le=7 * 24 * 60,
        description="How long a console sign-in lasts before the operator signs in again",
    )
    api_key_cache_size: int = Field(
        default=10_000,
        ge=1,
        description="Most API keys (known or unknown) one process remembers; least recent go first",
    )
    rate_limit_unknown_keys: str = Field(
        default="30/minute",
        description=(
            "Unknown or revoked keys one client address may send (limits syntax); past it, 429 "
            "before a lookup"
        ),
    )
    header_seconds: float = Field(
        default=10.0,
        gt=0,
        description="How long a request's line and headers may take to arrive (then it is closed)",
    )
    forwarded_allow_ips: str | None = Field(
        default=None,
        description=(
            "Proxies whose X-Forwarded-For/-Proto are believed (comma-separated addresses or "
            "networks, or *); unset: none, the peer's address is the client's"
        ),
    )
    idempotency_in_flight_seconds: float = Field(
        default=30.0,
        gt=0,
        description=(
            "Lease of an in-flight Idempotency-Key: renewed every third of it while its request "
            "runs, taken over this long after the last renewal (its request died)"
        ),
    )
    idempotency_retention_hours: float = Field(
        default=24.0, ge=24, description="How long Idempotency-Keys are kept (at least 24 hours)"
    )

    # --- webhooks (docs/webhooks.md) ---
    webhook_deadline_seconds: float = Field(
        default=defaults.WEBHOOK_DEADLINE.total_seconds(),
        gt=0,
        le=120,
        description=(
            "The whole of a webhook attempt (connect, send, the answer read); past it the attempt "
            "fails as timed out"
        ),
    )
    webhook_allowed_networks: str = Field(
        default="",
        description=(
            "Networks webhooks may be sent to despite being private, loopback or link-local "
            "(comma-separated CIDRs, e.g. 10.20.0.0/16,127.0.0.1/32); empty: public addresses only"
        ),
    )
    rate_limit_webhook_replays: str = Field(
        default="5/minute",
        description=(
            "Webhook replays per endpoint, and per admin key (limits syntax); past it, 429"
        ),
    )

    # --- documents by email (docs/invoices.md, Delivery by email) ---
    smtp_host: str = Field(
        default="",
        description=(
            "The SMTP server documents are sent through (a mail relay, or an email provider's "
            "SMTP endpoint); empty: documents are not emailed (their deliveries wait, queued)"
        ),
    )
    smtp_port: int = Field(default=587, ge=1, le=65535, description="Its port")
    smtp_security: Literal["starttls", "tls", "none"] = Field(
        default="starttls",
        description=(
            "starttls: plain connection upgraded with STARTTLS (refused if the server does not "
            "offer it); tls: TLS from the first byte (port 465); none: only for a relay on the "
            "same host"
        ),
    )
    smtp_username: str = Field(default="", description="Its user name; empty: no AUTH")
    smtp_password: SecretStr = Field(default=SecretStr(""), description="Its password")
    smtp_ca_file: str = Field(
        default="",
        description="A CA bundle to verify its certificate by; empty: the system's",
    )
    smtp_deadline_seconds: float = Field(
        default=30.0,
        gt=0,
        le=300,
        description=(
            "The whole of one attempt (connect, TLS, AUTH, the message sent, the answer read); "
            "past it the attempt fails as timed out and is tried again later"
        ),
    )
    mail_from: str = Field(
        default="billing@example.com",
        description="The address documents are sent from (its domain names each Message-ID)",
    )

    # --- each customer's page (docs/invoices.md, Each customer's page) ---
    public_url: str = Field(
        default="",
        description=(
            "Where households reach this API (https://bills.retailer.example): the links to "
            "their page in their emails start with it; empty: emails carry no link"
        ),
    )
    page_secret: SecretStr = Field(
        default=SecretStr(""),
        description=(
            "The key links to customers' pages are signed with (at least 32 characters); "
            "empty: no page opens. Changing it ends every link sent"
        ),
    )
    page_link_days: int = Field(
        default=90, ge=1, le=400, description="How long a link to a customer's page opens"
    )
    rate_limit_pages: str = Field(
        default="60/minute",
        description="Requests to customers' pages per client address (limits syntax); past it, 429",
    )

    @field_validator("page_secret")
    @classmethod
    def _page_secret(cls, value: SecretStr) -> SecretStr:
        secret = value.get_secret_value()
        if secret and len(secret) < 32:
            raise ValueError("at least 32 characters (or empty: no page opens)")
        return value

    @field_validator("webhook_allowed_networks")
    @classmethod
    def _networks(cls, value: str) -> str:
        Destinations.parse(value)  # a ValueError naming the one that is not a network
        return value

    def webhook_destinations(self) -> Destinations:
        """Where webhooks may be sent: the public Internet and ``webhook_allowed_networks``."""
        return Destinations.parse(self.webhook_allowed_networks)

    def nem12_limits(self) -> ReadLimits:
        """The ``nem12_*`` limits, as the NEM12 reader takes them."""
        from freehours.meterdata.nem12 import ReadLimits  # noqa: PLC0415 - only its users pay

        return ReadLimits(
            max_bytes=self.nem12_max_bytes,
            max_members=self.nem12_max_members,
            max_lines=self.nem12_max_lines,
            max_line=self.nem12_max_line_chars,
        )

    @property
    def batch_body_limit(self) -> int:
        """``max_batch_bytes``, or its default derived from ``max_batch_reads``."""
        if self.max_batch_bytes is not None:
            return self.max_batch_bytes
        return 512 * self.max_batch_reads + 64 * 1024


def worker_queues(spec: str) -> dict[str, int]:
    """The runner threads of each worker queue that ``spec`` sizes: ``QUEUE=RUNNERS`` pairs,
    comma-separated (``settle=8,webhook=16``), each queue one of ``defaults.WORKER_QUEUES`` at
    most once, its runners a whole number from 1. A ``ValueError`` names the part that is not."""
    sizes: dict[str, int] = {}
    for part in (part.strip() for part in spec.split(",")):
        if not part:
            continue
        name, equals, runners = (word.strip() for word in part.partition("="))
        if not equals:
            raise ValueError(f"{part!r} is not QUEUE=RUNNERS")
        if name not in defaults.WORKER_QUEUES:
            known = ", ".join(defaults.WORKER_QUEUES)
            raise ValueError(f"{part!r}: {name!r} is not a queue (the queues: {known})")
        if name in sizes:
            raise ValueError(f"{part!r}: the queue {name} is sized twice")
        if not runners.isdigit() or int(runners) < 1:
            raise ValueError(f"{part!r}: runners must be a whole number from 1")
        sizes[name] = int(runners)
    return sizes


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, read from the environment once; a value that is not one is a
    ``ConfigurationError`` naming its variable."""
    try:
        return Settings()
    except ValidationError as exc:
        raise ConfigurationError(settings_problems(exc, "FREEHOURS_")) from None


def settings_problems(error: ValidationError, prefix: str) -> str:
    """What is wrong with settings read from ``prefix``-ed variables, one variable a line:
    ``FREEHOURS_WORKER_CONCURRENCY='abc': Input should be a valid integer``."""
    lines = []
    for problem in error.errors(include_url=False):
        name = f"{prefix}{str(problem['loc'][0]).upper()}" if problem["loc"] else prefix + "*"
        message = problem["msg"].removeprefix("Value error, ")
        lines.append(f"{name}={problem['input']!r}: {message}")
    return "settings: " + "; ".join(lines)
