"""A bill: rated local days priced into lines, with GST, in the JSON of docs/bill.md.

Lines, in this order (docs/bill.md#lines):

- per time-of-use band type (plan order): the consumption charged at that band, outside the
  window and over the cap, at its unit price; a type with stepped rates has, right after its own
  line, ``TYPE_STEP2``, ... for each step its energy goes into (thresholds pro rata to the days
  billed; a step no energy goes into, or of no width once its thresholds are rounded, has no
  line);
- ``SUPPLY``: the days billed at the plan's daily supply charge (unit ``day``): every day, or
  with seasonal supply charges the days outside their seasons, and no line when there are none;
  ``SUPPLY_2``, ... for the days of each season that has days billed, at its own charge;
- ``CONTROLLED_LOAD`` (plans with a controlled load): the controlled-load channels' energy at its
  price, and ``CONTROLLED_LOAD_SUPPLY`` where it has a daily supply charge of its own;
- ``FEED_IN`` (plans with a feed-in price): export x feed-in price, as a negative amount;
- ``FREE_ENERGY`` (plans with a free window): the free kWh, unit price 0, amount 0; what they
  would have cost is ``free_energy_value``.

Every line's amount is rounded to the cent, half up; ``subtotal`` is the sum of the lines,
``gst = subtotal x gst_rate`` rounded the same way, ``total = subtotal + gst``.
``free_energy_value`` prices each free kWh at the band in force at its moment, rounded to the cent.

The notation of numbers (``kwh_text``, ``money_text``, ``decimal_text``) is the one every JSON of
freehours writes a bill's figures in: the bill, and invoices and credit notes
(``freehours.store.document_json``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from decimal import ROUND_HALF_UP, Decimal
from operator import attrgetter
from typing import NamedTuple, cast

from freehours.domain.plan import Band, ControlledLoad, Plan
from freehours.domain.rating import ZERO, DayRating

CENT = Decimal("0.01")


def to_cent(amount: Decimal) -> Decimal:
    """Money rounded to the cent, half up (as every bill line is)."""
    return amount.quantize(CENT, ROUND_HALF_UP)


def decimal_text(value: Decimal) -> str:
    """A price or a count of days as the bill's JSON writes it: plain notation, no exponent,
    the digits it has ("0.2300" as the plan writes it, "31")."""
    return format(value, "f")


def money_text(value: Decimal) -> str:
    """Money as the bill's JSON writes it: AUD to the cent, two decimals, "0.00" never
    "-0.00" ("13.92", "-0.40")."""
    return format(to_cent(value) + 0, "f")


def kwh_text(value: Decimal) -> str:
    """Energy as the bill writes it: exact, without trailing zeros ("12.3", "0")."""
    text = str(value)
    if text[-1] != "0" or "." not in text:
        if "E" not in text:
            return text
    elif "E" not in text and len(text) <= _PLAIN_DIGITS:
        # Trailing zeros after the point: stripping them gives what normalize() and "f" give,
        # in half the time (a bill writes four kWh figures a day, and a day without export
        # writes 0.000 as "0"). Up to 28 digits normalize() cannot round in the default
        # context, so the two agree.
        return text.rstrip("0").rstrip(".") if value else "0"
    return format(value.normalize(), "f") if value else "0"


#: The longest text, sign and point included, whose digits normalize() keeps all of (28).
_PLAIN_DIGITS = 28


class BillLine(NamedTuple):
    """One line of a bill. Immutable; a named tuple, as ``DayRating`` is, because a bill makes
    several and the better offer check prices a year under each offer with them."""

    code: str
    description: str
    quantity: Decimal
    unit: str
    unit_price: Decimal
    amount: Decimal

    def as_json(self) -> dict[str, str]:
        quantity = kwh_text(self.quantity) if self.unit == "kWh" else decimal_text(self.quantity)
        return {
            "code": self.code,
            "description": self.description,
            "quantity": quantity,
            "unit": self.unit,
            "unit_price": decimal_text(self.unit_price),
            "amount": money_text(self.amount),
        }


@dataclass(frozen=True, slots=True)
class Bill:
    """One NMI's bill for the local days ``start`` to ``end`` (inclusive)."""

    nmi: str
    plan_id: str
    time_zone: str
    start: date
    end: date
    days: tuple[DayRating, ...]
    # The totals of ``days``, added once by make_bill
    consumption_kwh: Decimal
    free_kwh: Decimal
    over_cap_kwh: Decimal
    export_kwh: Decimal
    lines: tuple[BillLine, ...]
    subtotal: Decimal
    gst: Decimal
    total: Decimal
    free_energy_value: Decimal

    def as_json(self) -> dict[str, object]:
        """The bill as ``freehours bill --format json`` and the API show it (decimals as text)."""
        head, tail = self._json_parts()
        days = [
            {
                "date": local_date.isoformat(),
                "consumption_kwh": kwh_text(consumption),
                "free_kwh": kwh_text(free),
                "over_cap_kwh": kwh_text(over_cap),
                "export_kwh": kwh_text(export),
                "missing_intervals": missing,
            }
            # Unpacked rather than read by name: a bill writes a row per day.
            for local_date, consumption, free, over_cap, export, missing, *_ in self.days
        ]
        return {**head, "days": days, **tail}

    def json_text(self) -> str:
        """``json.dumps(self.as_json())``: the same text, in three quarters of the time.

        The rows of days, most of a bill, are written from a template rather than made into
        dicts for the encoder: each holds a date, numbers as text (digits, a point, a sign) and
        a count, which JSON writes as they are. The rest goes through ``json.dumps``.
        """
        head, tail = self._json_parts()
        rows = ", ".join(
            [
                f'{{"date": "{local_date.isoformat()}", '
                f'"consumption_kwh": "{kwh_text(consumption)}", "free_kwh": "{kwh_text(free)}", '
                f'"over_cap_kwh": "{kwh_text(over_cap)}", "export_kwh": "{kwh_text(export)}", '
                f'"missing_intervals": {missing:d}}}'
                for local_date, consumption, free, over_cap, export, missing, *_ in self.days
            ]
        )
        # json.dumps writes '{"a": 1, "b": 2}': the head without its closing brace, the days,
        # the tail without its opening one.
        return f'{json.dumps(head)[:-1]}, "days": [{rows}], {json.dumps(tail)[1:]}'

    def _json_parts(self) -> tuple[dict[str, object], dict[str, object]]:
        """The JSON fields before ``days`` and after it."""
        head: dict[str, object] = {
            "nmi": self.nmi,
            "plan": self.plan_id,
            "time_zone": self.time_zone,
            "from": self.start.isoformat(),
            "to": self.end.isoformat(),
        }
        tail: dict[str, object] = {
            "totals": {
                "consumption_kwh": kwh_text(self.consumption_kwh),
                "free_kwh": kwh_text(self.free_kwh),
                "over_cap_kwh": kwh_text(self.over_cap_kwh),
                "export_kwh": kwh_text(self.export_kwh),
            },
            "lines": [line.as_json() for line in self.lines],
            "subtotal": money_text(self.subtotal),
            "gst": money_text(self.gst),
            "total": money_text(self.total),
            "free_energy_value": money_text(self.free_energy_value),
        }
        return head, tail


