"""Many plans' totals in one pass (``ManyPlans``) are the engine's (``MeterRating``'s days
added up) for every plan it answers, over random plans and data around the clock changes
(hypothesis); and it answers for the plans a better offer check prices on ordinary data."""

from __future__ import annotations

import random
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from freehours.domain.better_offer import totals_of
from freehours.domain.many_plans import ManyPlans
from freehours.domain.plan import clock_text
from freehours.domain.profiles import DayProfiles
from freehours.domain.rating import MeterRating
from freehours.domain.reads import IntervalDay
from freehours.plans import builtin_document
from freehours.plans.document import parse_plan
from tests.domain.rating_cases import NMI, document_for, nem_day

ANCHORS = [date(2026, 4, 4), date(2026, 10, 3), date(2026, 7, 14), date(2027, 1, 14)]


@st.composite
def plan_sets(draw: st.DrawFn) -> list[dict[str, Any]]:
    """One to five plans of one region, their edges on a grid of 1, 15, 30 or 60 minutes,
    sometimes one on NEM time, sometimes with a controlled load or other consumption."""
    region = draw(st.sampled_from(["NSW", "SEQ", "SA", "VIC"]))
    grid = draw(st.sampled_from([60, 30, 30, 15, 1]))
    documents = []
    for _ in range(draw(st.integers(1, 5))):

        def minute(low: int, high: int) -> int:
            return draw(st.integers(low // grid, high // grid)) * grid

        start = minute(0, 23 * 60)
        end = max(start + grid, minute(start + grid, 24 * 60))
        peak_start = minute(0, 23 * 60)
        peak_end = max(peak_start + grid, minute(peak_start + grid, 24 * 60))
        fields: dict[str, Any] = {
            "time_zone": draw(st.sampled_from(["LOCAL", "LOCAL", "LOCAL", "AEST"])),
            "time_of_use": [
                {
                    "type": "PEAK",
                    "unit_price": "0.50",
                    "periods": [
                        {
                            "days": [draw(st.sampled_from(["WEEKDAYS", "WEEKENDS", "ALL"]))],
                            "start": clock_text(peak_start),
                            "end": clock_text(min(peak_end, 24 * 60)),
                        }
                    ],
                },
                {
                    "type": "OFF_PEAK",
                    "unit_price": "0.20",
                    "periods": [{"days": ["ALL"], "start": "00:00", "end": "24:00"}],
                },
            ],
        }
        if draw(st.booleans()):
            fields["free_window"] = {
                "start": clock_text(start),
                "end": clock_text(min(end, 24 * 60)),
                "cap_kwh": str(draw(st.sampled_from([Decimal("0.5"), Decimal(4), Decimal(24)]))),
            }
        if draw(st.booleans()):
            fields["controlled_load"] = {"unit_price": "0.13"}
        documents.append(document_for(region, **fields))
    return documents


@st.composite
def meter_rows(draw: st.DrawFn) -> list[IntervalDay]:
    anchor = draw(st.sampled_from(ANCHORS))
    chance = random.Random(draw(st.integers(0, 2**32)))
    gaps = draw(st.booleans())
    rows = []
    for suffix in draw(st.sets(st.sampled_from(["E1", "E2", "B1"]), min_size=1)):
        minutes = draw(st.sampled_from([5, 15, 30]))
        for offset in range(draw(st.integers(1, 4))):
            values: list[Decimal | None] = [
                Decimal(chance.randrange(0, 900)) / 1000 for _ in range(24 * 60 // minutes)
            ]
            if gaps and chance.random() < 0.3:
                values[chance.randrange(len(values))] = None
            rows.append(nem_day(anchor + timedelta(days=offset), values, suffix=suffix))
    return rows


@settings(max_examples=150, deadline=None)
@given(documents=plan_sets(), rows=meter_rows(), trim=st.integers(0, 2))
def test_every_plan_answered_is_answered_as_the_engine_rates_it(
    documents: list[dict[str, Any]], rows: list[IntervalDay], trim: int
) -> None:
    plans = [parse_plan(document, source="test") for document in documents]
    profiles = [DayProfiles(plan) for plan in plans]
    days = sorted({row.day for row in rows})
    first, last = days[0] + timedelta(days=trim % 2), days[-1] + timedelta(days=trim // 2)
    if first > last:
        first = last
    answers = ManyPlans(profiles).totals(NMI, rows, first, last)
    dates = [first + timedelta(days=n) for n in range((last - first).days + 1)]
    for profile, answer in zip(profiles, answers, strict=True):
        if answer is None:
            continue
        rating = MeterRating(NMI, profile)
        for row in rows:
            rating.add(row)
        assert answer == totals_of(list(rating.days(dates).values()))


def test_the_plans_of_a_check_are_answered_on_ordinary_data() -> None:
    documents = [builtin_document("sso-nsw")]
    for n in range(5):
        offer = builtin_document("sso-nsw")
        offer["daily_supply_charge"] = f"{0.9 + n / 10:.4f}"
        for band in offer["time_of_use"]:
            band["unit_price"] = f"{0.2 + n / 100:.4f}"
        documents.append(offer)
    documents.append(document_for("NSW"))  # a single rate, no window
    plans = [parse_plan(document, source="test") for document in documents]
    profiles = [DayProfiles(plan) for plan in plans]
    chance = random.Random(7)
    july = [date(2026, 7, 1) + timedelta(days=n) for n in range(31)]
    rows = [
        nem_day(day, [Decimal(chance.randrange(0, 900)) / 1000 for _ in range(48)], suffix=s)
        for day in [july[0] - timedelta(days=1), *july, july[-1] + timedelta(days=1)]
        for s in ("E1", "B1")
    ]
    answers = ManyPlans(profiles).totals(NMI, rows, july[0], july[-1])
    assert None not in answers
    for profile, answer in zip(profiles, answers, strict=True):
        rating = MeterRating(NMI, profile)
        for row in rows:
            rating.add(row)
        assert answer == totals_of(list(rating.days(july).values()))
