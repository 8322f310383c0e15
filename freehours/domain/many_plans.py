"""Many plans' usage totals of one meter's days, in one pass over its values: what the better
offer check needs of a billing period under the customer's plan and each offer
(``freehours.domain.better_offer.UsageTotals``), without rating the period once per plan.

**How.** For a NEM date, every plan's day profile cuts its intervals into runs of one place
(local day, band, inside the free window or not). The cuts of all the plans together cut the
day into *atoms*: each atom has one place under every plan. A row's values are added once per
atom (``sum`` of a slice), the atoms of the NEM dates of one shape (the same profile object under
every plan) are added up together, and each plan takes the atoms of its bands from those sums.

**Exactly the engine's.** Totals are sums of the same exact values, so they equal
``totals_of`` of ``MeterRating``'s days whenever the engine would only add them up: a plan is
left to the engine (``None`` in the answer) where that is not so, when an interval is cut by one
of its edges (the engine shares it pro rata), when a day's consumption in its free window is over
its cap (the engine charges what is over in time order), or when it is on another clock than the
first plan; and every plan is, for a row with a missing value (the engine counts it).
``tests/domain/test_many_plans.py`` holds the two to each other over random plans and data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from itertools import pairwise
from operator import add
from typing import NamedTuple, cast

from freehours.domain.better_offer import UsageTotals
from freehours.domain.plan import Plan
from freehours.domain.profiles import DayProfiles
from freehours.domain.rating import ZERO
from freehours.domain.reads import IntervalDay

#: A channel's part under a plan: consumption, export, controlled load, or not rated.
_CONSUMPTION, _EXPORT, _CONTROLLED, _IGNORED = range(4)
_FLAT = (_EXPORT, _CONTROLLED)

#: A place: (local day, band, inside the free window).
_Place = tuple[int, int, bool]
#: Where atom sums are kept: (shape key, suffix, which of the shape's local days are wanted).
_SumKey = tuple[tuple[int, ...], str, tuple[bool, ...]]
#: What a row does (``ManyPlans._row_plan``): its shape (None: nothing), where its values are
#: added up, and (window group, local date, its intervals in the window) for each window.

#: Rows' plans kept (a batch's NEM dates, channels and periods: a few hundred).
_ROW_PLANS_KEPT = 100_000
#: The slots of export and controlled load (a band's is its index).
_EXPORT_SLOT, _CONTROLLED_SLOT = -1, -2


@dataclass(frozen=True, slots=True)
class _Shape:
    """A NEM date (at one interval length) under every plan: its atoms, and each plan's place
    for each atom (None for a plan that cuts one of its intervals)."""

    key: tuple[int, ...]
    local_dates: tuple[date, ...]
    atoms: tuple[slice, ...]
    places: tuple[tuple[_Place, ...] | None, ...]


class _RowPlan(NamedTuple):
    shape: _Shape | None
    key: _SumKey | None
    windows: tuple[tuple[int, date, slice], ...]
    #: ``_EXPORT`` or ``_CONTROLLED`` where the row is that for every plan (then only its
    #: wanted days' sum matters, the slices ``wanted``), else -1.
    flat: int = -1
    wanted: tuple[slice, ...] = ()


class ManyPlans:
    """The usage totals of meters' days under each of ``profiles``' plans. Keep one for many
    meters: a NEM date's shape is worked out once."""

    def __init__(self, profiles: Sequence[DayProfiles]) -> None:
        self.profiles = list(profiles)
        self.plans: list[Plan] = [p.plan for p in self.profiles]
        zone = self.plans[0].zone_name if self.plans else ""
        self._same_clock = [plan.zone_name == zone for plan in self.plans]
        self._shapes: dict[tuple[date, int], _Shape] = {}
        # (shape key, suffix, mask, plan) -> (slot, atom indices) to add, slot -1 export and
        # -2 controlled load
        self._takes: dict[tuple[object, ...], tuple[tuple[int, tuple[int, ...]], ...]] = {}
        self._windows: dict[tuple[object, ...], tuple[tuple[int, slice], ...]] = {}
        self._row_plans: dict[tuple[date, int, str, date, date], _RowPlan] = {}
        self._classes: dict[str, tuple[int, ...]] = {}
        self._interned: dict[tuple[_Place, ...], tuple[_Place, ...]] = {}
        # Plans whose free window is the same (and on the same clock) see the same energy in it
        # every day: one of them stands for all, whatever their bands.
        groups: dict[tuple[object, ...], list[int]] = {}
        for index, plan in enumerate(self.plans):
            window = plan.free_window
            if window is not None and self._same_clock[index]:
                groups.setdefault((plan.zone_name, window.start, window.end), []).append(index)
        self._window_groups = [(members[0], members) for members in groups.values()]

    def totals(
        self, nmi: str, rows: Sequence[IntervalDay], first: date, last: date
    ) -> list[UsageTotals | None]:
        """Each plan's totals of ``rows`` (one meter's, each channel's NEM date once) over the
        local days ``first`` to ``last``; None for a plan left to the engine."""
        count = len(self.plans)
        usable = list(self._same_clock)
        # (shape key, suffix, mask) -> the values of every NEM date of that shape, added up
        added: dict[_SumKey, list[Decimal]] = {}
        shapes: dict[tuple[int, ...], _Shape] = {}
        suffixes: set[str] = set()
        window: list[dict[date, Decimal]] = [{} for _ in self._window_groups]
        flats = {_EXPORT: ZERO, _CONTROLLED: ZERO}
        plans_of = self._row_plans
        for row in rows:
            known_row = plans_of.get((row.day, row.interval_minutes, row.suffix, first, last))
            if known_row is None:
                if row.uom != "KWH":
                    continue
                known_row = self._row_plan(row, first, last)
            if row.nmi != nmi or row.uom != "KWH":
                continue
            shape, key, windows, flat, wanted = known_row
            if shape is None or key is None:  # not rated under any plan, or no day wanted
                continue
            values = cast("list[Decimal]", row.values)
            suffixes.add(row.suffix)
            shapes[shape.key] = shape
            try:
                if flat >= 0:
                    for part in wanted:
                        flats[flat] += sum(values[part], ZERO)
                    continue
                known = added.get(key)
                added[key] = list(values) if known is None else list(map(add, known, values))
                for group, day, inside in windows:
                    energy = sum(values[inside], ZERO)
                    window[group][day] = window[group].get(day, ZERO) + energy
            except TypeError:  # a missing value: the engine counts it
                return [None] * count
        try:
            sums = {
                key: [sum(values[atom], ZERO) for atom in shapes[key[0]].atoms]
                for key, values in added.items()
            }
        except TypeError:  # a missing value on a shape's only row
            return [None] * count
        for shape in shapes.values():
            for index in range(count):
                if shape.places[index] is None:
                    usable[index] = False
        for group, (stand_in, members) in enumerate(self._window_groups):
            worst = max(window[group].values(), default=ZERO)
            for index in members:
                cap = self.plans[index].free_window
                same_channels = all(
                    self._classes[suffix][index] == self._classes[suffix][stand_in]
                    for suffix in suffixes
                )
                if not usable[stand_in] or not same_channels or cap is None or worst > cap.cap_kwh:
                    usable[index] = False
        # Plans that place every atom alike (offers on one network's tariff periods, say) and
        # read the channels alike have the same totals: worked out once.
        answers: list[UsageTotals | None] = []
        alike: dict[tuple[object, ...], UsageTotals] = {}
        for index in range(count):
            if not usable[index]:
                answers.append(None)
                continue
            signature = (
                len(self.plans[index].bands),
                *(id(shape.places[index]) for shape in shapes.values()),
                *(self._classes[suffix][index] for suffix in sorted(suffixes)),
            )
            found = alike.get(signature)
            if found is None:
                found = alike[signature] = self._plan_totals(
                    index, sums, shapes, flats, first=first, last=last
                )
            answers.append(found)
        return answers

    # --- the parts ---------------------------------------------------------------------------

    def _plan_totals(
        self,
        index: int,
        sums: dict[_SumKey, list[Decimal]],
        shapes: dict[tuple[int, ...], _Shape],
        flats: dict[int, Decimal],
        *,
        first: date,
        last: date,
    ) -> UsageTotals:
        charged = [ZERO] * len(self.plans[index].bands)
        export = flats[_EXPORT]
        controlled = flats[_CONTROLLED]
        for (shape_key, suffix, mask), atom_sums in sums.items():
            for slot, atoms in self._takes_of(shapes[shape_key], suffix, mask, index):
                energy = sum([atom_sums[i] for i in atoms], ZERO)
                if slot >= 0:
                    charged[slot] += energy
                elif slot == _EXPORT_SLOT:
                    export += energy
                else:
                    controlled += energy
        return UsageTotals(first, last, tuple(charged), export, controlled)

    def _row_plan(self, row: IntervalDay, first: date, last: date) -> _RowPlan:
        """What a row of its NEM date, interval length and suffix does when the days wanted are
        ``first`` to ``last``: its shape and where its values are added up, and the window
        energy it gives each group's days; made once and kept."""
        classes = self._classes.get(row.suffix) or self._classify(row.suffix)
        shape = self._shapes.get((row.day, row.interval_minutes)) or self._shape(row)
        mask = tuple(first <= day <= last for day in shape.local_dates)
        plan = _RowPlan(None, None, ())
        if any(mask) and not all(part == _IGNORED for part in classes):
            windows = tuple(
                (group, shape.local_dates[local_day], inside)
                for group, (stand_in, _) in enumerate(self._window_groups)
                if classes[stand_in] == _CONSUMPTION
                for local_day, inside in self._window_of(shape, stand_in)
                if mask[local_day]
            )
            plan = _RowPlan(shape, (shape.key, row.suffix, mask), windows)
            places = next(
                (
                    p
                    for p, same in zip(shape.places, self._same_clock, strict=True)
                    if same and p is not None
                ),
                None,
            )
            if places is not None and len(set(classes)) == 1 and classes[0] in _FLAT:
                # Export or controlled load under every plan: where in the day it falls does
                # not matter, only which local days are wanted.
                spans: list[slice] = []
                for atom, (local_day, _, _) in zip(shape.atoms, places, strict=True):
                    if not mask[local_day]:
                        continue
                    if spans and spans[-1].stop == atom.start:
                        spans[-1] = slice(spans[-1].start, atom.stop)
                    else:
                        spans.append(atom)
                wanted = tuple(spans)
                plan = plan._replace(flat=classes[0], wanted=wanted)
        if len(self._row_plans) >= _ROW_PLANS_KEPT:
            self._row_plans.clear()
        self._row_plans[(row.day, row.interval_minutes, row.suffix, first, last)] = plan
        return plan

    def _classify(self, suffix: str) -> tuple[int, ...]:
        """What ``suffix`` is under each plan, as ``MeterRating`` decides it."""
        classes = []
        for plan in self.plans:
            if plan.is_controlled_load(suffix):
                classes.append(_CONTROLLED)
            elif plan.is_consumption(suffix):
                classes.append(_CONSUMPTION)
            elif plan.is_export(suffix):
                classes.append(_EXPORT)
            else:
                classes.append(_IGNORED)
        found = self._classes[suffix] = tuple(classes)
        return found

    def _shape(self, row: IntervalDay) -> _Shape:
        """The shape of ``row``'s NEM date at its interval length, made once."""
        profiles = [p.get(row.day, row.interval_minutes) for p in self.profiles]
        key = (row.interval_minutes, *(id(profile.runs) for profile in profiles))
        cuts = {0, len(row.values)}
        for profile in profiles:
            for run in profile.runs:
                cuts.update((run.first, run.stop))
            for interval, _ in profile.splits:
                cuts.update((interval, interval + 1))
        edges = sorted(cuts)
        atoms = tuple(slice(a, b) for a, b in pairwise(edges))
        places: list[tuple[_Place, ...] | None] = []
        for profile in profiles:
            if profile.splits:
                places.append(None)
                continue
            found = []
            for atom in atoms:
                run = next(r for r in profile.runs if r.first <= atom.start < r.stop)
                found.append((run.local_day, run.band, run.in_window))
            # One object for equal places, so that plans placing atoms alike are seen to.
            places.append(self._interned.setdefault(tuple(found), tuple(found)))
        shape = _Shape(key, profiles[0].local_dates, atoms, tuple(places))
        self._shapes[(row.day, row.interval_minutes)] = shape
        return shape

    def _takes_of(
        self, shape: _Shape, suffix: str, mask: tuple[bool, ...], index: int
    ) -> tuple[tuple[int, tuple[int, ...]], ...]:
        """Where each atom of ``suffix``'s sums goes under plan ``index``: (slot, atoms), slot a
        band's index, -1 export or -2 controlled load; inside the window, nowhere (free)."""
        key = (shape.key, suffix, mask, index)
        found = self._takes.get(key)
        if found is None:
            places = shape.places[index]
            assert places is not None
            part = self._classes[suffix][index]
            slots: dict[int, list[int]] = {}
            for atom, (local_day, band, inside) in enumerate(places):
                if not mask[local_day] or part == _IGNORED:
                    continue
                if part == _CONSUMPTION:
                    if inside:
                        continue
                    slot = band
                else:
                    slot = _EXPORT_SLOT if part == _EXPORT else _CONTROLLED_SLOT
                slots.setdefault(slot, []).append(atom)
            found = self._takes[key] = tuple((slot, tuple(atoms)) for slot, atoms in slots.items())
        return found

    def _window_of(self, shape: _Shape, index: int) -> tuple[tuple[int, slice], ...]:
        """The intervals inside plan ``index``'s free window, by local day (one run of them
        a day: the window is one span of the day)."""
        key = (shape.key, index)
        found = self._windows.get(key)
        if found is None:
            places = shape.places[index]
            by_day: dict[int, list[int]] = {}
            for atom, (local_day, _, inside) in enumerate(places or ()):
                if inside:
                    by_day.setdefault(local_day, []).append(atom)
            found = self._windows[key] = tuple(
                (local_day, slice(shape.atoms[atoms[0]].start, shape.atoms[atoms[-1]].stop))
                for local_day, atoms in by_day.items()
            )
        return found
