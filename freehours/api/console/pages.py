"""The console's pages: each a GET that reads in one read transaction and renders a template.

The routes are plain functions (FastAPI runs them in a worker thread: they wait on the
database); the session is checked first (``session.current``), so nothing is read for a browser
that has not signed in. Lists are keyset pages of ``PAGE`` rows: a ``next`` link carries where
the page ended.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from starlette.responses import HTMLResponse, Response

from freehours.api.console import charts
from freehours.api.console.render import render
from freehours.api.console.session import Session, current
from freehours.api.problems import Problem
from freehours.api.routes import documents
from freehours.api.services import services_of
from freehours.domain import reads as rules
from freehours.domain.invoicing import Series
from freehours.domain.reads import NMI_PATTERN
from freehours.domain.settlement import quota_key
from freehours.domain.time import NEM_TIME, Region
from freehours.jobs.job import JobState
from freehours.observability.metrics import QUOTA_CACHE_REQUESTS
from freehours.settlement.model import NoQuotas
from freehours.store.console import QuotaFilter
from freehours.store.tables import JOB_STATES, QUOTA_STATUSES
from freehours.workers.rescuer import STUCK_AFTER
from freehours.workers.settle import KIND as SETTLE_KIND

router = APIRouter()
SignedIn = Annotated[Session, Depends(current)]

#: Rows on a page of a list.
PAGE = 50
#: The overview's charts: a bar per quarter hour of the NEM day.
BUCKET_MINUTES = 15
#: An agent not heard from for this long is shown as silent.
AGENT_SILENT_AFTER = timedelta(minutes=5)
#: Seconds between a live page's refreshes (console.js; a page without script stays as it is).
LIVE_SECONDS = 10
_NMI = re.compile(NMI_PATTERN)
#: A date in a page's address or filter, and an id (a job's, a position in a list): ASCII digits
#: only (``re``'s ``[0-9]``, unlike ``\d`` or ``str.isdigit``), an id at most 18 (a BIGINT).
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_ID = re.compile(r"[0-9]{1,18}")
_COUNTED = (JobState.AVAILABLE, JobState.RUNNING, JobState.RETRYABLE, JobState.DISCARDED)


# --- parameters ---------------------------------------------------------------------------------


def _invalid(field: str, message: str) -> Problem:
    return Problem(422, "validation-error", "Invalid filter", f"{field}: {message}")


def parse_day(value: str | None, field: str = "day") -> date | None:
    """A date written ``YYYY-MM-DD``, from ``EARLIEST_DATE`` to ``LATEST_DATE`` (as the API's
    ``NemDate``), else a 422 naming ``field``."""
    if not value:
        return None
    if not _DATE.fullmatch(value):
        raise _invalid(field, f"{value[:40]!r} is not a date (YYYY-MM-DD)")
    try:
        return rules.check_date(date.fromisoformat(value), field)
    except rules.RangeError as exc:
        raise _invalid(field, exc.reason) from None
    except ValueError:
        raise _invalid(field, f"{value[:40]!r} is not a date (YYYY-MM-DD)") from None


def parse_choice(value: str | None, field: str, choices: tuple[str, ...]) -> str | None:
    if not value:
        return None
    if value not in choices:
        raise _invalid(field, f"{value[:40]!r} is not one of {', '.join(choices)}")
    return value


def parse_nmi(value: str | None, field: str = "nmi") -> str | None:
    if not value:
        return None
    nmi = value.strip().upper()
    if not _NMI.fullmatch(nmi):
        raise _invalid(field, f"{value[:40]!r} is not a NMI (10 letters and digits)")
    return nmi


def parse_id(value: str | None, field: str) -> int | None:
    """A position in a list (an id), ASCII digits, else a 422 naming ``field``."""
    if not value:
        return None
    if not _ID.fullmatch(value):
        raise _invalid(field, f"{value[:40]!r} is not a position in this list")
    return int(value)


def path_id(value: str, what: str) -> int:
    """The id in a page's path, ASCII digits (``str.isdigit`` would take ``²``, which ``int``
    refuses), else a 404: no page has that address."""
    if not _ID.fullmatch(value):
        raise Problem(404, "not-found", "Not Found", f"{what} {value[:40]!r}: no such {what}")
    return int(value)


def parse_quota_cursor(value: str | None) -> tuple[date, str] | None:
    """``after``: the date and NMI of the last quota of the page before (``DATE~NMI``)."""
    if not value:
        return None
    day, _, nmi = value.partition("~")
    try:
        the_day, the_nmi = parse_day(day, "after"), parse_nmi(nmi, "after")
    except Problem:
        the_day = None
    if the_day is None:
        raise _invalid("after", f"{value[:40]!r} is not a position in this list")
    return the_day, the_nmi or ""


def _percentile(values: list[float], share: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def _cache_ratio() -> tuple[float | None, int]:
    """This process's quota cache hits of its look-ups since it started, and how many."""
    counts: dict[str, float] = {}
    for metric in QUOTA_CACHE_REQUESTS.collect():
        for sample in metric.samples:
            if sample.name.endswith("_total"):
                counts[sample.labels["result"]] = sample.value
    total = int(sum(counts.values()))
    return (counts.get("hit", 0) / total if total else None), total


