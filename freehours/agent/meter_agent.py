"""The meter agent: reads in from its sources, through the spool, out to the API.

Two threads share the spool file, each with its own connection:

- the caller's thread takes what the sources have (NEM12 files that arrived, simulated meters'
  intervals that ended), writes it to the spool in one synced transaction, and watches for the
  end of the run;
- the sender thread sends the oldest pending batch, and deletes it (200), sets it aside (a
  refusal) or leaves it first in line (deferred: it waits out the breaker or a backoff).

The run ends when the sources are finished (the simulation's duration has passed; with ``once``
the directory has been read, waiting up to ``ONCE_SETTLE_WAIT`` for files still being written)
and the spool is empty, or ``drain_timeout`` seconds after the
sources finished, or on ``stop()``. A NEM12 directory without ``once`` is watched until stopped.
Whatever is still spooled then is sent by the next run.
"""

from __future__ import annotations

import random
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from functools import partial
from pathlib import Path

import httpx
import structlog

from freehours import defaults
from freehours.agent.batch import Batch
from freehours.agent.breaker import Breaker, BreakerConfig
from freehours.agent.http import IngestApi, Timeouts, agent_header
from freehours.agent.inbox import (
    MAX_FILE_BYTES,
    SETTLE_SECONDS,
    Inbox,
    file_done,
    file_rejected,
)
from freehours.agent.meters import AcceleratedClock, Meters
from freehours.agent.policy import Backoff, RetryBudget, pause_after_deferral
from freehours.agent.sender import BREAKER_EXCLUDES, Delivery, Outcome, Sender, Stopped
from freehours.agent.spool import Spool, SpooledBatch, api_identity
from freehours.agent.tally import Counts, Tally
from freehours.backoff import RandomSource
from freehours.clock import Clock, SystemClock
from freehours.errors import ConfigurationError, FreehoursError
from freehours.observability.metrics import (
    AGENT_FILES_REJECTED,
    AGENT_READS_SENT,
    AGENT_REJECTED,
    AGENT_SENT,
    AGENT_SPOOLED,
)

log = structlog.get_logger("freehours.agent")

#: The caller's thread looks at its sources (and refreshes the progress display) this often.
TICK_SECONDS = 0.2
#: A NEM12 directory is listed once a second: files arrive in minutes, not milliseconds.
SCAN_SECONDS = 1.0
#: On stop, the sender may finish the request it is in for this long; past it the run ends
#: anyway (the batch is still spooled, and its Idempotency-Key makes the resend harmless).
STOP_GRACE_SECONDS = 5.0
#: After the sources finish, the agent keeps trying to empty the spool for five minutes: long
#: enough to ride out an API restart, short enough that a cron job does not pile up behind it.
DRAIN_TIMEOUT = 300.0
#: With ``once``, files still being written are waited for this long; past it they are left in
#: the directory for the next run (a file written to for ever must not keep a cron job alive).
ONCE_SETTLE_WAIT = 30.0


@dataclass(frozen=True, slots=True)
class Simulation:
    """Meters reading from ``start`` for ``duration``, ``speed`` times real time. ``meters``
    makes them for each run from its start and end (``freehours.sim.agent_meters``)."""

    meters: Callable[[datetime, datetime], Meters]
    start: datetime
    duration: timedelta
    speed: float


@dataclass(frozen=True, slots=True)
class AgentConfig:
    """Everything a run needs; the CLI builds it from its options and the settings."""

    api_url: str
    api_key: str
    spool_path: Path
    nem12_dir: Path | None = None
    once: bool = False
    simulation: Simulation | None = None
    timeouts: Timeouts = field(default_factory=Timeouts)
    breaker: BreakerConfig = field(default_factory=BreakerConfig)
    drain_timeout: float = DRAIN_TIMEOUT
    settle_seconds: float = SETTLE_SECONDS
    max_file_bytes: int = MAX_FILE_BYTES
    redis_url: str | None = None
    redis_prefix: str = defaults.REDIS_PREFIX
    #: What the agent calls itself in its ``Freehours-Agent`` header (default: the host's name).
    name: str = field(default_factory=socket.gethostname)


