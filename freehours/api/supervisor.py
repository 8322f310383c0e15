"""N API processes on one listening socket: started together, each replaced when it dies, stopped
together.

The socket is bound once by the supervisor (``freehours.api.server.serve``) and handed to each
process it starts; every process is started afresh (``spawn``: nothing of the supervisor's state
but the uvicorn configuration it is given, its application a factory of the supervisor's
settings) and accepts connections from that socket, as the kernel gives them out.

- A process that exits while the others serve is replaced at once (``api_process_replaced``,
  with its pid and exit status), and its live gauges dropped from the merged metrics.
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
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from types import FrameType

import structlog
import uvicorn
from uvicorn.config import STARTUP_FAILURE

from freehours.observability.exposition import forget_process

log = structlog.get_logger("freehours.api")

_SPAWN = multiprocessing.get_context("spawn")


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
        self.count = processes
        self.stop_seconds = stop_seconds
        self.processes: list[BaseProcess] = []
        self._ends: dict[int, Connection] = {}  # the supervisor's end of each process's pipe
        self._stopping = False
        #: The process that could not start, if one did not.
        self.failed: BaseProcess | None = None

    def run(self) -> bool:
        """Serve until SIGTERM or SIGINT (True), or until a process could not start (False)."""
        with _signals_wake() as woken:
            signal.signal(signal.SIGTERM, self._request_stop)
            signal.signal(signal.SIGINT, self._request_stop)
            self.processes = [self._start() for _ in range(self.count)]
            while not self._stopping:
                ready = wait([woken, *(process.sentinel for process in self.processes)])
                if woken in ready:
                    _drain(woken)
                if not self._stopping:
                    self._replace_the_dead()
            self._stop_all()
        return self.failed is None

    def _request_stop(self, _signal: int, _frame: FrameType | None) -> None:
        self._stopping = True

    def _start(self) -> BaseProcess:
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
        for index, process in enumerate(self.processes):
            if process.exitcode is None:
                continue
            self._forget(process)
            if process.exitcode == STARTUP_FAILURE:
                self.failed = process
                self._stopping = True
                return
            log.warning("api_process_replaced", process_pid=process.pid, exit_code=process.exitcode)
            self.processes[index] = self._start()

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