# --- the overview ------------------------------------------------------------------------------


@router.get("/", response_class=HTMLResponse, name="console_overview")
def overview(request: Request, session: SignedIn, day: str | None = None) -> HTMLResponse:
    services = services_of(request)
    now = services.clock.now()
    today = services.nem_today()
    asked = parse_day(day)
    bucket = BUCKET_MINUTES * 60
    with services.store.read() as unit:
        # Without a day asked for: the latest day with data, not an empty today.
        latest = unit.console.latest_day(today) or today
        the_day = asked or latest
        start = datetime.combine(the_day, time(), NEM_TIME)
        end = start + timedelta(days=1)
        regions = unit.console.regions_of_day(the_day)
        completions = unit.console.events_per_bucket(start, end, seconds=bucket, retries=False)
        retries = unit.console.events_per_bucket(start, end, seconds=bucket, retries=True)
        latencies = unit.console.latencies(start, end)
        jobs = unit.jobs.count_in(_COUNTED)
        stuck = unit.jobs.count_stuck(now=now, waiting_over=STUCK_AFTER)
        agents = unit.agents.every()
    buckets = (24 * 60) // BUCKET_MINUTES
    completed = [completions.get(n, 0) for n in range(buckets)]
    retried = [retries.get(n, 0) for n in range(buckets)]
    ratio, lookups = _cache_ratio()
    totals: dict[str, int] = {}
    for region in regions:
        for state, count in region.states.items():
            totals[state] = totals.get(state, 0) + count
    return render(
        request,
        "overview.html",
        session=session,
        current="overview",
        refresh=LIVE_SECONDS if the_day == today else 0,
        title=f"Overview {the_day.isoformat()}",
        day=the_day,
        today=today,
        latest=latest,
        chosen=asked is not None,
        previous=the_day - timedelta(days=1),
        following=the_day + timedelta(days=1),
        regions=regions,
        totals=totals,
        states=QUOTA_STATUSES,
        free_kwh=sum((region.free_kwh for region in regions), Decimal(0)),
        free_value=sum((region.free_value for region in regions), Decimal(0)),
        settled=sum(completed),
        peak_rate=max(completed, default=0) / BUCKET_MINUTES,
        retries=sum(retried),
        peak_retries=max(retried, default=0) / BUCKET_MINUTES,
        latency_p50=_percentile(latencies, 0.5),
        latency_p95=_percentile(latencies, 0.95),
        latency_sample=len(latencies),
        jobs=jobs,
        discarded=jobs[JobState.DISCARDED],
        stuck=stuck,
        cache_ratio=ratio,
        cache_lookups=lookups,
        agents=agents,
        silent_before=now - AGENT_SILENT_AFTER,
        state_chart=charts.stacked(
            [(region.region or "none", region.states) for region in regions],
            title=f"Quotas of {the_day.isoformat()} by state in each region",
        ),
        rate_chart=charts.timeline(
            completed,
            title=f"Settlements completed per {BUCKET_MINUTES} minutes, {the_day.isoformat()}",
            first=start,
            minutes=BUCKET_MINUTES,
            tick_every=12,
        ),
        retry_chart=charts.timeline(
            retried,
            title=f"Settlement retries per {BUCKET_MINUTES} minutes, {the_day.isoformat()}",
            first=start,
            minutes=BUCKET_MINUTES,
            tick_every=12,
        ),
    )


