"""The HTTP API (DESIGN.md section 3, contract): routes, their access scopes and their answers.

(No ``from __future__ import annotations`` here: FastAPI reads the route signatures at run time,
and some of their annotations name closures local to ``create_app``.)

Routes are thin: they check access and limits, parse, call the store, the settlement service or
the rating engine, and shape the answer. Access and rate limits are checked on the event loop (a
known key is in memory, the limits are ``limits.aio``); whatever waits on the database runs in a
worker thread, the synchronous driver's way: handlers are plain ``def`` (run in the threadpool),
and the settlement route hands its settlement to a few threads of its own
(``FREEHOURS_SETTLE_THREADS``).
"""

import asyncio
import contextlib
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Annotated, Any, Literal, TypeVar, cast

import anyio
import sqlalchemy as sa
import structlog
from fastapi import Depends, FastAPI, Header, Path, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
)
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from freehours.api import idempotency
from freehours.api.docs import mount_docs
from freehours.api.keys import ApiKey, Scope, find_key
from freehours.api.problems import (
    UNAVAILABLE_RETRY_AFTER_SECONDS,
    Problem,
    data_error_handler,
    database_unavailable_handler,
    http_exception_handler,
    internal_error_handler,
    problem_handler,
    validation_handler,
)
from freehours.api.ratelimit import RateLimits
from freehours.api.telemetry import RequestTelemetry
from freehours.cache.breaker import start_request
from freehours.clock import Clock
from freehours.domain import reads as rules
from freehours.domain.bill import make_bill
from freehours.domain.plan import PLAN_ID_MAX_LENGTH, PLAN_ID_PATTERN, PlanId, parse_plan
from freehours.domain.rating import MeterRating
from freehours.domain.reads import NMI_PATTERN, SUFFIX_PATTERN
from freehours.domain.settlement import Quota
from freehours.domain.time import NEM_TIME, Region
from freehours.errors import InputError, NEM12Error
from freehours.ingest import Ingested
from freehours.meterdata.nem12 import (
    NEM12Reader,
    NEM12TooLarge,
    ReadCancelled,
    read_days,
)
from freehours.meterdata.records import IntervalDay, IntervalRead
from freehours.observability.exposition import CONTENT_TYPE, render_metrics
from freehours.observability.logging import bind_fields
from freehours.observability.metrics import UPLOAD_BYTES_READ
from freehours.runtime import Runtime
from freehours.settings import Settings
from freehours.settlement import Answer, Outcome, Settlements
from freehours.store import catalog, meter
from freehours.store.database import Store

log = structlog.get_logger("freehours.api")

NmiPath = Annotated[str, Path(pattern=NMI_PATTERN, description="the 10-character NMI")]
#: Longest X-Filename: it names the file in answers, logs and the idempotency record.
FILENAME_MAX_LENGTH = 255
#: A JSON body larger than this is parsed in a worker thread, not on the event loop.
THREADED_PARSE_BYTES = 64 * 1024
#: A checked NEM12 upload up to this size (decompressed) has its days kept in memory for its
#: transaction (about 40 MB of them at most); a larger one is read again there instead.
KEPT_UPLOAD_BYTES = 8 * 1024 * 1024


@dataclass
class Services:
    """What the API runs on: built once at start-up, shared by every request."""

    runtime: Runtime
    limits: RateLimits
    #: Idempotency-Keys whose requests this process is running, their leases renewed.
    in_flight: idempotency.InFlight = field(default_factory=idempotency.InFlight)

    @classmethod
    def from_settings(cls, settings: Settings, clock: Clock | None = None) -> "Services":
        """Open the runtime (refusing an out-of-date database) and the rate limits."""
        runtime = Runtime.open(settings, clock)
        limits = RateLimits.open(
            settings.redis_url,
            settings.rate_limit_per_client,
            settings.rate_limit_per_nmi,
            settings.redis_prefix,
            settings.rate_limit_unknown_keys,
            timeout=settings.redis_timeout_seconds,
            breaker=runtime.redis_breaker,
        )
        return cls(runtime, limits)

    @property
    def settings(self) -> Settings:
        return self.runtime.settings

    @property
    def store(self) -> Store:
        return self.runtime.store

    @property
    def clock(self) -> Clock:
        return self.runtime.clock

    @property
    def settlements(self) -> Settlements:
        return self.runtime.settlements

    @property
    def settle_threads(self) -> int:
        """How many settlements this process runs at once: ``FREEHOURS_SETTLE_THREADS``, else
        what measured best (``make bench``): 4 on PostgreSQL, whose round trips leave the
        interpreter to another thread; 2 on SQLite, whose writers take turns anyway."""
        configured = self.settings.settle_threads
        if configured is not None:
            return configured
        return 2 if self.store.dialect == "sqlite" else 4


