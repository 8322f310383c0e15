"""Plan documents: a plan file (TOML) and the body of ``PUT /v1/plans/{id}`` (JSON), validated
into the ``freehours.domain.plan.Plan`` that rating works with.

Both are the same document, ``PlanDocument``, with the fields of DESIGN.md section 4. Validating
it checks every field and the plan as a whole (every moment of the week has a band);
``PlanDocument.to_plan`` then turns it into a ``Plan``, with the region's public holidays from
``freehours.plans.calendars``. ``parse_plan`` does both and reports the first problem as a
``PlanError`` that names the source and the dotted key, such as
``time_of_use[1].periods[0].start``. Pydantic does the validating here, outside the domain, which
imports nothing from outside ``freehours.domain``.

Conventions:

- Money and energy are strings (``"0.4800"``) or integers; floats are refused, because a binary
  float cannot hold most decimal prices exactly.
- Times of day are ``"HH:MM"`` on the customer's clock; ``"24:00"`` may end a period. A period
  never crosses midnight: write 22:00-06:00 as 22:00-24:00 and 00:00-06:00.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    StrictBool,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
)
from pydantic_core import ErrorDetails, PydanticCustomError

from freehours.domain import reads
from freehours.domain.fields import MAX_LINE_CODE, MAX_PLAN_ID, MAX_PLAN_NAME
from freehours.domain.plan import (
    DEFAULT_CAP_KWH,
    REGION_WINDOWS,
    WEEKDAY_NAMES,
    Band,
    ControlledLoad,
    DayName,
    FeedIn,
    FreeWindow,
    Period,
    Plan,
    Step,
    StepRates,
    SupplyCharge,
    TimeZoneMode,
    band_timeline,
    clock_text,
    day_names,
    in_dates,
)
from freehours.domain.reads import DAY_MINUTES
from freehours.domain.time import Region
from freehours.errors import PlanError
from freehours.plans.calendars import public_holidays

_CLOCK = re.compile(r"(\d\d):(\d\d)")
_DECIMAL_SCHEMA: dict[str, Any] = {
    "anyOf": [{"type": "string", "pattern": r"^-?\d+(\.\d+)?$"}, {"type": "integer"}]
}


def _exact_decimal(value: object) -> Decimal:
    """A Decimal from a string or an integer; floats are refused (binary, inexact)."""
    # PydanticCustomError, not TypeError: pydantic reports only these and ValueError as invalid.
    if isinstance(value, bool):
        raise PydanticCustomError(
            "decimal_type", f'expected a decimal string such as "0.25", got {value!r}'
        )
    if isinstance(value, float):
        raise PydanticCustomError(
            "decimal_type",
            f"got the number {value!r}, a binary float that cannot hold most decimals exactly: "
            f'write it as a string, "{value!r}"',
        )
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, str | Decimal):
        try:
            number = Decimal(value)
        except InvalidOperation:
            raise ValueError(f"{value!r} is not a decimal number") from None
        if not number.is_finite():
            raise ValueError(f"{value!r} is not a finite decimal number")
        return number
    raise PydanticCustomError(
        "decimal_type", f'expected a decimal string such as "0.25", got {type(value).__name__}'
    )


def _not_negative(value: Decimal) -> Decimal:
    if value < 0:
        raise ValueError(f"{value} is negative: prices and rates cannot be")
    return value


def _price_in_range(value: Decimal) -> Decimal:
    """A price inside ``freehours.domain.reads``' bounds, so that no amount of a bill overflows
    or is rounded before the cent (a price of 1e999999 would fail every settlement)."""
    try:
        return reads.check_price(value)
    except reads.RangeError as exc:
        raise ValueError(exc.reason) from None


def _kwh_in_range(value: Decimal) -> Decimal:
    try:
        return reads.check_kwh(value)
    except reads.RangeError as exc:
        raise ValueError(exc.reason) from None


def _positive(value: Decimal) -> Decimal:
    if value <= 0:
        raise ValueError(f"{value} is not positive")
    return value


def _below_one(value: Decimal) -> Decimal:
    if value >= 1:
        raise ValueError(f"{value} is not a rate below 1 (0.10 is 10%)")
    return value


ExactDecimal = Annotated[
    Decimal,
    PlainValidator(_exact_decimal),
    PlainSerializer(str, return_type=str),
    WithJsonSchema(_DECIMAL_SCHEMA),
]
Price = Annotated[ExactDecimal, AfterValidator(_not_negative), AfterValidator(_price_in_range)]
Rate = Annotated[
    ExactDecimal,
    AfterValidator(_not_negative),
    AfterValidator(_below_one),
    AfterValidator(_price_in_range),  # for its decimal places
]
PositiveKwh = Annotated[ExactDecimal, AfterValidator(_positive), AfterValidator(_kwh_in_range)]


def clock_minutes(text: str) -> int:
    """Minutes since midnight of a validated ``HH:MM``."""
    hours, minutes = text.split(":")
    return int(hours) * 60 + int(minutes)


def _clock(text: str, *, end: bool) -> str:
    match = _CLOCK.fullmatch(text)
    allowed = "00:00 to 23:59, or 24:00 to end a period" if end else "00:00 to 23:59"
    if match is None:
        raise ValueError(f"{text!r} is not a time of day as HH:MM ({allowed})")
    if text == "24:00":
        if not end:
            raise ValueError("24:00 can end a period but not start one")
        return text
    if int(match.group(1)) > 23 or int(match.group(2)) > 59:
        raise ValueError(f"{text!r} is not a time of day ({allowed})")
    return text


def _start_clock(text: str) -> str:
    return _clock(text, end=False)


def _end_clock(text: str) -> str:
    return _clock(text, end=True)


def _end_after_start(end: str, info: ValidationInfo) -> str:
    start = info.data.get("start")
    if start is not None and clock_minutes(end) <= clock_minutes(start):
        raise ValueError(
            f"end {end} is not after start {start} (a period that crosses midnight is two periods, "
            "one ending at 24:00 and one starting at 00:00)"
        )
    return end


def _not_export(suffix: str) -> str:
    if Plan.is_export(suffix):
        raise ValueError(f"{suffix} is an export channel and cannot count as consumption")
    return suffix


#: A time of day in the JSON Schema (which cannot say that an end is after its start).
_START_SCHEMA = {"type": "string", "pattern": r"^([01]\d|2[0-3]):[0-5]\d$"}
_END_SCHEMA = {"type": "string", "pattern": r"^(([01]\d|2[0-3]):[0-5]\d|24:00)$"}
StartClock = Annotated[str, AfterValidator(_start_clock), WithJsonSchema(_START_SCHEMA)]
EndClock = Annotated[
    str,
    AfterValidator(_end_clock),
    AfterValidator(_end_after_start),
    WithJsonSchema(_END_SCHEMA),
]
#: A band's type is the code of its bill line; a plan's id and description (its name) are on
#: every invoice: each as long as a document holds (``freehours.domain.fields``), no longer.
BandType = Annotated[str, Field(pattern=r"^[A-Z][A-Z0-9_]*$", max_length=MAX_LINE_CODE)]
Suffix = Annotated[str, Field(pattern=reads.SUFFIX_PATTERN), AfterValidator(_not_export)]
PLAN_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
PLAN_ID_MAX_LENGTH = MAX_PLAN_ID
PlanId = Annotated[str, Field(pattern=PLAN_ID_PATTERN, max_length=PLAN_ID_MAX_LENGTH)]


#: The most periods a plan has, in all its bands: a real plan has a few dozen.
MAX_PERIODS = 200


class _Document(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


_MONTH_DAY = re.compile(r"(\d\d)-(\d\d)")
_MONTH_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _month_day_text(text: str) -> str:
    match = _MONTH_DAY.fullmatch(text)
    if match is None:
        raise ValueError(f"{text!r} is not a day of the year as MM-DD")
    month, day = int(match.group(1)), int(match.group(2))
    if not 1 <= month <= 12 or not 1 <= day <= _MONTH_DAYS[month - 1]:
        raise ValueError(f"{text!r} is not a day of the year (MM-DD, 01-01 to 12-31)")
    return text


def month_day_of(text: str) -> int:
    """``MMDD`` of a validated ``MM-DD`` (see ``freehours.domain.plan.month_day``)."""
    return int(text[:2]) * 100 + int(text[3:])


MonthDay = Annotated[
    str,
    AfterValidator(_month_day_text),
    WithJsonSchema({"type": "string", "pattern": r"^(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$"}),
]
SeasonDates = Annotated[list[MonthDay], Field(min_length=2, max_length=2)]


class PeriodDocument(_Document):
    """``{ days = [...], start = "HH:MM", end = "HH:MM" }``, and ``dates = ["MM-DD", "MM-DD"]``
    for a band of one season only."""

    days: list[DayName] = Field(min_length=1, description="the days it applies on")
    start: StartClock = Field(description="HH:MM on the plan's clock, 00:00 to 23:59")
    end: EndClock = Field(description="HH:MM after start, up to 24:00")
    dates: SeasonDates | None = Field(
        default=None,
        description="the first and last day of the year it applies (MM-DD, both included; "
        "a first day after the last wraps over the new year); default: all year",
    )

    def to_period(self) -> Period:
        dates = (
            None
            if self.dates is None
            else (month_day_of(self.dates[0]), month_day_of(self.dates[1]))
        )
        return Period(
            frozenset(self.days), clock_minutes(self.start), clock_minutes(self.end), dates
        )


class StepDocument(_Document):
    """``{ after_kwh = "1000", unit_price = "0.35" }``: one step of a band's stepped rates."""

    after_kwh: PositiveKwh = Field(description="the usage in a step period this price starts at")
    unit_price: Price = Field(description="AUD per kWh, excluding GST, from there on")


