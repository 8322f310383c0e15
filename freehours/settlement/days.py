"""Which days have a quota, and how each stands: the side of ``Settlements`` that settles
nothing (``service.py`` settles).

``QuotaDays`` looks up a customer's plan (parsed once per stored version, ``PlanCache``), works
out a quota day's times under the policy, finds the quota days changed meter data touches
(``affected_days``, and ``reopen`` in an ingest's transaction), those still to settle
(``unsettled_days``), those no job took up (``count_unscheduled``), and answers how a quota
stands without settling it (``state``, ``view``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import date, datetime, timedelta

import structlog

from freehours.clock import Clock
from freehours.domain.reads import LATEST_DATE, DayKey
from freehours.domain.settlement import (
    Quota,
    QuotaStatus,
    QuotaTimes,
    new_quota,
    quota_dates,
    quota_times,
    seconds_until_settleable,
)
from freehours.domain.time import NEM_TIME
from freehours.plans.cache import PlanCache
from freehours.settlement.energy import free_energy, window_complete
from freehours.settlement.model import (
    PLAN_NOT_VALID,
    AffectedDays,
    CustomerPlan,
    NoQuotas,
    QuotaView,
    SettlementPolicy,
    _due_reason,
    _unsettleable,
    _waiting_reason,
    day_lock,
)
from freehours.store.database import Store, Unit

log = structlog.get_logger("freehours.settlement")


#: How far back ``Settlements.count_unscheduled`` looks, in NEM days before today's: a day no job
#: took up stays in the gauge for a week, long past the alert's hour, while a measurement reads
#: only a week of the meter days' ``day`` index. Older days are found and scheduled by
#: ``freehours settlements schedule``.
UNSCHEDULED_LOOKBACK = timedelta(days=7)


#: A day's settlement job runs within seconds of its window's end plus the grace (a late one is
#: ``freehours_jobs_stuck``'s); an hour on, a day without a quota had no job.
UNSCHEDULED_AFTER = timedelta(hours=1)


#: Day rows one measurement looks at, at most: a scrape must stay bounded when a week of some
#: thousand customers' days was stranded (the gauge then says at least that many).
UNSCHEDULED_LIMIT = 10_000


class QuotaDays:
    """Quota days and their plans, read from the store. Safe to share between threads."""

    def __init__(
        self,
        store: Store,
        clock: Clock,
        policy: SettlementPolicy | None = None,
        *,
        plans: PlanCache | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.policy = policy or SettlementPolicy()
        #: Stored plans parsed once per version (shared with invoicing by ``Runtime``).
        self.plans = plans or PlanCache()

    def customer_plan(self, unit: Unit, nmi: str) -> CustomerPlan | NoQuotas:
        """The customer's parsed plan (parsed once per stored version), or why there is none
        with a free window: what makes a quota impossible to settle."""
        return self._plan_of(unit, nmi, unit.catalog.plan_version_of(nmi))

    def _plan_of(
        self, unit: Unit, nmi: str, version: tuple[str, datetime] | None
    ) -> CustomerPlan | NoQuotas:
        """``customer_plan`` given the plan version the catalog has for ``nmi``."""
        if version is None:
            return NoQuotas(f"unknown NMI {nmi}: no customer")
        return self._parsed_plan(unit, version)

    def _parsed_plan(self, unit: Unit, version: tuple[str, datetime]) -> CustomerPlan | NoQuotas:
        """The plan stored as ``version`` (id, last update), parsed once per version."""
        plan_id = version[0]

        def document() -> Mapping[str, object]:
            stored = unit.catalog.get_plan(plan_id)
            assert stored is not None, "a customer's plan is kept by its foreign key"
            return stored.document

        parsed = self.plans.parsed(version, plan_id, document)
        if parsed is None:
            return NoQuotas(PLAN_NOT_VALID)
        plan, profiles = parsed.plan, parsed.profiles
        if plan.free_window is None:
            return NoQuotas(f"plan {plan_id!r} has no free window", plan, profiles)
        return CustomerPlan(plan, profiles, plan.free_window)

    def quota_times(self, customer: CustomerPlan, day: date) -> QuotaTimes:
        """When ``day``'s quota of a customer on ``customer``'s plan is due, and its data
        deadline, under this policy."""
        policy = self.policy
        return quota_times(
            customer.plan, day, grace=policy.grace, data_deadline=policy.data_deadline
        )

    def _wait(self, times: QuotaTimes, now: datetime, *, data_complete: bool) -> int | None:
        return seconds_until_settleable(
            times, now, data_complete=data_complete, poll=self.policy.data_poll
        )

    def reopen(self, unit: Unit, affected: Sequence[AffectedDays]) -> list[Quota]:
        """After new meter data, in the ingest's transaction: open the next version of every
        settled quota whose free energy the changed consumption day rows change.

        ``affected``: what ``affected_days`` made of the changed day rows (the scheduler takes
        the same list: the customers' plans are looked up once an ingest). A read outside the
        window, or one that leaves the window's free energy as it was settled, reopens nothing:
        only a real difference is worth an adjustment. Call ``publish`` with the result after
        the commit.
        """
        reopened = []
        now = self.clock.now()
        # Until this commits, a settlement of these days waits before it reads them (and if one
        # is reading them, this waits for it to finish): see freehours.store.locks. All of them
        # in one statement, in key order; then no settlement of them is under way, so the one
        # look-up of which are settled already sees them as they stay until this commits.
        unit.hold_shared([day_lock(item.nmi, day) for item in affected for day in item.days])
        settled = unit.quotas.settled_among(
            [(item.nmi, day) for item in affected for day in item.days]
        )
        for item in affected:
            nmi, customer = item.nmi, item.customer
            for day in item.days:
                if (nmi, day) not in settled:
                    continue  # not settled yet: it will read the new data when it is
                settled_quota = unit.quotas.latest(nmi, day, for_update=True)
                if settled_quota is None or settled_quota.status is not QuotaStatus.COMPLETED:
                    continue
                days = unit.meter.days_for(nmi, customer.plan.nem_dates(day))
                now_free = free_energy(customer.plan, customer.profiles, days, day)
                if now_free == (settled_quota.free_kwh, settled_quota.free_value):
                    continue
                successor = unit.quotas.reopen_if_settled(nmi, day, at=now)
                if successor is not None:
                    log.info("quota_reopened", quota_key=successor.key, version=successor.version)
                    reopened.append(successor)
        return reopened

    def affected_days(self, unit: Unit, changed: Iterable[DayKey]) -> list[AffectedDays]:
        """The quota days (local dates, sorted) whose free window the changed consumption day
        rows (NMI, suffix, NEM date) touch, NMI by NMI in order; an NMI without quotas (no
        customer, or a plan without a free window) is left out."""
        affected = []
        by_nmi: dict[str, set[tuple[str, date]]] = {}
        for nmi, suffix, nem_date in changed:
            by_nmi.setdefault(nmi, set()).add((suffix, nem_date))
        versions = unit.catalog.plan_versions_of(by_nmi)  # one look-up for all of them
        days_of: dict[tuple[tuple[str, datetime], frozenset[date]], list[date]] = {}
        for nmi, rows in sorted(by_nmi.items()):
            version = versions.get(nmi)
            if version is None:
                continue  # no customer
            customer = self._parsed_plan(unit, version)
            if isinstance(customer, NoQuotas):
                continue
            plan = customer.plan
            nem_dates = frozenset(
                nem_date for suffix, nem_date in rows if plan.is_consumption(suffix)
            )
            # Customers on one plan share their windows: worked out once per plan and dates.
            known = days_of.get((version, nem_dates))
            if known is None:
                known = days_of[(version, nem_dates)] = sorted(quota_dates(plan, nem_dates))
            affected.append(AffectedDays(nmi, customer, list(known)))
        return affected

    def unsettled_days(
        self, unit: Unit, nmis: Iterable[str], first: date, last: date
    ) -> list[AffectedDays]:
        """The quota days from ``first`` to ``last`` (local dates) of ``nmis`` that have meter
        data and no final quota (its newest version COMPLETED or ABORTED): what a settlement job
        would still settle, NMI by NMI (those without quotas left out, as ``affected_days``
        does). Three look-ups whatever the number of days: the day rows (a NEM date either
        side too, where a window may lie), the plans, the quotas."""
        day = timedelta(days=1)
        keys = unit.meter.day_keys_of(list(nmis), first - day, min(last + day, LATEST_DATE))
        affected = [
            AffectedDays(item.nmi, item.customer, [d for d in item.days if first <= d <= last])
            for item in self.affected_days(unit, keys)
        ]
        final = unit.quotas.terminal_among([(item.nmi, d) for item in affected for d in item.days])
        unsettled = [
            AffectedDays(
                item.nmi, item.customer, [d for d in item.days if (item.nmi, d) not in final]
            )
            for item in affected
        ]
        return [item for item in unsettled if item.days]

    def count_unscheduled(self) -> int:
        """``freehours_settlements_unscheduled_days``: the quota days of the last
        ``UNSCHEDULED_LOOKBACK`` with meter data, a customer whose plan has a free window, and no
        quota stored, whose window ended (plus the grace) over ``UNSCHEDULED_AFTER`` ago: days
        that no settlement job took up. At most ``UNSCHEDULED_LIMIT`` day rows are looked at."""
        now = self.clock.now()
        today = now.astimezone(NEM_TIME).date()
        with self.store.read() as unit:
            keys = unit.meter.days_without_quota(
                today - UNSCHEDULED_LOOKBACK, today - timedelta(days=1), limit=UNSCHEDULED_LIMIT
            )
            affected = self.affected_days(unit, keys)
            stored = unit.quotas.stored_among(
                [(item.nmi, d) for item in affected for d in item.days]
            )
        due_before = now - UNSCHEDULED_AFTER
        return sum(
            1
            for item in affected
            for d in item.days
            if (item.nmi, d) not in stored and self.quota_times(item.customer, d).due <= due_before
        )

    def state(self, nmi: str, day: date) -> Quota | None:
        """The quota's newest version as the database has it, or None when there is none."""
        with self.store.read() as unit:
            return unit.quotas.latest(nmi, day)

    def view(self, nmi: str, day: date) -> QuotaView:
        """The quota of ``nmi`` on ``day`` as a settlement request would find it now, read
        only: nothing is settled, stored or cached (``GET /v1/free-energy/settlements``).

        - A terminal version stored: it, as ``settle`` replays it.
        - No customer, or a plan without a free window: ABORTED with the reason, not stored
          (``settle`` answers the same while that is so).
        - A live lock: LOCKED, with the seconds left on it.
        - Otherwise PENDING, stored or not yet (version 1, no attempts), with the seconds until
          it can settle (its window's end plus the grace; while its window's data is incomplete,
          the next data poll until the data deadline); a PENDING without a reason of its own
          says when it is due.
        """
        now = self.clock.now()
        with self.store.read() as unit:
            stored = unit.quotas.latest(nmi, day)
            if stored is not None and stored.status.is_terminal:
                return QuotaView(stored)
            customer = self.customer_plan(unit, nmi)
            if isinstance(customer, NoQuotas):
                return QuotaView(_unsettleable(nmi, day, customer.reason))
            if stored is not None and stored.status is QuotaStatus.LOCKED:
                live = stored.is_locked_at(now)
                return QuotaView(stored, stored.lock_seconds_left(now) if live else None)
            times = self.quota_times(customer, day)
            wait = self._wait(times, now, data_complete=True)
            waiting_for_data = False
            if wait is None:
                plan = customer.plan
                days = unit.meter.days_for(nmi, plan.nem_dates(day))
                if not window_complete(plan, days, times.window_start, times.window_end):
                    wait = self._wait(times, now, data_complete=False)
                    waiting_for_data = wait is not None
        quota = stored or new_quota(nmi, day)
        if quota.reason is None:
            reason = _waiting_reason(times) if waiting_for_data else _due_reason(times, now)
            quota = replace(quota, reason=reason)
        return QuotaView(quota, wait)
