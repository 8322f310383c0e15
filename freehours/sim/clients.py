"""The incident's clients on simulated time, built from the meter agent's own parts.

- ``SimulatedNetwork``: an httpx transport that hands requests to the API application in process
  (``httpx.ASGITransport``), except where the fault plan says a post's first attempt meets a 5xx,
  a timeout, a lost answer or a duplicate delivery.
- ``AgentSending``: the agent's spool and ``Sender`` (three attempts, full jitter, Retry-After,
  retry budget, circuit breaker), one batch at a time, a deferred batch waiting as the agent's
  sender thread waits (``pause_after_deferral``); its sleeps are the timeline's.
- ``QuotaAsker``: the quota ask that goes with every post in the incident's workload. The agent
  does not ask for quotas (settlement jobs settle them), so this is the client a meter service
  would write with the agent's decisions: ``verdict`` on the answer, ``Retry-After`` (capped as
  the agent caps it), full-jitter ``Backoff``, at most ``MAX_ATTEMPTS`` attempts, a
  ``RetryBudget`` and a ``Breaker`` of its own.
- ``SimulatedTimeStorage``: a breaker state whose open time runs on the simulated clock.

Every request is counted in ``ClientCounts``; a request that repeats an earlier one of the same
batch or the same ask is a retry.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from functools import partial

import httpx
import pybreaker
from starlette.types import ASGIApp

from freehours.agent.batch import Batch
from freehours.agent.breaker import Breaker, CircuitOpen
from freehours.agent.http import Answer, BlockingClient
from freehours.agent.policy import (
    Backoff,
    RetryBudget,
    Verdict,
    pause_after_deferral,
    retry_after_seconds,
    verdict,
)
from freehours.agent.sender import MAX_ATTEMPTS, Outcome, Sender, Stopped
from freehours.agent.spool import Spool, SpooledBatch
from freehours.clock import Clock
from freehours.errors import ConfigurationError
from freehours.sim.figures import RetryLog
from freehours.sim.timeline import Timeline
from freehours.sim.workload import PostFault

#: The API's address as the clients know it; requests never leave the process.
API_URL = "http://freehours.simulated"


@dataclass(slots=True)
class ClientCounts:
    """Requests the clients sent, and which of them were retries."""

    retries: RetryLog
    requests: int = 0
    rejected: int = 0  # batches the API refused for good (none expected)

    def request(self, at: float, *, retry: bool) -> None:
        self.requests += 1
        if retry:
            self.retries.record(at)


class SimulatedNetwork(httpx.AsyncBaseTransport):
    """Delivers requests to ``app`` in process, with the faults ``expect`` was told of."""

    def __init__(self, app: ASGIApp) -> None:
        self._server = httpx.ASGITransport(app=app)
        self._faults: dict[str, PostFault] = {}

    def expect(self, idempotency_key: str, fault: PostFault) -> None:
        """The first request with ``idempotency_key`` meets ``fault``."""
        self._faults[idempotency_key] = fault

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        key = request.headers.get("idempotency-key")
        fault = None if key is None else self._faults.pop(key, None)
        match fault:
            case PostFault.SERVER_ERROR:
                return httpx.Response(503, json={"title": "simulated: service unavailable"})
            case PostFault.TIMEOUT:
                raise httpx.ConnectTimeout("simulated: the request was lost", request=request)
            case PostFault.ANSWER_LOST:
                await self._deliver(request)
                raise httpx.ReadTimeout("simulated: the answer was lost", request=request)
            case PostFault.DUPLICATE:
                await self._deliver(request)
        return await self._server.handle_async_request(request)

    async def _deliver(self, request: httpx.Request) -> None:
        response = await self._server.handle_async_request(request)
        await response.aread()


class SimulatedTimeStorage(pybreaker.CircuitMemoryStorage):
    """A breaker state whose open time runs on ``clock``.

    pybreaker decides whether an open breaker may try again by comparing ``opened_at`` with the
    wall clock (``datetime.now``), on which simulated hours pass in milliseconds. This storage
    keeps the moment the breaker opened on ``clock`` and shows pybreaker the wall-clock moment
    that lies as far back: the breaker then keeps simulated time. ``half_open_in`` gives the
    breaker's own answer on the same footing.
    """

    def __init__(self, clock: Clock) -> None:
        super().__init__(pybreaker.STATE_CLOSED)
        self._clock = clock
        self._opened: datetime | None = None

    @property
    def opened_at(self) -> datetime | None:
        if self._opened is None:
            return None
        return datetime.now(UTC) - (self._clock.now() - self._opened)

    @opened_at.setter
    def opened_at(self, datetime: datetime) -> None:
        self._opened = self._clock.now()


def half_open_in(breaker: Breaker) -> float | None:
    """Simulated seconds until ``breaker`` (kept in a ``SimulatedTimeStorage``) lets a trial
    call through; None when it is not open."""
    return breaker.half_open_in(datetime.now(UTC))


class AgentSending:
    """The agent's spool, sent one batch at a time on the timeline."""

    def __init__(
        self,
        timeline: Timeline,
        spool: Spool,
        sender: Sender,
        *,
        backoff: Backoff,
        counts: ClientCounts,
        on_delivered: Callable[[Batch], None],
    ) -> None:
        self._timeline = timeline
        self._spool = spool
        self._sender = sender
        self._backoff = backoff
        self._counts = counts
        self._on_delivered = on_delivered
        self._sending = False
        self._tried: set[int] = set()

    def accept(self, batches: list[Batch]) -> None:
        """Spool ``batches`` and send them, after those already waiting."""
        self._spool.add(batches, self._timeline.clock.now())
        self._timeline.after(0.0, self.send)

    def send(self) -> None:
        """Send until the spool is empty (a no-op while a send is under way: it goes on)."""
        if self._sending:
            return
        self._sending = True
        deferrals = 0
        try:
            while (head := self._spool.head()) is not None:
                delivery = self._sender.send(
                    head.batch,
                    earlier_attempts=head.attempts,
                    on_attempt=partial(self._attempt, head),
                )
                if delivery.outcome is Outcome.DELIVERED:
                    self._spool.delete(head.seq)
                    self._on_delivered(head.batch)
                elif delivery.outcome is Outcome.REJECTED and delivery.answer is not None:
                    answer = delivery.answer
                    self._spool.set_aside(head.seq, answer.status, answer.body.decode())
                    self._counts.rejected += 1
                if delivery.outcome is not Outcome.DEFERRED:
                    deferrals = 0
                    continue
                deferrals += 1
                self._timeline.sleep(
                    pause_after_deferral(
                        self._backoff,
                        deferrals,
                        retry_after=delivery.retry_after,
                        half_open_in=half_open_in(self._sender.breaker),
                    )
                )
        except Stopped:
            return  # the simulation ended; what is still spooled was not delivered
        finally:
            self._sending = False

    def _attempt(self, head: SpooledBatch) -> None:
        self._spool.count_attempt(head.seq)
        self._counts.request(self._timeline.now, retry=head.seq in self._tried)
        self._tried.add(head.seq)