_STEP_PERIOD = re.compile(r"P([1-9]\d?)([DWMY])")


def _step_period(text: str) -> str:
    if _STEP_PERIOD.fullmatch(text) is None:
        raise ValueError(
            f"{text!r} is not a step period: an ISO 8601 duration of one unit, P1D to P99Y "
            "(days D, weeks W, months M, years Y), such as P3M"
        )
    return text


StepPeriod = Annotated[
    str,
    AfterValidator(_step_period),
    WithJsonSchema({"type": "string", "pattern": r"^P[1-9]\d?[DWMY]$"}),
]


class TimeOfUseDocument(_Document):
    """One ``[[time_of_use]]`` band."""

    type: BandType = Field(description="PEAK, SHOULDER, OFF_PEAK, ...: one price per type")
    unit_price: Price = Field(description="AUD per kWh, excluding GST (the first step's)")
    periods: list[PeriodDocument] = Field(
        min_length=1, max_length=MAX_PERIODS, description="when the band is in force"
    )
    steps: list[StepDocument] = Field(
        default=[],
        max_length=10,
        description="stepped rates: the price from each usage on, per step_period; default none",
    )
    step_period: StepPeriod | None = Field(
        default=None,
        validate_default=True,  # checked against steps even when left out
        description="the usage period of the steps (P1D, P1M, P3M, P1Y, ...)",
    )

    @field_validator("steps")
    @classmethod
    def _steps_in_order(cls, steps: list[StepDocument]) -> list[StepDocument]:
        for index in range(1, len(steps)):
            if steps[index].after_kwh <= steps[index - 1].after_kwh:
                raise ValueError(
                    f"steps[{index}].after_kwh {steps[index].after_kwh} is not after the step "
                    f"before it ({steps[index - 1].after_kwh}): steps go up in usage"
                )
        return steps

    @field_validator("step_period")
    @classmethod
    def _period_with_steps(cls, period: str | None, info: ValidationInfo) -> str | None:
        if bool(period) != bool(info.data.get("steps")):
            raise ValueError("steps and step_period go together: give both or neither")
        return period

    def to_band(self) -> Band:
        steps = None
        if self.steps and self.step_period is not None:
            steps = StepRates(
                tuple(Step(step.after_kwh, step.unit_price) for step in self.steps),
                self.step_period,
            )
        return Band(self.type, self.unit_price, tuple(p.to_period() for p in self.periods), steps)


