"""The demo's mail server: a small SMTP server on loopback that accepts every message and keeps
it as a file (``out/demo/mail/NNNN.eml``), so that ``make demo`` sends its invoices by email as
a retailer's deployment does, to a server it can read back. The standard library's asyncio, in a
thread of its own; plain SMTP on 127.0.0.1 (the demo's sender uses ``security="none"``, which
the settings allow only for a relay on the same host). Not a mail server for anything else: no
TLS, no AUTH, no relaying.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from types import TracebackType

#: A message the mailbox keeps at most (a document's email with its PDF is about 60 KB).
MAX_MESSAGE = 2_000_000


class DemoMailbox:
    """The SMTP server: ``with DemoMailbox(directory) as box:`` serves on ``box.port``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = 0
        self.received = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None

    def __enter__(self) -> DemoMailbox:
        self.directory.mkdir(parents=True, exist_ok=True)
        for old in self.directory.glob("*.eml"):
            old.unlink()
        self._thread.start()
        started = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._session, "127.0.0.1", 0), self._loop
        )
        self._server = started.result(10)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _close(self) -> None:
        """Stop listening, and end the sessions still open (the senders keep their connections
        for a next message) while the loop still runs to close them."""
        if self._server is not None:
            self._server.close()
        sessions = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in sessions:
            task.cancel()
        await asyncio.gather(*sessions, return_exceptions=True)

    async def _session(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async def reply(line: str) -> None:
            writer.write(f"{line}\r\n".encode())
            await writer.drain()

        try:
            await reply("220 demo mailbox ready")
            while line := await asyncio.wait_for(reader.readline(), 30):
                verb = line.decode("ascii", "replace").strip().split(" ", 1)[0].upper()
                if verb in ("EHLO", "HELO"):
                    await reply("250-demo mailbox\r\n250 SIZE 2000000")
                elif verb in ("MAIL", "RCPT", "RSET", "NOOP"):
                    await reply("250 OK")
                elif verb == "DATA":
                    await reply("354 End data with <CR><LF>.<CR><LF>")
                    data = await asyncio.wait_for(reader.readuntil(b"\r\n.\r\n"), 30)
                    if len(data) > MAX_MESSAGE:
                        await reply("552 Message too large")
                        continue
                    self.received += 1
                    body = data[: -len(b".\r\n")].replace(b"\r\n..", b"\r\n.")
                    (self.directory / f"{self.received:04d}.eml").write_bytes(body)
                    await reply("250 Message accepted")
                elif verb == "QUIT":
                    await reply("221 Bye")
                    break
                else:
                    await reply("502 Command not implemented")
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
