"""Meter data in (ingest key): ``POST /v1/meter-readings`` (a JSON batch of interval reads) and
``POST /v1/meter-readings/nem12`` (a NEM12 file), each stored at most once per Idempotency-Key
(``freehours.api.once``).

A NEM12 upload is refused cheaply first (its name, its key, a free upload slot); then its body
is read, bounded, and the whole file checked in a worker thread, stopped if the client goes
away; only then is the database touched, in one transaction: all of the file or none of it.

Each batch or file stored is recorded with its counts (``freehours.settlement.ingest.Arrival``) in
the same transaction. A meter agent's ``Freehours-Agent`` header names it in that record, and its
report (its breaker's state) is written behind the request (``freehours.api.agents``), whatever the
request's answer.
"""

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from decimal import Decimal
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import (
    BaseModel,
    BeforeValidator,
    Field,
    field_validator,
)

from freehours.api.agents import AgentHeader, parse_header
from freehours.api.auth import requires
from freehours.api.bodies import (
    body_operation,
    bounded_body,
    parse_body,
    upload_body,
    while_connected,
)
from freehours.api.keys import ApiKey, Scope
from freehours.api.models import STRICT_BODY, Moment, _json_integer, check_read_date
from freehours.api.once import IDEMPOTENT, IdempotencyKey, check_idempotency_key, run_once
from freehours.api.openapi import link, merged, problem
from freehours.api.problems import Problem, client_gone
from freehours.api.services import AppServices, Services
from freehours.domain import reads as rules
from freehours.domain.reads import (
    NMI_PATTERN,
    SUFFIX_PATTERN,
    IntervalDay,
    IntervalMinutes,
    IntervalRead,
    QualityFlag,
)
from freehours.domain.time import NEM_TIME
from freehours.errors import NEM12Error
from freehours.meterdata.nem12 import NEM12Reader, NEM12TooLarge, ReadCancelled, read_days
from freehours.observability.logging import bind_fields
from freehours.observability.metrics import UPLOAD_BYTES_READ
from freehours.settlement.ingest import Arrival, Ingested
from freehours.store.database import Unit

#: An interval length in a request: a JSON integer (pydantic's ``Literal`` would take ``30.0``).
IntervalMinutesIn = Annotated[IntervalMinutes, BeforeValidator(_json_integer)]


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


#: Longest X-Filename: it names the file in answers, logs and the idempotency record.
FILENAME_MAX_LENGTH = 255
#: A JSON body larger than this is parsed in a worker thread, not on the event loop.
THREADED_PARSE_BYTES = 64 * 1024
#: A checked NEM12 upload up to this size (decompressed) has its days kept in memory for its
#: transaction (about 40 MB of them at most); a larger one is read again there instead.
KEPT_UPLOAD_BYTES = 8 * 1024 * 1024

router = APIRouter(tags=["meter data"])

IngestKey = Annotated[ApiKey, requires(Scope.INGEST)]


@router.post(
    "/v1/meter-readings",
    response_model=IngestCountsOut,
    response_description="What the batch did to the stored reads (a replay: the first answer).",
    openapi_extra=merged(
        body_operation(MeterReadingsIn),
        IDEMPOTENT,
        {
            "responses": {
                "200": {
                    "links": {
                        "settlement": link(
                            "post_settlement",
                            "Settle a day of the NMI's.",
                            body={"nmi": "$request.body#/nmi"},
                        )
                    }
                },
                "413": problem(
                    "The body is over its limit, or holds more reads than a batch may"
                    " (FREEHOURS_MAX_BATCH_READS; docs/security.md): `/problems/payload-too-large`."
                ),
            }
        },
    ),
)
async def post_readings(
    request: Request,
    key: IngestKey,
    services: AppServices,
    idempotency_key: IdempotencyKey = None,
) -> Response:
    """Ingest interval reads; never stored twice for one Idempotency-Key."""
    with _agent_heard(request, services) as agent:
        settings = services.settings
        limit = settings.batch_body_limit
        raw = await bounded_body(
            request,
            limit,
            title="Body too large",
            detail=f"body: over {limit} bytes (at most {settings.max_batch_reads} reads a batch)",
            required=None,
        )
        if len(raw) > THREADED_PARSE_BYTES:
            body = await anyio.to_thread.run_sync(parse_body, MeterReadingsIn, raw)
        else:
            body = parse_body(MeterReadingsIn, raw)
        arrival = Arrival(
            "reads", len(raw), key_id=key.id, agent=None if agent is None else agent.name
        )
        return await run_in_threadpool(_ingest_reads, services, body, key, idempotency_key, arrival)