class FreeWindowDocument(_Document):
    """``[free_window]``: every field optional, defaults from the region."""

    enabled: StrictBool = Field(default=True, description="false: the plan has no free window")
    start: StartClock | None = Field(default=None, description="default: the region's")
    end: EndClock | None = Field(default=None, description="default: the region's")
    cap_kwh: PositiveKwh | None = Field(default=None, description="free kWh a day; default 24")


class FeedInDocument(_Document):
    """``[feed_in]``"""

    unit_price: Price = Field(description="AUD per exported kWh, credited")


class SupplyChargeDocument(_Document):
    """``{ dates = ["MM-DD", "MM-DD"], unit_price = "1.30" }``: a season's daily supply charge."""

    dates: SeasonDates = Field(description="its first and last day of the year, both included")
    unit_price: Price = Field(description="AUD per day, excluding GST, in place of the plan's")

    def to_charge(self) -> SupplyCharge:
        return SupplyCharge(
            (month_day_of(self.dates[0]), month_day_of(self.dates[1])), self.unit_price
        )


class ControlledLoadDocument(_Document):
    """``[controlled_load]``: a circuit metered on channels of its own, never free."""

    suffixes: list[Suffix] = Field(
        default=["E2"], min_length=1, max_length=10, description="its channels; default E2"
    )
    unit_price: Price = Field(description="AUD per kWh, excluding GST")
    daily_supply_charge: Price | None = Field(
        default=None, description="AUD per day, excluding GST, on top of the plan's; default none"
    )


