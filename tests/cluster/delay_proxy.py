"""A TCP proxy that delays what passes through it: the cluster test's delay where the kernel has
no ``tc netem`` (sch_netem), so that a slow link can still be tested there.

``DelayProxy`` listens on an address of the test's (the bridge's, in the root namespace) and
forwards each connection to one target. Every chunk read from either side is written to the other
``delay`` seconds after it was read, in order: a delay line, not a pause, so that chunks read in
the meantime are on their way too, as on a long wire; a half-close (EOF) travels the same way.
Both directions are delayed, so a request and its answer cost ``2 * delay`` more than without it.

Loss belongs to the kernel (nftables ``numgen`` on the link, ``Host.lossy``): TCP sees lost
segments and sends them again. Where nftables cannot drop at random, ``cut_percent`` makes the
proxy lose instead: each chunk has that chance of ending its connection (both sides reset), as a
byte stream cannot lose a chunk and go on.

It runs an asyncio loop on a thread of its own; ``close`` stops it and every connection, and
waits for the thread (bounded).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
from dataclasses import dataclass

#: Bytes read at once from either side: a chunk, delayed as one.
CHUNK_BYTES = 65_536
#: How long ``start`` waits for the loop to listen, and ``close`` for it to end: far more than
#: either takes on a loaded machine, short enough that a stuck proxy fails the test soon.
THREAD_WAIT_SECONDS = 10.0


@dataclass
class Passed:
    """What went through the proxy."""

    connections: int = 0
    chunks: int = 0
    cuts: int = 0  # connections the proxy ended (``cut_percent``)


class DelayProxy:
    def __init__(
        self,
        listen: str,
        target: tuple[str, int],
        delay: float,
        cut_percent: int = 0,
        rng: random.Random | None = None,
    ) -> None:
        self.listen = listen
        self.target = target
        self.delay = delay
        self.cut_percent = cut_percent
        self.passed = Passed()
        self._rng = rng or random.Random()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._port = 0
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="delay-proxy", daemon=True)

    @property
    def address(self) -> tuple[str, int]:
        return self.listen, self._port

    def start(self) -> DelayProxy:
        self._thread.start()
        if not self._ready.wait(THREAD_WAIT_SECONDS) or self._error is not None:
            raise RuntimeError(f"the delay proxy did not start: {self._error!r}")
        return self

    def close(self) -> None:
        if self._stop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(THREAD_WAIT_SECONDS)
        if self._thread.is_alive():
            raise RuntimeError("the delay proxy did not stop")

    def __enter__(self) -> DelayProxy:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _run(self) -> None:
        try:
            self._loop.run_until_complete(self._serve())
        except BaseException as exc:  # noqa: BLE001 - start() reports it
            self._error = exc
            self._ready.set()
        finally:
            self._loop.close()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        connections: set[asyncio.Task[None]] = set()

        def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.ensure_future(self._connection(reader, writer))
            connections.add(task)
            task.add_done_callback(connections.discard)

        server = await asyncio.start_server(accepted, self.listen, 0)
        self._port = server.sockets[0].getsockname()[1]
        self._ready.set()
        async with server:
            await self._stop.wait()
        for task in list(connections):
            task.cancel()
        await asyncio.gather(*connections, return_exceptions=True)

    async def _connection(
        self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter
    ) -> None:
        self.passed.connections += 1
        try:
            server_reader, server_writer = await asyncio.open_connection(*self.target)
        except OSError:
            client_writer.transport.abort()
            return
        writers = (client_writer, server_writer)
        try:
            async with asyncio.TaskGroup() as directions:
                self._direction(directions, client_reader, server_writer)
                self._direction(directions, server_reader, client_writer)
        except* (OSError, _Cut):
            for writer in writers:
                writer.transport.abort()
        finally:
            for writer in writers:
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()

    def _direction(
        self,
        tasks: asyncio.TaskGroup,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        """One direction of a connection: each chunk read is written ``delay`` later."""
        line: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
        loop = asyncio.get_running_loop()

        async def read() -> None:
            while True:
                chunk = await reader.read(CHUNK_BYTES)
                await line.put((loop.time() + self.delay, chunk))
                if not chunk:
                    return

        async def write() -> None:
            while True:
                due, chunk = await line.get()
                await asyncio.sleep(max(0.0, due - loop.time()))
                if not chunk:
                    if writer.can_write_eof():
                        writer.write_eof()
                    return
                if self.cut_percent and self._rng.randrange(100) < self.cut_percent:
                    self.passed.cuts += 1
                    raise _Cut
                self.passed.chunks += 1
                writer.write(chunk)
                await writer.drain()

        tasks.create_task(read())
        tasks.create_task(write())


class _Cut(Exception):
    """The proxy lost a chunk: its connection ends."""