class _NotFinal(Exception):
    """409, 429, 5xx or no answer: ask again, perhaps (a failure for the breaker)."""

    def __init__(self, retry_after: float | None) -> None:
        super().__init__("not final")
        self.retry_after = retry_after


class SettlementApi(BlockingClient):
    """``POST /v1/free-energy/settlements`` over ``transport``, called synchronously."""

    def __init__(self, transport: httpx.AsyncBaseTransport, api_key: str) -> None:
        super().__init__(
            httpx.AsyncClient(
                base_url=API_URL,
                transport=transport,
                headers={"Authorization": f"Bearer {api_key}"},
            )
        )

    def settle(self, nmi: str, day: date) -> Answer:
        """Ask for the quota; raises ``httpx.TransportError`` when no answer came."""
        body = json.dumps({"nmi": nmi, "date": day.isoformat()})
        return self._post("/v1/free-energy/settlements", body, {"Content-Type": "application/json"})


class QuotaAsker:
    """Asks for a quota after a post, and again as the agent's decisions allow."""

    def __init__(
        self,
        timeline: Timeline,
        api: SettlementApi,
        *,
        breaker: Breaker,
        budget: RetryBudget,
        backoff: Backoff,
        counts: ClientCounts,
    ) -> None:
        self._timeline = timeline
        self._api = api
        self._breaker = breaker
        self._budget = budget
        self._backoff = backoff
        self._counts = counts

    def ask(self, nmi: str, day: date, attempt: int = 0) -> None:
        """Ask for ``nmi``'s quota of ``day``; ``attempt`` counts from 0 within one ask."""
        try:
            self._breaker.call(self._exchange, nmi, day, attempt)
        except CircuitOpen:
            return  # not sent: the settlement job settles the day whether anyone asks or not
        except _NotFinal as answer:
            if attempt + 1 < MAX_ATTEMPTS and self._budget.try_retry():
                wait = self._backoff.delay(attempt, answer.retry_after)
                self._timeline.after(wait, partial(self.ask, nmi, day, attempt + 1))

    def _exchange(self, nmi: str, day: date, attempt: int) -> None:
        """One request, inside the breaker: returns on a final answer, raises otherwise."""
        if attempt == 0:
            self._budget.record_request()  # as the agent's sender: a first attempt that goes out
        self._counts.request(self._timeline.now, retry=attempt > 0)
        try:
            answer = self._api.settle(nmi, day)
        except httpx.TransportError:
            raise _NotFinal(None) from None
        match verdict(answer.status):
            case Verdict.RETRY:
                now = self._timeline.clock.now()
                raise _NotFinal(retry_after_seconds(answer.headers.get("retry-after"), now))
            case Verdict.KEY_REFUSED:
                raise ConfigurationError(f"the API refused the settle key: {answer.status}")
            case Verdict.DELIVERED | Verdict.REJECTED:
                return  # settled, or never settleable (422): final either way
