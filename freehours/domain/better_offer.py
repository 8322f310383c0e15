"""The better offer check of the AER's Better Bills Guideline, and usage compared on a bill
(docs/invoices.md, "The better offer check" and "Usage compared").

**The check.** A customer's usage over the last 12 months of billing periods (from their first
day of data where that is later: then an estimate, the cost scaled to a year) is priced on their
current plan and on every offer of the retailer that applies to them, from the periods' usage
totals (``UsageTotals``, ``cost_of``): exactly what the engine that makes their bills charges.
The cheapest offer is *better* when its yearly saving is more than the retailer's threshold; else
the customer is on the best offer for them.
Every figure behind the message is kept (``BetterOfferCheck.as_json``) so that a message can be
reproduced and explained later.

**Usage compared.** Average daily use and the free window's share of it, for the period billed,
the one before it and the same period a year earlier, wherever there is data.

Pure: the invoicing core reads the data and the offers, and rates them.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from decimal import ROUND_HALF_UP, Decimal
from enum import StrEnum
from operator import add, sub
from typing import Any, NamedTuple, overload

from freehours.domain.bill import decimal_text, kwh_text, money_text, usage_total
from freehours.domain.plan import Plan
from freehours.domain.rating import ZERO, DayRating

#: The days of the usage a check prices: the last 12 months.
YEAR_DAYS = 365
_CENT = Decimal("0.01")
_TENTH = Decimal("0.1")
_PERCENT = Decimal(100)


class Outcome(StrEnum):
    """What a check found."""

    BETTER_OFFER = "better_offer"  # an offer saves more than the threshold a year
    BEST_OFFER = "best_offer"  # no offer does: the customer is on the best offer for them
    NO_OFFERS = "no_offers"  # the retailer has no offer that applies to the customer
    NO_DATA = "no_data"  # no usage to price


class Costed(NamedTuple):
    """A plan's cost of the usage a check prices: its bill's total (GST included where the plan
    charges it), and the yearly figure."""

    plan_id: str
    name: str
    total: Decimal
    per_year: Decimal
    gst_inclusive: bool
    offer_id: str | None = None  # None: the customer's current plan
    offer_version: int | None = None

    def as_json(self) -> dict[str, object]:
        return {
            "offer_id": self.offer_id,
            "offer_version": self.offer_version,
            "plan_id": self.plan_id,
            "name": self.name,
            "cost": money_text(self.total),
            "cost_per_year": money_text(self.per_year),
            "gst_inclusive": self.gst_inclusive,
        }

    @classmethod
    def from_json(cls, values: dict[str, Any]) -> Costed:
        version = values["offer_version"]
        return cls(
            plan_id=str(values["plan_id"]),
            name=str(values["name"]),
            total=Decimal(str(values["cost"])),
            per_year=Decimal(str(values["cost_per_year"])),
            gst_inclusive=bool(values["gst_inclusive"]),
            offer_id=None if values["offer_id"] is None else str(values["offer_id"]),
            offer_version=None if version is None else int(str(version)),
        )


def per_year(amount: Decimal, days: int) -> Decimal:
    """``amount`` over ``days`` days, scaled to a year of ``YEAR_DAYS``, to the cent."""
    return (amount * YEAR_DAYS / days).quantize(_CENT, ROUND_HALF_UP)


class UsageTotals(NamedTuple):
    """What pricing needs of consecutive rated local days, ``first`` to ``last``, under one
    plan: the consumption charged at each of its bands, the export and the controlled load. A
    year's cost is priced from its billing periods' totals (``cost_of``) exactly as a bill of
    all its days would be (``make_bill``): every line is a price times a sum of these.
    Immutable; a named tuple, as a check reads and writes some forty for each invoice."""

    first: date
    last: date
    charged: tuple[Decimal, ...]
    export: Decimal
    controlled: Decimal

    @property
    def days(self) -> int:
        return (self.last - self.first).days + 1

    def text(self) -> str:
        """One line of text, as a billing period's usage keeps it (``parse`` reads it back)."""
        charged = ",".join(str(kwh) for kwh in self.charged)
        return f"{self.first}|{self.last}|{charged}|{self.export}|{self.controlled}"

    @classmethod
    def parse(cls, text: str) -> UsageTotals:
        first, last, charged, export, controlled = text.split("|")
        return cls(
            date.fromisoformat(first),
            date.fromisoformat(last),
            tuple(Decimal(kwh) for kwh in charged.split(",")) if charged else (),
            Decimal(export),
            Decimal(controlled),
        )


