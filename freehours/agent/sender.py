"""Sending one batch: at most three attempts, full-jitter waits, the server's ``Retry-After``, a
retry budget, and the circuit breaker around every attempt.

tenacity runs the attempts, with everything explicit (its defaults retry forever without
waiting): ``stop`` after ``max_attempts`` or as soon as the retry budget refuses, ``wait`` from
``Backoff`` (never sooner than ``Retry-After``), ``retry`` only on failures a resend can fix, and
``sleep`` injected, so tests measure the waits on a manual clock and the agent can interrupt them.

    answer 200                  -> DELIVERED
    no answer, 408, 409, 429,   -> retried; after the last attempt, or when the budget or the
    5xx                            breaker says no: DEFERRED (the batch stays spooled)
    401, 403                    -> ``KeyRefused``: the agent's key is wrong, and every batch
                                   would be refused the same; the agent stops, the spool intact
    any other 4xx               -> REJECTED, never retried
    no request could be made    -> REJECTED with the reason (``Unsendable``), never attempted:
                                   the API is not at fault, so the breaker does not count it

Every send is a span, ``agent.send_batch``, with each attempt's HTTP request a client span inside
it. It is in the batch's own trace: the trace id the batch got when it was spooled (kept with it),
so that every send of one batch, also after a restart, shows in one trace, and the API's spans,
the settlement job and the settlement continue it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

import structlog
import tenacity
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from freehours.agent.batch import Batch
from freehours.agent.breaker import Breaker, CircuitOpen
from freehours.agent.http import Answer, IngestApi, Unreachable, Unsendable
from freehours.agent.policy import Backoff, RetryBudget, Verdict, retry_after_seconds, verdict
from freehours.agent.tally import Tally
from freehours.clock import Clock
from freehours.errors import ConfigurationError
from freehours.observability.metrics import (
    AGENT_ATTEMPTS,
    AGENT_RETRIES,
    AGENT_RETRY_BUDGET_EXHAUSTED,
)

log = structlog.get_logger("freehours.agent")
tracer = trace.get_tracer("freehours.agent")

#: DESIGN.md: at most three attempts per request.
MAX_ATTEMPTS = 3


class Stopped(Exception):
    """The agent is stopping: raised by the injected sleep to end a wait early."""


class KeyRefused(ConfigurationError):
    """The API refused the agent's key (401 or 403)."""


class _AnsweredRetry(Exception):
    """409, 429 or 5xx: the API could not take the batch now (a failure for the breaker)."""

    def __init__(self, answer: Answer, retry_after: float | None) -> None:
        super().__init__(f"HTTP {answer.status}")
        self.answer = answer
        self.retry_after = retry_after


class _AnsweredRefusal(Exception):
    """A 4xx that resending cannot change: the API is up, the batch or the key is wrong."""

    def __init__(self, answer: Answer, verdict: Verdict) -> None:
        super().__init__(f"HTTP {answer.status}")
        self.answer = answer
        self.verdict = verdict


class Outcome(StrEnum):
    """What became of one ``send``."""

    DELIVERED = "delivered"  # the API answered 200: delete the batch
    REJECTED = "rejected"  # refused for good: set it aside
    DEFERRED = "deferred"  # not this time: it stays first in line


@dataclass(frozen=True, slots=True)
class Delivery:
    """The outcome of ``send`` and what goes with it.

    ``answer`` is the API's last answer (None when there was none); ``retry_after`` the seconds
    its last answer said to wait; ``breaker_open``: deferred because the circuit is open;
    ``unsendable``: why a batch REJECTED without an answer could not be sent.
    """

    outcome: Outcome
    answer: Answer | None = None
    retry_after: float | None = None
    breaker_open: bool = False
    unsendable: str | None = None


class _BudgetStop(tenacity.stop.stop_base):
    """Stop retrying when the retry budget has no token for another attempt."""

    def __init__(self, budget: RetryBudget, on_refused: Callable[[], None]) -> None:
        self._budget = budget
        self._on_refused = on_refused

    def __call__(self, retry_state: tenacity.RetryCallState) -> bool:
        if self._budget.try_retry():
            return False
        self._on_refused()
        return True


