"""Settling a day's free-energy quota exactly once: the one path the API and the workers share.

Over 800 lines, for a reason: ``Settlements`` is one class, the protocol's every step (claim,
complete, release, for one request and for a worker's batch) beside the others, as
docs/protocol.md's table of steps reads them; what it is asked and answers is ``model.py``, the
free energy it computes ``energy.py``. Making the request a batch of one (issue 36) halves it.

``Settlements.settle(nmi, day)`` runs the state machine of ``freehours.domain.settlement`` against
the store, in three short transactions at most:

A. claim: the quota row locked (``FOR UPDATE`` / ``BEGIN IMMEDIATE``); a terminal state is
   replayed, a live lock answered with its seconds left, a day not yet due (window open, or its
   data incomplete before the data deadline) answered with the seconds until it is; otherwise
   the row becomes LOCKED with the next fence, and that is committed. A due quota nobody has
   asked for yet is inserted LOCKED in one statement of its own (no transaction around it).
B. complete: the quota day's lock taken (``day_lock``, shared by any ingest of the day's meter
   data until it commits; ``freehours.store.locks``), the row locked again, the fence checked,
   the day's reads re-read and rated, then COMPLETED and its ledger entry written in one
   transaction. A revision that lands meanwhile either is read here or finds the quota
   COMPLETED and opens the next version, even one whose ingest began before the quota existed.
C. on a failure between A and B's commit: release (attempts + 1, ABORTED at the maximum).
   A holder that dies without releasing leaves a lock that expires; the next claim takes over
   and counts that attempt.

The cache is written after the commit that made the answer; a cache failure is logged and
counted, never fatal.
Only terminal states are answered from the cache alone.

Each call is a span, ``settlement.settle``, with A, B and each cache write as spans inside it
(``settlement.claim``, ``settlement.complete``, ``cache.put``): in the API's request trace, or
in the trace of the job that settles. Where that trace is not recorded, they are not made.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta
from functools import partial

import structlog
from opentelemetry import trace

from freehours.backoff import ceiling
from freehours.cache.quota import CacheUnavailable, QuotaCache
from freehours.clock import Clock
from freehours.domain.plan import Plan
from freehours.domain.reads import LATEST_DATE, DayKey, IntervalDay
from freehours.domain.settlement import (
    Busy,
    ClaimDecision,
    Claimed,
    Quota,
    QuotaStatus,
    QuotaTimes,
    Settled,
    StaleFence,
    claim,
    complete,
    new_quota,
    postpone,
    quota_dates,
    quota_key,
    quota_times,
    release,
    seconds_until_settleable,
)
from freehours.domain.time import NEM_TIME
from freehours.faults import NoFaults
from freehours.observability.metrics import (
    QUOTA_CACHE_REQUESTS,
    QUOTA_CACHE_WRITE_FAILURES,
    SETTLEMENT_OUTCOMES,
    SETTLEMENT_SECONDS,
)
from freehours.observability.tracing import child_span
from freehours.plans.cache import PlanCache
from freehours.settlement.energy import (
    free_energy,
    window_complete,
)
from freehours.settlement.model import (
    ATTEMPT_FAILED,
    INCOMPLETE_AT_DEADLINE,
    NO_DATA_AT_DEADLINE,
    PLAN_NOT_VALID,
    AffectedDays,
    Answer,
    CustomerPlan,
    FaultPoint,
    NoQuotas,
    Outcome,
    QuotaView,
    SettlementFaults,
    SettlementPolicy,
    SettleRequest,
    _due_reason,
    _unsettleable,
    _waiting_reason,
    day_lock,
)
from freehours.store.database import Store, Unit
from freehours.store.quotas import LedgerEntry

log = structlog.get_logger("freehours.settlement")


tracer = trace.get_tracer("freehours.settlement")


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


@dataclass(frozen=True, slots=True)
class _Postponed:
    """B found the window's data incomplete before the deadline: the answer, and when."""

    answer: Answer
    at: datetime


@dataclass(slots=True)
class _Held:
    """A quota a batch holds: its request's index, the LOCKED version, the customer's plan."""

    n: int
    quota: Quota
    customer: CustomerPlan
    claimed_at: float = 0.0

    @property
    def key(self) -> tuple[str, date]:
        return (self.quota.nmi, self.quota.date)