#: What a plan's source says that is not rated: shown by ``plans validate`` and the API, never
#: on a document; a paragraph of a CDR plan's terms.
MAX_INFORMATION = 500
InformationText = Annotated[str, Field(max_length=MAX_INFORMATION)]


class PlanDocument(_Document):
    """A plan file, or the body of ``PUT /v1/plans/{id}``: the fields of DESIGN.md section 4.

    Validation covers the document as a whole, so a valid ``PlanDocument`` always makes a plan.
    """

    id: PlanId = Field(description="the plan's id, as customers and PUT /v1/plans name it")
    description: str = Field(
        default="",
        max_length=MAX_PLAN_NAME,
        description="for people: its name on invoices (its id when empty) and in plans list",
    )
    region: Region = Field(description="sets the clock and the default free window")
    time_zone: TimeZoneMode = Field(
        default=TimeZoneMode.LOCAL, description="LOCAL: the region's clock; AEST: NEM time"
    )
    daily_supply_charge: Price = Field(description="AUD per day, excluding GST")
    gst_rate: Rate = Field(default=Decimal("0.10"), description="added to the bill's subtotal")
    consumption_suffixes: list[Suffix] | None = Field(
        default=None,
        min_length=1,
        description="channels billed as consumption; default: every suffix starting with E",
    )
    free_window: FreeWindowDocument | None = Field(
        default=None, description="default: the region's window, 24 kWh a day"
    )
    time_of_use: list[TimeOfUseDocument] = Field(
        min_length=1,
        max_length=MAX_PERIODS,
        description="the bands, first listed wins; every moment needs one",
    )
    feed_in: FeedInDocument | None = Field(default=None, description="default: no feed-in credit")
    supply_charges: list[SupplyChargeDocument] = Field(
        default=[],
        max_length=12,
        description="seasonal daily supply charges, each in place of daily_supply_charge on its "
        "dates; default none",
    )
    controlled_load: ControlledLoadDocument | None = Field(
        default=None, description="default: none (every E channel is general consumption)"
    )
    information: list[InformationText] = Field(
        default=[],
        max_length=100,
        description="what the plan's source says that is not rated (fees, eligibility, ...): "
        "kept and shown, never billed",
    )

    @field_validator("supply_charges")
    @classmethod
    def _seasons_apart(cls, charges: list[SupplyChargeDocument]) -> list[SupplyChargeDocument]:
        taken: dict[int, int] = {}
        for index, charge in enumerate(charges):
            dates = charge.to_charge().dates
            for on in _YEAR:
                if in_dates(dates, on) and taken.setdefault(on, index) != index:
                    raise ValueError(
                        f"supply_charges[{index}] and supply_charges[{taken[on]}] both hold "
                        f"{on // 100:02d}-{on % 100:02d}: a day has one supply charge"
                    )
        return charges

    @field_validator("controlled_load")
    @classmethod
    def _controlled_load_apart(
        cls, load: ControlledLoadDocument | None, info: ValidationInfo
    ) -> ControlledLoadDocument | None:
        both = set(load.suffixes if load else ()) & set(info.data.get("consumption_suffixes") or ())
        if both:
            raise ValueError(
                f"{', '.join(sorted(both))} cannot be both consumption and controlled load"
            )
        return load

    @field_validator("free_window")
    @classmethod
    def _window_in_order(
        cls, window: FreeWindowDocument | None, info: ValidationInfo
    ) -> FreeWindowDocument | None:
        region = info.data.get("region")
        if window is None or region is None or not window.enabled:
            return window
        start, end = _window_minutes(window, region)
        if end <= start:
            raise ValueError(
                f"the window would run from {clock_text(start)} to {clock_text(end)} "
                f"(start or end taken from the {region} default): the end must be after the start"
            )
        return window

    @field_validator("time_of_use")
    @classmethod
    def _bands_cover_the_week(cls, documents: list[TimeOfUseDocument]) -> list[TimeOfUseDocument]:
        periods = sum(len(document.periods) for document in documents)
        if periods > MAX_PERIODS:
            raise ValueError(
                f"{periods} periods in all: a plan has at most {MAX_PERIODS} (checking that "
                "they cover every moment of every season takes time that grows with them)"
            )
        bands = tuple(document.to_band() for document in documents)
        prices: dict[str, Band] = {}
        for index, band in enumerate(bands):
            first = prices.setdefault(band.type, band)
            if first.unit_price != band.unit_price:
                raise ValueError(
                    f"time_of_use[{index}] gives {band.type} the price {band.unit_price} "
                    f"but an earlier band gave it {first.unit_price}: one type, one price"
                )
            if first.steps != band.steps:
                raise ValueError(
                    f"time_of_use[{index}] gives {band.type} other steps than an earlier band "
                    "of that type: one type, one price"
                )
        seasons = season_starts(bands)
        for on in seasons:
            for weekday, name in enumerate(WEEKDAY_NAMES):
                timeline = band_timeline(bands, day_names(weekday, public_holiday=False), on)
                if -1 in timeline:
                    start = timeline.index(-1)
                    end = next(
                        (m for m in range(start, DAY_MINUTES) if timeline[m] != -1), DAY_MINUTES
                    )
                    when = f" from {on // 100:02d}-{on % 100:02d}" if len(seasons) > 1 else ""
                    raise ValueError(
                        f"no band covers {name} {clock_text(start)}-{clock_text(end)}{when}: "
                        "every moment of the week needs a band (end with a fallback: "
                        'days = ["ALL"], 00:00-24:00)'
                    )
        return documents

    def to_plan(self) -> Plan:
        window = None
        if self.free_window is None or self.free_window.enabled:
            document = self.free_window or FreeWindowDocument()
            start, end = _window_minutes(document, self.region)
            cap = DEFAULT_CAP_KWH if document.cap_kwh is None else document.cap_kwh
            window = FreeWindow(start, end, cap)
        return Plan(
            id=self.id,
            region=self.region,
            time_zone=self.time_zone,
            daily_supply_charge=self.daily_supply_charge,
            gst_rate=self.gst_rate,
            consumption_suffixes=(
                None if self.consumption_suffixes is None else tuple(self.consumption_suffixes)
            ),
            free_window=window,
            bands=tuple(document.to_band() for document in self.time_of_use),
            feed_in=None if self.feed_in is None else FeedIn(self.feed_in.unit_price),
            description=self.description,
            supply_charges=tuple(charge.to_charge() for charge in self.supply_charges),
            controlled_load=(
                None
                if self.controlled_load is None
                else ControlledLoad(
                    tuple(self.controlled_load.suffixes),
                    self.controlled_load.unit_price,
                    self.controlled_load.daily_supply_charge,
                )
            ),
            holiday_calendar=public_holidays,
        )