@contextmanager
def _agent_heard(request: Request, services: Services) -> Iterator[AgentHeader | None]:
    """The request's ``Freehours-Agent`` header, if it has one that parses; when the request is
    done, whatever its answer, the agent's report recorded (behind the request, at most once per
    agent every 10 s)."""
    agent = parse_header(request.headers.get("freehours-agent"))
    try:
        yield agent
    finally:
        if agent is not None:
            services.agents.heard(
                agent,
                user_agent=request.headers.get("user-agent"),
                address=None if request.client is None else request.client.host,
            )


def _ingest_reads(
    services: Services,
    body: MeterReadingsIn,
    key: ApiKey,
    idempotency_key: str | None,
    arrival: Arrival,
) -> Response:
    settings = services.settings
    bind_fields(nmi=body.nmi)
    if len(body.reads) > settings.max_batch_reads:
        raise Problem(
            413,
            "payload-too-large",
            "Too many reads",
            f"reads: {len(body.reads)} reads, at most {settings.max_batch_reads} per batch",
        )
    today = services.nem_today()
    for number, read in enumerate(body.reads):
        check_read_date(read.start.astimezone(NEM_TIME).date(), today, f"reads.{number}.start")
    step = timedelta(minutes=body.interval_minutes)
    reads = [
        IntervalRead(body.nmi, body.suffix, r.start, r.start + step, r.kwh, r.quality)
        for r in body.reads
    ]

    def work(unit: Unit) -> tuple[int, dict[str, Any], Ingested]:
        ingested = services.runtime.ingestion.reads(unit, reads, arrival)
        counts = ingested.counts
        answer = {
            "accepted": counts.accepted,
            "superseded": counts.superseded,
            "unchanged": counts.unchanged,
        }
        return 200, answer, ingested

    return run_once(
        services,
        key,
        idempotency_key=idempotency_key,
        route="/v1/meter-readings",
        payload=body.model_dump_json().encode(),
        work=work,
        committed=services.runtime.ingestion.committed,
    )


@router.post(
    "/v1/meter-readings/nem12",
    response_model=Nem12CountsOut,
    response_description="What the file did to the stored meter data (a replay: the first answer).",
    openapi_extra=merged(
        {
            "parameters": [
                {
                    "name": "X-Filename",
                    "in": "header",
                    "required": False,
                    "description": "The file's name, for answers and logs (default upload.csv):"
                    f" at most {FILENAME_MAX_LENGTH} characters, no control characters.",
                    "schema": {"type": "string", "maxLength": FILENAME_MAX_LENGTH},
                }
            ],
            "requestBody": {
                "required": True,
                "description": "The NEM12 file as it is: CSV, or a zip or gzip of it (told apart"
                " by their bytes, whatever the Content-Type).",
                "content": {
                    "text/csv": {"schema": {"type": "string"}},
                    "application/zip": {"schema": {"type": "string", "format": "binary"}},
                    "application/gzip": {"schema": {"type": "string", "format": "binary"}},
                },
            },
            "responses": {
                "400": problem(
                    "X-Filename is too long, empty, or holds control characters:"
                    " `/problems/bad-request`."
                ),
                "413": problem(
                    "The file is over FREEHOURS_MAX_UPLOAD_BYTES, or its decompressed bytes, zip"
                    " entries or lines are over their limits (docs/security.md):"
                    " `/problems/payload-too-large`."
                ),
                "422": {
                    "description": "An empty body is a `/problems/validation-error`; a file with"
                    " a bad record is a `/problems/invalid-input` naming the file and line, and"
                    " nothing of it is stored."
                },
                "503": problem(
                    "This process reads as many uploads as it may at once"
                    " (FREEHOURS_UPLOAD_CONCURRENCY; `/problems/busy`), or the database is"
                    " unavailable (`/problems/database-unavailable`).",
                    "Retry-After",
                ),
            },
        },
        IDEMPOTENT,
    ),
)
async def post_nem12(
    request: Request,
    key: IngestKey,
    services: AppServices,
    idempotency_key: IdempotencyKey = None,
) -> Response:
    """Ingest a NEM12 file (CSV, zip or gzip): all of it, or, on one bad line, none of it."""
    with _agent_heard(request, services) as agent:
        return await _upload(request, key, services, idempotency_key, agent)