class Sender:
    """Sends batches to the API through the breaker, one at a time."""

    def __init__(
        self,
        api: IngestApi,
        breaker: Breaker,
        *,
        budget: RetryBudget,
        backoff: Backoff,
        clock: Clock,
        sleep: Callable[[float], None],
        tally: Tally,
        max_attempts: int = MAX_ATTEMPTS,
    ) -> None:
        self._api = api
        self._breaker = breaker
        self._budget = budget
        self._backoff = backoff
        self._clock = clock
        self._sleep = sleep
        self._tally = tally
        self._max_attempts = max_attempts
        self._last_retry_after: float | None = None

    @property
    def breaker(self) -> Breaker:
        return self._breaker

    def send(
        self, batch: Batch, *, earlier_attempts: int = 0, on_attempt: Callable[[], None]
    ) -> Delivery:
        """Send ``batch`` (attempted ``earlier_attempts`` times before, by an earlier ``send`` or
        an earlier run); ``on_attempt`` is called before each attempt goes out.

        Raises ``KeyRefused`` on 401 or 403, and ``Stopped`` when a wait is interrupted.
        """
        with tracer.start_as_current_span(
            "agent.send_batch",
            context=batch_trace(batch),
            attributes={
                "freehours.idempotency_key": batch.idempotency_key,
                "freehours.batch.route": batch.route.value,
                "freehours.batch.reads": batch.reads,
                "freehours.batch.earlier_attempts": earlier_attempts,
            },
        ) as span:
            delivery = self._send(batch, earlier_attempts, on_attempt)
            span.set_attribute("freehours.batch.outcome", delivery.outcome.value)
            return delivery

    def _send(
        self, batch: Batch, earlier_attempts: int, on_attempt: Callable[[], None]
    ) -> Delivery:
        attempt = 0
        self._last_retry_after = None
        try:
            self._api.check(batch)
        except Unsendable as exc:
            return _unsendable(batch, exc)

        def guarded() -> Answer:
            nonlocal attempt
            attempt += 1
            return self._breaker.call(self._exchange, batch, attempt, earlier_attempts, on_attempt)

        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self._max_attempts)
            | _BudgetStop(self._budget, self._budget_refused),
            wait=self._wait,
            retry=tenacity.retry_if_exception_type((_AnsweredRetry, Unreachable)),
            sleep=self._sleep,
            reraise=True,
        )
        try:
            answer = retrying(guarded)
        except _AnsweredRefusal as refusal:
            if refusal.verdict is Verdict.KEY_REFUSED:
                raise KeyRefused(
                    f"the API refused the agent's key (HTTP {refusal.answer.status}): "
                    "check --api-key or FREEHOURS_API_KEY and its ingest scope"
                ) from refusal
            return Delivery(Outcome.REJECTED, refusal.answer)
        except _AnsweredRetry as failure:
            return Delivery(Outcome.DEFERRED, failure.answer, failure.retry_after)
        except Unreachable:
            return Delivery(Outcome.DEFERRED)
        except CircuitOpen:
            return Delivery(Outcome.DEFERRED, retry_after=self._last_retry_after, breaker_open=True)
        except Unsendable as exc:
            return _unsendable(batch, exc)
        return Delivery(Outcome.DELIVERED, answer)

    def _exchange(
        self, batch: Batch, attempt: int, earlier_attempts: int, on_attempt: Callable[[], None]
    ) -> Answer:
        """One attempt, inside the breaker: returns only on a 200."""
        if attempt == 1:
            self._budget.record_request()
        on_attempt()
        retried = int(attempt + earlier_attempts > 1)
        if retried:
            AGENT_RETRIES.inc()
        self._tally.add(attempts=1, retried=retried)
        context = {"idempotency_key": batch.idempotency_key, "attempt": attempt + earlier_attempts}
        try:
            answer = self._api.post(batch)
        except Unreachable as exc:
            self._failed("unreachable")
            log.warning("attempt_failed", error=str(exc), **context)
            raise
        judged = verdict(answer.status)
        if judged is Verdict.DELIVERED:
            AGENT_ATTEMPTS.labels("delivered").inc()
            return answer
        if judged is Verdict.RETRY:
            retry_after = retry_after_seconds(answer.headers.get("retry-after"), self._clock.now())
            self._last_retry_after = retry_after
            self._failed("retry")
            log.warning("attempt_failed", status=answer.status, retry_after=retry_after, **context)
            raise _AnsweredRetry(answer, retry_after)
        AGENT_ATTEMPTS.labels("rejected").inc()
        raise _AnsweredRefusal(answer, judged)

    def _failed(self, result: str) -> None:
        AGENT_ATTEMPTS.labels(result).inc()
        self._tally.add(failed_attempts=1)

    def _wait(self, retry_state: tenacity.RetryCallState) -> float:
        failure = retry_state.outcome.exception() if retry_state.outcome else None
        retry_after = failure.retry_after if isinstance(failure, _AnsweredRetry) else None
        return self._backoff.delay(retry_state.attempt_number - 1, retry_after)

    def _budget_refused(self) -> None:
        AGENT_RETRY_BUDGET_EXHAUSTED.inc()
        self._tally.add(budget_exhausted=1)
        log.warning("retry_budget_exhausted", balance=round(self._budget.balance, 2))


def _unsendable(batch: Batch, exc: Unsendable) -> Delivery:
    AGENT_ATTEMPTS.labels("unsendable").inc()
    log.error("batch_unsendable", idempotency_key=batch.idempotency_key, error=str(exc))
    return Delivery(Outcome.REJECTED, unsendable=str(exc))


#: What the breaker does not count as the API failing: a refusal is the API answering, and a
#: request h11 would not write never reached it.
BREAKER_EXCLUDES: tuple[type[BaseException], ...] = (_AnsweredRefusal, Unsendable)


def batch_trace(batch: Batch) -> otel_context.Context:
    """The batch's trace, as the parent of each of its sends.

    The batch itself is not a span (it was spooled by another thread, perhaps by another run):
    its span id is made from its trace id, so it is the same in every run.
    """
    trace_id = int(batch.trace_id, 16)
    parent = SpanContext(
        trace_id=trace_id,
        span_id=(trace_id >> 64) or 1,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    return trace.set_span_in_context(NonRecordingSpan(parent), otel_context.Context())