@dataclass(slots=True)
class _Batch:
    """A ``settle_many`` call's requests and its answers so far (None: not answered yet)."""

    requests: Sequence[SettleRequest]
    answers: list[Answer | Exception | None]
    #: The index of each quota key's first request: a repeated key is answered alone, after.
    firsts: list[int]
    #: The first requests not answered from the cache, and the cached state of each.
    open: list[int] = field(default_factory=list)
    cached: dict[int, Quota | None] = field(default_factory=dict)
    trace_ids: dict[str, str | None] = field(default_factory=dict)

    @classmethod
    def of(cls, requests: Sequence[SettleRequest]) -> _Batch:
        firsts: dict[str, int] = {}
        for n, request in enumerate(requests):
            firsts.setdefault(request.key, n)
        trace_ids = {key: requests[n].trace_id for key, n in firsts.items()}
        return cls(requests, [None] * len(requests), list(firsts.values()), trace_ids=trace_ids)

    def answer(
        self, n: int, answer: Answer, settlements: Settlements, cached: Quota | None = None
    ) -> None:
        """Request ``n``'s answer, counted and cached as ``settle`` counts and caches its own."""
        if cached is None:
            cached = self.cached.get(n)
        self.answers[n] = settlements._answered(answer, cached=cached, record=False)

    def attempt(self, n: int, run: Callable[[], Answer], settlements: Settlements) -> None:
        """Request ``n``'s answer from the single path's ``run``, or the exception it raised."""
        try:
            answer = run()
        except Exception as exc:  # noqa: BLE001 - this request's, as settle raises it
            self.answers[n] = exc
        else:
            self.answer(n, answer, settlements)


def _customer(customers: dict[str, CustomerPlan | NoQuotas], nmi: str) -> CustomerPlan:
    customer = customers[nmi]
    assert isinstance(customer, CustomerPlan), "only a customer with a window has due quotas"
    return customer