# --- quotas ---------------------------------------------------------------------------------


@router.get("/quotas", response_class=HTMLResponse, name="console_quotas")
def quotas(
    request: Request,
    session: SignedIn,
    *,
    state: str | None = None,
    day: str | None = None,
    region: str | None = None,
    nmi: str | None = None,
    after: str | None = None,
) -> HTMLResponse:
    services = services_of(request)
    where = QuotaFilter(
        status=parse_choice(state, "state", QUOTA_STATUSES),
        day=parse_day(day),
        region=parse_choice(region, "region", tuple(r.value for r in Region)),
        nmi=parse_nmi(nmi),
    )
    cursor = parse_quota_cursor(after)
    with services.store.read() as unit:
        rows = unit.console.quotas(where, limit=PAGE + 1, after=cursor)
    more = len(rows) > PAGE
    rows = rows[:PAGE]
    query = {
        "state": where.status,
        "day": where.day.isoformat() if where.day else None,
        "region": where.region,
        "nmi": where.nmi,
    }
    return render(
        request,
        "quotas.html",
        session=session,
        current="quotas",
        title="Quotas",
        rows=rows,
        where=query,
        states=QUOTA_STATUSES,
        regions=[r.value for r in Region],
        next_after=f"{rows[-1].day.isoformat()}~{rows[-1].nmi}" if more else None,
        query={name: value for name, value in query.items() if value},
    )


@router.get("/quotas/{nmi}/{day}", response_class=HTMLResponse, name="console_quota")
def quota(request: Request, session: SignedIn, nmi: str, day: str) -> HTMLResponse:
    services = services_of(request)
    the_nmi = parse_nmi(nmi) or ""
    the_day = parse_day(day) or services.nem_today()
    key = quota_key(the_nmi, the_day)
    with services.store.read() as unit:
        versions = unit.console.versions(the_nmi, the_day)
        if not versions:
            raise Problem(404, "not-found", "Not Found", f"quota {the_nmi} {the_day}: none")
        events = unit.quotas.events(the_nmi, the_day)
        ledger = unit.quotas.ledger(the_nmi, the_day)
        jobs = unit.jobs.page(kind=SETTLE_KIND, key=key, limit=PAGE)
        customer = services.settlements.customer_plan(unit, the_nmi)
        days = []
        if not isinstance(customer, NoQuotas):
            days = unit.meter.days_for(the_nmi, customer.plan.nem_dates(the_day))
        audit = unit.audit.page(limit=20, target=f"quota:{key}")
    latest = versions[-1]
    chart = None
    window = None
    plan_id = None
    clock = None
    if not isinstance(customer, NoQuotas):
        plan = customer.plan
        plan_id = plan.id
        zone = plan.zone
        day_start = datetime.combine(the_day, time(), zone)
        day_end = datetime.combine(the_day + timedelta(days=1), time(), zone)
        window = customer.window.bounds(the_day, zone)
        clock = Clock(day_clock(day_start, day_end), plan.zone_name)
        intervals = _consumption(days, plan, day_start, day_end)
        chart = charts.reads(
            intervals,
            title=f"{the_nmi} consumption on {the_day.isoformat()} (kWh per interval, times"
            f" {clock.abbreviation}), the free window shaded",
            day_start=day_start,
            day_end=day_end,
            window=window,
            clock=clock.abbreviation,
        )
    return render(
        request,
        "quota.html",
        session=session,
        current="quotas",
        refresh=LIVE_SECONDS if latest.status in ("PENDING", "LOCKED") else 0,
        title=f"Quota {the_nmi} {the_day.isoformat()}",
        nmi=the_nmi,
        day=the_day,
        versions=versions,
        latest=latest,
        events=events,
        ledger=ledger,
        jobs=jobs,
        audit=audit,
        chart=chart,
        window=window,
        plan_id=plan_id,
        clock=clock,
        no_quotas=customer.reason if isinstance(customer, NoQuotas) else None,
    )


@dataclass(frozen=True, slots=True)
class Clock:
    """The clock a quota's day is read on: its abbreviation that day ("ACST", or "ACST/ACDT"
    on a day daylight saving starts or ends) and the zone's name ("Australia/Adelaide")."""

    abbreviation: str
    zone: str


