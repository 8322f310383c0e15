"""N API processes on one listening socket: started together, each replaced when it dies, stopped
together.

The socket is bound once by the supervisor (``freehours.api.server.serve``) and handed to each
process it starts; every process is started afresh (``spawn``: nothing of the supervisor's state
but the uvicorn configuration it is given, its application a factory of the supervisor's
settings) and accepts connections from that socket, as the kernel gives them out.

- A process that exits while the others serve is replaced (``api_process_replaced``, with its
  pid and exit status), and its live gauges dropped from the merged metrics: at once when it had
  served a while; when it died within ``QUICK_SECONDS`` of starting, after a wait that doubles
  with each such death in a row (``ceiling`` of ``freehours.backoff``: 0.5, 1, 2, 4 s), and after
  ``MAX_QUICK_DEATHS`` of them the supervisor gives up and stops the others, as for a start-up
  failure: a process that cannot stay up is never restarted in a loop.
- A process that exits with uvicorn's start-up failure status (3: its application or its
  lifespan could not start, e.g. its database refused it) would fail the same way again: the
  supervisor stops the others and ``run`` says so.
- SIGTERM or SIGINT: each process is sent SIGTERM (it stops accepting, finishes its requests,
  stops its job workers); one still running after ``stop_seconds`` is killed.
- A process whose supervisor is gone (killed, not stopped) stops by itself as on SIGTERM: it
  watches a pipe whose other end only the supervisor holds.

The supervisor waits on the processes' sentinels and on a wake-up file descriptor for signals,
so a death or a signal is acted on at once rather than at the next poll.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from types import FrameType

import structlog
import uvicorn
from uvicorn.config import STARTUP_FAILURE

from freehours.backoff import ceiling
from freehours.observability.exposition import forget_process

log = structlog.get_logger("freehours.api")

_SPAWN = multiprocessing.get_context("spawn")

#: A process that dies within this many seconds of starting died quickly.
QUICK_SECONDS = 10.0
#: Quick deaths in a row of one process's slot after which the supervisor gives up.
MAX_QUICK_DEATHS = 5
#: The wait before replacing a process after its first quick death, doubled after each next one.
RESTART_BASE_SECONDS = 0.5


@dataclass
class Slot:
    """One of the supervisor's ``processes`` places: the process in it, when it started, and how
    many of its processes in a row died quickly."""

    process: BaseProcess | None = None
    started: float = 0.0
    quick_deaths: int = 0
    #: When the next process may start in it (monotonic seconds), while it is empty.
    restart_at: float | None = None

    def died(self, now: float) -> float | None:
        """The process has died at ``now``: when to start the next (None: give up)."""
        if now - self.started >= QUICK_SECONDS:
            self.quick_deaths = 0
            return now
        self.quick_deaths += 1
        if self.quick_deaths >= MAX_QUICK_DEATHS:
            return None
        return now + ceiling(self.quick_deaths - 1, RESTART_BASE_SECONDS, QUICK_SECONDS)


def _serve_process(config: uvicorn.Config, listener: socket.socket, supervisor: Connection) -> None:
    """An API process: serve ``listener`` until SIGTERM (or until the supervisor is gone)."""

    def watch_supervisor() -> None:
        with contextlib.suppress(EOFError):
            supervisor.recv()  # nothing is ever sent: it ends when the supervisor's end closes
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch_supervisor, name="watch-supervisor", daemon=True).start()
    uvicorn.Server(config).run(sockets=[listener])


class Supervisor:
    """Runs ``processes`` API processes serving ``listener`` with ``config``, as the module
    says."""

    def __init__(
        self,
        config: uvicorn.Config,
        listener: socket.socket,
        processes: int,
        *,
        stop_seconds: float,
    ) -> None:
        self.config = config
        self.listener = listener
        self.stop_seconds = stop_seconds
        self.slots = [Slot() for _ in range(processes)]
        self._ends: dict[int, Connection] = {}  # the supervisor's end of each process's pipe
        self._stopping = False
        #: Why the supervisor gave up (a process could not start, or could not stay up), if it
        #: did: the command's last line.
        self.failure: str | None = None

    @property
    def processes(self) -> list[BaseProcess]:
        """The processes running or just exited, one a slot (an empty slot has none)."""
        return [slot.process for slot in self.slots if slot.process is not None]

    def run(self) -> bool:
        """Serve until SIGTERM or SIGINT (True), or until a process could not start or stay up
        (False, ``failure`` saying which)."""
        with _signals_wake() as woken:
            signal.signal(signal.SIGTERM, self._request_stop)
            signal.signal(signal.SIGINT, self._request_stop)
            for slot in self.slots:
                self._start(slot)
            while not self._stopping:
                sentinels = [process.sentinel for process in self.processes]
                ready = wait([woken, *sentinels], timeout=self._until_next_restart())
                if woken in ready:
                    _drain(woken)
                if not self._stopping:
                    self._replace_the_dead()
            self._stop_all()
        return self.failure is None

    def _request_stop(self, _signal: int, _frame: FrameType | None) -> None:
        self._stopping = True

    def _until_next_restart(self) -> float | None:
        """Seconds until an empty slot may be filled again (None: no slot waits)."""
        due = [slot.restart_at for slot in self.slots if slot.restart_at is not None]
        return None if not due else max(0.0, min(due) - time.monotonic())

    def _start(self, slot: Slot) -> None:
        slot.process = self._spawn()
        slot.started = time.monotonic()
        slot.restart_at = None

    def _spawn(self) -> BaseProcess:
        reader, writer = _SPAWN.Pipe(duplex=False)
        process = _SPAWN.Process(
            target=_serve_process,
            args=(self.config, self.listener, reader),
            name="freehours-api",
        )
        process.start()
        reader.close()  # the process has its copy, which sees the end of the pipe with ours
        assert process.pid is not None
        self._ends[process.pid] = writer
        return process

    def _replace_the_dead(self) -> None:
        now = time.monotonic()
        for slot in self.slots:
            process = slot.process
            if process is not None and process.exitcode is not None:
                self._forget(process)
                slot.process = None
                if process.exitcode == STARTUP_FAILURE:
                    self._give_up(
                        "an API process could not start (its api_process_failed line says why)"
                    )
                    return
                restart_at = slot.died(now)
                if restart_at is None:
                    self._give_up(
                        f"an API process died {slot.quick_deaths} times in a row within"
                        f" {QUICK_SECONDS:g} s of starting (its api_process_replaced lines say"
                        " how)"
                    )
                    return
                slot.restart_at = restart_at
                log.warning(
                    "api_process_replaced",
                    process_pid=process.pid,
                    exit_code=process.exitcode,
                    quick_deaths=slot.quick_deaths,
                    after_seconds=round(restart_at - now, 3),
                )
            if slot.process is None and slot.restart_at is not None and slot.restart_at <= now:
                self._start(slot)

    def _give_up(self, why: str) -> None:
        self.failure = f"{why}; the others were stopped"
        self._stopping = True

    def _stop_all(self) -> None:
        for process in self.processes:
            if process.exitcode is None and process.pid is not None:
                os.kill(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + self.stop_seconds
        for process in self.processes:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.exitcode is None:
                log.error(
                    "api_process_killed", process_pid=process.pid, after_seconds=self.stop_seconds
                )
                process.kill()
                process.join()
            self._forget(process)

    def _forget(self, process: BaseProcess) -> None:
        """A process that has exited: its pipe closed, its live gauges dropped (one that stopped
        as it should has dropped them itself)."""
        assert process.pid is not None
        end = self._ends.pop(process.pid, None)
        if end is not None:
            end.close()
        forget_process(process.pid)


@contextmanager
def _signals_wake() -> Iterator[socket.socket]:
    """A socket that becomes readable when a signal arrives (``signal.set_wakeup_fd``); the
    signal handlers in place before are put back afterwards."""
    readable, writable = socket.socketpair()
    writable.setblocking(False)
    handlers = {number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGINT)}
    previous = signal.set_wakeup_fd(writable.fileno(), warn_on_full_buffer=False)
    try:
        yield readable
    finally:
        signal.set_wakeup_fd(previous)
        for number, handler in handlers.items():
            signal.signal(number, handler)
        readable.close()
        writable.close()


def _drain(readable: socket.socket) -> None:
    readable.setblocking(False)
    with contextlib.suppress(BlockingIOError):
        while readable.recv(64):
            pass