# --- request bodies ----------------------------------------------------------------------------


def _no_float(value: object) -> object:
    if isinstance(value, float):
        # Pydantic turns ValueError, not TypeError, into a 422 naming the field.
        raise ValueError("decimals are strings (a JSON number is binary and inexact)")  # noqa: TRY004
    return value


class ReadIn(BaseModel):
    """One interval read: its start (with offset), its energy in kWh, its NEM12 quality. Each
    inside the ranges of ``freehours.domain.reads``; the route checks the date against today."""

    model_config = ConfigDict(extra="forbid")

    start: AwareDatetime
    kwh: Decimal | None = Field(
        description="kWh as a decimal string of ASCII digits (below 1000000, at most 6 decimal"
        " places; docs/security.md); null when missing"
    )
    quality: Literal["A", "E", "S", "F", "N"] = "A"

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

    @field_validator("start")
    @classmethod
    def _start_in_range(cls, value: datetime) -> datetime:
        return rules.check_moment(value)


class MeterReadingsIn(BaseModel):
    """A batch of interval reads for one NMI and channel."""

    model_config = ConfigDict(extra="forbid")

    nmi: str = Field(pattern=NMI_PATTERN, description="the 10-character NMI")
    suffix: str = Field(pattern=SUFFIX_PATTERN, description="the NEM12 channel suffix, e.g. E1")
    interval_minutes: Literal[5, 15, 30]
    reads: list[ReadIn]


class IngestCountsOut(BaseModel):
    accepted: int
    superseded: int
    unchanged: int


class SettlementIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    nmi: str = Field(pattern=NMI_PATTERN)
    date: Annotated[date, AfterValidator(rules.check_date)]


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


class CustomerIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    plan_id: PlanId
    region: Region


class CustomerOut(BaseModel):
    nmi: str
    plan_id: str
    region: Region


def quota_body(quota: Quota) -> dict[str, Any]:
    """The contract's quota body, decimals as strings, times ISO 8601 with offset."""
    return {
        "nmi": quota.nmi,
        "date": quota.date.isoformat(),
        "version": quota.version,
        "status": quota.status.value,
        "free_kwh": None if quota.free_kwh is None else str(quota.free_kwh),
        "attempts": quota.attempts,
        "completed_at": None if quota.completed_at is None else quota.completed_at.isoformat(),
        "reason": quota.reason,
    }


_STATUS_CODES = {
    Outcome.SETTLED: 200,
    Outcome.REPLAYED: 200,
    Outcome.LOCKED: 409,
    Outcome.NOT_DUE: 409,
    Outcome.RETRY: 409,
    Outcome.ABORTED: 422,
}


def settlement_response(answer: Answer) -> JSONResponse:
    """The contract's answer to a settlement request."""
    headers: dict[str, str] = {}
    if answer.retry_after is not None:
        headers["Retry-After"] = str(answer.retry_after)
    if answer.outcome is Outcome.REPLAYED:
        headers["Idempotent-Replayed"] = "true"
    return JSONResponse(quota_body(answer.quota), _STATUS_CODES[answer.outcome], headers=headers)


# --- access --------------------------------------------------------------------------------


class KeyCache:
    """Keys looked up by their secret's hash, remembered for ``ttl`` so that a request does not
    pay a database round trip for its key; a revocation takes effect within ``ttl``. At most
    ``size`` secrets are remembered, the least recently used forgotten first: a flood of unknown
    secrets pushes out only its own entries, never a working key used since."""

    def __init__(self, store: Store, clock: Clock, ttl: float, size: int = 10_000) -> None:
        self._store = store
        self._clock = clock
        self._ttl = ttl
        self._size = size
        self._known: OrderedDict[str, tuple[float, ApiKey | None]] = OrderedDict()
        self._lock = threading.Lock()

    def cached(self, secret: str) -> ApiKey | Literal[False] | None:
        """The key of ``secret`` while it is fresh in memory (None: known to be unknown), else
        False (it takes a lookup)."""
        now = self._clock.monotonic()
        with self._lock:
            hit = self._known.get(secret)
            if hit is None or hit[0] <= now:
                return False
            self._known.move_to_end(secret)
            return hit[1]

    async def load(self, secret: str) -> ApiKey | None:
        """The key of ``secret`` from the database (in a worker thread: the event loop never
        waits on the database), remembered."""
        now = self._clock.monotonic()
        key = await run_in_threadpool(self._load, secret)
        with self._lock:
            self._known[secret] = (now + self._ttl, key)
            self._known.move_to_end(secret)
            while len(self._known) > self._size:
                self._known.popitem(last=False)
        return key

    def __len__(self) -> int:
        return len(self._known)

    def _load(self, secret: str) -> ApiKey | None:
        with self._store.read() as conn:
            return find_key(conn, secret)


