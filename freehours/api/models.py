"""What the API's requests and answers look like: the bodies, the path parameters, and their
checks against the rules of ``freehours.domain.reads``.

Decimals travel as strings (a JSON number is binary and inexact). Every date and moment a
request names, in its body, query or path, is of one of two types, ``NemDate`` and ``Moment``:
a string in its documented form (never a number of seconds), inside the NEM calendar's bounds
(``EARLIEST_DATE`` to ``LATEST_DATE``), else a 422 naming the field; a read's date is also
checked against today by its route (``check_read_date``), which knows the clock. Request bodies
are strict (``STRICT_BODY``): an integer is a JSON integer, a string a string, a boolean
``true`` or ``false``, as docs/api.md says.
"""

import re
from datetime import date, datetime
from decimal import Decimal
from typing import Annotated, Any, Literal

from fastapi import Path
from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    TypeAdapter,
    field_validator,
)

from freehours.api.problems import range_problem
from freehours.domain import reads as rules
from freehours.domain.invoicing import (
    DEFAULT_PAYMENT_TERM_DAYS,
    MAX_ANCHOR_DAY,
    MAX_PAYMENT_TERM_DAYS,
    MIN_PAYMENT_TERM_DAYS,
    BillingCycle,
    Frequency,
)
from freehours.domain.reads import NMI_PATTERN, SUFFIX_PATTERN, IntervalMinutes, QualityFlag
from freehours.domain.time import Region
from freehours.domain.webhooks import (
    EVENT_TYPES,
    MAX_DESCRIPTION_LENGTH,
    MAX_URL_LENGTH,
    InvalidEndpoint,
    check_url,
)
from freehours.plans.document import PlanDocument, PlanId

NmiPath = Annotated[str, Path(pattern=NMI_PATTERN, description="the 10-character NMI")]

#: How a request writes a date: ``YYYY-MM-DD`` (RFC 3339's full-date), ASCII digits. Pydantic
#: alone would also take a number of seconds since 1970, as a number or as a string.
DATE_TEXT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
#: How a request writes a moment: RFC 3339's date-time, its offset required.
MOMENT_TEXT = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?([Zz]|[+-][0-9]{2}:[0-9]{2})"
)

#: Request bodies: no field unknown, every type strict (no ``"30"`` or ``30.0`` for ``30``).
STRICT_BODY = ConfigDict(extra="forbid", strict=True)


def _written(form: re.Pattern[str], what: str) -> Any:
    def check(value: object) -> object:
        if not isinstance(value, str) or not form.fullmatch(value):
            raise ValueError(what)
        return value

    return BeforeValidator(check)


def _in_range(check: Any) -> Any:
    def bounded(value: Any) -> Any:
        try:
            return check(value)
        except rules.RangeError as exc:
            raise ValueError(exc.reason) from None  # the field is named by where it is

    return AfterValidator(bounded)


#: A date in a request's body, query or path: ``YYYY-MM-DD``, from ``EARLIEST_DATE`` to
#: ``LATEST_DATE`` (a 422 naming the field otherwise). Not strict to pydantic (its strict mode
#: takes no string for a date): the string's form is checked first.
NemDate = Annotated[
    date,
    Strict(False),
    _written(DATE_TEXT, "a date is a string YYYY-MM-DD"),
    _in_range(rules.check_date),
]
#: A moment in a request: RFC 3339 with its offset, its date (on its own clock) from
#: ``EARLIEST_DATE`` to ``LATEST_DATE``: it can be moved to any time zone, and a day either
#: side of it written, without overflowing.
Moment = Annotated[
    AwareDatetime,
    Strict(False),
    _written(MOMENT_TEXT, "a moment is an RFC 3339 date-time string with its offset"),
    _in_range(rules.check_moment),
]


def _json_integer(value: object) -> object:
    if not isinstance(value, int) or isinstance(value, bool):
        # Pydantic turns ValueError, not TypeError, into a 422 naming the field.
        raise ValueError("an integer, written without a point or exponent")  # noqa: TRY004
    return value


#: An interval length in a request: a JSON integer (pydantic's ``Literal`` would take ``30.0``).
IntervalMinutesIn = Annotated[IntervalMinutes, BeforeValidator(_json_integer)]