def make_bill(plan: Plan, nmi: str, days: Iterable[DayRating]) -> Bill:
    """Price the rated local days of one NMI (at least one) into a bill."""
    rated = tuple(sorted(days, key=attrgetter("local_date")))
    if not rated:
        raise ValueError(f"a bill for NMI {nmi} needs at least one day")
    # The days as columns, one per DayRating field: zip(*) transposes them in one pass, and
    # each total is then one sum over a column.
    columns = dict(zip(DayRating._fields, zip(*rated, strict=True), strict=True))
    # Per band: zip(*) turns the days' per-band tuples into per-band columns the same way.
    charged_by_band = [sum(kwh, ZERO) for kwh in zip(*columns["charged_kwh"], strict=True)]
    free_by_band = [sum(kwh, ZERO) for kwh in zip(*columns["free_kwh_by_band"], strict=True)]
    free_total = sum(columns["free_kwh"], ZERO)
    export_total = sum(columns["export_kwh"], ZERO)
    controlled = sum(cast("tuple[Decimal, ...]", columns["controlled_load_kwh"]), ZERO)
    lines = usage_lines(
        plan,
        charged_by_band=charged_by_band,
        export_kwh=export_total,
        controlled_kwh=controlled,
        free_kwh=free_total,
        dates=[day.local_date for day in rated],
    )
    free_value = sum(
        (kwh * band.unit_price for band, kwh in zip(plan.bands, free_by_band, strict=True)),
        ZERO,
    )
    subtotal, gst, total = total_of(plan, lines)
    return Bill(
        nmi=nmi,
        plan_id=plan.id,
        time_zone=plan.zone_name,
        start=rated[0].local_date,
        end=rated[-1].local_date,
        days=rated,
        consumption_kwh=sum(columns["consumption_kwh"], ZERO),
        free_kwh=free_total,
        over_cap_kwh=sum(columns["over_cap_kwh"], ZERO),
        export_kwh=export_total,
        lines=tuple(lines),
        subtotal=subtotal,
        gst=gst,
        total=total,
        free_energy_value=to_cent(free_value),
    )


