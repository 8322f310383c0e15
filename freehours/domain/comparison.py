"""Plans compared on a household's own data (``freehours compare``, ``POST /v1/comparisons``):
each plan's bills of the data, as ``freehours bill`` makes them, ranked cheapest first, with
the cost per year and the free window's unused room (docs/cli.md, Comparisons)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

from freehours.domain.bill import Bill, decimal_text, kwh_text
from freehours.domain.billing import billable, bills_of
from freehours.domain.errors import InputError
from freehours.domain.plan import Plan
from freehours.domain.rating import rate_meters
from freehours.domain.reads import IntervalDay

#: Plans one comparison rates: each is a pass over the data.
MAX_PLANS = 50
_CENT = Decimal("0.01")
_YEAR = 365


@dataclass(frozen=True, slots=True)
class Rated:
    """One plan's figures for one NMI: its bill, and what a comparison adds to it."""

    plan: Plan
    bill: Bill
    per_year: Decimal
    room_kwh: Decimal | None  # None: the plan has no free window

    def as_json(self, rank: int) -> dict[str, object]:
        return {
            "rank": rank,
            "plan_id": self.plan.id,
            "plan_name": self.plan.name,
            "region": self.plan.region,
            "from": self.bill.start.isoformat(),
            "to": self.bill.end.isoformat(),
            "days": len(self.bill.days),
            "total": decimal_text(self.bill.total),
            "per_year": decimal_text(self.per_year),
            "free_kwh": kwh_text(self.bill.free_kwh),
            "free_value": decimal_text(self.bill.free_energy_value),
            "room_kwh": None if self.room_kwh is None else kwh_text(self.room_kwh),
        }


def rated(plan: Plan, bill: Bill) -> Rated:
    """``bill`` (under ``plan``) with the year's cost and the window's unused room."""
    per_year = (bill.total * _YEAR / len(bill.days)).quantize(_CENT, ROUND_HALF_UP)
    window = plan.free_window
    room = None
    if window is not None:
        room = sum(
            (
                min(day.outside_window_kwh, window.cap_kwh - day.free_kwh)
                for day in bill.days
                if day.free_kwh < window.cap_kwh
            ),
            Decimal(0),
        )
    return Rated(plan, bill, per_year, room)


def ranked(rows: list[Rated]) -> list[Rated]:
    """Cheapest over the data first; a tie by plan id."""
    return sorted(rows, key=lambda row: (row.bill.total, row.plan.id))


def compare_days(
    plans: Sequence[Plan],
    days: Sequence[IntervalDay],
    first: date | None,
    last: date | None,
    source: Path,
) -> tuple[dict[str, list[Rated]], list[str]]:
    """Each NMI of ``days`` (a file's) rated under each of ``plans``, ranked; and the notes
    (each said once). ``InputError`` where a plan can bill none of the NMIs."""
    by_nmi: dict[str, list[Rated]] = {}
    notes: list[str] = []
    for plan in plans:
        ratings, plan_notes = billable(plan, rate_meters(plan, days))
        if not ratings:
            why = plan_notes[-1] if plan_notes else "no consumption or export data"
            raise InputError(f"{source}: {why}")
        for bill in bills_of(plan, ratings, first, last, source, notes=plan_notes):
            by_nmi.setdefault(bill.nmi, []).append(rated(plan, bill))
        notes += [note for note in plan_notes if note not in notes]
    return {meter: ranked(rows) for meter, rows in sorted(by_nmi.items())}, notes
