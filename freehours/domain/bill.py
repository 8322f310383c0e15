"""A bill: rated local days priced into lines, with GST, in the JSON of DESIGN.md section 4.

Lines, in this order:

- one per time-of-use band type (plan order): the consumption charged at that band, outside the
  window and over the cap, at its unit price;
- ``SUPPLY``: the daily supply charge, quantity = days billed (unit ``day``);
- ``FEED_IN`` (plans with a feed-in price): export x feed-in price, as a negative amount;
- ``FREE_ENERGY`` (plans with a free window): the free kWh, unit price 0, amount 0; what they
  would have cost is ``free_energy_value``.

Every line's amount is rounded to the cent, half up; ``subtotal`` is the sum of the lines,
``gst = subtotal x gst_rate`` rounded the same way, ``total = subtotal + gst``.
``free_energy_value`` prices each free kWh at the band in force at its moment, rounded to the cent.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from decimal import ROUND_HALF_UP, Decimal

from freehours.domain.plan import Plan
from freehours.domain.rating import ZERO, DayRating

CENT = Decimal("0.01")


def to_cent(amount: Decimal) -> Decimal:
    """Money rounded to the cent, half up (as every bill line is)."""
    return amount.quantize(CENT, ROUND_HALF_UP)


def decimal_text(value: Decimal) -> str:
    """A decimal as the bill's JSON writes it: plain notation, no exponent."""
    return format(value, "f")


def kwh_text(value: Decimal) -> str:
    """Energy as the bill writes it: exact, without trailing zeros ("12.3", "0")."""
    text = str(value)
    if (text[-1] == "0" and "." in text) or "E" in text:
        return format(value.normalize(), "f") if value else "0"
    return text


@dataclass(frozen=True, slots=True)
class BillLine:
    """One line of a bill."""

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
            "amount": decimal_text(self.amount),
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
    lines: tuple[BillLine, ...]
    subtotal: Decimal
    gst: Decimal
    total: Decimal
    free_energy_value: Decimal

    @property
    def consumption_kwh(self) -> Decimal:
        return sum((day.consumption_kwh for day in self.days), ZERO)

    @property
    def free_kwh(self) -> Decimal:
        return sum((day.free_kwh for day in self.days), ZERO)

    @property
    def over_cap_kwh(self) -> Decimal:
        return sum((day.over_cap_kwh for day in self.days), ZERO)

    @property
    def export_kwh(self) -> Decimal:
        return sum((day.export_kwh for day in self.days), ZERO)

    def as_json(self) -> dict[str, object]:
        """The bill as ``freehours bill --format json`` and the API show it (decimals as text)."""
        return {
            "nmi": self.nmi,
            "plan": self.plan_id,
            "time_zone": self.time_zone,
            "from": self.start.isoformat(),
            "to": self.end.isoformat(),
            "days": [
                {
                    "date": day.local_date.isoformat(),
                    "consumption_kwh": kwh_text(day.consumption_kwh),
                    "free_kwh": kwh_text(day.free_kwh),
                    "over_cap_kwh": kwh_text(day.over_cap_kwh),
                    "export_kwh": kwh_text(day.export_kwh),
                    "missing_intervals": day.missing_intervals,
                }
                for day in self.days
            ],
            "totals": {
                "consumption_kwh": kwh_text(self.consumption_kwh),
                "free_kwh": kwh_text(self.free_kwh),
                "over_cap_kwh": kwh_text(self.over_cap_kwh),
                "export_kwh": kwh_text(self.export_kwh),
            },
            "lines": [line.as_json() for line in self.lines],
            "subtotal": decimal_text(self.subtotal),
            "gst": decimal_text(self.gst),
            "total": decimal_text(self.total),
            "free_energy_value": decimal_text(self.free_energy_value),
        }


def make_bill(plan: Plan, nmi: str, days: Iterable[DayRating]) -> Bill:
    """Price the rated local days of one NMI (at least one) into a bill."""
    rated = tuple(sorted(days, key=lambda day: day.local_date))
    if not rated:
        raise ValueError(f"a bill for NMI {nmi} needs at least one day")
    # Per band over the days: zip(*) turns the days' per-band tuples into per-band columns.
    charged_by_band = [
        sum(kwh, ZERO) for kwh in zip(*(day.charged_kwh for day in rated), strict=True)
    ]
    free_by_band = [
        sum(kwh, ZERO) for kwh in zip(*(day.free_kwh_by_band for day in rated), strict=True)
    ]
    charged: dict[str, Decimal] = {}
    prices: dict[str, Decimal] = {}
    free_value = ZERO
    for band, charged_kwh, free_kwh in zip(plan.bands, charged_by_band, free_by_band, strict=True):
        charged[band.type] = charged.get(band.type, ZERO) + charged_kwh
        prices[band.type] = band.unit_price
        free_value += free_kwh * band.unit_price
    lines = [
        BillLine(
            code=band_type,
            description=f"{band_type.replace('_', ' ').capitalize()} energy",
            quantity=kwh,
            unit="kWh",
            unit_price=prices[band_type],
            amount=to_cent(kwh * prices[band_type]),
        )
        for band_type, kwh in charged.items()
    ]
    lines.append(
        BillLine(
            code="SUPPLY",
            description="Daily supply charge",
            quantity=Decimal(len(rated)),
            unit="day",
            unit_price=plan.daily_supply_charge,
            amount=to_cent(len(rated) * plan.daily_supply_charge),
        )
    )
    if plan.feed_in is not None:
        export = sum((day.export_kwh for day in rated), ZERO)
        lines.append(
            BillLine(
                code="FEED_IN",
                description="Solar feed-in credit",
                quantity=export,
                unit="kWh",
                unit_price=plan.feed_in.unit_price,
                amount=ZERO - to_cent(export * plan.feed_in.unit_price),  # never -0.00
            )
        )
    if plan.free_window is not None:
        window = plan.free_window
        lines.append(
            BillLine(
                code="FREE_ENERGY",
                description=(
                    f"Free energy {window.label}, up to {kwh_text(window.cap_kwh)} kWh a day"
                ),
                quantity=sum((day.free_kwh for day in rated), ZERO),
                unit="kWh",
                unit_price=ZERO,
                amount=to_cent(ZERO),
            )
        )
    subtotal = sum((line.amount for line in lines), ZERO)
    gst = to_cent(subtotal * plan.gst_rate)
    return Bill(
        nmi=nmi,
        plan_id=plan.id,
        time_zone=plan.zone_name,
        start=rated[0].local_date,
        end=rated[-1].local_date,
        days=rated,
        lines=tuple(lines),
        subtotal=subtotal,
        gst=gst,
        total=subtotal + gst,
        free_energy_value=to_cent(free_value),
    )