#: A plan's body, read as any JSON object: ``parse_plan`` checks it as it checks a plan file, to
#: name every problem as a plan file's are.
PLAN_DOCUMENT: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])


def plan_body_schema() -> dict[str, Any]:
    """The JSON schema of a plan's body: ``PlanDocument``'s, its ``id`` optional (the path's).

    A schema cannot say all that the plan's validation checks (every moment of the week in a
    band, one price per band type); the route answers 422 ``invalid-plan`` for the rest."""
    schema = PlanDocument.model_json_schema()
    schema["required"] = [name for name in schema["required"] if name != "id"]
    schema["properties"]["id"] = {
        **schema["properties"]["id"],
        "description": "the plan's id: the path's plan_id, which it must equal when given",
    }
    return schema


def _no_float(value: object) -> object:
    if isinstance(value, float):
        # Pydantic turns ValueError, not TypeError, into a 422 naming the field.
        raise ValueError("decimals are strings (a JSON number is binary and inexact)")  # noqa: TRY004
    return value


class ReadIn(BaseModel):
    """One interval read: its start (with offset), its energy in kWh, its NEM12 quality. Each
    inside the ranges of ``freehours.domain.reads``; the route checks the date against today."""

    model_config = STRICT_BODY

    start: Moment
    kwh: Decimal | None = Field(
        description="kWh as a decimal string of ASCII digits (below 1000000, at most 6 decimal"
        " places; docs/security.md); null when missing"
    )
    quality: QualityFlag = "A"

    @field_validator("kwh", mode="before")
    @classmethod
    def _kwh_in_range(cls, value: object) -> object:
        # Before pydantic's own parsing, which also takes exponents, NaN and non-ASCII digits.
        if value is None:
            return None
        if isinstance(value, str):
            return rules.kwh_of(value)
        if isinstance(value, int) and not isinstance(value, bool):
            return rules.check_kwh(Decimal(value))
        _no_float(value)
        raise ValueError('kwh is a decimal string such as "0.412", or null')


class MeterReadingsIn(BaseModel):
    """A batch of interval reads for one NMI and channel."""

    model_config = STRICT_BODY

    nmi: str = Field(pattern=NMI_PATTERN, description="the 10-character NMI")
    suffix: str = Field(pattern=SUFFIX_PATTERN, description="the NEM12 channel suffix, e.g. E1")
    interval_minutes: IntervalMinutesIn
    reads: list[ReadIn]


class IngestCountsOut(BaseModel):
    """What ``POST /v1/meter-readings`` did, in interval reads (one per interval the batch
    names; the last of one interval counts)."""

    accepted: int = Field(description="reads for an interval that had no value")
    superseded: int = Field(description="reads that replaced a different value or quality")
    unchanged: int = Field(description="reads of the value and quality stored already")


class Nem12CountsOut(BaseModel):
    """What ``POST /v1/meter-readings/nem12`` did, in channel-days: one channel's NEM day, a
    300 row, (NMI, suffix, date), the unit NEM12's revision rule replaces whole. The words
    differ from the reads' on purpose: ``accepted`` there counts interval reads."""

    file: str = Field(description="the file's name (X-Filename)")
    intervals: int = Field(description="the interval values of the file's channel-days")
    channel_days_accepted: int = Field(description="channel-days stored where there were none")
    channel_days_superseded: int = Field(
        description="channel-days that replaced an older revision, or one of the same stamp"
        " with other values"
    )
    channel_days_unchanged: int = Field(description="channel-days stored exactly so already")
    channel_days_stale: int = Field(
        description="channel-days older than the revision stored, so not stored"
    )


class SettlementIn(BaseModel):
    model_config = STRICT_BODY

    nmi: str = Field(pattern=NMI_PATTERN)
    date: NemDate


class ScheduleIn(BaseModel):
    """What ``POST /v1/settlements/schedule`` takes: whose days, and which."""

    model_config = STRICT_BODY

    nmi: str = Field(
        pattern=NMI_PATTERN,
        description="the customer's NMI (every customer at once is `freehours settlements"
        " schedule`'s: a run of minutes, not a request's)",
    )
    first: NemDate = Field(alias="from", description="the first local day scheduled")
    last: NemDate = Field(
        alias="to",
        description=f"the last local day scheduled: at most {rules.SCHEDULE_MAX_DAYS} days in all",
    )


