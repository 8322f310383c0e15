"""Settling a day's free-energy quota exactly once: the one path the API and the workers share.

``Settlements`` is one class, the protocol's every step beside the others, as docs/protocol.md's
table of steps reads them; what it is asked and answers is ``model.py``, the free energy it
computes ``energy.py``. A request for one quota (``settle``, the API) is a batch of one through
the same phases as a worker's batch (``settle_many``), each phase over a list:

A. claim (``_claim``): the customers' plans looked up in one statement; a quota whose customer
   has none with a free window replayed if it is final, else answered ABORTED (not stored). The
   common case, a due quota nobody has asked for yet, is inserted already LOCKED, all of them
   in one statement of its own (no transaction around it). The others, in one transaction:
   their rows locked (``FOR UPDATE`` / ``BEGIN IMMEDIATE``, in key order), a day not yet due
   created PENDING if new; a terminal state replayed, a live lock answered with its seconds
   left, a day not yet due (window open, or its data incomplete before the data deadline)
   answered with the seconds until it is; otherwise the row becomes LOCKED with the next fence.
B. complete (``_complete``): the quota days' locks taken (``day_lock``, shared by any ingest of
   the day's meter data until it commits; ``freehours.store.locks``): one quota waits for its
   lock, taken with the ``BEGIN``; a batch takes without waiting those no ingest holds, and
   completes each of the others after, alone, waiting. Then the rows locked again, each fence
   checked, the days' reads read in one statement and rated, then COMPLETED and its ledger
   entry written, all of them in one statement. A revision that lands meanwhile either is read
   here or finds the quota COMPLETED and opens the next version, even one whose ingest began
   before the quota existed.
C. release (``_release``), on a failure between A and B's commit: attempts + 1, ABORTED at the
   maximum. A holder that dies without releasing leaves a lock that expires; the next claim
   takes over and counts that attempt.

A phase's transaction that fails for a batch of many is done again for each of its quotas alone,
so that no quota's failure counts an attempt against another; for a batch of one, the failure
is the request's (B's releases the quota). The database's own failure (unreachable, too slow,
no pooled connection: ``freehours.store.errors.UNAVAILABLE``) is every quota's at once, as if
each were alone (B's releases them, in one transaction): done again quota by quota, each would
wait for it in turn. The cache is written after the commit that made the answer; a cache
failure is logged and counted, never fatal. Only terminal states are answered from the cache
alone.

Each call is a span, ``settlement.settle`` (or ``settlement.settle_many``), with A, B and each
cache write as spans inside it (``settlement.claim``, ``settlement.complete``, ``cache.put``):
in the API's request trace, or in the trace of the job that settles. Where that trace is not
recorded, they are not made.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime

import structlog
from opentelemetry import trace

from freehours.backoff import ceiling
from freehours.cache.quota import CacheUnavailable, QuotaCache
from freehours.clock import Clock
from freehours.domain.plan import Plan
from freehours.domain.reads import IntervalDay
from freehours.domain.settlement import (
    Busy,
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
    quota_key,
    release,
)
from freehours.faults import NoFaults
from freehours.observability.metrics import (
    QUOTA_CACHE_REQUESTS,
    QUOTA_CACHE_WRITE_FAILURES,
    SETTLEMENT_OUTCOMES,
    SETTLEMENT_SECONDS,
)
from freehours.observability.tracing import child_span
from freehours.plans.cache import PlanCache
from freehours.settlement.days import QuotaDays
from freehours.settlement.energy import (
    free_energy,
    window_complete,
)
from freehours.settlement.model import (
    ATTEMPT_FAILED,
    INCOMPLETE_AT_DEADLINE,
    NO_DATA_AT_DEADLINE,
    Answer,
    CustomerPlan,
    FaultPoint,
    NoQuotas,
    Outcome,
    SettlementFaults,
    SettlementPolicy,
    SettleRequest,
    _due_reason,
    _unsettleable,
    _waiting_reason,
    day_lock,
)
from freehours.store.database import Store, Unit
from freehours.store.errors import UNAVAILABLE
from freehours.store.quotas import LedgerEntry

log = structlog.get_logger("freehours.settlement")


tracer = trace.get_tracer("freehours.settlement")


@dataclass(frozen=True, slots=True)
class _Postponed:
    """B found the window's data incomplete before the deadline: the answer, and when."""

    answer: Answer
    at: datetime


