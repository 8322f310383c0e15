"""``POST /v1/comparisons`` (read): a household's NEM12 data rated under plans and the retailer's
offers, cheapest first, as ``freehours compare`` rates it (``freehours.domain.comparison``).
Nothing is stored. The body is bounded as an upload is, and read by the uploads' own capacity."""

import threading
from datetime import date
from functools import partial
from pathlib import Path as FilePath
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, Field

from freehours.api.auth import requires
from freehours.api.bodies import upload_body, while_connected
from freehours.api.keys import Scope
from freehours.api.models import NemDate
from freehours.api.openapi import TOO_LARGE, merged, problem
from freehours.api.problems import Problem, client_gone
from freehours.api.services import AppServices, Services
from freehours.domain.comparison import MAX_PLANS, compare_days
from freehours.domain.plan import Plan
from freehours.errors import InputError, PlanError
from freehours.meterdata.nem12 import NEM12Reader, NEM12TooLarge, ReadCancelled
from freehours.plans import BUILTIN_IDS, builtin_document
from freehours.plans.document import parse_plan

router = APIRouter(tags=["comparisons"], dependencies=[requires(Scope.READ)])

#: The most interval values a comparison keeps and rates under each plan: a year of 5-minute
#: data of 5 meters (at 50 plans, about 9 s of a worker thread on this machine).
MAX_COMPARED_VALUES = 5 * 365 * 288


class ComparedPlanOut(BaseModel):
    rank: int
    plan_id: str
    plan_name: str
    region: str
    from_: str = Field(alias="from")
    to: str
    days: int
    total: str = Field(description="The plan's bill of the data, GST included, to the cent.")
    per_year: str = Field(description="The total over the days billed, times 365.")
    free_kwh: str
    free_value: str = Field(description="What the free energy would have cost.")
    room_kwh: str | None = Field(
        description="Energy used outside the free window on days its cap still had room for"
        " (null: the plan has no free window)."
    )


class ComparedMeterOut(BaseModel):
    nmi: str
    plans: list[ComparedPlanOut] = Field(description="Cheapest over the data first.")


class ComparisonOut(BaseModel):
    items: list[ComparedMeterOut]
    notes: list[str] = Field(description="Days only partly in the data; meters not billed.")


@router.post(
    "/v1/comparisons",
    response_model=ComparisonOut,
    response_description="Each NMI's plans, cheapest first.",
    openapi_extra=merged(
        {
            "requestBody": {
                "required": True,
                "content": {
                    "application/octet-stream": {
                        "schema": {
                            "type": "string",
                            "format": "binary",
                            "description": "A NEM12 file: CSV, a zip of them, or gzip.",
                        }
                    }
                },
            }
        },
        {
            "responses": {
                "413": merged(
                    TOO_LARGE,
                    {
                        "description": "Over the upload's limits, or more than 525,600"
                        " interval values (a year of 5-minute data of 5 meters):"
                        " `/problems/payload-too-large`."
                    },
                ),
                "422": {
                    "description": "A file with a bad record (`/problems/invalid-input`, naming"
                    " its line), no plan or offer to compare, more than 50, an unknown plan id"
                    " (`/problems/unknown-plan`)."
                },
                "503": problem(
                    "This process reads as many uploads as it may at once"
                    " (FREEHOURS_UPLOAD_CONCURRENCY; `/problems/busy`).",
                    "Retry-After",
                ),
            }
        },
    ),
)
async def post_comparison(
    request: Request,
    services: AppServices,
    *,
    plan: Annotated[
        list[str] | None,
        Query(
            description="a plan's id: stored, or built in; repeatable (default: the built-in"
            " plans, unless offers=true)"
        ),
    ] = None,
    offers: Annotated[
        bool, Query(description="also every offer stored, its latest version")
    ] = False,
    first: Annotated[NemDate | None, Query(alias="from", description="first local day")] = None,
    last: Annotated[NemDate | None, Query(alias="to", description="last local day")] = None,
) -> dict[str, Any]:
    """Rate a NEM12 file under plans and offers, cheapest first: each plan's bill total, its
    cost per year, its free energy and value, and the free window's unused room. Each figure is
    the plan's own bill's (``freehours bill``), to the cent. Stores nothing."""
    ids = list(dict.fromkeys(plan or ([] if offers else BUILTIN_IDS)))
    if len(ids) > MAX_PLANS:
        raise Problem(
            422, "validation-error", "Too many plans", f"plan: {len(ids)}, at most {MAX_PLANS}"
        )
    if first is not None and last is not None and first > last:
        raise Problem(
            422, "validation-error", "Request is not valid", f"from: {first} is after to {last}"
        )
    async with upload_body(request, services) as body:
        stop = threading.Event()
        try:
            asked = partial(_compare, ids=ids, offers=offers, first=first, last=last, stop=stop)
            return await while_connected(request, stop, asked, services, body)
        except ReadCancelled:
            raise client_gone() from None
        except NEM12TooLarge as exc:
            raise Problem(413, "payload-too-large", "File too large", str(exc)) from exc


