"""The settlement state machine: one quota per (NMI, local date, version), settled exactly once.

::

    PENDING --claim--> LOCKED --complete(fence)--> COMPLETED  (terminal; replayed to every retry)
                         |  \\--abort(fence)-----> ABORTED    (terminal; same answer every time)
                         |--release(fence)--> PENDING  (attempts + 1; ABORTED after max attempts)
                         |--postpone(fence)--> PENDING (its data is not complete yet; no attempt)
                         \\--lock expired: claim takes over with fence + 1 (attempts + 1)

Every function here is pure: it takes a quota and the time, and returns the next quota or a
decision. The store applies them inside one transaction that holds the row (``FOR UPDATE`` on
PostgreSQL, ``BEGIN IMMEDIATE`` on SQLite).

``attempts`` counts the attempts that did not complete: a release, or a lock that expired because
its holder died. It lives on the quota row, so no job, request or restart resets it; only a new
version starts from zero. This is what makes the incident's endless retry impossible: a quota that
keeps failing reaches ``max_attempts`` and becomes ABORTED, which every client is told to stop on.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from enum import StrEnum

from freehours.domain.plan import Plan


class QuotaStatus(StrEnum):
    """Where a quota is in its life."""

    PENDING = "PENDING"  # not settled yet; may be claimed once it is due
    LOCKED = "LOCKED"  # one holder, named by its fence, is settling it until locked_until
    COMPLETED = "COMPLETED"  # terminal: settled, its ledger entry booked in the same transaction
    ABORTED = "ABORTED"  # terminal: can never be settled; clients must stop

    @property
    def is_terminal(self) -> bool:
        return self in (QuotaStatus.COMPLETED, QuotaStatus.ABORTED)


@dataclass(frozen=True, slots=True)
class Quota:
    """One day's free-energy quota for one NMI, at one version."""

    nmi: str
    date: date
    version: int
    status: QuotaStatus
    fence: int  # the current holder's token; bumped by every claim
    attempts: int  # attempts that did not complete (see the module docstring)
    locked_until: datetime | None
    free_kwh: Decimal | None
    free_value: Decimal | None
    completed_at: datetime | None
    reason: str | None
    revision: int  # bumped by every write; orders cache entries of one version

    @property
    def key(self) -> str:
        """The idempotency key of the quota: ``quota_key``."""
        return quota_key(self.nmi, self.date)

    def lock_seconds_left(self, now: datetime) -> int:
        """Whole seconds until the lock expires, at least 1 (what Retry-After says)."""
        if self.locked_until is None:
            return 1
        return max(1, math.ceil((self.locked_until - now).total_seconds()))

    def is_locked_at(self, now: datetime) -> bool:
        return (
            self.status is QuotaStatus.LOCKED
            and self.locked_until is not None
            and self.locked_until > now
        )


def new_quota(nmi: str, day: date, version: int = 1) -> Quota:
    """A fresh PENDING quota."""
    return Quota(
        nmi=nmi,
        date=day,
        version=version,
        status=QuotaStatus.PENDING,
        fence=0,
        attempts=0,
        locked_until=None,
        free_kwh=None,
        free_value=None,
        completed_at=None,
        reason=None,
        revision=0,
    )


class StaleFence(Exception):
    """A holder whose fence is no longer current tried to write: its lock was taken over."""

    def __init__(self, quota: Quota, fence: int) -> None:
        self.quota = quota
        self.fence = fence
        super().__init__(
            f"quota {quota.key} v{quota.version}: fence {fence} is stale "
            f"(current {quota.fence}, {quota.status})"
        )


@dataclass(frozen=True, slots=True)
class Claimed:
    """The caller now holds the quota with ``quota.fence`` until ``quota.locked_until``."""

    quota: Quota


@dataclass(frozen=True, slots=True)
class Busy:
    """Another holder has a live lock: come back in ``retry_after`` seconds."""

    quota: Quota
    retry_after: int


@dataclass(frozen=True, slots=True)
class Settled:
    """Terminal already: COMPLETED (replay it) or ABORTED (stop). ``quota`` may be a new state
    when the claim itself aborted a quota that ran out of attempts."""

    quota: Quota
    changed: bool = False


ClaimDecision = Claimed | Busy | Settled


def claim(quota: Quota, now: datetime, lock_timeout: timedelta, max_attempts: int) -> ClaimDecision:
    """Try to take the quota. An expired lock is taken over, counting the dead holder's attempt."""
    if quota.status.is_terminal:
        return Settled(quota)
    if quota.is_locked_at(now):
        return Busy(quota, quota.lock_seconds_left(now))
    attempts = quota.attempts
    if quota.status is QuotaStatus.LOCKED:
        # The holder's lock ran out: it died or hung. That attempt failed.
        attempts += 1
        if attempts >= max_attempts:
            aborted = _abort(quota, now, f"gave up after {attempts} attempts (lock expired)")
            return Settled(replace(aborted, attempts=attempts), changed=True)
    return Claimed(
        replace(
            quota,
            status=QuotaStatus.LOCKED,
            fence=quota.fence + 1,
            attempts=attempts,
            locked_until=now + lock_timeout,
            reason=None,
            revision=quota.revision + 1,
        )
    )


def complete(
    quota: Quota,
    fence: int,
    free_kwh: Decimal,
    free_value: Decimal,
    now: datetime,
    *,
    reason: str | None = None,
) -> Quota:
    """The holder settled the quota: COMPLETED with its free energy (and a ``reason`` when it
    was settled on incomplete data)."""
    _check_fence(quota, fence)
    return replace(
        quota,
        status=QuotaStatus.COMPLETED,
        locked_until=None,
        free_kwh=free_kwh,
        free_value=free_value,
        completed_at=now,
        reason=reason,
        revision=quota.revision + 1,
    )


