"""One message sent through an SMTP server, within a total deadline: the standard library's
``smtplib`` over TLS (from the first byte) or STARTTLS, with AUTH where a user name is set.

What can go wrong is sorted into two: ``Refused`` (the server refused the recipient or the
message with a 5xx reply: sending it again will not help) and ``NotSent`` (anything else: no
connection, a timeout, a 4xx reply, TLS, AUTH or the sender refused; tried again later). No
reply text leaves here with the recipient's address in it: servers often echo it ("550
<jane@...>: no such user"), and it is personal data (docs/security.md).
"""

from __future__ import annotations

import contextlib
import re
import smtplib
import socket
import ssl
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from email.message import Message

#: Of a reply kept for the delivery's record.
MAX_REPLY = 300
_ADDRESS = re.compile(r"[^\s<>\"']+@[^\s<>\"']+")


@dataclass(frozen=True, slots=True)
class SmtpServer:
    """Where and how documents are sent (the ``FREEHOURS_SMTP_*`` settings)."""

    host: str
    port: int = 587
    security: str = "starttls"  # "starttls", "tls" or "none"
    username: str = ""
    password: str = ""
    ca_file: str = ""
    deadline_seconds: float = 30.0

    def tls_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=self.ca_file or None)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        return context


class NotSent(Exception):
    """The message was not accepted this time; try again later."""

    def __init__(self, code: int | None, reply: str) -> None:
        super().__init__(reply)
        self.code = code
        self.reply = reply


class Refused(NotSent):
    """The server refused the message for good (a 5xx reply to its sender, recipient or data)."""


def send(server: SmtpServer, message: Message, recipient: str) -> int:
    """Send ``message`` to ``recipient`` through ``server`` in a connection of its own."""
    return SmtpClient(server, reuse=False).send(message, recipient)


class SmtpClient:
    """Sends messages through ``server``, each within its deadline. With ``reuse``, each thread
    keeps its connection (TLS and AUTH done once) for its next message; one found closed at the
    message's MAIL FROM (nothing of it sent) is made again, once, and one that failed during a
    message is never used again."""

    def __init__(self, server: SmtpServer, *, reuse: bool = True) -> None:
        self.server = server
        self.reuse = reuse
        self._kept = threading.local()

    def send(self, message: Message, recipient: str) -> int:
        """Send ``message`` to ``recipient``: the code of the server's acceptance (250).
        ``NotSent`` or ``Refused``, their reply without the recipient's address."""
        deadline = time.monotonic() + self.server.deadline_seconds
        try:
            return self._send(message, recipient, deadline)
        except smtplib.SMTPRecipientsRefused as exc:
            code, reply = exc.recipients.get(recipient, (550, b"recipient refused"))
            raise _failure(code, reply, recipient) from None
        except smtplib.SMTPDataError as exc:  # the message itself refused (5xx) or deferred
            raise _failure(exc.smtp_code, exc.smtp_error, recipient) from None
        except smtplib.SMTPResponseException as exc:
            # HELO, STARTTLS, AUTH or the sender refused: this side's set-up, not the
            # recipient's (a relay that wants STARTTLS first answers MAIL FROM 530); tried
            # again, never failed for good, so that mending the settings sends them all.
            raise NotSent(exc.smtp_code, _clean(exc.smtp_error, recipient)) from None
        except (smtplib.SMTPException, OSError) as exc:  # ssl.SSLError is an OSError
            if time.monotonic() >= deadline:
                seconds = self.server.deadline_seconds
                raise NotSent(None, f"timed out after {seconds:g} s") from None
            raise NotSent(None, _clean(f"{type(exc).__name__}: {exc}", recipient)) from None

    def _send(self, message: Message, recipient: str, deadline: float) -> int:
        # A kept connection ended its last message cleanly (a failed one is never kept), so it
        # needs no RSET: its MAIL FROM shows whether it is still open, and one found closed there
        # (nothing of this message sent yet) is made again, once.
        client: _Client | None = getattr(self._kept, "client", None)
        self._kept.client = None
        # Past the deadline the socket is shut: a server that answers a byte at a time cannot
        # hold the attempt longer than that, whatever each read's own timeout.
        holder: list[smtplib.SMTP] = []
        timer = threading.Timer(max(deadline - time.monotonic(), 0), _shut_held, (holder,))
        timer.daemon = True
        timer.start()
        try:
            if client is not None:
                holder.append(client)
                try:
                    # One recipient: refused, it raises SMTPRecipientsRefused.
                    client.send_message(message, to_addrs=[recipient])
                except _Closed:
                    _close(client)
                    client = None
            if client is None:
                client = self._connect()
                holder.append(client)
                client.send_message(message, to_addrs=[recipient])
        except BaseException:
            if client is not None:
                _close(client)
            raise
        finally:
            timer.cancel()
        if self.reuse and time.monotonic() < deadline:
            client.kept = True
            self._kept.client = client
        else:
            with contextlib.suppress(smtplib.SMTPException, OSError):
                client.quit()  # accepted already: a QUIT unanswered changes nothing
            _close(client)
        return 250

    def _connect(self) -> _Client:
        server = self.server
        timeout = server.deadline_seconds
        if server.security == "tls":
            client: _Client = _SslClient(
                server.host, server.port, timeout=timeout, context=server.tls_context()
            )
        else:
            client = _Client(server.host, server.port, timeout=timeout)
        try:
            _greet(client, server)
        except BaseException:
            _close(client)
            raise
        return client


