"""A household's days of the free window: what each day used, what it had free, what of its
free allowance it left unused, and what moving that much of its use into the window would have
saved at the prices it paid (the customer's page and ``GET /v1/customers/{nmi}/usage`` show the
same figures).

How the saving is worked out (docs/api.md, "A household's days"): a day's unused free energy is
the window's cap less the free energy it had; the use that could have moved into the window is
at most the energy charged outside it that day; its price is what that day's charged energy cost
on average, each band's kWh at its unit price (a stepped band at its price before its first
step), GST included where the plan charges it. The saving is that many kWh at that price,
rounded to the cent.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from decimal import ROUND_HALF_UP, Decimal

from freehours.domain.bill import kwh_text, money_text
from freehours.domain.plan import Plan
from freehours.domain.rating import ZERO, DayRating

_CENT = Decimal("0.01")


@dataclass(frozen=True, slots=True)
class DayUse:
    """One local day of a household under its plan (kWh and AUD)."""

    day: date
    use_kwh: Decimal
    free_kwh: Decimal
    #: The cap less the free energy; None under a plan without a free window.
    unused_free_kwh: Decimal | None
    over_cap_kwh: Decimal
    #: Intervals of the day with no meter value: its figures count only what was read.
    missing_intervals: int
    #: What moving use into the window, up to the unused free energy, would have saved at the
    #: day's average price of charged energy; None without a window.
    could_have_saved: Decimal | None

    def as_json(self) -> dict[str, object]:
        return {
            "date": self.day.isoformat(),
            "use_kwh": kwh_text(self.use_kwh),
            "free_kwh": kwh_text(self.free_kwh),
            "unused_free_kwh": _maybe(self.unused_free_kwh),
            "over_cap_kwh": kwh_text(self.over_cap_kwh),
            "missing_intervals": self.missing_intervals,
            "could_have_saved": _money(self.could_have_saved),
        }


def days_of_use(plan: Plan, days: Iterable[DayRating]) -> list[DayUse]:
    """Each of ``days`` (rated under ``plan``) as the household's page shows it."""
    window = plan.free_window
    gst = 1 + plan.gst_rate
    prices = [band.unit_price for band in plan.bands]
    found = []
    for day in days:
        unused = saved = None
        if window is not None:
            unused = max(window.cap_kwh - day.free_kwh, ZERO)
            charged = sum(day.charged_kwh, ZERO)
            movable = min(unused, charged - day.over_cap_kwh)
            saved = ZERO
            if movable > 0 and charged > 0:
                cost = sum(
                    (kwh * price for kwh, price in zip(day.charged_kwh, prices, strict=True)),
                    ZERO,
                )
                saved = (movable * cost * gst / charged).quantize(_CENT, ROUND_HALF_UP)
        found.append(
            DayUse(
                day.local_date,
                day.consumption_kwh,
                day.free_kwh,
                unused,
                day.over_cap_kwh,
                day.missing_intervals,
                saved,
            )
        )
    return found


@dataclass(frozen=True, slots=True)
class UseTotals:
    """``DayUse`` added up over days."""

    use_kwh: Decimal
    free_kwh: Decimal
    unused_free_kwh: Decimal | None
    over_cap_kwh: Decimal
    could_have_saved: Decimal | None

    @classmethod
    def of(cls, days: list[DayUse]) -> UseTotals:
        windowed = bool(days) and days[0].unused_free_kwh is not None
        return cls(
            sum((d.use_kwh for d in days), ZERO),
            sum((d.free_kwh for d in days), ZERO),
            sum((d.unused_free_kwh or ZERO for d in days), ZERO) if windowed else None,
            sum((d.over_cap_kwh for d in days), ZERO),
            sum((d.could_have_saved or ZERO for d in days), ZERO) if windowed else None,
        )

    @property
    def free_share(self) -> Decimal | None:
        """The free energy as a whole percentage of the use; None without use."""
        if self.use_kwh <= 0:
            return None
        return (self.free_kwh * 100 / self.use_kwh).quantize(Decimal(1), ROUND_HALF_UP)

    def as_json(self) -> dict[str, object]:
        share = self.free_share
        return {
            "use_kwh": kwh_text(self.use_kwh),
            "free_kwh": kwh_text(self.free_kwh),
            "unused_free_kwh": _maybe(self.unused_free_kwh),
            "over_cap_kwh": kwh_text(self.over_cap_kwh),
            "could_have_saved": _money(self.could_have_saved),
            "free_share_percent": None if share is None else int(share),
        }


def _maybe(value: Decimal | None) -> str | None:
    return None if value is None else kwh_text(value)


def _money(value: Decimal | None) -> str | None:
    return None if value is None else money_text(value)