def _compare(
    services: Services,
    body: bytes,
    *,
    ids: list[str],
    offers: bool,
    first: date | None,
    last: date | None,
    stop: threading.Event,
) -> dict[str, Any]:
    plans = _plans(services, ids, offers)
    reader = NEM12Reader(
        body, name="upload", today=services.nem_today(), limits=services.nem12_limits,
        stop=stop, future=True,
    )  # fmt: skip
    try:
        days = []
        values = 0
        for day in reader.days():
            values += len(day.values)
            if values > MAX_COMPARED_VALUES:
                raise Problem(
                    413,
                    "payload-too-large",
                    "Too much data to compare",
                    f"upload: more than {MAX_COMPARED_VALUES:,} interval values (a year of"
                    " 5-minute data of 5 meters); compare a household's file",
                )
            days.append(day)
        results, notes = compare_days(plans, days, first, last, FilePath("upload"))
    except (NEM12TooLarge, ReadCancelled):
        raise
    except InputError as exc:  # a bad record (NEM12Error) names its line
        raise Problem(422, "invalid-input", "The file cannot be compared", str(exc)) from None
    warning = reader.ahead_warning()
    return {
        "items": [
            {"nmi": meter, "plans": [row.as_json(n) for n, row in enumerate(rows, 1)]}
            for meter, rows in results.items()
        ],
        "notes": ([warning] if warning else []) + notes,
    }


def _plans(services: Services, ids: list[str], offers: bool) -> list[Plan]:
    """The plans of ``ids`` (stored, else built in) and, with ``offers``, of every offer."""
    loaded: list[Plan] = []
    with services.store.read() as unit:
        for plan_id in ids:
            stored = unit.catalog.get_plan(plan_id)
            if stored is None and plan_id not in BUILTIN_IDS:
                raise Problem(
                    422, "unknown-plan", "Unknown plan",
                    f"plan: no plan {plan_id!r} (stored, or built in: {', '.join(BUILTIN_IDS)})",
                )  # fmt: skip
            document = stored.document if stored is not None else builtin_document(plan_id)
            loaded.append(_parsed(document, plan_id))
        if offers:
            loaded.extend(
                _parsed({**offer.document, "id": offer.offer_id}, offer.offer_id)
                for offer in unit.catalog.current_offers()
            )
    if not loaded:
        raise Problem(422, "validation-error", "Nothing to compare", "offers: no offers stored")
    if len(loaded) > MAX_PLANS:
        raise Problem(
            422, "validation-error", "Too many plans",
            f"offers: {len(loaded)} plans with the offers, at most {MAX_PLANS}",
        )  # fmt: skip
    return loaded


def _parsed(document: dict[str, Any], source: str) -> Plan:
    try:
        return parse_plan(document, source=source)
    except PlanError as exc:  # a stored plan is valid; one of an older freehours may not be
        raise Problem(422, "invalid-plan", "A stored plan cannot be rated", str(exc)) from None