class Settlements:
    """Settles quotas. Safe to share between threads; state lives in the store and the cache."""

    def __init__(
        self,
        store: Store,
        cache: QuotaCache,
        clock: Clock,
        policy: SettlementPolicy | None = None,
        faults: SettlementFaults | None = None,
        *,
        plans: PlanCache | None = None,
    ) -> None:
        self.store = store
        self.cache = cache
        self.clock = clock
        self.policy = policy or SettlementPolicy()
        self.faults: SettlementFaults = faults or NoFaults()
        #: Stored plans parsed once per version (shared with invoicing by ``Runtime``).
        self.plans = plans or PlanCache()

    def settle(self, nmi: str, day: date, *, version: int = 1, trust_cache: bool = True) -> Answer:
        """Settle the quota of ``nmi`` on local date ``day``, or say why not and when to retry.

        ``version`` is the least version the caller knows of (a job scheduled for a reopened
        quota passes its version): a cached state of an older version is not trusted.
        ``trust_cache=False`` (a settle job: it must drive the newest version to a final state)
        never answers from the cache: a job is told of a new version by its payload only when
        it was enqueued for it, and a job waiting or running when a revision opened the version
        keeps the payload it had (unique per key), so a lost or late cache write of the new
        version would let the cache's older COMPLETED complete the job with the new version left
        PENDING (found by the protocol's model, docs/protocol.md).
        """
        with child_span(tracer, "settlement.settle"):
            key = quota_key(nmi, day)
            trace.get_current_span().set_attribute("freehours.quota.key", key)
            cached = self._cached(key) if trust_cache else None
            if cached is not None and cached.status.is_terminal and cached.version >= version:
                QUOTA_CACHE_REQUESTS.labels("hit").inc()
                return self._answered(self._terminal(cached, replay=True), cached=cached)
            return self._answered(self._claim(nmi, day, cached), cached=cached)

    def settle_many(self, requests: Sequence[SettleRequest]) -> list[Answer | Exception]:
        """``settle`` for many quotas at once, in as few transactions as one takes: each
        request's answer, or the exception ``settle`` would have raised for it, in order.

        The same state machine and the same answers: A for all of them in one transaction (their
        rows locked in one statement, in key order, the new ones inserted LOCKED in another, the
        claims written in a third); B in one more (their day locks taken without waiting, their
        meter data read in one statement, each rated, then the completions with their events and
        ledger entries, and the postponements, written in a statement each for all); then the
        cache. A request the common path does not fit (not due, no customer, inserted meanwhile
        by another, its day lock held by an ingest, or the batch's own transaction failing) is
        answered by the single path, alone: ``settle``, or its B for a quota claimed here. A
        quota whose attempt fails is released on its own, as ``settle`` releases it: no quota's
        failure counts an attempt against another.
        """
        batch = _Batch.of(requests)
        with child_span(tracer, "settlement.settle_many"):
            trace.get_current_span().set_attribute("freehours.settlement.batch", len(requests))
            for n in batch.firsts:
                request = requests[n]
                cached = self._cached(request.key) if request.trust_cache else None
                if (
                    cached is not None
                    and cached.status.is_terminal
                    and cached.version >= request.version
                ):
                    QUOTA_CACHE_REQUESTS.labels("hit").inc()
                    batch.answer(n, self._terminal(cached, replay=True), self, cached)
                    continue
                batch.cached[n] = cached
                batch.open.append(n)
            held = self._claim_many(batch)
            if held:
                self._complete_many(batch, held)
            for n, answer in enumerate(batch.answers):
                if answer is None:  # the single path's, one request at a time
                    request = requests[n]
                    try:
                        batch.answers[n] = self.settle(
                            request.nmi,
                            request.day,
                            version=request.version,
                            trust_cache=request.trust_cache,
                        )
                    except Exception as exc:  # noqa: BLE001 - this request's, as settle raises it
                        batch.answers[n] = exc
        return [answer for answer in batch.answers if answer is not None]

    def _claim_many(self, batch: _Batch) -> list[_Held]:
        """A for the batch's open requests that are due, in one transaction: the quotas now held
        (LOCKED by this call). Answers those A settles (replays, live locks, aborts); leaves to
        the single path those it cannot."""
        now = self.clock.now()
        policy = self.policy
        requests = batch.requests
        held: list[_Held] = []
        answered: list[tuple[int, Answer, Quota | None]] = []
        if not batch.open:
            return held
        try:
            with child_span(tracer, "settlement.claim"), self.store.write() as unit:
                nmis = {requests[n].nmi for n in batch.open}
                versions = unit.catalog.plan_versions_of(nmis)
                customers = {nmi: self._plan_of(unit, nmi, versions.get(nmi)) for nmi in nmis}
                due: dict[tuple[str, date], int] = {}
                for n in batch.open:
                    request = requests[n]
                    customer = customers[request.nmi]
                    if isinstance(customer, NoQuotas):
                        continue  # answered by the single path (a replay, or not stored)
                    times = self.quota_times(customer, request.day)
                    if self._wait(times, now, data_complete=True) is not None:
                        continue  # not due: answered by the single path
                    due[(request.nmi, request.day)] = n
                stored = unit.quotas.latest_many(due, for_update=True)
                fresh: list[tuple[int, Quota]] = []
                changed: list[Quota] = []
                for key, n in due.items():
                    quota = stored.get(key)
                    if quota is None:
                        first = claim(
                            new_quota(*key), now, policy.lock_timeout, policy.max_attempts
                        )
                        assert isinstance(first, Claimed), "a new quota can always be claimed"
                        fresh.append((n, first.quota))
                        continue
                    self._count_revalidation(batch.cached[n], quota)
                    decision = claim(quota, now, policy.lock_timeout, policy.max_attempts)
                    if isinstance(decision, Claimed):
                        changed.append(decision.quota)
                        held.append(_Held(n, decision.quota, _customer(customers, key[0])))
                    elif isinstance(decision, Busy):
                        locked = Answer(Outcome.LOCKED, decision.quota, decision.retry_after)
                        answered.append((n, locked, batch.cached[n]))
                    elif decision.changed:
                        changed.append(decision.quota)
                        aborted = self._terminal(decision.quota, replay=False)
                        answered.append((n, aborted, batch.cached[n]))
                    else:
                        answered.append((n, self._terminal(quota, replay=True), batch.cached[n]))
                traces = batch.trace_ids
                inserted = unit.quotas.insert_many_if_absent(
                    [quota for _, quota in fresh], at=now, trace_ids=traces
                )
                unit.quotas.save_many(changed, at=now, trace_ids=traces)
        except Exception:
            # Nothing of it stands: every request goes the single way, each on its own.
            log.warning("settlement_batch_claim_failed", quotas=len(batch.open), exc_info=True)
            return []
        for n, quota in fresh:
            if (quota.nmi, quota.date) in inserted:  # else another was first: asked again alone
                self._count_revalidation(batch.cached[n], quota)
                held.append(_Held(n, quota, _customer(customers, quota.nmi)))
        for quota in changed:
            if quota.status is QuotaStatus.ABORTED:  # by this claim: its attempts ran out
                log.error("quota_aborted", quota_key=quota.key, reason=quota.reason)
        for n, answer, cached in answered:
            batch.answer(n, answer, self, cached)
        claimed_at = self.clock.monotonic()
        for item in held:
            item.claimed_at = claimed_at
            log.debug(
                "quota_claimed",
                quota_key=item.quota.key,
                version=item.quota.version,
                fence=item.quota.fence,
            )
        return held

    def _complete_many(self, batch: _Batch, held: list[_Held]) -> None:
        """B for the quotas the batch holds, in one transaction; C (release) for each whose
        attempt failed; the single path's B for each the batch could not complete."""
        failed: list[tuple[_Held, Exception]] = []
        ready: list[_Held] = []
        for item in held:
            try:
                self.faults.check(FaultPoint.AFTER_CLAIM, item.quota)
            except Exception as exc:  # noqa: BLE001 - the attempt failed: released, as settle does
                failed.append((item, exc))
            else:
                ready.append(item)
        alone: list[_Held] = []
        stale: list[tuple[_Held, Quota]] = []
        done: list[tuple[_Held, Quota, LedgerEntry]] = []
        postponed: list[tuple[_Held, _Postponed]] = []
        try:
            with child_span(tracer, "settlement.complete"), self.store.write() as unit:
                # Without waiting: a day lock an ingest holds (shared, until it commits) sends
                # its quota the single way, which waits for it; so the batch holds many day
                # locks and never waits for one in a cycle with an ingest holding others.
                names = {day_lock(item.quota.nmi, item.quota.date): item for item in ready}
                taken = unit.try_hold_exclusive(names)
                mine = [item for name, item in names.items() if name in taken]
                alone = [item for name, item in names.items() if name not in taken]
                current = unit.quotas.latest_many([item.key for item in mine], for_update=True)
                wanted: dict[str, set[date]] = {}
                plans: dict[str, Plan] = {}
                for item in mine:
                    nem_dates = item.customer.profiles.nem_dates(item.quota.date)
                    wanted.setdefault(item.quota.nmi, set()).update(nem_dates)
                    plans[item.quota.nmi] = item.customer.plan
                # Only consumption counts towards free energy (and its window's completeness):
                # an export channel's day is not read into values, nor rated.
                days_of = unit.meter.days_for_many(
                    wanted, keep=lambda nmi, suffix: plans[nmi].is_consumption(suffix)
                )
                for item in mine:
                    mine_held = item.quota
                    quota = current.get(item.key)
                    if quota is None or quota.version != mine_held.version:
                        stale.append((item, quota or mine_held))
                        continue
                    dates = set(item.customer.profiles.nem_dates(mine_held.date))
                    days = [day for day in days_of[mine_held.nmi] if day.day in dates]
                    try:
                        step = self._completion(unit, quota, mine_held, item.customer, days)
                    except StaleFence as exc:
                        stale.append((item, exc.quota))
                    except Exception as error:  # noqa: BLE001 - released after the commit
                        failed.append((item, error))
                    else:
                        if isinstance(step, _Postponed):
                            postponed.append((item, step))
                        else:
                            done.append((item, *step))
                traces = batch.trace_ids
                for at in sorted({step.at for _, step in postponed}):
                    waiting = [step.answer.quota for _, step in postponed if step.at == at]
                    unit.quotas.save_many(waiting, at=at, trace_ids=traces)
                unit.quotas.save_and_book_many(
                    [(quota, entry) for _, quota, entry in done], trace_ids=traces
                )
        except Exception:
            # Nothing of it stands: each quota still held whose own attempt did not fail is
            # completed the single way, alone.
            log.warning("settlement_batch_complete_failed", quotas=len(ready), exc_info=True)
            finished = {item.n for item, _ in failed}
            alone = [item for item in ready if item.n not in finished]
            stale, done, postponed = [], [], []
        for item, completed, _ in done:
            SETTLEMENT_SECONDS.observe(self.clock.monotonic() - item.claimed_at)
            log.info(
                "quota_completed",
                quota_key=completed.key,
                version=completed.version,
                free_kwh=str(completed.free_kwh),
            )
            batch.answer(item.n, Answer(Outcome.SETTLED, completed), self)
        for item, step in postponed:
            batch.answer(item.n, step.answer, self)
        for item, found in stale:
            # Our lock expired and another holder took over: whatever it does is the answer.
            log.warning("quota_fence_stale", quota_key=item.key, fence=item.quota.fence)
            batch.answer(item.n, self._after_stale(found), self)
        for item, failure in failed:
            batch.attempt(item.n, partial(self._release, item.quota, failure), self)
        for item in alone:
            finish = partial(
                self._settle_claimed, item.quota, item.customer, item.claimed_at, checked=True
            )
            batch.attempt(item.n, finish, self)

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

    def publish(self, changed: Iterable[Quota]) -> None:
        """Write quotas to the cache after the commit that changed them."""
        for quota in changed:
            self._cache_put(quota)

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

    # --- A: claim -------------------------------------------------------------------------

    def _claim(self, nmi: str, day: date, cached: Quota | None) -> Answer:
        now = self.clock.now()
        policy = self.policy
        with child_span(tracer, "settlement.claim"):
            # The common case, a due quota nobody has asked for, is one statement of its own:
            # version 1 inserted already LOCKED.
            with self.store.autocommit() as unit:
                customer = self.customer_plan(unit, nmi)
                if isinstance(customer, NoQuotas):
                    # A version settled before the customer's plan lost its window is still
                    # what it was: replayed. Otherwise ABORTED, not stored: see _unsettleable.
                    stored = unit.quotas.latest(nmi, day)
                    if stored is not None and stored.status.is_terminal:
                        return self._terminal(stored, replay=True)
                    return Answer(Outcome.ABORTED, _unsettleable(nmi, day, customer.reason))
                # Whether the window has ended is known here; whether its data is complete is
                # checked by the holder, which reads the data anyway (B).
                times = self.quota_times(customer, day)
                wait = self._wait(times, now, data_complete=True)
                decision: ClaimDecision | None = (
                    None if wait is not None else self._claim_new(unit, nmi, day, now)
                )
            if decision is not None:
                self._count_revalidation(cached, decision.quota)
            else:
                with self.store.write() as unit:
                    # Due: the quota exists, lock it. Not due: create it PENDING if new, to
                    # answer with.
                    quota = unit.quotas.latest(nmi, day, for_update=True) if wait is None else None
                    quota = quota or unit.quotas.latest_or_new(nmi, day, at=now)
                    self._count_revalidation(cached, quota)
                    decision = claim(quota, now, policy.lock_timeout, policy.max_attempts)
                    if isinstance(decision, Settled) and not decision.changed:
                        return self._terminal(quota, replay=True)
                    if isinstance(decision, Busy):
                        return Answer(Outcome.LOCKED, decision.quota, decision.retry_after)
                    if wait is not None:
                        # Not due: nothing is taken over or aborted; the quota is answered as
                        # it stands, saying when it is due unless it has a reason of its own.
                        if quota.reason is None:
                            quota = replace(quota, reason=_due_reason(times, now))
                        return Answer(Outcome.NOT_DUE, quota, wait)
                    unit.quotas.save(decision.quota, at=now)
                    if isinstance(decision, Settled):
                        log.error(
                            "quota_aborted", quota_key=quota.key, reason=decision.quota.reason
                        )
                        return self._terminal(decision.quota, replay=False)
        assert isinstance(decision, Claimed)
        held = decision.quota
        # Debug: the request's or job's canonical line and quota_completed tell the story; a
        # line per claim would double the settlement's log volume for no new fact.
        log.debug("quota_claimed", quota_key=held.key, version=held.version, fence=held.fence)
        return self._settle_claimed(held, customer, claimed_at=self.clock.monotonic())

    def _claim_new(self, unit: Unit, nmi: str, day: date, now: datetime) -> Claimed | None:
        """The common case, a due quota nobody has asked for: version 1 inserted already LOCKED,
        one statement where an existing quota takes three. None when the quota exists."""
        first = claim(new_quota(nmi, day), now, self.policy.lock_timeout, self.policy.max_attempts)
        assert isinstance(first, Claimed), "a new quota can always be claimed"
        return first if unit.quotas.insert_if_absent(first.quota, at=now) else None

    # --- B: complete, or C: release ---------------------------------------------------------

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

    def _settle_claimed(
        self, held: Quota, customer: CustomerPlan, claimed_at: float, *, checked: bool = False
    ) -> Answer:
        """B (or C) for a quota this call holds; ``checked``: its AFTER_CLAIM fault point was
        passed already (a batch handing one quota on)."""
        try:
            if not checked:
                self.faults.check(FaultPoint.AFTER_CLAIM, held)
            done = self._complete(held, customer)
            if isinstance(done, Answer):
                return done
        except StaleFence as exc:
            # Our lock expired and another holder took over: whatever it does is the answer.
            log.warning("quota_fence_stale", quota_key=held.key, fence=held.fence)
            return self._after_stale(exc.quota)
        except Exception as exc:  # noqa: BLE001 - any failure of the attempt releases the quota
            return self._release(held, exc)
        SETTLEMENT_SECONDS.observe(self.clock.monotonic() - claimed_at)
        log.info(
            "quota_completed", quota_key=done.key, version=done.version, free_kwh=str(done.free_kwh)
        )
        return Answer(Outcome.SETTLED, done)

    def _complete(self, held: Quota, customer: CustomerPlan) -> Quota | Answer:
        """COMPLETED with its ledger entry; or, when the window's data is still incomplete before
        the data deadline, postponed (an Answer to come back later)."""
        lock = day_lock(held.nmi, held.date)
        with child_span(tracer, "settlement.complete"), self.store.write(lock) as unit:
            quota = unit.quotas.latest(held.nmi, held.date, for_update=True)
            if quota is None or quota.version != held.version:
                raise StaleFence(quota or held, held.fence)
            days = unit.meter.days_for(held.nmi, customer.plan.nem_dates(held.date))
            step = self._completion(unit, quota, held, customer, days)
            if isinstance(step, _Postponed):
                unit.quotas.save(step.answer.quota, at=step.at)
                return step.answer
            unit.quotas.save_and_book(*step)
        return step[0]

    def _completion(
        self,
        unit: Unit,
        quota: Quota,
        held: Quota,
        customer: CustomerPlan,
        days: list[IntervalDay],
    ) -> _Postponed | tuple[Quota, LedgerEntry]:
        """B's decision for ``quota`` (the held version, locked in ``unit``) from its day rows:
        COMPLETED with its ledger entry, or postponed while the window's data is incomplete
        before the data deadline. Raises ``StaleFence`` when ``held`` is no longer the holder."""
        plan = customer.plan
        times = self.quota_times(customer, held.date)
        reason = None
        if not window_complete(plan, days, times.window_start, times.window_end):
            now = self.clock.now()
            wait = self._wait(times, now, data_complete=False)
            if wait is not None:
                waiting = postpone(quota, held.fence, _waiting_reason(times))
                return _Postponed(Answer(Outcome.NOT_DUE, waiting, wait), now)
            # The data deadline has passed: settled with what there is, and it says so. Data
            # that arrives later opens the next version, which books the difference.
            reason = (
                INCOMPLETE_AT_DEADLINE
                if any(day.is_energy and plan.is_consumption(day.suffix) for day in days)
                else NO_DATA_AT_DEADLINE
            )
        free_kwh, free_value = free_energy(plan, customer.profiles, days, held.date)
        self.faults.check(FaultPoint.BEFORE_COMPLETE, quota)
        now = self.clock.now()
        done = complete(quota, held.fence, free_kwh, free_value, now, reason=reason)
        booked_kwh, booked_amount = unit.quotas.booked_before(held.nmi, held.date, done.version)
        entry = LedgerEntry(
            nmi=done.nmi,
            date=done.date,
            version=done.version,
            kwh=free_kwh - booked_kwh,
            amount=free_value - booked_amount,
            booked_at=now,
        )
        return done, entry

    def _release(self, held: Quota, failure: Exception) -> Answer:
        reason = ATTEMPT_FAILED
        log.warning("quota_attempt_failed", quota_key=held.key, fence=held.fence, exc_info=failure)
        now = self.clock.now()
        with self.store.write() as unit:
            quota = unit.quotas.latest(held.nmi, held.date, for_update=True)
            if quota is None or quota.version != held.version or quota.fence != held.fence:
                return self._after_stale(quota or held)
            if quota.status is not QuotaStatus.LOCKED:
                return self._after_stale(quota)
            released = release(quota, held.fence, reason, now, self.policy.max_attempts)
            unit.quotas.save(released, at=now)
        if released.status is QuotaStatus.ABORTED:
            log.error("quota_aborted", quota_key=released.key, reason=released.reason)
            return self._terminal(released, replay=False)
        return Answer(Outcome.RETRY, released, self._retry_after(released.attempts))

    def _after_stale(self, current: Quota) -> Answer:
        now = self.clock.now()
        if current.status.is_terminal:
            return self._terminal(current, replay=True)
        if current.is_locked_at(now):
            return Answer(Outcome.LOCKED, current, current.lock_seconds_left(now))
        return Answer(Outcome.RETRY, current, self._retry_after(current.attempts))

    def _retry_after(self, attempts: int) -> int:
        """Seconds before retrying after ``attempts`` failures, in whole seconds for a
        ``Retry-After``: the backoff's ceiling, doubling from ``retry_base`` up to ``retry_cap``."""
        policy = self.policy
        seconds = ceiling(
            attempts - 1, policy.retry_base.total_seconds(), policy.retry_cap.total_seconds()
        )
        return max(1, round(seconds))

    # --- helpers -----------------------------------------------------------------------------

    def _terminal(self, quota: Quota, *, replay: bool) -> Answer:
        if quota.status is QuotaStatus.ABORTED:
            return Answer(Outcome.ABORTED, quota)
        return Answer(Outcome.REPLAYED if replay else Outcome.SETTLED, quota)

    def _answered(self, answer: Answer, *, cached: Quota | None, record: bool = True) -> Answer:
        """Count the answer and write it to the cache when it is a stored state newer than the
        cached one: the one place the cache is written, always after the commit. ``record``:
        say it on the current span too (not on a batch's, which has many answers)."""
        quota = answer.quota
        span = trace.get_current_span() if record else None
        if span is not None and span.is_recording():
            span.set_attribute("freehours.settlement.outcome", answer.outcome.value)
            span.set_attribute("freehours.quota.status", quota.status.value)
        replayed = str(answer.outcome is Outcome.REPLAYED).lower()
        SETTLEMENT_OUTCOMES.labels(quota.status.value, replayed).inc()
        stored = quota.revision > 0
        newer = cached is None or (quota.version, quota.revision) > (
            cached.version,
            cached.revision,
        )
        if stored and newer:
            self._cache_put(quota)
        return answer

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

    def _cached(self, key: str) -> Quota | None:
        try:
            cached = self.cache.get(key)
        except CacheUnavailable as exc:
            QUOTA_CACHE_REQUESTS.labels("error").inc()
            log.warning("quota_cache_unavailable", quota_key=key, error=str(exc))
            return None
        if cached is None:
            QUOTA_CACHE_REQUESTS.labels("miss").inc()
        return cached

    def _count_revalidation(self, cached: Quota | None, current: Quota) -> None:
        if cached is None:
            return
        fresh = (cached.version, cached.revision) == (current.version, current.revision)
        QUOTA_CACHE_REQUESTS.labels("revalidated" if fresh else "stale").inc()

    def _cache_put(self, quota: Quota) -> None:
        ttl = (
            self.policy.terminal_cache_ttl if quota.status.is_terminal else self.policy.lock_timeout
        )
        try:
            with child_span(tracer, "cache.put"):
                self.faults.check(FaultPoint.CACHE_WRITE, quota)
                self.cache.put(quota, ttl.total_seconds())
        except Exception as exc:  # noqa: BLE001 - a cache write is never fatal (DESIGN.md 2)
            QUOTA_CACHE_WRITE_FAILURES.inc()
            log.warning("quota_cache_write_failed", quota_key=quota.key, error=str(exc))
