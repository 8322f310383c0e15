"""What a settlement is asked and answers: the request, its outcome and answer, the policy, the
fault points, and the batch a worker settles (``freehours.settlement.service`` performs them)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta
from decimal import Decimal
from enum import StrEnum
from typing import TypeAlias

from freehours import defaults
from freehours.domain.plan import FreeWindow, Plan
from freehours.domain.profiles import DayProfiles
from freehours.domain.settlement import (
    Quota,
    QuotaStatus,
    QuotaTimes,
    new_quota,
    quota_key,
)
from freehours.faults import Faults

CENT = Decimal("0.01")


class Outcome(StrEnum):
    """What a settle call found or did; the API maps each to its status code."""

    SETTLED = "settled"  # COMPLETED by this call: 200
    REPLAYED = "replayed"  # COMPLETED before: 200 with Idempotent-Replayed
    LOCKED = "locked"  # another holder's live lock: 409 LOCKED, Retry-After
    NOT_DUE = "not_due"  # window open or data incomplete: 409 PENDING, Retry-After
    RETRY = "retry"  # this attempt failed and was released: 409 PENDING, Retry-After
    ABORTED = "aborted"  # attempts ran out (stored), or no quota can exist while the NMI has no


#: The public ``reason`` of a quota whose settlement attempt failed: fixed, because a reason is
#: shown to every client that asks, and an exception's text can carry SQL, values and internals.
#: The exception itself is logged (``quota_attempt_failed``, with its traceback).
ATTEMPT_FAILED = "the settlement attempt failed (the server logged why)"


#: The reason of a quota whose customer's stored plan no longer parses (stored before a rule
#: that refuses it): PUT the plan again.
PLAN_NOT_VALID = "the customer's stored plan is not valid: store the plan again"


#: The reason of a quota COMPLETED at the data deadline with part of its window's data missing:
#: the missing intervals count as nothing.
INCOMPLETE_AT_DEADLINE = (
    "settled at the data deadline with the window's meter data incomplete: missing intervals"
    " count as nothing; data that arrives later settles the next version"
)


#: The reason of a quota COMPLETED at the data deadline without any consumption data for its
#: day: 0 kWh.
NO_DATA_AT_DEADLINE = (
    "settled at the data deadline without meter data for the day: 0 kWh; data that arrives"
    " later settles the next version"
)


@dataclass(frozen=True, slots=True)
class Answer:
    """The outcome, the quota as it stands, and how long to wait before asking again."""

    outcome: Outcome
    quota: Quota
    retry_after: int | None = None


@dataclass(frozen=True, slots=True)
class QuotaView:
    """A quota as a settlement request would find it now, without settling it (``view``):
    ``retry_after`` is the seconds until a request could settle it (at least 1), None when one
    could now, or never (a terminal state)."""

    quota: Quota
    retry_after: int | None = None


@dataclass(frozen=True, slots=True)
class SettlementPolicy:
    """The settlement's limits, each with its reason. The first four are settings
    (``runtime.settlement_policy(settings)``); their defaults and reasons are in
    ``freehours.defaults``."""

    #: How long a holder's lock lasts before another may take over
    #: (``FREEHOURS_LOCK_TIMEOUT_SECONDS``).
    lock_timeout: timedelta = defaults.LOCK_TIMEOUT
    #: Failed attempts after which a quota is ABORTED (``FREEHOURS_SETTLEMENT_MAX_ATTEMPTS``).
    max_attempts: int = defaults.SETTLEMENT_MAX_ATTEMPTS
    #: The wait after the window ends before its day settles
    #: (``FREEHOURS_SETTLEMENT_GRACE_SECONDS``).
    grace: timedelta = defaults.SETTLEMENT_GRACE
    #: After this long past the window, settle with what data there is
    #: (``FREEHOURS_DATA_DEADLINE_HOURS``).
    data_deadline: timedelta = defaults.DATA_DEADLINE
    #: How often a day waiting for its data asks again.
    data_poll: timedelta = timedelta(minutes=10)
    #: Terminal states change only by a new version, which ingest writes to the cache at once;
    #: the time to live bounds how long a lost cache write can hide a new version.
    terminal_cache_ttl: timedelta = timedelta(minutes=5)
    #: After a failed attempt, wait at least this long (doubling per attempt, up to ``retry_cap``).
    retry_base: timedelta = timedelta(seconds=1)
    #: A caller told to retry never waits more than a minute: a quota whose attempts keep failing
    #: is ABORTED after a few of them anyway.
    retry_cap: timedelta = timedelta(minutes=1)


class FaultPoint(StrEnum):
    """Where the simulation may inject a fault into a settlement."""

    AFTER_CLAIM = "after_claim"  # the lock is committed; nothing else has happened
    BEFORE_COMPLETE = "before_complete"  # inside B, rated, before COMPLETED is written
    CACHE_WRITE = "cache_write"  # after a commit, writing the cache


#: The settlement's fault-injection seam (``freehours.faults``): a point, and the quota at it.
SettlementFaults: TypeAlias = Faults[FaultPoint, Quota]


@dataclass(frozen=True, slots=True)
class CustomerPlan:
    """A customer's plan, parsed, with the day profiles its ratings share and its free window
    (a plan without one gives ``NoQuotas``)."""

    plan: Plan
    profiles: DayProfiles
    window: FreeWindow


@dataclass(frozen=True, slots=True)
class NoQuotas:
    """Why an NMI has no quotas to settle: no customer, a stored plan that no longer parses, or a
    plan without a free window (whose customer is still billed: ``plan`` and ``profiles``)."""

    reason: str
    plan: Plan | None = None
    profiles: DayProfiles | None = None


@dataclass(frozen=True, slots=True)
class AffectedDays:
    """The quota days of one NMI that changed meter data touches, and its customer's plan."""

    nmi: str
    customer: CustomerPlan
    days: list[date]


@dataclass(frozen=True, slots=True)
class SettleRequest:
    """One quota for ``Settlements.settle_many``: what ``settle`` takes, and the trace id its
    writes are recorded in (its job's; None: the current trace's)."""

    nmi: str
    day: date
    version: int = 1
    trace_id: str | None = None
    trust_cache: bool = True

    @property
    def key(self) -> str:
        return quota_key(self.nmi, self.day)


def _due_reason(times: QuotaTimes, now: datetime) -> str:
    """The reason of a PENDING quota that has none of its own: when it is due."""
    when = times.due.isoformat()
    return (
        f"not settled yet: due at {when}"
        if now < times.due
        else f"not settled yet: due since {when}"
    )


def _waiting_reason(times: QuotaTimes) -> str:
    """The reason of a due quota whose window's meter data is not all in: until when."""
    deadline = times.data_deadline.isoformat()
    return f"waiting for the window's meter data; settles with what there is at {deadline}"


def day_lock(nmi: str, day: date) -> str:
    """The lock a quota day's completion holds, and an ingest of its meter data shares."""
    return f"quota-day:{nmi}:{day.isoformat()}"


def _unsettleable(nmi: str, day: date, reason: str) -> Quota:
    """The ABORTED answer for a quota that cannot exist while its NMI has no customer, or its
    customer's plan no free window: not stored (version 1, no attempts, never completed, so
    every request gets the same answer while that is so), so that it settles normally once the
    customer is put on a plan with a window."""
    return replace(new_quota(nmi, day), status=QuotaStatus.ABORTED, reason=reason)