@dataclass(slots=True)
class _Held:
    """A quota a call holds: its request's index, the LOCKED version, the customer's plan."""

    n: int
    quota: Quota
    customer: CustomerPlan
    claimed_at: float = 0.0

    @property
    def key(self) -> tuple[str, date]:
        return (self.quota.nmi, self.quota.date)


@dataclass(slots=True)
class _Batch:
    """A call's requests and its answers so far (None: not answered yet)."""

    requests: Sequence[SettleRequest]
    answers: list[Answer | Exception | None]
    #: The index of each quota key's first request: a repeated key is answered alone, after.
    firsts: list[int]
    #: The cached state of each first request read from the cache (None: none, or not trusted).
    cached: dict[int, Quota | None] = field(default_factory=dict)
    trace_ids: dict[str, str | None] = field(default_factory=dict)

    @classmethod
    def of(cls, requests: Sequence[SettleRequest]) -> _Batch:
        firsts: dict[str, int] = {}
        for n, request in enumerate(requests):
            firsts.setdefault(request.key, n)
        trace_ids = {key: requests[n].trace_id for key, n in firsts.items()}
        return cls(requests, [None] * len(requests), list(firsts.values()), trace_ids=trace_ids)

    def key(self, n: int) -> tuple[str, date]:
        request = self.requests[n]
        return (request.nmi, request.day)