class ScheduleOut(BaseModel):
    """What ``POST /v1/settlements/schedule`` did."""

    model_config = ConfigDict(populate_by_name=True)

    nmi: str
    first: date = Field(alias="from")
    last: date = Field(alias="to")
    scheduled: int = Field(
        ge=0,
        description="days with reads and no COMPLETED or ABORTED quota, each given its settlement"
        " job (or, where one waits already, told to run when due)",
    )


class QuotaOut(BaseModel):
    """The quota, as every settlement answer carries it."""

    nmi: str
    date: date
    version: int
    status: Literal["PENDING", "LOCKED", "COMPLETED", "ABORTED"]
    free_kwh: str | None
    attempts: int
    completed_at: datetime | None
    reason: str | None


BillingFrequency = Literal["monthly", "quarterly"]
AnchorDay = Annotated[
    int,
    Field(
        strict=True,
        ge=1,
        le=MAX_ANCHOR_DAY,
        description="the day of the month each billing period starts on (1 to 28, so that"
        " every month has it)",
    ),
]
PaymentTermDays = Annotated[
    int,
    Field(
        strict=True,
        ge=MIN_PAYMENT_TERM_DAYS,
        le=MAX_PAYMENT_TERM_DAYS,
        description="days from an invoice's issue to its due date (the Retail Rules give at"
        " least 13 business days)",
    ),
]


class CustomerIn(BaseModel):
    """A customer: the plan, the region, and the billing cycle (the defaults when left out)."""

    model_config = STRICT_BODY

    plan_id: PlanId
    region: Region
    billing_cycle: BillingFrequency = Field(
        default="monthly", description="how often the customer is invoiced"
    )
    anchor_day: AnchorDay = 1
    payment_term_days: PaymentTermDays = DEFAULT_PAYMENT_TERM_DAYS

    def cycle(self) -> BillingCycle:
        return BillingCycle(Frequency(self.billing_cycle), self.anchor_day, self.payment_term_days)


class CustomerOut(BaseModel):
    nmi: str
    plan_id: str
    region: Region
    billing_cycle: BillingFrequency
    anchor_day: AnchorDay
    payment_term_days: PaymentTermDays


#: A decimal as the bill writes it: plain notation, no exponent.
DecimalText = Annotated[str, Field(pattern=r"^-?\d+(\.\d+)?$")]


class BillDayOut(BaseModel):
    """One local day of a bill."""

    date: date
    consumption_kwh: DecimalText
    free_kwh: DecimalText
    over_cap_kwh: DecimalText
    export_kwh: DecimalText
    missing_intervals: int = Field(ge=0)


class BillTotalsOut(BaseModel):
    consumption_kwh: DecimalText
    free_kwh: DecimalText
    over_cap_kwh: DecimalText
    export_kwh: DecimalText


class BillLineOut(BaseModel):
    """One priced line: energy in a band, the supply charge, or feed-in (a credit)."""

    code: str
    description: str
    quantity: DecimalText
    unit: str
    unit_price: DecimalText
    amount: DecimalText


class BillOut(BaseModel):
    """The bill, the same JSON as ``freehours bill --format json`` (docs/design.md section 4);
    amounts in AUD, GST on top of ``subtotal``."""

    model_config = ConfigDict(populate_by_name=True)

    nmi: str
    plan: str
    time_zone: str
    first: date = Field(alias="from")
    last: date = Field(alias="to")
    days: list[BillDayOut]
    totals: BillTotalsOut
    lines: list[BillLineOut]
    subtotal: DecimalText
    gst: DecimalText
    total: DecimalText
    free_energy_value: DecimalText


class HealthOut(BaseModel):
    status: Literal["ok"]


class ReadinessOut(BaseModel):
    """Whether this process can serve: its database answers (else 503), and whether Redis
    does (reported, never a 503)."""

    status: Literal["ok", "degraded", "unavailable"] = Field(
        description="ok; degraded: Redis does not answer (the limits count in this process);"
        " unavailable: the database does not answer"
    )
    database: Literal["ok", "not answering", "unavailable"]
    redis: Literal["ok", "unavailable"] | None = Field(
        default=None, description="absent when no Redis is configured"
    )