def joined(first: UsageTotals, then: UsageTotals) -> UsageTotals:
    """The totals of ``first``'s days and then ``then``'s, which start the day after."""
    if then.first != first.last + timedelta(days=1):
        raise ValueError(f"totals to {first.last} joined to totals from {then.first}")
    return UsageTotals(
        first.first,
        then.last,
        tuple(map(add, first.charged, then.charged)),
        first.export + then.export,
        first.controlled + then.controlled,
    )


def without_head(totals: UsageTotals, head: UsageTotals) -> UsageTotals:
    """``totals`` without its first days, ``head``'s."""
    if head.first != totals.first or head.last >= totals.last:
        raise ValueError(f"totals of {head.first} to {head.last} are not the head of {totals}")
    return UsageTotals(
        head.last + timedelta(days=1),
        totals.last,
        tuple(map(sub, totals.charged, head.charged)),
        totals.export - head.export,
        totals.controlled - head.controlled,
    )


def totals_of(days: Sequence[DayRating]) -> UsageTotals:
    """The totals of rated local days, consecutive and in order (at least one)."""
    charged = tuple(sum(kwh, ZERO) for kwh in zip(*(day.charged_kwh for day in days), strict=True))
    return UsageTotals(
        days[0].local_date,
        days[-1].local_date,
        charged,
        sum((day.export_kwh for day in days), ZERO),
        sum((day.controlled_load_kwh for day in days), ZERO),
    )


def cost_of(plan: Plan, parts: Sequence[UsageTotals]) -> Decimal:
    """What ``plan`` charges for the days of ``parts`` (apart, in order: a year of billing
    periods), GST included where it charges it: the total of the bill of all those days."""
    if len(parts) == 1:  # a year priced from its totals, as the check prices every plan's
        (part,) = parts
        charged: Sequence[Decimal] = part.charged
        export, controlled = part.export, part.controlled
    else:
        charged = [sum(kwh, ZERO) for kwh in zip(*(part.charged for part in parts), strict=True)]
        export = sum((part.export for part in parts), ZERO)
        controlled = sum((part.controlled for part in parts), ZERO)
    if len(charged) != len(plan.bands):
        raise ValueError(f"totals of {len(charged)} bands priced under a plan of {len(plan.bands)}")
    return usage_total(
        plan,
        charged_by_band=charged,
        export_kwh=export,
        controlled_kwh=controlled,
        dates=_Dates(parts),
    )


@dataclass(frozen=True, slots=True)
class PeriodUsage:
    """What a billing period's invoice keeps of its usage for later checks: the days it has a
    meter value for, the energy used and the free energy under the plan it was invoiced on (for
    usage compared), and its usage totals under that plan and each offer it was checked against
    (``totals``: by plan key, the ``UsageTotals`` text)."""

    start: date
    end: date
    read_days: int
    consumption_kwh: Decimal
    free_kwh: Decimal
    totals: dict[str, str]
    #: By plan key, the totals (text) of the 12 months of periods to this one that its
    #: invoice's check priced: the next period's check adds itself to them and takes off the
    #: period that leaves its year, rather than adding up 12 periods' totals.
    year: dict[str, str] = field(default_factory=dict)

    def text(self) -> str:
        """One text: a head line, then a line per plan key of its totals, and of its year's
        (``*key``); totals equal to an earlier line's are written as that line's key
        (``@key``), as offers that differ from the customer's plan only in prices have its."""
        lines = [f"{self.read_days}|{self.consumption_kwh}|{self.free_kwh}"]
        for mark, texts in (("", self.totals), ("*", self.year)):
            seen: dict[str, str] = {}
            for key, text in sorted(texts.items()):
                same = seen.setdefault(text, key)
                lines.append(f"{mark}{key}\t{text if same == key else '@' + same}")
        return "\n".join(lines)

    @classmethod
    def parse(cls, start: date, end: date, text: str) -> PeriodUsage:
        head, *lines = text.split("\n")
        read_days, consumption, free = head.split("|")
        totals: dict[str, str] = {}
        year: dict[str, str] = {}
        for line in lines:
            key, value = line.split("\t", 1)
            texts = totals
            if key.startswith("*"):
                key, texts = key[1:], year
            texts[key] = texts[value[1:]] if value.startswith("@") else value
        return cls(start, end, int(read_days), Decimal(consumption), Decimal(free), totals, year)

    def summary(self, kind: UsageKind) -> UsageSummary | None:
        if not self.read_days:
            return None
        return UsageSummary(
            kind, self.start, self.end, self.read_days, self.consumption_kwh, self.free_kwh
        )


