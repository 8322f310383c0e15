"""Billing a NEM12 file's meters under a plan, as ``freehours bill`` bills them and a comparison
(``freehours compare``, ``POST /v1/comparisons``) bills them under each plan: which meters can be
billed and why the others cannot, the local days each is billed for, the bills, and the notes
(a first or last day only partly in the data; a meter not billed)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path

from freehours.domain.bill import Bill, make_bill
from freehours.domain.errors import InputError
from freehours.domain.plan import Plan
from freehours.domain.rating import MeterRating


def billable(
    plan: Plan, meters: dict[str, MeterRating]
) -> tuple[dict[str, MeterRating], list[str]]:
    """The meters of ``meters`` (a file's, rated under ``plan``) that can be billed, and a note
    for each that cannot."""
    notes = [not_billed(plan, rating) for rating in meters.values() if not rating.rated]
    return {meter: rating for meter, rating in meters.items() if rating.rated}, notes


def bills_of(
    plan: Plan,
    ratings: dict[str, MeterRating],
    first: date | None,
    last: date | None,
    source: Path,
    *,
    notes: list[str],
) -> Iterator[Bill]:
    """Each meter's bill, in order, made as the caller asks for it; each meter's rating is let
    go once its bill is made. (The caller makes every bill before it writes anything.) A first
    or last day billed that the data covers only in part adds a line to ``notes``."""
    spans: dict[tuple[date, date], list[date]] = {}  # one list of dates per distinct span
    for meter in list(ratings):
        rating = ratings.pop(meter)
        span = billed_span(rating, first, last, source)
        local_dates = spans.get(span)
        if local_dates is None:
            start, end = span
            local_dates = spans[span] = [
                start + timedelta(days=n) for n in range((end - start).days + 1)
            ]
        days = rating.days(local_dates)
        notes.extend(
            partial(rating, boundary, days[boundary].missing_intervals)
            for boundary in sorted(set(span))
            if rating.is_partial(boundary) and days[boundary].missing_intervals
        )
        yield make_bill(plan, meter, days.values())


def not_billed(plan: Plan, rating: MeterRating) -> str:
    """Why an NMI of the file has no bill: its suffixes, and the plan's."""
    suffixes = ", ".join(f"{suffix} {why}" for suffix, why in rating.unrated_suffixes().items())
    consumption = (
        "every suffix starting with E"
        if plan.consumption_suffixes is None
        else ", ".join(plan.consumption_suffixes)
    )
    return (
        f"NMI {rating.nmi} is not billed: no consumption or export channel in kWh (its"
        f" suffixes: {suffixes}; the plan's consumption suffixes: {consumption}; export: every"
        " suffix starting with B)"
    )


#: The runs of missing intervals a note names before it says how many more there are.
_RUNS_NAMED = 3


def partial(rating: MeterRating, day: date, missing: int) -> str:
    """The note of a day billed that the data covers only in part."""
    runs = rating.missing_runs(day)
    named = ", ".join(
        f"{start:%H:%M}-{'24:00' if end.date() > day else format(end, '%H:%M')}"
        for start, end in runs[:_RUNS_NAMED]
    )
    if len(runs) > _RUNS_NAMED:
        named += f" and {len(runs) - _RUNS_NAMED} more"
    return (
        f"NMI {rating.nmi}: {day} is only partly in the data: {missing} of its"
        f" {rating.intervals(day)} intervals have no value ({named}, {rating.plan.zone})"
    )


def billed_span(
    rating: MeterRating, first: date | None, last: date | None, source: Path
) -> tuple[date, date]:
    """The first and last local days to bill: ``first`` and ``last``, each defaulting to the
    first and last local day that the NMI's data touches."""
    data_first, data_last = rating.local_date_range()
    first = data_first if first is None else first
    last = data_last if last is None else last
    if first > last:
        raise InputError(
            f"{source}: NMI {rating.nmi} has data from {data_first} to {data_last}, "
            f"nothing to bill from {first} to {last}"
        )
    return first, last