def check_read_date(day: date, today: date, field: str, *, where: str = "body") -> None:
    """A 422 naming ``{where}.{field}`` when no meter can have read ``day`` yet (or before
    2000)."""
    try:
        rules.check_read_date(day, today, field)
    except rules.RangeError as exc:
        raise range_problem(f"{where}.{field}", exc) from None


class InvoiceRunIn(BaseModel):
    """What ``POST /v1/invoice-runs`` may say: the moment the run bills up to (default now)."""

    model_config = STRICT_BODY

    as_of: Moment | None = Field(
        default=None,
        description="RFC 3339 with an offset, from 2000 to 2099 and not in the future: the run"
        " invoices the billing periods that ended before it, on each customer's calendar"
        " (default: now)",
    )


class RunCountsOut(BaseModel):
    """What a run has done so far, added up over its batches done."""

    accounts: int = Field(ge=0, description="accounts looked at")
    invoices: int = Field(ge=0)
    credit_notes: int = Field(ge=0)
    adjustment_invoices: int = Field(ge=0)
    waiting: int = Field(
        ge=0, description="periods not ready (a day still settling): the next run takes them"
    )
    held: int = Field(
        ge=0, description="periods held (an ABORTED quota, a plan that no longer parses)"
    )


class InvoiceRunOut(BaseModel):
    """An invoice run: RUNNING until its last batch is done, then COMPLETED."""

    run_id: str
    state: Literal["RUNNING", "COMPLETED"]
    as_of: datetime
    requested_at: datetime
    finished_at: datetime | None
    batches: int | None = Field(ge=0, description="null until the run is planned")
    batches_done: int = Field(ge=0)
    counts: RunCountsOut
    notes: list[str] = Field(description="why periods wait or are held: the first 100, as examples")
    journal: str = Field(description="the path of the run's accounting journal (CSV)")


DocumentTypeName = Literal["invoice", "credit_note", "adjustment_invoice"]


class DocumentLinksOut(BaseModel):
    """Where the document is, as JSON and as the household reads it."""

    document: str
    pdf: str
    html: str


class DocumentSummaryOut(BaseModel):
    """A finalised document, in short. Amounts in AUD; a correction's are differences."""

    number: str
    type: DocumentTypeName
    nmi: str
    period_start: date
    period_end: date
    issue_date: date
    due_date: date | None = Field(description="null when there is nothing to pay")
    subtotal: DecimalText
    gst: DecimalText
    total: DecimalText
    free_kwh: DecimalText
    free_value: DecimalText
    corrects: str | None = Field(description="the number of the invoice this one corrects")
    corrected_by: list[str] = Field(description="the numbers of its corrections, in order")
    links: DocumentLinksOut


class DocumentPageOut(BaseModel):
    """A page of documents, oldest period first, then by NMI, each invoice before its
    corrections."""

    items: list[DocumentSummaryOut]
    next: str | None = Field(description="the next page's path (its cursor); null on the last")


class DocumentDayOut(BaseModel):
    """One local day of a document, and the quota version it billed (null: no quota, billed
    after its data deadline). On a correction, the change in each figure."""

    date: date
    quota_version: int | None
    consumption_kwh: DecimalText
    free_kwh: DecimalText
    export_kwh: DecimalText


class DocumentOut(DocumentSummaryOut):
    """A finalised document, whole: what it charges, line by line and day by day, each day with
    the quota version it billed, and the plan and retailer it was made with."""

    series: Literal["invoice", "credit_note"]
    serial: int = Field(ge=1)
    sequence: int = Field(ge=0, description="0: the period's invoice; 1 on: its corrections")
    run_id: str | None
    finalised_at: datetime
    plan_id: str
    region: Region
    time_zone: str
    reason: str | None = Field(description="why a correction was made")
    consumption_kwh: DecimalText
    over_cap_kwh: DecimalText
    export_kwh: DecimalText
    lines: list[BillLineOut]
    days: list[DocumentDayOut]
    plan: dict[str, Any] = Field(description="the plan as it was when the document was made")
    retailer: dict[str, Any] = Field(description="the retailer's details printed on it")


