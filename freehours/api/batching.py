"""Settlement requests that arrive together, settled together: the API's side of the one path.

A settlement request is a batch of one through the protocol's phases (``Settlements``); a
worker settles a batch of many in the same phases, in about as many statements as one takes.
``SettleQueue`` gives concurrent API requests the same: each request waits in the queue on the
event loop, and each of at most ``runners`` settlement threads takes everything waiting (up to
``batch``) as one ``settle_many`` call. Nothing waits for a batch to fill: a request that
finds a thread free is settled at once, alone, as before; only requests that arrive while
every thread is busy are settled together, by the next thread free. Under load each request's
statements are shared with the others of its batch, which is what lets one process settle
more (docs/scale.md); no request waits longer than the batch before it.

Each answer is the request's own: ``settle_many`` answers every request apart (a phase whose
transaction fails for the batch is done again for each quota alone, so that no quota's failure
counts against another), and a failure of the request's own is raised to it alone.

A batch runs in a context of its own (none of one request's log fields on another's lines):
its span, ``settlement.batch``, is a child of the first request's span, linked to each of the
others', and each quota's events are written in its own request's trace.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import cast

import anyio
from opentelemetry import trace

from freehours.observability.metrics import SETTLEMENT_BATCH_SIZE
from freehours.observability.trace_ids import current_trace_id
from freehours.settlement.model import Answer, SettleRequest
from freehours.settlement.service import Settlements

tracer = trace.get_tracer("freehours.api")

#: Quotas one ``settle_many`` call takes at most: the workers' batch (``DEFAULT_BATCH``).
BATCH = 64


@dataclass(slots=True)
class _Waiting:
    request: SettleRequest
    answer: asyncio.Future[Answer]
    span: trace.SpanContext


class SettleQueue:
    """Settles each request in the next batch a free settlement thread takes."""

    def __init__(self, settlements: Settlements, runners: int, *, batch: int = BATCH) -> None:
        self.settlements = settlements
        self.runners = runners
        self.batch = batch
        self._waiting: deque[_Waiting] = deque()
        self._running: set[asyncio.Task[None]] = set()
        #: Threads of their own: no other kind of work takes theirs, nor they its.
        self._threads = anyio.CapacityLimiter(runners)

    @property
    def waiting(self) -> int:
        """Requests waiting for a thread to take them (a client gone away still counted)."""
        return len(self._waiting)

    async def settle(self, request: SettleRequest) -> Answer:
        """``request``'s answer, settled in a batch with any others waiting; its failure
        raised."""
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[Answer] = loop.create_future()
        span = trace.get_current_span().get_span_context()
        if request.trace_id is None:
            request = replace(request, trace_id=current_trace_id())
        self._waiting.append(_Waiting(request, answer, span))
        if len(self._running) < self.runners:
            # A context of its own: the request's log fields are not the batch's.
            self._running.add(loop.create_task(self._run(), context=contextvars.Context()))
        return await answer

    async def _run(self) -> None:
        try:
            while self._waiting:
                taken: list[_Waiting] = []
                while self._waiting and len(taken) < self.batch:
                    waiting = self._waiting.popleft()
                    if not waiting.answer.done():  # its client went away: not settled
                        taken.append(waiting)
                if taken:
                    await self._settle(taken)
        finally:
            # In the same step as the last look at the queue: a request that comes after it
            # finds this thread gone, and starts another.
            self._running.discard(cast("asyncio.Task[None]", asyncio.current_task()))

    async def _settle(self, taken: Sequence[_Waiting]) -> None:
        try:
            answers = await anyio.to_thread.run_sync(
                self._settle_many, taken, limiter=self._threads
            )
        except Exception as exc:  # noqa: BLE001 - settle_many answers each; this is its bug
            answers = [exc] * len(taken)
        for waiting, answer in zip(taken, answers, strict=True):
            if waiting.answer.done():
                continue
            if isinstance(answer, Exception):
                waiting.answer.set_exception(answer)
            else:
                waiting.answer.set_result(answer)

    def _settle_many(self, taken: Sequence[_Waiting]) -> list[Answer | Exception]:
        # The first request's span is the batch's parent (sampled as it is); the others' linked.
        parent = trace.set_span_in_context(trace.NonRecordingSpan(taken[0].span))
        links = [trace.Link(waiting.span) for waiting in taken[1:] if waiting.span.is_valid]
        with tracer.start_as_current_span("settlement.batch", context=parent, links=links) as span:
            if span.is_recording():
                span.set_attribute("freehours.settlement.batch", len(taken))
            SETTLEMENT_BATCH_SIZE.observe(len(taken))
            return self.settlements.settle_many([waiting.request for waiting in taken])