class Settlements(QuotaDays):
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
        super().__init__(store, clock, policy, plans=plans)
        self.cache = cache
        self.faults: SettlementFaults = faults or NoFaults()

    def settle(self, nmi: str, day: date, *, version: int = 1, trust_cache: bool = True) -> Answer:
        """Settle the quota of ``nmi`` on local date ``day``, or say why not and when to retry:
        a batch of one (``settle_many``), whose failure is raised.

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
            span = trace.get_current_span()
            span.set_attribute("freehours.quota.key", quota_key(nmi, day))
            request = SettleRequest(nmi, day, version=version, trust_cache=trust_cache)
            (answer,) = self._settle([request])
            if isinstance(answer, Exception):
                raise answer
            if span.is_recording():
                span.set_attribute("freehours.settlement.outcome", answer.outcome.value)
                span.set_attribute("freehours.quota.status", answer.quota.status.value)
            return answer

    def settle_many(self, requests: Sequence[SettleRequest]) -> list[Answer | Exception]:
        """``settle`` for many quotas at once, in as few statements as one takes: each
        request's answer, or the exception ``settle`` would have raised for it, in order.

        The same phases as ``settle`` (it is a batch of one): A with the customers' plans read
        in one statement, the new due quotas inserted LOCKED in another, and the rest claimed in
        one transaction; B in one more (the day locks no ingest holds taken without waiting,
        the meter data read in one statement, each quota rated, then the completions with their
        events and ledger entries, and the postponements, written in a statement each for all);
        C for those whose attempt failed, in one more; then the cache. A quota whose day lock an
        ingest holds is completed after, alone, waiting for it; a phase whose transaction fails
        is done again for each of its quotas alone: no quota's failure counts an attempt against
        another.
        """
        with child_span(tracer, "settlement.settle_many"):
            trace.get_current_span().set_attribute("freehours.settlement.batch", len(requests))
            return self._settle(requests)

    def _settle(self, requests: Sequence[SettleRequest]) -> list[Answer | Exception]:
        batch = _Batch.of(requests)
        open_: list[int] = []
        for n in batch.firsts:
            request = requests[n]
            cached = self._cached(request.key) if request.trust_cache else None
            if (
                cached is not None
                and cached.status.is_terminal
                and cached.version >= request.version
            ):
                QUOTA_CACHE_REQUESTS.labels("hit").inc()
                self._answer(batch, n, self._terminal(cached, replay=True), cached)
                continue
            batch.cached[n] = cached
            open_.append(n)
        if open_:
            held = self._claim(batch, open_)
            if held:
                self._complete(batch, held)
        answers: list[Answer | Exception] = []
        for n, answered in enumerate(batch.answers):
            if answered is None:  # a key asked for again in the batch: after its first, alone
                answers += self._settle([requests[n]])
            else:
                answers.append(answered)
        return answers

    def publish(self, changed: Iterable[Quota]) -> None:
        """Write quotas to the cache after the commit that changed them."""
        for quota in changed:
            self._cache_put(quota)

    # --- A: claim -------------------------------------------------------------------------

    def _claim(self, batch: _Batch, ns: Sequence[int]) -> list[_Held]:
        """A for requests ``ns`` of the batch (first of their keys, not answered from the
        cache): the quotas now held (LOCKED by this call). Answers the others."""
        now = self.clock.now()
        held: list[_Held] = []
        answered: list[tuple[int, Answer]] = []
        rest: list[int] = []  # due but stored already, or not due: claimed in a transaction
        customers: dict[str, CustomerPlan] = {}
        waiting: dict[int, tuple[int, QuotaTimes]] = {}
        try:
            with child_span(tracer, "settlement.claim"), self.store.autocommit() as unit:
                nmis = {batch.requests[n].nmi for n in ns}
                versions = unit.catalog.plan_versions_of(nmis)
                plans = {nmi: self._plan_of(unit, nmi, versions.get(nmi)) for nmi in nmis}
                unsettleable: list[tuple[int, str]] = []
                due: list[int] = []
                for n in ns:
                    request = batch.requests[n]
                    customer = plans[request.nmi]
                    if isinstance(customer, NoQuotas):
                        unsettleable.append((n, customer.reason))
                        continue
                    customers[request.nmi] = customer
                    times = self.quota_times(customer, request.day)
                    # Whether the window has ended is known here; whether its data is complete
                    # is checked by the holder, which reads the data anyway (B).
                    wait = self._wait(times, now, data_complete=True)
                    if wait is None:
                        due.append(n)
                    else:
                        waiting[n] = (wait, times)
                        rest.append(n)
                if unsettleable:
                    # A version settled before the customer's plan lost its window is still
                    # what it was: replayed. Otherwise ABORTED, not stored: see _unsettleable.
                    stored = unit.quotas.latest_many([batch.key(n) for n, _ in unsettleable])
                    for n, reason in unsettleable:
                        found = stored.get(batch.key(n))
                        if found is not None and found.status.is_terminal:
                            answered.append((n, self._terminal(found, replay=True)))
                        else:
                            aborted = _unsettleable(*batch.key(n), reason)
                            answered.append((n, Answer(Outcome.ABORTED, aborted)))
                # The common case, a due quota nobody has asked for: version 1 inserted already
                # LOCKED, one statement for all of them where an existing quota takes three.
                fresh = {batch.key(n): (n, self._first_claim(batch.key(n), now)) for n in due}
                inserted = unit.quotas.insert_if_absent(
                    [quota for _, quota in fresh.values()], at=now, trace_ids=batch.trace_ids
                )
        except Exception as exc:  # noqa: BLE001 - nothing of it stands but the inserts' own
            return self._alone(batch, ns, exc, "settlement_batch_claim_failed", self._claim)
        for key, (n, quota) in fresh.items():
            if key in inserted:
                self._count_revalidation(batch.cached[n], quota)
                held.append(_Held(n, quota, customers[key[0]]))
            else:  # another was first: claimed in the transaction below
                rest.append(n)
        for n, answer in answered:
            self._answer(batch, n, answer)
        if rest:
            held += self._claim_stored(batch, sorted(rest), customers, waiting)
        claimed_at = self.clock.monotonic()
        for item in held:
            item.claimed_at = claimed_at
            # Debug: the request's or job's canonical line and quota_completed tell the story;
            # a line per claim would double the settlement's log volume for no new fact.
            log.debug(
                "quota_claimed",
                **_named(item.quota),
                version=item.quota.version,
                fence=item.quota.fence,
            )
        return held

    def _claim_stored(
        self,
        batch: _Batch,
        ns: Sequence[int],
        customers: Mapping[str, CustomerPlan],
        waiting: Mapping[int, tuple[int, QuotaTimes]],
    ) -> list[_Held]:
        """A in one transaction for requests ``ns``: those due whose quota is stored already,
        and those not due (``waiting``: the seconds until they are, and their times), whose
        quota is created PENDING if new, to answer with."""
        now = self.clock.now()
        policy = self.policy
        held: list[_Held] = []
        answered: list[tuple[int, Answer]] = []
        changed: list[Quota] = []
        try:
            with child_span(tracer, "settlement.claim"), self.store.write() as unit:
                new = [new_quota(*batch.key(n)) for n in ns if n in waiting]
                unit.quotas.insert_if_absent(new, at=now, trace_ids=batch.trace_ids)
                stored = unit.quotas.latest_many([batch.key(n) for n in ns], for_update=True)
                for n in ns:
                    quota = stored[batch.key(n)]
                    self._count_revalidation(batch.cached[n], quota)
                    decision = claim(quota, now, policy.lock_timeout, policy.max_attempts)
                    if isinstance(decision, Settled) and not decision.changed:
                        answered.append((n, self._terminal(quota, replay=True)))
                    elif isinstance(decision, Busy):
                        answer = Answer(Outcome.LOCKED, decision.quota, decision.retry_after)
                        answered.append((n, answer))
                    elif n in waiting:
                        # Not due: nothing is taken over or aborted; the quota is answered as
                        # it stands, saying when it is due unless it has a reason of its own.
                        wait, times = waiting[n]
                        if quota.reason is None:
                            quota = replace(quota, reason=_due_reason(times, now))
                        answered.append((n, Answer(Outcome.NOT_DUE, quota, wait)))
                    elif isinstance(decision, Claimed):
                        changed.append(decision.quota)
                        held.append(_Held(n, decision.quota, customers[quota.nmi]))
                    else:  # taken over with its attempts run out: ABORTED by this claim
                        changed.append(decision.quota)
                        answered.append((n, self._terminal(decision.quota, replay=False)))
                unit.quotas.save(changed, at=now, trace_ids=batch.trace_ids)
        except Exception as exc:  # noqa: BLE001 - nothing of it stands
            return self._alone(
                batch,
                ns,
                exc,
                "settlement_batch_claim_failed",
                lambda b, one: self._claim_stored(b, one, customers, waiting),
            )
        for quota in changed:
            if quota.status is QuotaStatus.ABORTED:
                log.error("quota_aborted", **_named(quota), reason=quota.reason)
        for n, answer in answered:
            self._answer(batch, n, answer)
        return held

    def _first_claim(self, key: tuple[str, date], now: datetime) -> Quota:
        first = claim(new_quota(*key), now, self.policy.lock_timeout, self.policy.max_attempts)
        assert isinstance(first, Claimed), "a new quota can always be claimed"
        return first.quota

    def _alone(
        self,
        batch: _Batch,
        ns: Sequence[int],
        failure: Exception,
        event: str,
        phase: Callable[[_Batch, Sequence[int]], list[_Held]],
    ) -> list[_Held]:
        """After a phase's transaction failed for requests ``ns``: the request's answer when it
        is one, else the phase again for each alone (what each then holds)."""
        if len(ns) > 1 and not isinstance(failure, UNAVAILABLE):
            log.warning(event, quotas=len(ns), exc_info=failure)
            return [item for n in ns for item in phase(batch, [n])]
        # The database's failure is each request's answer: alone, each would wait for it again.
        for n in ns:
            batch.answers[n] = failure
        return []

    # --- B: complete, or C: release ---------------------------------------------------------

    def _complete(self, batch: _Batch, held: list[_Held]) -> None:
        """B for the quotas the call holds, C (release) for each whose attempt failed."""
        failed: list[tuple[_Held, Exception]] = []
        ready: list[_Held] = []
        for item in held:
            try:
                self.faults.check(FaultPoint.AFTER_CLAIM, item.quota)
            except Exception as exc:  # noqa: BLE001 - the attempt failed: released
                failed.append((item, exc))
            else:
                ready.append(item)
        if ready:
            failed += self._complete_ready(batch, ready)
        if failed:
            self._release(batch, failed)

    def _complete_ready(self, batch: _Batch, ready: list[_Held]) -> list[tuple[_Held, Exception]]:
        """B for ``ready`` in one transaction: the quotas whose attempt failed (to release)."""
        failed: list[tuple[_Held, Exception]] = []
        alone: list[_Held] = []
        stale: list[tuple[_Held, Quota]] = []
        done: list[tuple[_Held, Quota, LedgerEntry]] = []
        postponed: list[tuple[_Held, _Postponed]] = []
        one = len(ready) == 1
        try:
            # One quota waits for its day lock (taken with the BEGIN). A batch takes without
            # waiting those no ingest holds (shared, until it commits) and completes the others
            # after, alone: it holds many day locks and never waits for one in a cycle with an
            # ingest holding others.
            lock = day_lock(*ready[0].key) if one else None
            with child_span(tracer, "settlement.complete"), self.store.write(lock) as unit:
                mine = ready
                if not one:
                    names = {day_lock(*item.key): item for item in ready}
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
                    unit.quotas.save(waiting, at=at, trace_ids=traces)
                unit.quotas.save_and_book(
                    [(quota, entry) for _, quota, entry in done], trace_ids=traces
                )
        except Exception as exc:
            if one or isinstance(exc, UNAVAILABLE):
                # The attempt failed (the database's failure is each quota's): released, as
                # any failure is.
                return [(item, exc) for item in ready]
            # Each quota still held whose own attempt did not fail is completed alone.
            log.warning("settlement_batch_complete_failed", quotas=len(ready), exc_info=True)
            finished = {item.n for item, _ in failed}
            alone = [item for item in ready if item.n not in finished]
            stale, done, postponed = [], [], []
        for item, completed, _ in done:
            SETTLEMENT_SECONDS.observe(self.clock.monotonic() - item.claimed_at)
            log.info(
                "quota_completed",
                **_named(completed),
                version=completed.version,
                free_kwh=str(completed.free_kwh),
            )
            self._answer(batch, item.n, Answer(Outcome.SETTLED, completed))
        for item, step in postponed:
            self._answer(batch, item.n, step.answer)
        for item, found in stale:
            # Our lock expired and another holder took over: whatever it does is the answer.
            log.warning("quota_fence_stale", **_named(item.quota), fence=item.quota.fence)
            self._answer(batch, item.n, self._after_stale(found))
        for item in alone:
            failed += self._complete_ready(batch, [item])
        return failed

    def _release(self, batch: _Batch, failed: list[tuple[_Held, Exception]]) -> None:
        """C for the quotas whose attempt failed, in one transaction: attempts + 1, ABORTED at
        the maximum, fenced (a quota another holder took over is answered as it stands)."""
        for item, failure in failed:
            log.warning(
                "quota_attempt_failed",
                **_named(item.quota),
                fence=item.quota.fence,
                exc_info=failure,
            )
        self._released(batch, failed)

    def _released(self, batch: _Batch, failed: list[tuple[_Held, Exception]]) -> None:
        now = self.clock.now()
        released: list[tuple[_Held, Quota]] = []
        stale: list[tuple[_Held, Quota]] = []
        try:
            with self.store.write() as unit:
                current = unit.quotas.latest_many([item.key for item, _ in failed], for_update=True)
                for item, _ in failed:
                    held = item.quota
                    quota = current.get(item.key)
                    if (
                        quota is None
                        or (quota.version, quota.fence) != (held.version, held.fence)
                        or quota.status is not QuotaStatus.LOCKED
                    ):
                        stale.append((item, quota or held))
                        continue
                    released.append(
                        (
                            item,
                            release(
                                quota, held.fence, ATTEMPT_FAILED, now, self.policy.max_attempts
                            ),
                        )
                    )
                unit.quotas.save(
                    [quota for _, quota in released], at=now, trace_ids=batch.trace_ids
                )
        except Exception as exc:
            if len(failed) == 1 or isinstance(exc, UNAVAILABLE):
                for item, _ in failed:
                    batch.answers[item.n] = exc
                return
            log.warning("settlement_batch_release_failed", quotas=len(failed), exc_info=True)
            for one in failed:
                self._released(batch, [one])
            return
        for item, found in stale:
            self._answer(batch, item.n, self._after_stale(found))
        for item, quota in released:
            if quota.status is QuotaStatus.ABORTED:
                log.error("quota_aborted", **_named(quota), reason=quota.reason)
                self._answer(batch, item.n, self._terminal(quota, replay=False))
            else:
                retry = Answer(Outcome.RETRY, quota, self._retry_after(quota.attempts))
                self._answer(batch, item.n, retry)

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

    def _answer(self, batch: _Batch, n: int, answer: Answer, cached: Quota | None = None) -> None:
        """Request ``n``'s answer, counted and cached (``cached``: the state the cache had)."""
        if cached is None:
            cached = batch.cached.get(n)
        batch.answers[n] = self._answered(answer, cached=cached)

    def _answered(self, answer: Answer, *, cached: Quota | None) -> Answer:
        """Count the answer and write it to the cache when it is a stored state newer than the
        cached one: the one place the cache is written, always after the commit."""
        quota = answer.quota
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
            log.warning("quota_cache_write_failed", **_named(quota), error=str(exc))


def _named(quota: Quota) -> dict[str, str]:
    """A quota's fields on a log line: its key, and its NMI and date as a request's line names
    them (a batch's lines are in no one request's context)."""
    return {"quota_key": quota.key, "nmi": quota.nmi, "date": quota.date.isoformat()}
