"""The retailer's offers: the plans it makes generally available, each with where and when it
applies. The better offer check (docs/invoices.md) weighs a customer's plan against the offers
that apply to them; ``freehours compare --offers`` rates a household's data under them.

An offer is versioned: a new version when its plan or its terms change, the old ones kept so that
a check made against one can be reproduced and explained later.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from enum import StrEnum
from typing import Any

from freehours.domain.time import Region


class OfferSource(StrEnum):
    """Where an offer came from."""

    CDR = "cdr"  # a CDR EnergyPlanDetailV3, as the retailer publishes it
    PLAN = "plan"  # a freehours plan file


@dataclass(frozen=True, slots=True)
class OfferTerms:
    """Where and when an offer applies.

    ``distributors`` are the distribution networks it is offered on (none: every one in
    ``region``); ``controlled_load`` whether it is for premises with a controlled load (its plan
    prices one); ``effective_from`` and ``effective_to`` the days it is offered from and to (none:
    open), as its CDR document says or as the retailer gives them.
    """

    region: Region
    distributors: tuple[str, ...] = ()
    controlled_load: bool = False
    effective_from: date | None = None
    effective_to: date | None = None

    def __post_init__(self) -> None:
        if (
            self.effective_from is not None
            and self.effective_to is not None
            and self.effective_to < self.effective_from
        ):
            raise ValueError(
                f"effective_to: {self.effective_to} is before effective_from {self.effective_from}"
            )

    def applies(
        self, region: Region, distributor: str | None, controlled_load: bool, day: date
    ) -> bool:
        """Whether an offer of these terms is one for a customer in ``region`` on
        ``distributor``'s network (None: not known, so any), with or without a controlled load,
        on ``day``."""
        return (
            self.region is region
            and (not self.distributors or distributor is None or distributor in self.distributors)
            and self.controlled_load == controlled_load
            and (self.effective_from is None or self.effective_from <= day)
            and (self.effective_to is None or day <= self.effective_to)
        )


@dataclass(frozen=True, slots=True)
class Offer:
    """One version of an offer: its id, its plan (the plan file's document), its terms."""

    offer_id: str
    version: int
    name: str
    source: OfferSource
    terms: OfferTerms
    document: dict[str, Any]

    def as_json(self) -> dict[str, object]:
        """The offer as ``offers list --format json`` and ``GET /v1/offers`` show it (its plan
        apart: ``GET /v1/offers/{offer_id}`` has it)."""
        terms = self.terms
        return {
            "offer_id": self.offer_id,
            "version": self.version,
            "name": self.name,
            "source": self.source.value,
            "region": terms.region.value,
            "distributors": list(terms.distributors),
            "controlled_load": terms.controlled_load,
            "effective_from": _day(terms.effective_from),
            "effective_to": _day(terms.effective_to),
        }


def _day(day: date | None) -> str | None:
    return None if day is None else day.isoformat()