class _Dates(Sequence[date]):
    """The dates of consecutive runs of days, made only when read (a plan without seasonal
    supply charges only counts them)."""

    def __init__(self, parts: Sequence[UsageTotals]) -> None:
        self._parts = parts
        length = 0
        for part in parts:
            length += (part.last - part.first).days + 1
        self._length = length

    def __len__(self) -> int:
        return self._length

    def __iter__(self) -> Iterator[date]:
        for part in self._parts:
            for n in range(part.days):
                yield part.first + timedelta(days=n)

    @overload
    def __getitem__(self, index: int) -> date: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[date]: ...
    def __getitem__(self, index: int | slice) -> date | Sequence[date]:
        return list(self)[index]


@dataclass(frozen=True, slots=True)
class BetterOfferCheck:
    """One better offer check: what was priced, on which days, and what it found."""

    outcome: Outcome
    checked_on: date
    data_from: date | None
    data_to: date | None
    threshold: Decimal
    offers_checked: int
    current: Costed | None = None
    #: The cheapest offer that applies (whether or not it is a better one).
    offer: Costed | None = None
    #: What the offer saves a year (its yearly cost less the current plan's): positive, zero or
    #: negative; None without an offer or data.
    saving_per_year: Decimal | None = None

    @property
    def days(self) -> int:
        if self.data_from is None or self.data_to is None:
            return 0
        return (self.data_to - self.data_from).days + 1

    @property
    def estimated(self) -> bool:
        """Whether the usage priced is less than a year (the cost scaled up to one)."""
        return 0 < self.days < YEAR_DAYS

    def as_json(self) -> dict[str, object]:
        return {
            "outcome": self.outcome.value,
            "checked_on": self.checked_on.isoformat(),
            "data_from": None if self.data_from is None else self.data_from.isoformat(),
            "data_to": None if self.data_to is None else self.data_to.isoformat(),
            "days": self.days,
            "estimated": self.estimated,
            "threshold": money_text(self.threshold),
            "offers_checked": self.offers_checked,
            "current": None if self.current is None else self.current.as_json(),
            "offer": None if self.offer is None else self.offer.as_json(),
            "saving_per_year": (
                None if self.saving_per_year is None else money_text(self.saving_per_year)
            ),
        }

    @classmethod
    def from_json(cls, values: dict[str, Any]) -> BetterOfferCheck:
        def day(key: str) -> date | None:
            text = values[key]
            return None if text is None else date.fromisoformat(str(text))

        def money(key: str) -> Decimal | None:
            text = values[key]
            return None if text is None else Decimal(str(text))

        current, offer = values["current"], values["offer"]
        checked_on = day("checked_on")
        threshold = money("threshold")
        assert checked_on is not None
        assert threshold is not None
        return cls(
            outcome=Outcome(str(values["outcome"])),
            checked_on=checked_on,
            data_from=day("data_from"),
            data_to=day("data_to"),
            threshold=threshold,
            offers_checked=int(str(values["offers_checked"])),
            current=None if current is None else Costed.from_json(current),
            offer=None if offer is None else Costed.from_json(offer),
            saving_per_year=money("saving_per_year"),
        )