def day_clock(day_start: datetime, day_end: datetime) -> str:
    """The abbreviation of the local clock over ``[day_start, day_end)``, from zoneinfo: both
    when it changes that day."""
    first = day_start.tzname() or ""
    last = (day_end - timedelta(seconds=1)).tzname() or ""
    return first if first == last else f"{first}/{last}"


def _consumption(
    days: list[Any], plan: Any, day_start: datetime, day_end: datetime
) -> list[tuple[datetime, Decimal]]:
    """The consumption intervals that fall in the local day, summed over its channels."""
    summed: dict[datetime, Decimal] = {}
    for row in days:
        if not (row.is_energy and plan.is_consumption(row.suffix)):
            continue
        step = timedelta(minutes=row.interval_minutes)
        first = row.start
        for n, value in enumerate(row.values):
            at = first + n * step
            if value is not None and day_start <= at < day_end:
                summed[at] = summed.get(at, Decimal(0)) + value
    return sorted(summed.items())


# --- jobs ------------------------------------------------------------------------------------


@router.get("/jobs", response_class=HTMLResponse, name="console_jobs")
def jobs(
    request: Request,
    session: SignedIn,
    *,
    state: str | None = None,
    kind: str | None = None,
    before: str | None = None,
) -> HTMLResponse:
    services = services_of(request)
    the_state = parse_choice(state, "state", JOB_STATES)
    before_id = parse_id(before, "before")
    with services.store.read() as unit:
        kinds = unit.jobs.kinds()
        the_kind = parse_choice(kind, "kind", tuple(kinds)) if kind else None
        rows = unit.jobs.page(state=the_state, kind=the_kind, limit=PAGE + 1, before_id=before_id)
        counts = unit.jobs.count_in(_COUNTED)
    more = len(rows) > PAGE
    rows = rows[:PAGE]
    query = {"state": the_state, "kind": the_kind}
    return render(
        request,
        "jobs.html",
        session=session,
        current="jobs",
        refresh=LIVE_SECONDS,
        title="Jobs",
        rows=rows,
        where=query,
        states=JOB_STATES,
        kinds=kinds,
        counts=counts,
        next_before=rows[-1].id if more else None,
        query={name: value for name, value in query.items() if value},
    )


@router.get("/jobs/{job_id}", response_class=HTMLResponse, name="console_job")
def job(request: Request, session: SignedIn, job_id: str) -> HTMLResponse:
    services = services_of(request)
    the_id = path_id(job_id, "job")
    with services.store.read() as unit:
        found = unit.jobs.get(the_id)
        if found is None:
            raise Problem(404, "not-found", "Not Found", f"job {job_id}: none")
        siblings = unit.jobs.page(kind=found.kind, key=found.key, limit=20)
        audit = unit.audit.page(limit=20, target=f"job:{the_id}")
    quota_link = None
    if found.kind == SETTLE_KIND and "nmi" in found.payload and "date" in found.payload:
        quota_link = f"/console/quotas/{found.payload['nmi']}/{found.payload['date']}"
    return render(
        request,
        "job.html",
        session=session,
        current="jobs",
        refresh=LIVE_SECONDS if not found.state.is_finished else 0,
        title=f"Job {found.id}",
        job=found,
        siblings=siblings,
        audit=audit,
        quota_link=quota_link,
        attempt_errors=found.errors,
        may_retry=found.state is JobState.DISCARDED,
        may_cancel=found.state in (JobState.AVAILABLE, JobState.RETRYABLE),
    )


# --- ingestion, invoices, audit, keys, settings ---------------------------------------------------


@router.get("/ingestion", response_class=HTMLResponse, name="console_ingestion")
def ingestion(request: Request, session: SignedIn, before: str | None = None) -> HTMLResponse:
    services = services_of(request)
    before_id = parse_id(before, "before")
    with services.store.read() as unit:
        rows = unit.ingestions.recent(limit=PAGE + 1, before_id=before_id)
    more = len(rows) > PAGE
    rows = rows[:PAGE]
    return render(
        request,
        "ingestion.html",
        session=session,
        current="ingestion",
        refresh=LIVE_SECONDS if before_id is None else 0,
        title="Ingestion",
        rows=rows,
        next_before=rows[-1].id if more else None,
    )