async def _upload(
    request: Request,
    key: ApiKey,
    services: Services,
    idempotency_key: str | None,
    agent: AgentHeader | None,
) -> Response:
    name = _filename(request.headers.get("x-filename"))
    check_idempotency_key(idempotency_key)
    async with upload_body(request, services) as body:
        stop = threading.Event()
        error: NEM12Error | None = None
        kept: list[IntervalDay] | None = None
        try:
            kept = await while_connected(request, stop, _check_upload, services, body, name, stop)
        except ReadCancelled:
            raise client_gone() from None
        except NEM12TooLarge as exc:
            raise Problem(413, "payload-too-large", "File too large", str(exc)) from exc
        except NEM12Error as exc:
            error = exc  # the request's final answer, kept for its Idempotency-Key below
        arrival = Arrival(
            "nem12",
            len(body),
            name=name if "x-filename" in request.headers else None,
            key_id=key.id,
            agent=None if agent is None else agent.name,
        )
        return await run_in_threadpool(
            _ingest_upload,
            services,
            body,
            name,
            kept=kept,
            error=error,
            key=key,
            idempotency_key=idempotency_key,
            arrival=arrival,
        )


def _check_upload(
    services: Services, body: bytes, name: str, stop: threading.Event
) -> list[IntervalDay] | None:
    """Every limit and record of the file checked (``NEM12Error`` at the first problem),
    keeping nothing (``NEM12Reader.check``); then, for a small file, its days, kept for the
    transaction (a large one is read again there)."""
    reader = NEM12Reader(
        body, name=name, today=services.nem_today(), limits=services.nem12_limits, stop=stop
    )
    try:
        reader.check()
        if reader.bytes_read > 2 * KEPT_UPLOAD_BYTES:  # check() read it twice
            return None
        return list(reader.days())
    finally:
        UPLOAD_BYTES_READ.inc(reader.bytes_read)


def _ingest_upload(
    services: Services,
    body: bytes,
    name: str,
    *,
    kept: list[IntervalDay] | None,
    error: NEM12Error | None,
    key: ApiKey,
    idempotency_key: str | None,
    arrival: Arrival,
) -> Response:
    def work(unit: Unit) -> tuple[int, dict[str, Any], Ingested]:
        if error is not None:
            raise error
        days = (
            kept
            if kept is not None
            else read_days(
                body, name=name, today=services.nem_today(), limits=services.nem12_limits
            )
        )
        ingested = services.runtime.ingestion.days(unit, days, arrival)
        counts = ingested.counts
        # In channel-days, named so: "accepted" alone means interval reads (IngestCountsOut).
        answer = Nem12CountsOut(
            file=name,
            intervals=ingested.values,
            channel_days_accepted=counts.accepted,
            channel_days_superseded=counts.superseded,
            channel_days_unchanged=counts.unchanged,
            channel_days_stale=counts.stale,
        )
        return 200, answer.model_dump(), ingested

    return run_once(
        services,
        key,
        idempotency_key=idempotency_key,
        route="/v1/meter-readings/nem12",
        payload=body,
        work=work,
        committed=services.runtime.ingestion.committed,
    )


def _filename(header: str | None) -> str:
    """The file's name from ``X-Filename`` (default ``upload.csv``): at most
    ``FILENAME_MAX_LENGTH`` characters, no control characters, else a 400."""
    if header is None:
        return "upload.csv"
    if len(header) > FILENAME_MAX_LENGTH:
        raise Problem(
            400,
            "bad-request",
            "X-Filename is too long",
            f"X-Filename: {len(header)} characters, at most {FILENAME_MAX_LENGTH}",
        )
    if not header.strip() or any(ord(char) < 32 or ord(char) == 127 for char in header):
        raise Problem(
            400,
            "bad-request",
            "X-Filename is not a file name",
            "X-Filename: empty, or holds control characters",
        )
    return header
