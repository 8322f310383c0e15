"""A TCP proxy on 127.0.0.1 that fails as a network or a server does: for the faults tests and
``make bench`` (it imports nothing of freehours).

Modes, switched at any time from any thread:

- ``pass``: bytes go through both ways.
- ``cut``: every open connection is reset, and new ones are reset as soon as they are accepted
  (a server that is down, a refused connection).
- ``blackhole``: connections are accepted, and nothing goes through either way; what was sent is
  held, and delivered once the mode is ``pass`` again (a partition that heals, a hung server
  whose kernel still acknowledges).
- ``slow``: each chunk waits ``delay`` seconds before it goes on, both ways.

It counts what it was asked to carry (connections accepted, chunks read from clients), so that a
test can tell how often its client tried the server.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

Mode = Literal["pass", "cut", "blackhole", "slow"]
T = TypeVar("T")


@dataclass
class Counts:
    connections: int = 0
    client_chunks: int = 0


class FaultProxy:
    """A proxy from ``127.0.0.1:{port}`` to ``target``, run on an event loop of its own thread."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.mode: Mode = "pass"
        self.delay = 0.0
        self.counts = Counts()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._writers: set[asyncio.StreamWriter] = set()
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._server: asyncio.Server | None = None
        self.port = 0

    def start(self) -> FaultProxy:
        self._thread.start()
        self._server = self._run(asyncio.start_server(self._accept, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def stop(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
            self._reset_all()

        self._run(close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)

    def set_mode(self, mode: Mode, delay: float = 0.0) -> None:
        """Switch to ``mode`` (``delay``: seconds per chunk in ``slow``); counts start again."""

        async def switch() -> None:
            self.mode = mode
            self.delay = delay
            self.counts = Counts()
            if mode == "blackhole":
                self._flowing.clear()
            else:
                self._flowing.set()
            if mode == "cut":
                self._reset_all()

        self._run(switch())

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=10)

    def _reset_all(self) -> None:
        for writer in list(self._writers):
            _reset(writer)
        self._writers.clear()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.counts.connections += 1
        if self.mode == "cut":
            _reset(writer)
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            _reset(writer)
            return
        self._writers.update((writer, up_writer))
        await asyncio.gather(
            self._pump(reader, up_writer, from_client=True),
            self._pump(up_reader, writer, from_client=False),
        )
        self._writers.difference_update((writer, up_writer))

    async def _pump(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, from_client: bool
    ) -> None:
        try:
            while data := await reader.read(65536):
                if from_client:
                    self.counts.client_chunks += 1
                await self._flowing.wait()
                if self.mode == "slow":
                    await asyncio.sleep(self.delay)
                if self.mode == "cut" or writer.is_closing():
                    break
                writer.write(data)
                await writer.drain()
        except OSError:
            pass
        finally:
            if not writer.is_closing():
                writer.close()


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with a reset (SO_LINGER 0), as a refused or dropped connection looks to the peer."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.close()


@contextmanager
def fault_proxy(target_host: str, target_port: int) -> Iterator[FaultProxy]:
    """A started proxy to the target, stopped afterwards."""
    proxy = FaultProxy(target_host, target_port).start()
    try:
        yield proxy
    finally:
        proxy.stop()