def decide(
    checked_on: date,
    window: tuple[date, date] | None,
    current: Costed | None,
    offers: Sequence[Costed],
    threshold: Decimal,
) -> BetterOfferCheck:
    """The check's finding from its figures: the cheapest of ``offers`` (a tie by offer id) is
    better when it saves more than ``threshold`` a year on ``current``."""
    if window is None or current is None:
        return BetterOfferCheck(Outcome.NO_DATA, checked_on, None, None, threshold, len(offers))
    data_from, data_to = window
    if not offers:
        return BetterOfferCheck(
            Outcome.NO_OFFERS, checked_on, data_from, data_to, threshold, 0, current
        )
    best = min(offers, key=lambda offer: (offer.total, offer.offer_id or ""))
    days = (data_to - data_from).days + 1
    saving = per_year(current.total - best.total, days)
    outcome = Outcome.BETTER_OFFER if saving > threshold else Outcome.BEST_OFFER
    return BetterOfferCheck(
        outcome, checked_on, data_from, data_to, threshold, len(offers), current, best, saving
    )


# --- usage compared -------------------------------------------------------------------------


class UsageKind(StrEnum):
    """Which period a row of usage compared is."""

    THIS_PERIOD = "this_period"
    PREVIOUS_PERIOD = "previous_period"
    YEAR_EARLIER = "year_earlier"


@dataclass(frozen=True, slots=True)
class UsageSummary:
    """One period's use: the days it has data for, the energy used and the free energy in it."""

    kind: UsageKind
    start: date
    end: date
    days: int
    consumption_kwh: Decimal
    free_kwh: Decimal

    @property
    def average_daily_kwh(self) -> Decimal:
        """The energy used a day, to 0.1 kWh."""
        return (self.consumption_kwh / self.days).quantize(_TENTH, ROUND_HALF_UP)

    @property
    def free_share(self) -> Decimal | None:
        """The free window's share of the energy used, in whole percent; None with no use."""
        if not self.consumption_kwh:
            return None
        return (self.free_kwh * _PERCENT / self.consumption_kwh).quantize(Decimal(1), ROUND_HALF_UP)

    def as_json(self) -> dict[str, object]:
        share = self.free_share
        return {
            "kind": self.kind.value,
            "start": self.start.isoformat(),
            "end": self.end.isoformat(),
            "days": self.days,
            "consumption_kwh": kwh_text(self.consumption_kwh),
            "free_kwh": kwh_text(self.free_kwh),
            "average_daily_kwh": decimal_text(self.average_daily_kwh),
            "free_share_percent": None if share is None else decimal_text(share),
        }

    @classmethod
    def from_json(cls, values: dict[str, Any]) -> UsageSummary:
        return cls(
            kind=UsageKind(str(values["kind"])),
            start=date.fromisoformat(str(values["start"])),
            end=date.fromisoformat(str(values["end"])),
            days=int(str(values["days"])),
            consumption_kwh=Decimal(str(values["consumption_kwh"])),
            free_kwh=Decimal(str(values["free_kwh"])),
        )


def summarise(
    kind: UsageKind,
    start: date,
    end: date,
    days: Iterable[DayRating],
    unread: Collection[date],
) -> UsageSummary | None:
    """The use of the rated ``days`` from ``start`` to ``end`` that have a meter value (not in
    ``unread``); None when none has."""
    read = [day for day in days if start <= day.local_date <= end and day.local_date not in unread]
    if not read:
        return None
    return UsageSummary(
        kind,
        start,
        end,
        len(read),
        sum((day.consumption_kwh for day in read), ZERO),
        sum((day.free_kwh for day in read), ZERO),
    )


def year_before(day: date) -> date:
    """The same day a year earlier (28 February for 29 February)."""
    try:
        return day.replace(year=day.year - 1)
    except ValueError:
        return day.replace(year=day.year - 1, day=28)