def usage_lines(
    plan: Plan,
    *,
    charged_by_band: Sequence[Decimal],
    export_kwh: Decimal,
    controlled_kwh: Decimal,
    free_kwh: Decimal,
    dates: Sequence[date],
    describe: bool = True,
) -> list[BillLine]:
    """A bill's lines (the module docstring's, in its order) from what its days add up to:
    the consumption charged at each of the plan's bands, the export, the controlled load and
    the free energy, over the local ``dates`` billed. ``make_bill`` prices a bill's days with
    it, and the better offer check a year of billing periods' totals (``describe`` False: the
    lines' descriptions left empty, for a total alone)."""
    charged: dict[str, Decimal] = {}
    bands: dict[str, Band] = {}
    for band, charged_kwh in zip(plan.bands, charged_by_band, strict=True):
        charged[band.type] = charged.get(band.type, ZERO) + charged_kwh
        bands.setdefault(band.type, band)
    lines = [
        line
        for band_type, kwh in charged.items()
        for line in _energy_lines(bands[band_type], kwh, len(dates), describe)
    ]
    lines.extend(_supply_lines(plan, dates, describe))
    if plan.controlled_load is not None:
        lines.extend(
            _controlled_load_lines(plan.controlled_load, controlled_kwh, len(dates), describe)
        )
    if plan.feed_in is not None:
        lines.append(
            BillLine(
                code="FEED_IN",
                description="Solar feed-in credit",
                quantity=export_kwh,
                unit="kWh",
                unit_price=plan.feed_in.unit_price,
                amount=ZERO - to_cent(export_kwh * plan.feed_in.unit_price),  # never -0.00
            )
        )
    if plan.free_window is not None:
        window = plan.free_window
        lines.append(
            BillLine(
                code="FREE_ENERGY",
                description=(
                    f"Free energy {window.label}, up to {kwh_text(window.cap_kwh)} kWh a day"
                    if describe
                    else ""
                ),
                quantity=free_kwh,
                unit="kWh",
                unit_price=ZERO,
                amount=to_cent(ZERO),
            )
        )
    return lines


def usage_total(
    plan: Plan,
    *,
    charged_by_band: Sequence[Decimal],
    export_kwh: Decimal,
    controlled_kwh: Decimal,
    dates: Sequence[date],
) -> Decimal:
    """The total, GST included, of ``usage_lines``' lines, without making those that are one
    price times one figure: the same amounts, each rounded as its line is, added up as
    ``total_of`` adds them (the better offer check prices a year under each offer with it;
    ``tests/domain/test_better_offer_totals.py`` holds it to ``make_bill``)."""
    if len(charged_by_band) != len(plan.bands):
        raise ValueError(
            f"usage of {len(charged_by_band)} bands priced under a plan of {len(plan.bands)}"
        )
    days = len(dates)
    subtotal = ZERO
    for band, indices in _band_types(plan):
        if len(indices) == 1:
            kwh = charged_by_band[indices[0]]
        else:
            kwh = sum([charged_by_band[index] for index in indices], ZERO)
        if band.steps is None:
            subtotal += (kwh * band.unit_price).quantize(CENT, ROUND_HALF_UP)
        else:
            lines = _energy_lines(band, kwh, days, describe=False)
            subtotal += sum((line.amount for line in lines), ZERO)
    if plan.supply_charges:
        lines = _supply_lines(plan, dates, describe=False)
        subtotal += sum((line.amount for line in lines), ZERO)
    else:
        subtotal += to_cent(days * plan.daily_supply_charge)
    load = plan.controlled_load
    if load is not None:
        subtotal += to_cent(controlled_kwh * load.unit_price)
        if load.daily_supply_charge is not None:
            subtotal += to_cent(days * load.daily_supply_charge)
    if plan.feed_in is not None:
        subtotal -= to_cent(export_kwh * plan.feed_in.unit_price)
    return subtotal + to_cent(subtotal * plan.gst_rate)


#: By plan (its id; the plan is kept with it, so the id is still its own): ``_band_types``.
_BAND_TYPES: dict[int, tuple[Plan, tuple[tuple[Band, tuple[int, ...]], ...]]] = {}


def _band_types(plan: Plan) -> tuple[tuple[Band, tuple[int, ...]], ...]:
    """``plan``'s band types in the order its bands first name them, each as its first band
    (whose prices every band of the type has) and the indices of its bands; worked out once a
    plan (``usage_total`` prices a year under each offer for every invoice)."""
    found = _BAND_TYPES.get(id(plan))
    if found is not None and found[0] is plan:
        return found[1]
    types: dict[str, tuple[Band, list[int]]] = {}
    for index, band in enumerate(plan.bands):
        types.setdefault(band.type, (band, []))[1].append(index)
    made = tuple((band, tuple(indices)) for band, indices in types.values())
    if len(_BAND_TYPES) >= 1024:  # plans come and go with their versions: start again
        _BAND_TYPES.clear()
    _BAND_TYPES[id(plan)] = (plan, made)
    return made