def postpone(quota: Quota, fence: int, reason: str) -> Quota:
    """The holder found the day not ready (its data incomplete): back to PENDING, no attempt
    counted, since nothing failed."""
    _check_fence(quota, fence)
    return replace(
        quota,
        status=QuotaStatus.PENDING,
        locked_until=None,
        reason=reason,
        revision=quota.revision + 1,
    )


def abort(quota: Quota, fence: int, reason: str, now: datetime) -> Quota:
    """The holder found the quota can never be settled: ABORTED with the reason."""
    _check_fence(quota, fence)
    return _abort(quota, now, reason)


def release(quota: Quota, fence: int, reason: str, now: datetime, max_attempts: int) -> Quota:
    """The holder failed this time: back to PENDING, or ABORTED once attempts reach the maximum."""
    _check_fence(quota, fence)
    attempts = quota.attempts + 1
    if attempts >= max_attempts:
        return replace(
            _abort(quota, now, f"gave up after {attempts} attempts: {reason}"), attempts=attempts
        )
    return replace(
        quota,
        status=QuotaStatus.PENDING,
        attempts=attempts,
        locked_until=None,
        reason=reason,
        revision=quota.revision + 1,
    )


def _abort(quota: Quota, now: datetime, reason: str) -> Quota:
    return replace(
        quota,
        status=QuotaStatus.ABORTED,
        locked_until=None,
        completed_at=now,
        reason=reason,
        revision=quota.revision + 1,
    )


def _check_fence(quota: Quota, fence: int) -> None:
    if quota.status is not QuotaStatus.LOCKED or quota.fence != fence:
        raise StaleFence(quota, fence)


def quota_key(nmi: str, day: date) -> str:
    """The idempotency key of a quota day, ``"{nmi}:{date}"``: the cache's key, its settle job's
    key, what the API and the logs name it by."""
    return f"{nmi}:{day.isoformat()}"


def has_quota(plan: Plan, local_date: date, nem_dates_with_data: Collection[date]) -> bool:
    """Whether ``local_date`` has a quota, given the NEM dates with consumption data: its plan
    has a free window, and one of the NEM dates that window covers has data."""
    return any(nem_date in nem_dates_with_data for nem_date in plan.window_nem_dates(local_date))


def quota_dates(plan: Plan, nem_dates: Iterable[date]) -> set[date]:
    """The local dates that consumption data on ``nem_dates`` (NEM days) gives a quota: those
    whose free window overlaps one of them (``has_quota``)."""
    with_data = set(nem_dates)
    # A local date's window lies within a day of its NEM date in every Australian zone.
    candidates = {
        nem_date + timedelta(days=shift) for nem_date in with_data for shift in (-1, 0, 1)
    }
    return {local_date for local_date in candidates if has_quota(plan, local_date, with_data)}


def elapsed(moment: datetime, span: timedelta) -> datetime:
    """The moment ``span`` of real time after ``moment``, on ``moment``'s clock. Counted in UTC:
    an aware datetime's own ``+`` adds wall-clock time, so three days after a window that ends
    before a daylight-saving change would be 71 or 73 hours after it."""
    return (moment.astimezone(UTC) + span).astimezone(moment.tzinfo)


def data_deadline_of(plan: Plan, local_date: date, data_deadline: timedelta) -> datetime:
    """From when ``local_date`` settles (and is billed) with what data there is: ``data_deadline``
    after its free window's end, or, for a plan without a window, after the local day's end."""
    bounds = plan.window_bounds(local_date)
    end = plan.local_day_bounds(local_date)[1] if bounds is None else bounds[1]
    return elapsed(end, data_deadline)


@dataclass(frozen=True, slots=True)
class QuotaTimes:
    """A quota day's times, on the customer's clock: its free window ``[window_start,
    window_end)``; ``due``, from when it may be settled (the window's end plus the grace); and
    ``data_deadline``, from when it settles with what data there is."""

    window_start: datetime
    window_end: datetime
    due: datetime
    data_deadline: datetime

    @classmethod
    def of(
        cls, window: tuple[datetime, datetime], *, grace: timedelta, data_deadline: timedelta
    ) -> QuotaTimes:
        start, end = window
        return cls(start, end, elapsed(end, grace), elapsed(end, data_deadline))


def quota_times(
    plan: Plan, local_date: date, *, grace: timedelta, data_deadline: timedelta
) -> QuotaTimes:
    """The times of ``local_date``'s quota under ``plan``, which has a free window."""
    window = plan.window_bounds(local_date)
    assert window is not None, "only a plan with a free window has quotas"
    return QuotaTimes.of(window, grace=grace, data_deadline=data_deadline)


def seconds_until_settleable(
    times: QuotaTimes, now: datetime, *, data_complete: bool, poll: timedelta
) -> int | None:
    """How long to wait before the day can be settled, or None when it can be settled now.

    A day is due once its free window has ended and the grace has passed. A due day whose window
    data is incomplete waits for it, polling every ``poll``, until its data deadline; from then
    on it settles with what there is (missing intervals count as nothing).
    """
    if now < times.due:
        return max(1, math.ceil((times.due - now).total_seconds()))
    deadline = times.data_deadline
    if not data_complete and now < deadline:
        return max(1, math.ceil(min(poll, deadline - now).total_seconds()))
    return None