class AuditEntryOut(BaseModel):
    """One operator action or sign-in: who, when, what, and the state before and after."""

    id: int
    at: datetime
    key_id: str = Field(description="the key the operator signed in or called with")
    key_name: str
    action: str = Field(
        description="job.retry, job.cancel, quota.reopen, key.revoke, session.sign_in,"
        " session.sign_out"
    )
    target: str = Field(description="what it acted on: job:ID, quota:NMI:DATE, key:ID")
    outcome: str = Field(description="done, or conflict: the state had changed, nothing done")
    reason: str | None = Field(description="the operator's reason, or why it was not done")
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    trace_id: str | None = Field(description="the trace of the request that did it")


class AuditPageOut(BaseModel):
    """A page of the audit log, newest first."""

    items: list[AuditEntryOut]
    next: str | None = Field(description="the next page's path; null on the last")


# --- webhooks (docs/webhooks.md) -----------------------------------------------------------------

WebhookEventType = Literal[
    "quota.completed", "quota.aborted", "quota.revised", "invoice.finalised", "credit_note.issued"
]


def _webhook_url(url: str) -> str:
    try:
        return check_url(url)
    except InvalidEndpoint as exc:
        raise ValueError(exc.reason) from None


WebhookUrl = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_URL_LENGTH,
        description="Where events are POSTed: an http or https URL.",
        examples=["https://example.com/freehours/webhooks"],
    ),
    AfterValidator(_webhook_url),
]
WebhookEvents = Annotated[
    list[WebhookEventType],
    Field(
        min_length=1,
        max_length=2 * len(EVENT_TYPES),
        description="The event types sent to the endpoint.",
    ),
]
WebhookDescription = Annotated[str, Field(max_length=MAX_DESCRIPTION_LENGTH)]


class WebhookEndpointIn(BaseModel):
    """A webhook endpoint to register."""

    model_config = STRICT_BODY

    url: WebhookUrl
    events: WebhookEvents
    description: WebhookDescription = ""


class WebhookEndpointPatch(BaseModel):
    """What to change of an endpoint: the fields given. ``enabled: true`` enables a disabled
    endpoint again (its run of failures forgotten); ``false`` disables it."""

    model_config = STRICT_BODY

    url: WebhookUrl | None = None
    events: WebhookEvents | None = None
    description: WebhookDescription | None = None
    enabled: bool | None = None


class WebhookEndpointOut(BaseModel):
    """A webhook endpoint; never its secret (shown once, when made or rotated)."""

    id: str
    url: str
    description: str
    events: list[str]
    enabled: bool
    disabled_at: datetime | None
    disabled_reason: str | None = Field(
        description="Why it was disabled: its deliveries kept failing, or through the API."
    )
    failing_since: datetime | None = Field(
        description="Since when every attempt has failed (null: the last one succeeded)."
    )
    final_failures: int = Field(description="Deliveries in a row that failed for good.")
    previous_secret_until: datetime | None = Field(
        description="Until when the secret a rotation replaced still signs, beside the new one."
    )
    created_at: datetime
    updated_at: datetime


class WebhookEndpointSecretOut(WebhookEndpointOut):
    """An endpoint with its signing secret: shown this once."""

    secret: str = Field(description="The signing secret, `whsec_` and base64: shown this once.")


class WebhookEndpointsOut(BaseModel):
    items: list[WebhookEndpointOut]


class WebhookAttemptOut(BaseModel):
    at: datetime
    outcome: Literal["succeeded", "failed", "error"] = Field(
        description="succeeded (2xx), failed (another status), error (no answer)."
    )
    status_code: int | None
    latency_ms: int
    error: str | None


class WebhookDeliveryOut(BaseModel):
    """One event's delivery to one endpoint, and its attempts."""

    id: int
    webhook_id: str = Field(description="The event's id: the `webhook-id` of every attempt.")
    event_type: str
    endpoint_id: str
    status: Literal["pending", "succeeded", "failed"]
    attempts: int = Field(description="Attempts since it was created or last replayed.")
    created_at: datetime
    started_at: datetime
    next_attempt_at: datetime | None
    finished_at: datetime | None
    last_status_code: int | None
    last_error: str | None
    replays: int
    attempt_log: list[WebhookAttemptOut] = Field(description="Every attempt, oldest first.")


class WebhookDeliveriesOut(BaseModel):
    items: list[WebhookDeliveryOut]
    next: str | None = Field(description="The next page's path, while there may be more.")