def _bearer(authorization: str | None) -> str:
    if not authorization:
        raise Problem(
            401,
            "unauthorized",
            "Unauthorized",
            "Authorization: Bearer KEY is required",
            headers={"WWW-Authenticate": "Bearer"},
        )
    scheme, _, secret = authorization.partition(" ")
    if scheme.lower() != "bearer" or not secret.strip():
        raise Problem(
            401,
            "unauthorized",
            "Unauthorized",
            "Authorization must be Bearer KEY",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return secret.strip()


# --- the app -----------------------------------------------------------------------------


def create_app(services: Services) -> FastAPI:
    """The API over ``services``."""
    settings = services.settings
    keys = KeyCache(
        services.store,
        services.clock,
        ttl=settings.api_key_cache_seconds,
        size=settings.api_key_cache_size,
    )
    # Settlements are short bursts of Python between database round trips: a few threads keep
    # the database busy, and more than a few only take turns at the interpreter lock, which
    # costs every request more CPU (measured on PostgreSQL: 32 at once cost 1.6x the CPU per
    # settlement of 4).
    settling = anyio.CapacityLimiter(services.settle_threads)
    # NEM12 uploads read and checked at once: each holds its body and a CPU; past it, 503.
    uploads = anyio.CapacityLimiter(settings.upload_concurrency)
    nem12_limits = settings.nem12_limits()

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        loops = [
            asyncio.create_task(_purge_idempotency_keys(services)),
            asyncio.create_task(_renew_idempotency_keys(services)),
        ]
        try:
            yield
        finally:
            for loop in loops:
                loop.cancel()
            for loop in loops:
                with contextlib.suppress(asyncio.CancelledError):
                    await loop

    app = FastAPI(
        title="freehours",
        version="1",
        description="Meter data in, free-energy quotas settled exactly once, bills out.",
        lifespan=lifespan,
        # FastAPI's server span (freehours.api.telemetry), without one more span each for
        # dependencies, the route and serialization: on the settlement path they cost more
        # than they tell.
        telemetry={"operation_spans": False},
        # Documentation pages with no third party's scripts (freehours.api.docs).
        docs_url=None,
        redoc_url=None,
    )
    mount_docs(app, "freehours")
    app.add_exception_handler(Problem, problem_handler)
    app.add_exception_handler(StarletteHTTPException, http_exception_handler)
    app.add_exception_handler(RequestValidationError, validation_handler)
    app.add_exception_handler(sa.exc.DataError, data_error_handler)
    for unavailable in (sa.exc.OperationalError, sa.exc.TimeoutError, sa.exc.DisconnectionError):
        app.add_exception_handler(unavailable, database_unavailable_handler)
    app.add_exception_handler(Exception, internal_error_handler)
    app.add_middleware(RequestTelemetry)
    app.state.uploads = uploads  # the NEM12 upload slots, for a look from outside

    async def authorize(request: Request, scope: Scope) -> ApiKey:
        """The key of the request's ``Authorization: Bearer`` header, if it may use ``scope``
        and is within its limit; else a 401, 403 or 429 problem. On the event loop: a known key
        and its limit cost no thread hop (routes that touch the database run in a thread after).
        A client that keeps sending unknown keys is refused (429) before its next unknown key
        costs a database lookup."""
        start_request()  # the request's Redis budget (freehours.cache.breaker)
        secret = _bearer(request.headers.get("authorization"))
        key = keys.cached(secret)
        address = request.client.host if request.client else ""
        if key is False:
            await services.limits.check_unknown_keys(address)
            key = await keys.load(secret)
        if key is None:
            await services.limits.count_unknown_key(address)
            raise Problem(
                401,
                "unauthorized",
                "Unauthorized",
                "unknown or revoked key",
                headers={"WWW-Authenticate": "Bearer"},
            )
        bind_fields(key_id=key.id)
        if not key.allows(scope):
            raise Problem(403, "forbidden", "Forbidden", f"this key lacks the {scope} scope")
        await services.limits.check_client(key.id)
        return key

    def require(scope: Scope) -> Callable[..., Awaitable[ApiKey]]:
        """``authorize`` as a route dependency (its ``Authorization`` header described in the
        OpenAPI document)."""

        async def check(
            request: Request, authorization: Annotated[str | None, Header()] = None
        ) -> ApiKey:
            return await authorize(request, scope)

        return check

    admin = Depends(require(Scope.ADMIN))

    # --- plans and customers ---

    # Routes with a body read it themselves, after the key is checked (FastAPI reads a declared
    # body before it runs the dependencies) and bounded while it is read; the OpenAPI
    # description is that of a declared body (``_operation``).

    @app.put("/v1/plans/{plan_id}", tags=["catalogue"], openapi_extra=_operation(_PLAN_DOCUMENT))
    async def put_plan(
        request: Request,
        plan_id: Annotated[
            str, Path(pattern=PLAN_ID_PATTERN, max_length=PLAN_ID_MAX_LENGTH, description="plan id")
        ],
        key: ApiKey = admin,
    ) -> dict[str, Any]:
        """Create or replace a tariff plan: the plan file's fields as JSON."""
        raw = await _bounded_body(
            request, settings.max_json_body_bytes, title="Body too large", required=None
        )
        document = _parse_body(_PLAN_DOCUMENT, raw)
        return await run_in_threadpool(store_plan, plan_id, document)

    def store_plan(plan_id: str, document: dict[str, Any]) -> dict[str, Any]:
        document = {**document, "id": document.get("id", plan_id)}
        if document["id"] != plan_id:
            raise Problem(422, "validation-error", "Plan id mismatch", "body id differs from path")
        try:
            parse_plan(document, source=f"plan {plan_id}")
        except InputError as exc:
            raise Problem(422, "invalid-plan", "The plan is not valid", str(exc)) from exc
        with services.store.write() as conn:
            stored = catalog.put_plan(conn, plan_id, document, updated_at=services.clock.now())
        return stored.document

    @app.put(
        "/v1/customers/{nmi}",
        tags=["catalogue"],
        response_model=CustomerOut,
        openapi_extra=_operation(CustomerIn),
    )
    async def put_customer(request: Request, nmi: NmiPath, key: ApiKey = admin) -> CustomerOut:
        """Create or update a customer: the plan they are on and their region."""
        bind_fields(nmi=nmi)
        raw = await _bounded_body(
            request, settings.max_json_body_bytes, title="Body too large", required=None
        )
        body = _parse_body(CustomerIn, raw)
        return await run_in_threadpool(store_customer, nmi, body)

    def store_customer(nmi: str, body: CustomerIn) -> CustomerOut:
        with services.store.write() as conn:
            if catalog.get_plan(conn, body.plan_id) is None:
                raise Problem(
                    422, "unknown-plan", "Unknown plan", f"plan_id: no plan {body.plan_id!r}"
                )
            catalog.put_customer(
                conn, nmi, plan_id=body.plan_id, region=body.region, updated_at=services.clock.now()
            )
            # Reads may have come first (meter data is never dropped): their days settle now.
            services.runtime.ingestion.customer_changed(conn, nmi)
        return CustomerOut(nmi=nmi, plan_id=body.plan_id, region=body.region)

    # --- meter data ---

    @app.post(
        "/v1/meter-readings",
        tags=["meter data"],
        response_model=IngestCountsOut,
        openapi_extra=_operation(MeterReadingsIn),
    )
    async def post_readings(
        request: Request,
        key: Annotated[ApiKey, Depends(require(Scope.INGEST))],
        idempotency_key: Annotated[str | None, Header()] = None,
    ) -> Response:
        """Ingest interval reads; never stored twice for one Idempotency-Key."""
        limit = settings.batch_body_limit
        raw = await _bounded_body(
            request,
            limit,
            title="Body too large",
            detail=f"body: over {limit} bytes (at most {settings.max_batch_reads} reads a batch)",
            required=None,
        )
        if len(raw) > THREADED_PARSE_BYTES:
            body = await anyio.to_thread.run_sync(_parse_body, MeterReadingsIn, raw)
        else:
            body = _parse_body(MeterReadingsIn, raw)
        return await run_in_threadpool(ingest_reads, body, key, idempotency_key)

    def ingest_reads(body: MeterReadingsIn, key: ApiKey, idempotency_key: str | None) -> Response:
        bind_fields(nmi=body.nmi)
        if len(body.reads) > settings.max_batch_reads:
            raise Problem(
                413,
                "payload-too-large",
                "Too many reads",
                f"reads: {len(body.reads)} reads, at most {settings.max_batch_reads} per batch",
            )
        today = _nem_today(services)
        for number, read in enumerate(body.reads):
            _check_read_date(read.start.astimezone(NEM_TIME).date(), today, f"reads.{number}.start")
        step = timedelta(minutes=body.interval_minutes)
        reads = [
            IntervalRead(body.nmi, body.suffix, r.start, r.start + step, r.kwh, r.quality)
            for r in body.reads
        ]
        payload = body.model_dump_json().encode()

        def work(conn: sa.Connection) -> tuple[int, dict[str, Any], Ingested]:
            ingested = services.runtime.ingestion.reads(conn, reads)
            counts = ingested.counts
            return (
                200,
                {
                    "accepted": counts.accepted,
                    "superseded": counts.superseded,
                    "unchanged": counts.unchanged,
                },
                ingested,
            )

        return _idempotent(
            services,
            key,
            idempotency_key=idempotency_key,
            route="/v1/meter-readings",
            payload=payload,
            work=work,
        )

    @app.post(
        "/v1/meter-readings/nem12",
        tags=["meter data"],
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {
                    "text/csv": {"schema": {"type": "string"}},
                    "application/zip": {"schema": {"type": "string", "format": "binary"}},
                },
            }
        },
    )
    async def post_nem12(
        request: Request,
        key: Annotated[ApiKey, Depends(require(Scope.INGEST))],
        idempotency_key: Annotated[str | None, Header()] = None,
    ) -> Response:
        """Ingest a NEM12 file (CSV, zip or gzip): all of it, or, on one bad line, none of it."""
        # Cheap refusals first; then, in one of a few upload slots, the body is read and the
        # whole file checked in a worker thread, stopped if the client goes away; only then is
        # the database touched.
        name = _filename(request.headers.get("x-filename"))
        _check_idempotency_key(idempotency_key)
        try:
            uploads.acquire_nowait()
        except anyio.WouldBlock:
            raise Problem(
                503,
                "busy",
                "Too many uploads at once",
                f"this server reads {settings.upload_concurrency} NEM12 uploads at once; retry",
                headers={"Retry-After": "5"},
            ) from None
        try:
            body = await _bounded_body(request, settings.max_upload_bytes)
            stop = threading.Event()
            error: NEM12Error | None = None
            kept: list[IntervalDay] | None = None
            try:
                kept = await _while_connected(request, stop, check_upload, body, name, stop)
            except ReadCancelled:
                raise _client_gone() from None
            except NEM12TooLarge as exc:
                raise Problem(413, "payload-too-large", "File too large", str(exc)) from exc
            except NEM12Error as exc:
                error = exc  # the request's final answer, kept for its Idempotency-Key below
            return await run_in_threadpool(
                ingest_upload,
                body,
                name,
                kept=kept,
                error=error,
                key=key,
                idempotency_key=idempotency_key,
            )
        finally:
            uploads.release()

    def check_upload(body: bytes, name: str, stop: threading.Event) -> list[IntervalDay] | None:
        """Every limit and record of the file checked (``NEM12Error`` at the first problem),
        keeping nothing (``NEM12Reader.check``); then, for a small file, its days, kept for the
        transaction (a large one is read again there)."""
        reader = NEM12Reader(
            body, name=name, today=_nem_today(services), limits=nem12_limits, stop=stop
        )
        try:
            reader.check()
            if reader.bytes_read > 2 * KEPT_UPLOAD_BYTES:  # check() read it twice
                return None
            return list(reader.days())
        finally:
            UPLOAD_BYTES_READ.inc(reader.bytes_read)

    def ingest_upload(
        body: bytes,
        name: str,
        *,
        kept: list[IntervalDay] | None,
        error: NEM12Error | None,
        key: ApiKey,
        idempotency_key: str | None,
    ) -> Response:
        def work(conn: sa.Connection) -> tuple[int, dict[str, Any], Ingested]:
            if error is not None:
                raise error
            days = (
                kept
                if kept is not None
                else read_days(body, name=name, today=_nem_today(services), limits=nem12_limits)
            )
            ingested = services.runtime.ingestion.days(conn, days)
            counts = ingested.counts
            return (
                200,
                {
                    "file": name,
                    "accepted": counts.accepted,
                    "superseded": counts.superseded,
                    "unchanged": counts.unchanged,
                    "stale": counts.stale,
                },
                ingested,
            )

        return _idempotent(
            services,
            key,
            idempotency_key=idempotency_key,
            route="/v1/meter-readings/nem12",
            payload=body,
            work=work,
        )

    # --- settlements ---

    @app.post(
        "/v1/free-energy/settlements",
        tags=["settlement"],
        openapi_extra=_operation(SettlementIn, headers=["authorization"]),
    )
    async def post_settlement(request: Request) -> JSONResponse:
        """Settle one day's quota exactly once; every answer says to stop, or when to retry."""
        # The hot path reads its header and body itself: FastAPI's dependency solving cost this
        # route more CPU than everything else it does on the event loop (measured). The
        # answers, and the OpenAPI description, are those of a declared header and body.
        await authorize(request, Scope.SETTLE)
        body = _parse_body(SettlementIn, await request.body())
        bind_fields(nmi=body.nmi, date=body.date.isoformat())
        _check_read_date(body.date, _nem_today(services), "date")
        await services.limits.check_nmi(body.nmi)
        answer = await anyio.to_thread.run_sync(
            services.settlements.settle, body.nmi, body.date, limiter=settling
        )
        bind_fields(quota_state=answer.quota.status.value)
        return settlement_response(answer)

    @app.get(
        "/v1/free-energy/settlements/{nmi}/{day}", tags=["settlement"], response_model=QuotaOut
    )
    def get_settlement(
        nmi: NmiPath, day: date, key: Annotated[ApiKey, Depends(require(Scope.READ))]
    ) -> JSONResponse:
        """The quota's current state (its newest version)."""
        bind_fields(nmi=nmi, date=day.isoformat())
        quota = services.settlements.state(nmi, day)
        if quota is None:
            raise Problem(404, "quota-not-found", "No such quota", f"no quota for {nmi} on {day}")
        bind_fields(quota_state=quota.status.value)
        return JSONResponse(quota_body(quota))

    @app.get("/v1/customers/{nmi}/bill", tags=["billing"])
    def get_bill(
        nmi: NmiPath,
        key: Annotated[ApiKey, Depends(require(Scope.READ))],
        first: Annotated[date, Query(alias="from", description="first local day, YYYY-MM-DD")],
        last: Annotated[date, Query(alias="to", description="last local day, YYYY-MM-DD")],
    ) -> JSONResponse:
        """The customer's bill for local days ``from`` to ``to``: the same JSON as ``freehours
        bill``, rated from the stored meter data."""
        bind_fields(nmi=nmi)
        for name, bound in (("from", first), ("to", last)):
            try:
                rules.check_date(bound, name)
            except rules.RangeError as exc:
                raise _range_problem(f"query.{name}", exc) from None
        if first > last:
            raise Problem(422, "validation-error", "Empty period", f"from: {first} is after {last}")
        if (last - first).days > 366:
            raise Problem(422, "validation-error", "Period too long", "to: at most 367 days")
        with services.store.read() as conn:
            customer = services.settlements.customer_plan(conn, nmi)
            if isinstance(customer, str):
                raise Problem(404, "customer-not-found", "No bill for this NMI", customer)
            local_dates = [first + timedelta(days=n) for n in range((last - first).days + 1)]
            plan = customer.plan
            nem_dates = {d for day in local_dates for d in plan.nem_dates(day)}
            days = meter.days_for(conn, nmi, nem_dates)
        rating = MeterRating(nmi, customer.profiles)
        for day in days:
            rating.add(day)
        bill = make_bill(plan, nmi, rating.days(local_dates).values())
        return JSONResponse(bill.as_json())

    # --- operations ---

    @app.get("/healthz", tags=["operations"])
    def healthz() -> dict[str, str]:
        """Liveness: the process answers."""
        return {"status": "ok"}

    readiness = anyio.CapacityLimiter(2)

    @app.get("/readyz", tags=["operations"])
    async def readyz() -> JSONResponse:
        """Readiness: the database answers (else 503), and whether Redis does. Within
        ``READY_TIMEOUT_SECONDS`` whatever the database does; the answer names what failed in
        fixed words, never the driver's text (which goes to the log)."""
        database = await _check_ready(readiness, lambda: _select_one(services.store))
        body: dict[str, str] = {"database": database}
        status = "ok" if database == "ok" else "unavailable"
        if services.settings.redis_url is not None:
            # Redis is optional (the service runs on without it): reported, never a 503.
            body["redis"] = await services.limits.ping()
            if status == "ok" and body["redis"] != "ok":
                status = "degraded"
        headers = {} if database == "ok" else {"Retry-After": str(UNAVAILABLE_RETRY_AFTER_SECONDS)}
        return JSONResponse(
            {"status": status, **body}, 200 if database == "ok" else 503, headers=headers
        )

    @app.get("/metrics", tags=["operations"], response_class=PlainTextResponse)
    async def metrics(
        request: Request, authorization: Annotated[str | None, Header()] = None
    ) -> Response:
        """Prometheus metrics: open on loopback, elsewhere a ``read`` key."""
        host = request.client.host if request.client else ""
        if host not in ("127.0.0.1", "::1", "localhost", "testclient"):
            await authorize(request, Scope.READ)
        return Response(await run_in_threadpool(render_metrics), media_type=CONTENT_TYPE)

    return app