class _Closed(Exception):
    """A kept connection was found closed at a message's MAIL FROM: nothing of it was sent."""


class _Client(smtplib.SMTP):
    """A connection that knows whether it was kept from an earlier message (``kept``): then a
    MAIL FROM that finds it closed (no reply, or 421) raises ``_Closed``."""

    kept = False

    def mail(self, sender: str, options: Sequence[str] = ()) -> tuple[int, bytes]:
        if not self.kept:
            return super().mail(sender, options)
        self.kept = False
        try:
            code, reply = super().mail(sender, options)
        except (smtplib.SMTPServerDisconnected, OSError) as exc:
            raise _Closed() from exc
        if code == 421:  # the server's "closing" (an idle timeout, say): nothing sent
            raise _Closed()
        return code, reply


class _SslClient(_Client, smtplib.SMTP_SSL):
    pass


def _greet(client: _Client, server: SmtpServer) -> None:
    """EHLO, STARTTLS where asked (refused where not offered), AUTH where a user is set."""
    client.ehlo()
    if server.security == "starttls":
        if not client.has_extn("starttls"):
            raise smtplib.SMTPNotSupportedError("the server does not offer STARTTLS")
        client.starttls(context=server.tls_context())
        client.ehlo()
    if server.username:
        client.login(server.username, server.password)


def _close(client: smtplib.SMTP) -> None:
    with contextlib.suppress(OSError):
        client.close()


def _shut_held(holder: list[smtplib.SMTP]) -> None:
    for client in holder:
        _shut(client)


def _shut(client: smtplib.SMTP) -> None:
    sock = client.sock
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def _failure(code: int | None, reply: bytes | str, recipient: str) -> NotSent:
    text = _clean(reply, recipient)
    if code is not None and 500 <= code < 600:
        return Refused(code, text)
    return NotSent(code, text)


def _clean(reply: bytes | str, recipient: str) -> str:
    """A server's reply as the delivery's record keeps it: decoded, one line, bounded, and with
    the recipient's address (or any address) taken out."""
    text = reply.decode("utf-8", "replace") if isinstance(reply, bytes) else str(reply)
    text = text.replace(recipient, "<recipient>")
    text = _ADDRESS.sub("<address>", text)
    text = " ".join(text.split())
    return text[:MAX_REPLY]
