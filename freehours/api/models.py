"""The types every route's bodies are made of: the path parameters, dates and moments, strict
bodies, and their checks against the rules of ``freehours.domain.reads``. Each resource's own
bodies are declared beside its routes (``api/routes/*.py``; the settlement's in ``api/settle.py``).

Decimals travel as strings (a JSON number is binary and inexact). Every date and moment a
request names, in its body, query or path, is of one of two types, ``NemDate`` and ``Moment``:
a string in its documented form (never a number of seconds), inside the NEM calendar's bounds
(``EARLIEST_DATE`` to ``LATEST_DATE``), else a 422 naming the field; a read's date is also
checked against today by its route (``check_read_date``), which knows the clock. Request bodies
are strict (``STRICT_BODY``): an integer is a JSON integer, a string a string, a boolean
``true`` or ``false``, as docs/api.md says.
"""

import re
from datetime import date
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
)

from freehours.api.problems import range_problem
from freehours.domain import reads as rules
from freehours.domain.reads import NMI_PATTERN
from freehours.plans.document import PlanDocument

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


#: A decimal as the bill writes it: plain notation, no exponent.
DecimalText = Annotated[str, Field(pattern=r"^-?\d+(\.\d+)?$")]


def check_read_date(day: date, today: date, field: str, *, where: str = "body") -> None:
    """A 422 naming ``{where}.{field}`` when no meter can have read ``day`` yet (or before
    2000)."""
    try:
        rules.check_read_date(day, today, field)
    except rules.RangeError as exc:
        raise range_problem(f"{where}.{field}", exc) from None


class CostedOut(BaseModel):
    """A plan's cost of the usage a better offer check priced."""

    offer_id: str | None = Field(description="null: the customer's current plan")
    offer_version: int | None
    plan_id: str
    name: str
    cost: DecimalText = Field(description="over the days priced, AUD")
    cost_per_year: DecimalText = Field(description="scaled to a year of 365 days, AUD")
    gst_inclusive: bool


class BetterOfferOut(BaseModel):
    """A better offer check (docs/invoices.md, The better offer check): the usage it priced,
    on the current plan and on the cheapest offer that applies, and what it found."""

    outcome: Literal["better_offer", "best_offer", "no_offers", "no_data"]
    checked_on: date = Field(description="the last local day of the usage priced")
    data_from: date | None
    data_to: date | None
    days: int = Field(ge=0)
    estimated: bool = Field(description="less than a year of usage, the costs scaled to one")
    threshold: DecimalText = Field(description="what a better offer must save a year, more than")
    offers_checked: int = Field(ge=0)
    current: CostedOut | None
    offer: CostedOut | None = Field(description="the cheapest offer that applies")
    saving_per_year: DecimalText | None = Field(
        description="the offer's yearly saving on the current plan (negative: it costs more)"
    )


class UsageOut(BaseModel):
    """One period of usage compared: its days with data, use and free energy."""

    kind: Literal["this_period", "previous_period", "year_earlier"]
    start: date
    end: date
    days: int = Field(ge=1)
    consumption_kwh: DecimalText
    free_kwh: DecimalText
    average_daily_kwh: DecimalText
    free_share_percent: DecimalText | None