_Body = TypeVar("_Body")

#: A plan's body: any JSON object (``parse_plan`` checks its fields).
_PLAN_DOCUMENT: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])


def _operation(
    body: type[BaseModel] | TypeAdapter[Any], headers: list[str] | None = None
) -> dict[str, Any]:
    """The OpenAPI description of a route that reads a JSON ``body`` and optional ``headers``
    itself (``_parse_body``), as FastAPI would have described them declared."""
    schema = body.model_json_schema() if isinstance(body, type) else body.json_schema()
    operation: dict[str, Any] = {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": _inline_refs(schema)}},
        },
    }
    if headers:
        operation["parameters"] = [
            {"name": name, "in": "header", "required": False, "schema": {"type": "string"}}
            for name in headers
        ]
    return operation


def _nem_today(services: Services) -> date:
    """Today's NEM date on the services' clock: what reads and settlements are dated against."""
    return services.clock.now().astimezone(NEM_TIME).date()


def _range_problem(field: str, exc: rules.RangeError) -> Problem:
    """A 422 naming ``field`` as the validation answer does (``errors: [{field, message}]``)."""
    return Problem(
        422,
        "validation-error",
        "Request is not valid",
        f"{field}: {exc.reason}",
        errors=[{"field": field, "message": exc.reason}],
    )