class Ending(StrEnum):
    """Why a run ended."""

    FINISHED = "finished"  # the sources finished and the spool is empty
    DRAIN_TIMEOUT = "drain_timeout"  # the sources finished; the spool did not empty in time
    STOPPED = "stopped"  # stop() (a signal)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What the progress display shows, at one moment."""

    counts: Counts
    pending: int
    breaker: str
    simulated_now: datetime | None
    simulation: Simulation | None


@dataclass(frozen=True, slots=True)
class RunSummary:
    """The run's counts, what was still spooled at its end, and why it ended."""

    counts: Counts
    pending: int
    ending: Ending

    def as_dict(self) -> dict[str, int | str]:
        return {**self.counts.as_dict(), "pending": self.pending, "ending": self.ending.value}


class MeterAgent:
    """One run of the agent. ``transport``, ``clock`` and ``rng`` are seams for tests."""

    def __init__(
        self,
        config: AgentConfig,
        *,
        clock: Clock | None = None,
        rng: RandomSource | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if config.nem12_dir is None and config.simulation is None:
            raise ValueError("an agent needs a NEM12 directory or a simulation")
        if config.nem12_dir is not None and (
            config.spool_path.resolve().parent == config.nem12_dir.resolve()
        ):
            raise ConfigurationError(
                f"spool {config.spool_path}: not in --nem12-dir, or it would be sent as a file"
            )
        self.config = config
        self.tally = Tally()
        self._clock = clock or SystemClock()
        self._rng = rng or random.Random()
        self._transport = transport
        self._stopping = threading.Event()
        self._work = threading.Event()  # new batches spooled: the sender looks again
        self._failure: BaseException | None = None
        self.breaker = Breaker.open(
            config.breaker,
            redis_url=config.redis_url,
            redis_prefix=config.redis_prefix,
            exclude=BREAKER_EXCLUDES,
            on_trip=lambda: self.tally.add(breaker_trips=1),
        )
        self._spool = Spool.open(config.spool_path)
        try:
            self._claim_spool()
        except BaseException:
            self._spool.close()
            raise
        self._inbox = (
            None
            if config.nem12_dir is None
            else Inbox(
                config.nem12_dir,
                self._clock,
                settle_seconds=config.settle_seconds,
                max_bytes=config.max_file_bytes,
            )
        )
        self._inbox_read = False  # with ``once``: the directory has been read
        self._once_deadline: float | None = None  # with ``once``: until then, wait for files
        self._simulated: tuple[Meters, AcceleratedClock] | None = None

    def _claim_spool(self) -> None:
        """The spool is this API's, or the agent does not start (``SpoolOwned``)."""
        config = self.config
        inbox = "" if config.nem12_dir is None else str(config.nem12_dir.resolve())
        had_owner = self._spool.owner() is not None
        try:
            self._spool.claim(config.spool_path, config.api_url, inbox, self._clock.now())
        except ConfigurationError as exc:
            self._spool_refused(exc)
            raise
        pending = self._spool.pending()
        if not had_owner and pending:
            # Made by an agent from before spools had owners: its batches are taken to be this
            # API's. Said, so that a wrong guess can be seen.
            log.warning(
                "spool_claimed",
                spool=str(config.spool_path),
                api=api_identity(config.api_url),
                pending=pending,
            )

    def _spool_refused(self, exc: ConfigurationError) -> None:
        """Say what the spool holds and for whom: a log line as well as the error."""
        config = self.config
        owner = self._spool.owner()
        log.error(
            "spool_belongs_to_another_api",
            spool=str(config.spool_path),
            spool_api=None if owner is None else owner.api_url,
            spool_inbox=None if owner is None else owner.inbox,
            pending=self._spool.pending(),
            set_aside=len(self._spool.rejected()),
            api=api_identity(config.api_url),
            error=str(exc),
        )

    def stop(self) -> None:
        """End the run soon (safe from a signal handler)."""
        self._stopping.set()

    def run(self, on_progress: Callable[[Snapshot], None] = lambda _: None) -> RunSummary:
        """Run until the sources finish and the spool empties, or until stopped.

        Raises ``KeyRefused`` when the API refuses the key, with the spool left as it was.
        """
        simulation = self.config.simulation
        if simulation is not None:
            meters = simulation.meters(simulation.start, simulation.start + simulation.duration)
            clock = AcceleratedClock(self._clock, simulation.start, simulation.speed)
            self._simulated = (meters, clock)
        log.info(
            "agent_started",
            api=self.config.api_url,
            spool=str(self.config.spool_path),
            pending=self._spool.pending(),
        )
        rejected = self._spool.rejected()
        if rejected:
            # Set aside by earlier runs and never resent: someone has to look at them.
            log.warning(
                "spool_holds_rejected_batches",
                count=len(rejected),
                oldest_status=rejected[0].status_code,
                oldest_problem=rejected[0].problem[:500],
            )
        sender = threading.Thread(target=self._send_all, name="freehours-agent-sender", daemon=True)
        sender.start()
        try:
            ending = self._produce(on_progress)
        finally:
            self._stopping.set()
            self._work.set()
            sender.join(STOP_GRACE_SECONDS)
            pending = self._spool.pending()
            self._spool.close()
        if self._failure is not None:
            raise self._failure
        summary = RunSummary(self.tally.counts(), pending, ending)
        log.info("agent_stopped", **summary.as_dict())
        return summary

    # --- the caller's thread: sources into the spool ---

    def _produce(self, on_progress: Callable[[Snapshot], None]) -> Ending:
        next_scan = self._clock.monotonic()
        drain_deadline: float | None = None
        while True:
            now = self._clock.monotonic()
            if self._inbox is not None and now >= next_scan and not self._inbox_read:
                self._scan(self._inbox, now)
                next_scan = now + SCAN_SECONDS
            if self._simulated is not None and not self._simulated[0].finished:
                meters, clock = self._simulated
                self._accept(meters.due(clock.now()))
            pending = self._spool.pending()
            AGENT_SPOOLED.set(pending)
            on_progress(self._snapshot(pending))
            if self._stopping.is_set():
                return Ending.STOPPED
            if self._sources_finished():
                if pending == 0:
                    return Ending.FINISHED
                if drain_deadline is None:
                    drain_deadline = now + self.config.drain_timeout
                if now >= drain_deadline:
                    return Ending.DRAIN_TIMEOUT
            self._stopping.wait(self._until_next_tick())

    def _scan(self, inbox: Inbox, now: float) -> None:
        """Take what has arrived; with ``once``, decide whether the directory has been read."""
        self._accept(inbox.arrivals())
        if inbox.rejected:
            self.tally.add(files_rejected=inbox.rejected)
        if not self.config.once:
            return
        if self._once_deadline is None:
            self._once_deadline = now + ONCE_SETTLE_WAIT
        if not inbox.unsettled:
            self._inbox_read = True
        elif now >= self._once_deadline:
            log.warning(
                "files_still_being_written",
                files=[path.name for path in inbox.unsettled],
                waited=ONCE_SETTLE_WAIT,
                note="left in the directory for the next run",
            )
            self._inbox_read = True

    def _accept(self, batches: list[Batch]) -> None:
        if not batches:
            return
        added = self._spool.add(batches, self._clock.now())
        if added:
            self.tally.add(spooled=added)
            log.debug("batches_spooled", count=added)
            self._work.set()

    def _sources_finished(self) -> bool:
        if self._inbox is not None and not self.config.once:
            return False
        inbox_done = self._inbox is None or self._inbox_read
        meters_done = self._simulated is None or self._simulated[0].finished
        return inbox_done and meters_done

    def _until_next_tick(self) -> float:
        wait = TICK_SECONDS
        if self._simulated is not None:
            meters, clock = self._simulated
            if meters.next_end is not None:
                wait = min(wait, clock.real_seconds_until(meters.next_end))
        return wait

    def _snapshot(self, pending: int) -> Snapshot:
        return Snapshot(
            counts=self.tally.counts(),
            pending=pending,
            breaker=self.breaker.state,
            simulated_now=self._simulated_now(),
            simulation=self.config.simulation,
        )

    def _simulated_now(self) -> datetime | None:
        """Simulated time, up to the simulation's end (past it, a fast clock would soon run
        past the year 9999)."""
        if self._simulated is None:
            return None
        meters, clock = self._simulated
        return meters.end if meters.finished else clock.now()

    # --- the sender thread: the spool out to the API ---

    def _identity(self) -> str:
        """The ``Freehours-Agent`` header: this agent's name, its breaker's state as the
        request is made (``half-open`` on the trial call), and how often it opened this run."""
        return agent_header(self.config.name, self.breaker.state, self.tally.counts().breaker_trips)

    def _send_all(self) -> None:
        spool = Spool.open(self.config.spool_path, durable=False)
        api = IngestApi(
            self.config.api_url,
            self.config.api_key,
            self.config.timeouts,
            transport=self._transport,
            identity=self._identity,
        )
        backoff = Backoff(self._rng)
        sender = Sender(
            api,
            self.breaker,
            budget=RetryBudget(self._clock),
            backoff=backoff,
            clock=self._clock,
            sleep=self._interruptible_sleep,
            tally=self.tally,
        )
        deferrals = 0
        try:
            while not self._stopping.is_set():
                head = spool.head()
                if head is None:
                    self._work.wait(TICK_SECONDS)
                    self._work.clear()
                    continue
                delivery = sender.send(
                    head.batch,
                    earlier_attempts=head.attempts,
                    on_attempt=partial(spool.count_attempt, head.seq),
                )
                self._settle(spool, head, delivery)
                if delivery.outcome is not Outcome.DEFERRED:
                    deferrals = 0
                    continue
                deferrals += 1
                pause = pause_after_deferral(
                    backoff,
                    deferrals,
                    retry_after=delivery.retry_after,
                    half_open_in=self.breaker.half_open_in(self._clock.now()),
                )
                log.info("batch_deferred", seq=head.seq, pause=round(pause, 3))
                self._interruptible_sleep(pause)
        except Stopped:
            pass
        except FreehoursError as exc:
            # The run cannot go on (the key was refused): it ends, and ``run`` raises this.
            self._failure = exc
            self._stopping.set()
        except Exception as exc:
            log.exception("sender_failed")
            self._failure = exc
            self._stopping.set()
        finally:
            api.close()
            spool.close()

    def _settle(self, spool: Spool, head: SpooledBatch, delivery: Delivery) -> None:
        """Act on a delivery: the file moved and the batch deleted, or set aside.

        A batch that can never be delivered (refused for good, or no request could be made of
        it) leaves the queue, so the batches behind it go out: a file's goes to ``rejected/``
        with the reason (the spool's copy is dropped once the file is there), a JSON batch, or
        a file's whose file is gone, stays in the spool set aside, for a person to look at.
        """
        batch = head.batch
        if delivery.outcome is Outcome.DELIVERED:
            if batch.source:
                file_done(batch.source)
            spool.delete(head.seq)
            AGENT_SENT.inc()
            AGENT_READS_SENT.inc(batch.reads)
            self.tally.add(sent=1, reads_sent=batch.reads, files_done=int(bool(batch.source)))
            log.debug("batch_sent", seq=head.seq, idempotency_key=batch.idempotency_key)
        elif delivery.outcome is Outcome.REJECTED:
            answer = delivery.answer
            status = None if answer is None else answer.status
            if answer is not None:
                problem = answer.body.decode("utf-8", "replace")
                reason = f"refused by the API at {api_identity(self.config.api_url)}: HTTP {status}"
                kind = "refused"
            else:
                problem = reason = f"could not be sent: {delivery.unsendable}"
                kind = "unsendable"
            moved = None
            if batch.source:
                moved = file_rejected(
                    batch.source,
                    f"{reason}\n{problem}" if answer is not None else reason,
                    self._clock.now(),
                    None if answer is None else answer.body,
                )
            if moved is not None:
                spool.delete(head.seq)
                AGENT_FILES_REJECTED.labels(kind).inc()
                self.tally.add(files_rejected=1)
            else:
                spool.set_aside(head.seq, status, problem)
            AGENT_REJECTED.inc()
            self.tally.add(rejected=1)
            log.error(
                "batch_rejected",
                seq=head.seq,
                status=status,
                idempotency_key=batch.idempotency_key,
                source=batch.source or None,
                problem=problem[:500],
                kept_in="rejected/" if moved is not None else "spool",
            )

    def _interruptible_sleep(self, seconds: float) -> None:
        if self._stopping.wait(seconds):
            raise Stopped