@router.get("/invoices", response_class=HTMLResponse, name="console_invoices")
def invoices(
    request: Request,
    session: SignedIn,
    *,
    run: str | None = None,
    nmi: str | None = None,
    series: str | None = None,
) -> HTMLResponse:
    services = services_of(request)
    the_nmi = parse_nmi(nmi)
    the_series = parse_choice(series, "series", tuple(s.value for s in Series))
    if run is not None and not re.fullmatch(r"[A-Za-z0-9_-]{1,32}", run):
        raise _invalid("run", f"{run[:40]!r} is not a run id")
    with services.store.read() as unit:
        runs = unit.invoices.list_runs(limit=10)
        run_id = run or (runs[0].run_id if runs and the_nmi is None else None)
        documents = unit.invoices.list_documents(
            nmi=the_nmi,
            run_id=run_id,
            series=Series(the_series) if the_series else None,
            limit=PAGE,
        )
        emails = unit.mail.latest_of([d.number for d in documents])
        email_counts = unit.mail.counts()
    return render(
        request,
        "invoices.html",
        session=session,
        current="invoices",
        title="Invoices and credit notes",
        runs=runs,
        run_id=run_id,
        documents=documents,
        nmi=the_nmi,
        series=the_series,
        all_series=[s.value for s in Series],
        emails=emails,
        email_counts=email_counts,
    )


@router.get("/audit", response_class=HTMLResponse, name="console_audit")
def audit(
    request: Request, session: SignedIn, target: str | None = None, before: str | None = None
) -> HTMLResponse:
    services = services_of(request)
    before_id = parse_id(before, "before")
    if target is not None and len(target) > 200:
        raise _invalid("target", "at most 200 characters")
    with services.store.read() as unit:
        rows = unit.audit.page(limit=PAGE + 1, before_id=before_id, target=target or None)
    more = len(rows) > PAGE
    rows = rows[:PAGE]
    return render(
        request,
        "audit.html",
        session=session,
        current="audit",
        title="Audit log",
        rows=rows,
        target=target or "",
        next_before=rows[-1].id if more else None,
    )


@router.get("/keys", response_class=HTMLResponse, name="console_keys")
def keys(request: Request, session: SignedIn) -> HTMLResponse:
    services = services_of(request)
    with services.store.read() as unit:
        rows = unit.keys.every()
    return render(
        request, "keys.html", session=session, current="keys", title="API keys", rows=rows
    )


#: Settings whose values are secrets, or may hold one (a URL's password).
_SECRET_WORDS = ("password", "secret", "token")


def shown_setting(name: str, value: object) -> str:
    """A setting's value as the settings page shows it: a URL's password and any secret
    hidden."""
    if value is None:
        return "(unset)"
    text = str(value)
    if any(word in name for word in _SECRET_WORDS):
        return "(hidden)"
    return re.sub(r"(://[^:/@\s]*:)[^@/\s]+@", r"\1(hidden)@", text)


@router.get("/settings", response_class=HTMLResponse, name="console_settings")
def settings(request: Request, session: SignedIn) -> HTMLResponse:
    services = services_of(request)
    current_settings = services.settings
    fields = type(current_settings).model_fields
    rows = [
        (
            f"FREEHOURS_{name.upper()}",
            shown_setting(name, getattr(current_settings, name)),
            field.description or "",
            getattr(current_settings, name) != field.default,
        )
        for name, field in fields.items()
    ]
    return render(
        request,
        "settings.html",
        session=session,
        current="settings",
        title="Settings in force",
        rows=rows,
        database=services.store.dialect,
    )


@router.get("/documents/{number:path}", name="console_document")
def document(request: Request, session: SignedIn, number: str) -> Response:
    """An invoice or credit note as the household reads it: ``NUMBER.html`` or ``NUMBER.pdf``."""
    stem, _, suffix = number.rpartition(".")
    media = {"html": documents.HTML, "pdf": documents.PDF}.get(suffix)
    if media is None or not stem or len(stem) > 40:
        raise Problem(404, "not-found", "Not Found", f"{number[:60]}: ask for NUMBER.html or .pdf")
    with services_of(request).store.read() as unit:
        found = unit.invoices.get_document(stem)
    if found is None:
        raise Problem(404, "document-not-found", "No such document", f"number: no document {stem}")
    return documents.render(found, media)