def _check_read_date(day: date, today: date, field: str) -> None:
    """A 422 naming ``body.{field}`` when no meter can have read ``day`` yet (or before 2000)."""
    try:
        rules.check_read_date(day, today, field)
    except rules.RangeError as exc:
        raise _range_problem(f"body.{field}", exc) from None


def _inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with its ``$defs`` written in where they are referred to: a ``#/$defs/...``
    reference inside an OpenAPI document would be resolved against the document's root."""
    defs = schema.get("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return inline(defs[ref.removeprefix("#/$defs/")])
            return {name: inline(value) for name, value in node.items() if name != "$defs"}
        if isinstance(node, list):
            return [inline(item) for item in node]
        return node

    result: dict[str, Any] = inline(schema)
    return result


def _parse_body(model: type[_Body] | TypeAdapter[_Body], raw: bytes) -> _Body:
    """``raw`` as ``model``, or the 422 FastAPI gives for a declared body (fields as
    ``body.NAME``; a missing body as ``body``)."""
    if not raw:
        missing = {"type": "missing", "loc": ("body",), "msg": "Field required", "input": None}
        raise RequestValidationError([missing], body=raw)
    try:
        if isinstance(model, TypeAdapter):
            return model.validate_json(raw)
        return cast(type[BaseModel], model).model_validate_json(raw)  # type: ignore[return-value]
    except ValidationError as exc:
        errors = [{**error, "loc": ("body", *error["loc"])} for error in exc.errors()]
        raise RequestValidationError(errors, body=raw) from exc


async def _bounded_body(
    request: Request,
    limit: int,
    *,
    title: str = "File too large",
    detail: str | None = None,
    required: str | None = "body: a NEM12 file is required",
) -> bytes:
    """The request body, refused with 413 as soon as it passes ``limit`` bytes (before a byte
    is read when its Content-Length says so); a 422 when it is empty and ``required`` says why
    it may not be (None: the caller answers an empty body)."""
    too_large = Problem(413, "payload-too-large", title, detail or f"body: over {limit} bytes")
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise too_large
            chunks.append(chunk)
    except ClientDisconnect:
        raise _client_gone() from None
    if size == 0 and required:
        raise Problem(422, "validation-error", "Empty body", required)
    return b"".join(chunks)


def _client_gone() -> Problem:
    """What a request whose client went away answers (nginx's 499): to no one, but counted."""
    return Problem(499, "client-closed-request", "The client closed the request")


_Result = TypeVar("_Result")


async def _while_connected(
    request: Request,
    stop: threading.Event,
    call: Callable[..., _Result],
    *args: Any,
) -> _Result:
    """``call(*args)`` in a worker thread, with ``stop`` set as soon as the client goes away
    (looked at every 0.1 s), for ``call`` to end early."""

    async def watch() -> None:
        while not await request.is_disconnected():
            await anyio.sleep(0.1)
        stop.set()

    outcome: list[_Result] = []
    failure: list[Exception] = []
    async with anyio.create_task_group() as group:
        group.start_soon(watch)
        try:
            outcome.append(await anyio.to_thread.run_sync(call, *args))
        except Exception as exc:  # noqa: BLE001 - raised below, outside the group
            # (raised inside, it would come out wrapped in an ExceptionGroup)
            failure.append(exc)
        group.cancel_scope.cancel()
    if failure:
        raise failure[0]
    return outcome[0]


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


def _check_idempotency_key(idempotency_key: str | None) -> None:
    """A 400 unless the request carries a usable Idempotency-Key."""
    if not idempotency_key:
        raise Problem(400, "idempotency-key-missing", "Idempotency-Key header is required")
    if len(idempotency_key) > 255:
        raise Problem(400, "bad-request", "Idempotency-Key is over 255 characters")


def _idempotent(
    services: Services,
    key: ApiKey,
    *,
    idempotency_key: str | None,
    route: str,
    payload: bytes,
    work: Callable[[sa.Connection], tuple[int, dict[str, Any], Ingested]],
) -> Response:
    """Run ``work`` at most once per Idempotency-Key; replay its answer to repeats."""
    if not idempotency_key:
        raise Problem(400, "idempotency-key-missing", "Idempotency-Key header is required")
    if len(idempotency_key) > 255:
        raise Problem(400, "bad-request", "Idempotency-Key is over 255 characters")
    settings = services.settings
    request_hash = idempotency.fingerprint("POST", route, payload)
    with services.store.write() as conn:
        saved = idempotency.begin(
            conn,
            principal=key.id,
            key=idempotency_key,
            request_hash=request_hash,
            now=services.clock.now(),
            in_flight_timeout=timedelta(seconds=settings.idempotency_in_flight_seconds),
        )
    if saved is not None:
        return Response(
            saved.body,
            saved.status_code,
            media_type=saved.media_type,
            headers={"Idempotent-Replayed": "true"},
        )
    try:
        with (
            services.in_flight.hold(key.id, idempotency_key),
            services.store.write() as conn,
        ):
            status, payload_out, ingested = work(conn)
            answer = idempotency.json_response(status, payload_out)
            idempotency.finish(
                conn,
                principal=key.id,
                key=idempotency_key,
                response=answer,
                now=services.clock.now(),
            )
    except InputError as exc:
        # Bad input is the request's final answer: saved, so a repeat gets the same 422.
        problem = Problem(422, "invalid-input", "The input is not valid", str(exc))
        with services.store.write() as conn:
            idempotency.finish(
                conn,
                principal=key.id,
                key=idempotency_key,
                response=idempotency.SavedResponse(
                    422, bytes(problem.response(route).body).decode(), "application/problem+json"
                ),
                now=services.clock.now(),
            )
        raise problem from exc
    except BaseException:
        with services.store.write() as conn:
            idempotency.forget(conn, principal=key.id, key=idempotency_key)
        raise
    services.runtime.ingestion.committed(ingested)
    return Response(answer.body, status, media_type=answer.media_type)


#: Longest /readyz waits for the database before it says it is unavailable.
READY_TIMEOUT_SECONDS = 2.0


def _select_one(store: Store) -> None:
    with store.read() as conn:
        conn.exec_driver_sql("SELECT 1")


async def _check_ready(limiter: anyio.CapacityLimiter, check: Callable[[], None]) -> str:
    """``"ok"``, or a fixed word for why not. The check runs on threads of its own (a black-holed
    database holds one until the database timeouts end it), and is waited for at most
    ``READY_TIMEOUT_SECONDS``."""
    try:
        with anyio.fail_after(READY_TIMEOUT_SECONDS):
            await anyio.to_thread.run_sync(check, limiter=limiter, abandon_on_cancel=True)
    except TimeoutError:
        log.warning("readiness_timeout", dependency="database")
        return "not answering"
    except Exception as exc:  # noqa: BLE001 - any failure to answer means not ready
        log.warning(
            "readiness_failed", dependency="database", error=f"{type(exc).__name__}: {exc}"[:500]
        )
        return "unavailable"
    return "ok"


async def _renew_idempotency_keys(services: Services) -> None:
    """Every third of the in-flight lease, renew the leases of the Idempotency-Keys whose
    requests this process is running: a key stays held however long its request runs."""
    period = services.settings.idempotency_in_flight_seconds / 3
    while True:
        await asyncio.sleep(period)
        held = services.in_flight.held()
        if not held:
            continue

        def renew(held: list[tuple[str, str]] = held) -> int:
            with services.store.write() as conn:
                return idempotency.renew(conn, held, now=services.clock.now())

        try:
            await run_in_threadpool(renew)
        except Exception as exc:  # noqa: BLE001 - the next period tries again, within the lease
            log.warning("idempotency_lease_renewal_failed", keys=len(held), error=str(exc))


async def _purge_idempotency_keys(services: Services) -> None:
    """Every hour, drop Idempotency-Keys older than the retention (24 hours by default)."""
    retention = timedelta(hours=services.settings.idempotency_retention_hours)
    while True:

        def purge() -> int:
            with services.store.write() as conn:
                return idempotency.purge(conn, older_than=services.clock.now() - retention)

        try:
            purged = await run_in_threadpool(purge)
            log.info("idempotency_keys_purged", count=purged)
        except Exception as exc:  # noqa: BLE001 - the next hour tries again
            log.warning("idempotency_keys_purge_failed", error=str(exc))
        await asyncio.sleep(3600)