def season_starts(
    bands: tuple[Band, ...], supply_charges: tuple[SupplyCharge, ...] = ()
) -> list[int]:
    """The first day (``MMDD``) of each stretch of the year in which the same dated periods (and
    supply charges) apply: checking one day of each checks the whole year. ``[101]`` for a plan
    without dates."""
    dated = [period.dates for band in bands for period in band.periods]
    dated += [charge.dates for charge in supply_charges]
    starts = {101}
    for dates in dated:
        if dates is not None:
            first, last = dates
            starts.add(first)
            starts.add(_day_after(last))
    return sorted(starts)


#: Every day of a leap year as ``MMDD``.
_YEAR = tuple(
    month * 100 + day for month in range(1, 13) for day in range(1, _MONTH_DAYS[month - 1] + 1)
)


def _day_after(month_day: int) -> int:
    month, day = divmod(month_day, 100)
    if day < _MONTH_DAYS[month - 1]:
        return month_day + 1
    return 101 if month == 12 else (month + 1) * 100 + 1


def _window_minutes(window: FreeWindowDocument, region: Region) -> tuple[int, int]:
    default_start, default_end = REGION_WINDOWS[region]
    start = default_start if window.start is None else clock_minutes(window.start)
    end = default_end if window.end is None else clock_minutes(window.end)
    return start, end


