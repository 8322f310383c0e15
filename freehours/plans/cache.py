"""Stored plan documents, parsed once per version: the one cache the settlement and invoicing
share (``Runtime`` gives both the same), so that a plan is validated and its day profiles made
once per process, whichever of them asks first.

A version is what changes whenever the stored document does: ``(plan id, last update)`` for a
customer's plan, ``("document", number)`` for the plan a finalised document keeps. Plans are
few and their versions fewer; nothing is evicted.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass

import structlog

from freehours.domain.plan import Plan
from freehours.domain.profiles import DayProfiles
from freehours.errors import PlanError
from freehours.plans.document import parse_plan

log = structlog.get_logger("freehours.plans")


@dataclass(frozen=True, slots=True)
class ParsedPlan:
    """A stored plan, parsed, with the day profiles its ratings share."""

    plan: Plan
    profiles: DayProfiles


class PlanCache:
    """Parsed plans by version. Safe to share between threads."""

    def __init__(self) -> None:
        self._parsed: dict[Hashable, ParsedPlan] = {}
        self._lock = threading.Lock()

    def parsed(
        self, version: Hashable, plan_id: str, document: Callable[[], Mapping[str, object]]
    ) -> ParsedPlan | None:
        """The plan ``plan_id`` stored as ``version``, parsed from ``document()`` the first time
        it is asked for; None when it does not parse (stored before a rule that refuses it),
        logged as ``stored_plan_not_valid`` and asked again next time."""
        with self._lock:
            known = self._parsed.get(version)
        if known is not None:
            return known
        try:
            plan = parse_plan(document(), source=f"plan {plan_id}")
        except PlanError as exc:
            log.warning("stored_plan_not_valid", plan_id=plan_id, error=str(exc))
            return None
        parsed = ParsedPlan(plan, DayProfiles(plan))
        with self._lock:
            return self._parsed.setdefault(version, parsed)
