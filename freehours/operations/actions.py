"""What an operator may do to the running system, each exactly once and each in the audit log.

- ``retry_job``: a DISCARDED job runs again as a new job of the same kind, key and payload. The
  discarded job stays as it was (its history is the record of what failed), and what it works on
  is not touched: a settlement job retried never resets its quota's attempts.
- ``cancel_job``: a waiting (AVAILABLE or RETRYABLE) job is CANCELLED; a running one finishes.
- ``reopen_quota``: an ABORTED quota's next version, PENDING with the operator's reason, and its
  settlement job.
- ``revoke_key``: the key stops working (within the API's key cache time), and its console
  sessions end at once.
- ``resend_document``: a document sent by email again, a delivery of its own.
- ``revoke_page``: every link to a customer's own page stops opening (their next email carries a
  link to a new page).

Each is one transaction: it locks what it acts on, checks that it is still in the state the
operator saw (the version, the job's state), acts, and writes its audit entry with the state
before and after. When the state changed meanwhile, nothing is done and the entry says
``conflict`` with what the state is now: two operators pressing the same button do it once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import date
from typing import Any

from freehours.clock import Clock
from freehours.domain.contacts import Delivery
from freehours.domain.settlement import Quota, QuotaStatus, new_quota, quota_key
from freehours.errors import InputError
from freehours.jobs.decisions import DEFAULT_DEADLINE
from freehours.jobs.job import Job, JobState
from freehours.observability.trace_ids import current_trace_id
from freehours.settlement.model import day_lock
from freehours.settlement.service import Settlements
from freehours.store.database import Store, Unit
from freehours.workers.settle import KIND as SETTLE_KIND
from freehours.workers.settle import SETTLEMENT_JOB_SLACK, current_traceparent

#: The longest reason an operator may give.
REASON_LENGTH = 500
_WAITING = (JobState.AVAILABLE, JobState.RETRYABLE)


@dataclass(frozen=True, slots=True)
class Operator:
    """Who acts: the key they signed in (or call the API) with."""

    key_id: str
    key_name: str


@dataclass(frozen=True, slots=True)
class Outcome:
    """What an action did: ``done``, or ``conflict`` (nothing done; ``message`` says why), and
    its audit entry."""

    done: bool
    message: str
    entry_id: int
    target: str
    #: What the action made, when it made something: the new job's id, the new version.
    made: dict[str, Any]


class NotFound(InputError):
    """What an action names does not exist (a 404)."""


class Actions:
    """The operator's actions over one store."""

    def __init__(self, store: Store, clock: Clock, settlements: Settlements) -> None:
        self.store = store
        self.clock = clock
        self.settlements = settlements

    def retry_job(self, operator: Operator, job_id: int) -> Outcome:
        """A DISCARDED job run again as a new job (once: a second retry of it is a conflict)."""
        return self._on_job(operator, job_id, "job.retry", self._retry)

    def cancel_job(self, operator: Operator, job_id: int) -> Outcome:
        """A waiting job CANCELLED."""
        return self._on_job(operator, job_id, "job.cancel", self._cancel)

    def _on_job(
        self,
        operator: Operator,
        job_id: int,
        action: str,
        act: Callable[[Unit, Job, Callable[..., Outcome]], Outcome],
    ) -> Outcome:
        """``act`` on job ``job_id``, locked for the transaction, with its audit entry."""
        with self.store.write() as unit:
            job = unit.jobs.lock(job_id)
            if job is None:
                raise NotFound(f"job {job_id}: no such job")
            record = self._recorder(unit, operator, action, f"job:{job_id}", job_summary(job))
            return act(unit, job, record)

    def _retry(self, unit: Unit, job: Job, record: Callable[..., Outcome]) -> Outcome:
        if job.state is not JobState.DISCARDED:
            return record(f"job {job.id} is {job.state.value}: only a DISCARDED job is retried")
        earlier = unit.audit.done("job.retry", f"job:{job.id}")
        if earlier is not None:
            again = (earlier.after or {}).get("retried_as")
            return record(f"job {job.id} was retried already, as job {again}")
        unfinished = [
            other
            for other in unit.jobs.page(kind=job.kind, key=job.key, limit=5)
            if not other.state.is_finished
        ]
        if unfinished:
            other = unfinished[0]
            return record(
                f"job {other.id} of the same kind and key is {other.state.value}: it does this work"
            )
        now = self.clock.now()
        new_id = unit.jobs.enqueue(
            job.kind,
            job.key,
            job.payload,
            run_at=now,
            deadline=now + DEFAULT_DEADLINE,
            max_attempts=job.max_attempts,
            traceparent=current_traceparent(),
            now=now,
        )
        return record(
            f"job {job.id} retried as job {new_id}",
            after={**job_summary(job), "retried_as": new_id},
            made={"job": new_id},
        )

    def _cancel(self, unit: Unit, job: Job, record: Callable[..., Outcome]) -> Outcome:
        if job.state not in _WAITING:
            return record(
                f"job {job.id} is {job.state.value}: only a waiting (AVAILABLE or RETRYABLE)"
                " job is cancelled"
            )
        unit.jobs.cancel(job.kind, job.key, now=self.clock.now())
        return record(
            f"job {job.id} cancelled",
            after={**job_summary(job), "state": JobState.CANCELLED.value},
        )

    def reopen_quota(
        self, operator: Operator, nmi: str, day: date, version: int, reason: str
    ) -> Outcome:
        """The ABORTED ``version`` of a quota reopened as its next version, with its settlement
        job; a conflict when ``version`` is no longer the newest or no longer ABORTED."""
        reason = " ".join(reason.split())
        if not reason:
            raise InputError("reason: say why the quota is reopened")
        if len(reason) > REASON_LENGTH:
            raise InputError(f"reason: at most {REASON_LENGTH} characters")
        target = f"quota:{quota_key(nmi, day)}"
        with self.store.write(day_lock(nmi, day)) as unit:
            quota = unit.quotas.latest(nmi, day, for_update=True)
            if quota is None:
                raise NotFound(f"quota {nmi} {day.isoformat()}: no such quota")
            before = quota_summary(quota)
            record = self._recorder(unit, operator, "quota.reopen", target, before, reason=reason)
            if quota.version != version:
                return record(
                    f"quota {nmi} {day.isoformat()} is at version {quota.version} now"
                    f" ({quota.status.value}), not {version}"
                )
            if quota.status is not QuotaStatus.ABORTED:
                return record(
                    f"quota {nmi} {day.isoformat()} version {version} is {quota.status.value}:"
                    " only an ABORTED quota is reopened"
                )
            successor = replace(
                new_quota(nmi, day, version=quota.version + 1), reason=f"reopened: {reason}"
            )
            now = self.clock.now()
            unit.quotas.insert(successor, at=now)
            unit.jobs.enqueue(
                SETTLE_KIND,
                quota.key,
                {"nmi": nmi, "date": day.isoformat(), "version": successor.version},
                run_at=now,
                deadline=now + SETTLEMENT_JOB_SLACK,
                traceparent=current_traceparent(),
                now=now,
            )
            outcome = record(
                f"quota {nmi} {day.isoformat()} reopened as version {successor.version}",
                after=quota_summary(successor),
                made={"version": successor.version},
            )
        self.settlements.publish([successor])
        return outcome

    def resend_document(self, operator: Operator, number: str) -> Outcome:
        """Document ``number`` sent by email again (a new delivery, its job queued), to the
        customer's email address as it is now; a conflict when they have no email delivery."""
        target = f"document:{number}"
        with self.store.write() as unit:
            document = unit.invoices.get_document(number)
            if document is None:
                raise NotFound(f"number: no document {number}")
            sent = unit.mail.of_document(number)
            before = {"deliveries": len(sent), "statuses": [d.status.value for d in sent]}
            record = self._recorder(unit, operator, "document.resend", target, before)
            contact = unit.catalog.contacts([document.nmi]).get(document.nmi)
            if contact is None or contact.delivery is not Delivery.EMAIL:
                return record(
                    f"document {number}: its customer has no email delivery (set an email"
                    " address and delivery email on the customer first)"
                )
            delivery = unit.mail.resend(
                number, document.nmi, actor=operator.key_name, at=self.clock.now()
            )
            return record(
                f"document {number} queued to be sent again (delivery {delivery.id})",
                after={"deliveries": len(sent) + 1, "delivery_id": delivery.id},
                made={"delivery_id": delivery.id},
            )

    def revoke_key(self, operator: Operator, key_id: str) -> Outcome:
        """A key revoked and its console sessions ended."""
        target = f"key:{key_id}"
        with self.store.write() as unit:
            key = unit.keys.get(key_id)
            if key is None:
                raise NotFound(f"key {key_id}: no such key")
            before = {"name": key.name, "scopes": sorted(key.scopes), "revoked_at": key.revoked_at}
            record = self._recorder(unit, operator, "key.revoke", target, before)
            now = self.clock.now()
            if not unit.keys.revoke(key_id, now):
                return record(f"key {key_id} was revoked already")
            sessions = unit.sessions.end_for_key(key_id)
            return record(
                f"key {key_id} revoked; {sessions} console session(s) ended",
                after={**before, "revoked_at": now},
            )

    def revoke_page(self, operator: Operator, nmi: str) -> Outcome:
        """Every link to customer ``nmi``'s own page stops opening: done, with how many pages
        were revoked (0 or 1; none when no link was ever sent, or it was revoked already)."""
        target = f"customer:{nmi}"
        with self.store.write() as unit:
            if unit.catalog.plan_version_of(nmi) is None:
                raise NotFound(f"nmi: no customer {nmi}")
            record = self._recorder(unit, operator, "page.revoke", target, {})
            revoked = unit.pages.revoke(nmi, at=self.clock.now())
            return record(
                f"customer {nmi}: their page's links stopped opening"
                if revoked
                else f"customer {nmi}: no page link to revoke",
                after={"revoked": revoked},
                made={"revoked": revoked},
            )

    def record(
        self, unit: Unit, operator: Operator, action: str, target: str, *, after: dict[str, Any]
    ) -> int:
        """An entry for what is not an action on the system (a sign-in, a sign-out), in the
        caller's transaction."""
        return unit.audit.record(
            at=self.clock.now(),
            key_id=operator.key_id,
            key_name=operator.key_name,
            action=action,
            target=target,
            outcome="done",
            after=after,
            trace_id=current_trace_id(),
        )

    def _recorder(
        self,
        unit: Unit,
        operator: Operator,
        action: str,
        target: str,
        before: dict[str, Any],
        *,
        reason: str | None = None,
    ) -> Callable[..., Outcome]:
        """The action's ending: its audit entry, done when given ``after``, else a conflict."""

        def record(
            message: str, *, after: dict[str, Any] | None = None, made: dict[str, Any] | None = None
        ) -> Outcome:
            done = after is not None
            entry = unit.audit.record(
                at=self.clock.now(),
                key_id=operator.key_id,
                key_name=operator.key_name,
                action=action,
                target=target,
                outcome="done" if done else "conflict",
                reason=reason if done else message,
                before=before,
                after=after,
                trace_id=current_trace_id(),
            )
            return Outcome(done, message, entry, target, made or {})

        return record


def job_summary(job: Job) -> dict[str, Any]:
    """What the audit log keeps of a job's state."""
    return {
        "kind": job.kind,
        "key": job.key,
        "state": job.state.value,
        "attempts": job.attempts,
        "runs": job.runs,
        "error": job.error,
    }


def quota_summary(quota: Quota) -> dict[str, Any]:
    """What the audit log keeps of a quota version's state."""
    return {
        "version": quota.version,
        "status": quota.status.value,
        "fence": quota.fence,
        "attempts": quota.attempts,
        "reason": quota.reason,
    }