def parse_plan(document: Mapping[str, object], *, source: str) -> Plan:
    """Validate a plan document (parsed TOML or JSON) into a ``Plan``.

    Raises ``PlanError`` naming ``source`` and the dotted key of the first problem.
    """
    try:
        return PlanDocument.model_validate(document).to_plan()
    except ValidationError as exc:
        raise _plan_error(exc, source) from exc


#: Problems of one plan named in its error, beyond the first: enough for a hand-written file,
#: bounded for a document made to be wrong everywhere.
_MORE_PROBLEMS_SHOWN = 9


def _plan_error(exc: ValidationError, source: str) -> PlanError:
    """The first problem as the error's key and reason; every other one (up to a bound) named
    after it, so that a misspelt key is shown beside the required key it left missing."""
    problems = [_problem(error) for error in exc.errors(include_url=False)]
    key, message = problems[0]
    shown = problems[1 : 1 + _MORE_PROBLEMS_SHOWN]
    if shown:
        message += "; also " + "; ".join(f"{other}: {why}" for other, why in shown)
    if len(problems) > 1 + len(shown):
        more = len(problems) - 1 - len(shown)
        message += f" (and {more} more problem{'s' if more > 1 else ''})"
    return PlanError(message, source=source, key=key or None)


def _problem(error: ErrorDetails) -> tuple[str, str]:
    """One validation error as (its dotted key, what is wrong)."""
    key = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in error["loc"])
    if error["type"] == "value_error":
        message = str(error["ctx"]["error"])
    elif error["type"] == "missing":
        message = "is required"
    elif error["type"] == "enum":
        message = f"unknown value {error['input']!r}: expected {error['ctx']['expected']}"
    elif error["type"] == "extra_forbidden":
        message = "is not a plan key (check its spelling and section)"
    else:
        message = error["msg"]
    return key.lstrip("."), message
