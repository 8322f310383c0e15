"""What the CDR reader and writer share: the standard's names and the checks of a JSON path's
value (``freehours.plans.cdr``)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from freehours.domain.time import Region
from freehours.errors import PlanError
from freehours.plans.document import MAX_INFORMATION

#: The media type of a CDR energy plan document, in ``Content-Type`` and ``Accept``.
CDR_MEDIA_TYPE = "application/vnd.cdr.energy-plan+json"
#: The CDS release whose ``EnergyPlanDetailV3`` this module reads and writes.
CDS_RELEASE = "1.36.0"

#: The time-of-use types of ``EnergyPlanTariffPeriodV2.timeOfUseRates`` (CDS 1.36.0).
CDR_TOU_TYPES = ("PEAK", "OFF_PEAK", "SHOULDER", "SHOULDER1", "SHOULDER2")
#: ``EnergyDaysEnum``, in the order an exported document lists days.
CDR_DAYS = ("MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN", "PUBLIC_HOLIDAYS")
#: The band type of a single-rate tariff period (a bill line's code).
SINGLE_RATE_TYPE = "SINGLE_RATE"
#: The distribution networks of each region, as ``geography.distributors`` names them.
REGION_DISTRIBUTORS: dict[Region, tuple[str, ...]] = {
    Region.NSW: ("Ausgrid", "Endeavour Energy", "Essential Energy"),
    Region.SEQ: ("Energex",),
    Region.SA: ("SA Power Networks",),
    Region.VIC: ("CitiPower", "Powercor", "Jemena", "AusNet Services", "United Energy"),
}
#: A distributor's region by the first words of its name (lower case): "Endeavour Energy" and
#: "Endeavour" alike.
_DISTRIBUTORS = {
    _name: _region
    for _region, _names in REGION_DISTRIBUTORS.items()
    for _full in _names
    for _name in {_full.lower(), _full.lower().split()[0]}
    if _name not in {"sa", "united"}  # too short or too common alone
}


def _first_words(distributor: object) -> str:
    """The words of a distributor's name that ``_DISTRIBUTORS`` knows it by, or ""."""
    if not isinstance(distributor, str):
        return ""
    name = " ".join(distributor.lower().split())
    for known in _DISTRIBUTORS:
        if name == known or name.startswith(known + " "):
            return known
    return ""


#: The first digit of a postcode in each region (QLD's 4xxx is Energex's south-east).
_POSTCODE_REGIONS = {"2": Region.NSW, "3": Region.VIC, "4": Region.SEQ, "5": Region.SA}
#: Bounds on a document's lists: a real plan has a handful of each.
MAX_ITEMS = 64
_FREE_WINDOW_NAME = "Free window"
_FEES_ONE_OFF_TERMS = {"FIXED", "PERCENT_OF_BILL", "VARIABLE"}

_TIME = re.compile(r"T?(\d\d):?(\d\d)(?::?(\d\d))?(Z|[+-]\d\d:?\d\d)?")
_MONTH_DAY = re.compile(r"(?:--)?(\d\d)-(\d\d)")
_DURATION_DAY = re.compile(r"P1D|PT24H")
_STEP_PERIOD = re.compile(r"P[1-9]\d?[DWMY]")

Json = Mapping[str, Any]


class _Path:
    """Where a value is in the document, for errors: ``electricityContract.tariffPeriod[0]``."""

    def __init__(self, source: str, text: str = "") -> None:
        self.source = source
        self.text = text

    def __truediv__(self, part: str | int) -> _Path:
        if isinstance(part, int):
            return _Path(self.source, f"{self.text}[{part}]")
        return _Path(self.source, f"{self.text}.{part}" if self.text else part)

    def error(self, why: str) -> PlanError:
        return PlanError(why, source=self.source, key=self.text or None)


def _object(value: object, at: _Path) -> Json:
    if not isinstance(value, Mapping):
        raise at.error(f"expected an object, got {_kind(value)}")
    return value


def _field(parent: Json, name: str, at: _Path, *, default: object = ...) -> Any:
    if name not in parent or parent[name] is None:
        if default is ...:
            raise (at / name).error("is required")
        return default
    return parent[name]


def _text(parent: Json, name: str, at: _Path, *, default: str | None = None) -> str:
    value = _field(parent, name, at, default=... if default is None else default)
    if not isinstance(value, str):
        raise (at / name).error(f"expected text, got {_kind(value)}")
    return value


def _list(parent: Json, name: str, at: _Path, *, required: bool = False) -> list[Any]:
    value = _field(parent, name, at, default=... if required else [])
    if not isinstance(value, list):
        raise (at / name).error(f"expected an array, got {_kind(value)}")
    if len(value) > MAX_ITEMS:
        raise (at / name).error(f"has {len(value)} items: at most {MAX_ITEMS} are read")
    if required and not value:
        raise (at / name).error("is empty: at least one is required")
    return value


def _one_of(parent: Json, name: str, at: _Path, allowed: Sequence[str], default: str) -> str:
    value = _text(parent, name, at, default=default)
    if value not in allowed:
        raise (at / name).error(f"unknown value {value!r}: expected one of {', '.join(allowed)}")
    return value


def _amount(value: object, at: _Path) -> Decimal:
    """An ``AmountString`` (or, leniently, a JSON number read exactly) as a Decimal."""
    if isinstance(value, bool) or not isinstance(value, str | int | Decimal | float):
        raise at.error(f'expected an amount such as "0.2500", got {_kind(value)}')
    try:
        number = Decimal(str(value))
    except InvalidOperation:
        raise at.error(f"{value!r} is not a decimal amount") from None
    if not number.is_finite():
        raise at.error(f"{value!r} is not a finite amount")
    return number


def _kept(information: list[str]) -> list[str]:
    """What a plan keeps of the information read: at most 100 lines of ``MAX_INFORMATION``
    characters, and a last line saying what was left out, so that nothing is dropped unsaid."""
    lines = [_shortened(line, MAX_INFORMATION) for line in information]
    if len(lines) > 100:
        lines = [*lines[:99], f"... and {len(lines) - 99} more informational items, not kept"]
    return lines


def _shortened(text: str, most: int) -> str:
    return text if len(text) <= most else text[: most - 1] + "…"


def _kind(value: object) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "an array", str: "text", bool: "true or false"}.get(
        type(value), "a number"
    )


def _plain(value: Decimal) -> str:
    """A decimal as a plan document writes it: plain, no exponent, trailing zeros kept."""
    return format(value, "f")