def total_of(plan: Plan, lines: Sequence[BillLine]) -> tuple[Decimal, Decimal, Decimal]:
    """The subtotal of ``lines``, its GST at ``plan``'s rate and the total, as a bill adds
    them."""
    subtotal = sum((line.amount for line in lines), ZERO)
    gst = to_cent(subtotal * plan.gst_rate)
    return subtotal, gst, subtotal + gst


def _supply_lines(plan: Plan, dates: Sequence[date], describe: bool = True) -> list[BillLine]:
    """``SUPPLY``: the days billed at the plan's daily charge; with seasonal charges, the days of
    each season at its own, as ``SUPPLY_2``, ``SUPPLY_3``, ... (the second, third, ... charge of
    the plan: the first seasonal one is number 2), and ``SUPPLY`` the days outside every season.
    A charge no day billed is at has no line (``SUPPLY`` included: a bill of summer days only
    under a plan with a summer charge has ``SUPPLY_2`` alone); the lines' days add up to the days
    billed."""
    days: dict[int, int] = {0: len(dates)}
    if plan.supply_charges:
        days = {}
        for local_date in dates:
            number, _ = plan.supply_charge_on(local_date)
            days[number] = days.get(number, 0) + 1
    lines = []
    for number in sorted(days):
        description, price = "Daily supply charge", plan.daily_supply_charge
        if number:
            charge = plan.supply_charges[number - 1]
            if describe:
                description += f", {_season_text(charge.dates)}"
            price = charge.unit_price
        lines.append(
            BillLine(
                code="SUPPLY" if number == 0 else f"SUPPLY_{number + 1}",
                description=description,
                quantity=Decimal(days[number]),
                unit="day",
                unit_price=price,
                amount=to_cent(days[number] * price),
            )
        )
    return lines


def _season_text(dates: tuple[int, int]) -> str:
    first, last = dates
    return f"{first // 100:02d}-{first % 100:02d} to {last // 100:02d}-{last % 100:02d}"


def _energy_lines(band: Band, kwh: Decimal, days: int, describe: bool = True) -> list[BillLine]:
    """A band type's charged energy: one line at its price, or with steps, its line (the first
    step, there even at 0 kWh, as a band's always is) and one line per further step that energy
    goes into. The steps' thresholds are pro rata to the days billed (``StepRates``); a step that
    no energy reaches, or of no width (two thresholds equal once rounded), has no line: never a
    0 kWh step line."""
    name = band.type.replace("_", " ").capitalize() if describe else ""
    if band.steps is None:
        return [
            BillLine(
                code=band.type,
                description=f"{name} energy" if describe else "",
                quantity=kwh,
                unit="kWh",
                unit_price=band.unit_price,
                amount=to_cent(kwh * band.unit_price),
            )
        ]
    thresholds = band.steps.thresholds(days)
    starts = (ZERO, *thresholds)
    ends = (*thresholds, None)
    prices = (band.unit_price, *(step.unit_price for step in band.steps.steps))
    lines = []
    for number, (start, end, price) in enumerate(zip(starts, ends, prices, strict=True), 1):
        if number > 1 and kwh <= start:
            break
        quantity = (kwh if end is None else min(kwh, end)) - start
        if number > 1 and not quantity:
            continue  # a step of no width: the next one starts where it does
        lines.append(
            BillLine(
                code=band.type if number == 1 else f"{band.type}_STEP{number}",
                description=(
                    f"{name} energy"
                    + (f", up to {kwh_text(end)} kWh" if number == 1 and end is not None else "")
                    + (f", step {number} from {kwh_text(start)} kWh" if number > 1 else "")
                    if describe
                    else ""
                ),
                quantity=max(quantity, ZERO),
                unit="kWh",
                unit_price=price,
                amount=to_cent(max(quantity, ZERO) * price),
            )
        )
    return lines


def _controlled_load_lines(
    load: ControlledLoad, kwh: Decimal, days: int, describe: bool = True
) -> list[BillLine]:
    """The controlled load's energy line, and its supply line where it has a charge."""
    lines = [
        BillLine(
            code="CONTROLLED_LOAD",
            description="Controlled load energy",
            quantity=kwh,
            unit="kWh",
            unit_price=load.unit_price,
            amount=to_cent(kwh * load.unit_price),
        )
    ]
    if load.daily_supply_charge is not None:
        lines.append(
            BillLine(
                code="CONTROLLED_LOAD_SUPPLY",
                description="Controlled load daily supply charge",
                quantity=Decimal(days),
                unit="day",
                unit_price=load.daily_supply_charge,
                amount=to_cent(days * load.daily_supply_charge),
            )
        )
    return lines
