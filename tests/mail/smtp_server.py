"""A real SMTP server for the mail tests, as a process of its own: aiosmtpd with STARTTLS (a
certificate made for the test) and AUTH (PLAIN and LOGIN, after TLS only), writing each message
it accepts to ``DIR/NNNN.eml`` and reading its next answers from ``DIR/replies``.

``DIR/replies`` holds lines ``STAGE CODE TEXT`` (STAGE ``mail``, ``rcpt`` or ``data``): the next
time that stage is reached, the line is taken out and its reply sent instead of accepting, so a
test can make the server answer 451 once, or 550 for good; ``mail close`` closes the connection
at the next MAIL FROM without a word (a server that dropped an idle connection). ``DIR/delay``
holds seconds to wait before answering DATA (a slow server).

    python -m tests.mail.smtp_server --port P --cert C --key K --dir D --user U --password W
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import ssl
import subprocess
import time
import warnings
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session


def make_certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and localhost (openssl): its cert and key."""
    cert, key = directory / "smtp.crt", directory / "smtp.key"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


class Handler:
    def __init__(self, directory: Path, *, discard: bool = False) -> None:
        self.directory = directory
        self.discard = discard
        self.count = 0

    def _scripted(self, stage: str) -> str | None:
        replies = self.directory / "replies"
        if not replies.exists():
            return None
        lines = replies.read_text().splitlines()
        for index, line in enumerate(lines):
            if line.startswith(stage + " "):
                replies.write_text(
                    "".join(f"{rest}\n" for rest in lines[:index] + lines[index + 1 :])
                )
                return line.split(" ", 1)[1]
        return None

    async def handle_MAIL(
        self, server: SMTP, session: Session, envelope: Envelope, address: str, options: list[str]
    ) -> str | None:
        scripted = self._scripted("mail")
        if scripted == "close":
            assert server.transport is not None
            server.transport.close()
            return None
        if scripted is not None:
            return scripted
        envelope.mail_from = address
        envelope.mail_options.extend(options)
        return "250 OK"

    async def handle_RCPT(
        self, server: SMTP, session: Session, envelope: Envelope, address: str, options: list[str]
    ) -> str:
        scripted = self._scripted("rcpt")
        if scripted is not None:
            return scripted
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        delay = self.directory / "delay"
        if delay.exists():
            await asyncio.sleep(float(delay.read_text()))
        scripted = self._scripted("data")
        if scripted is not None:
            return scripted
        self.count += 1
        if self.discard:  # a benchmark's: counted, not kept
            (self.directory / "count").write_text(str(self.count))
            return "250 Message accepted for delivery"
        content = envelope.original_content or b""
        name = self.directory / f"{time.time_ns()}-{self.count:04d}.eml"
        peer = ":".join(map(str, session.peer)) if session.peer else ""
        envelope_line = (
            f"X-Envelope-To: {', '.join(envelope.rcpt_tos)}\r\nX-Peer: {peer}\r\n".encode()
        )
        name.write_bytes(envelope_line + content)
        return "250 Message accepted for delivery"


class Authenticator:
    def __init__(self, user: str, password: str) -> None:
        self.user, self.password = user.encode(), password.encode()

    def __call__(
        self, server: SMTP, session: Session, envelope: Envelope, mechanism: str, auth_data: Any
    ) -> AuthResult:
        ok = (
            isinstance(auth_data, LoginPassword)
            and auth_data.login == self.user
            and auth_data.password == self.password
        )
        return AuthResult(success=ok, handled=False)


def main() -> None:
    warnings.filterwarnings("ignore", message=".*login_data is deprecated.*")
    # aiosmtpd logs (not warns) that its own AUTH code sets a deprecated attribute: every login.
    logging.getLogger("mail.log").addFilter(lambda record: "login_data" not in record.msg)
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--dir", required=True)
    parser.add_argument("--user", required=True)
    parser.add_argument("--password", required=True)
    parser.add_argument("--discard", action="store_true", help="count messages, keep none")
    args = parser.parse_args()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(args.cert, args.key)
    controller = Controller(
        Handler(Path(args.dir), discard=args.discard),
        hostname="127.0.0.1",
        port=args.port,
        tls_context=context,
        require_starttls=True,
        authenticator=Authenticator(args.user, args.password),
        auth_required=True,
        auth_require_tls=True,
        ready_timeout=10,
    )
    controller.start()
    (Path(args.dir) / "ready").write_text("ready")
    stopped = False

    def stop(_signal: int, _frame: object) -> None:
        nonlocal stopped
        stopped = True

    signal.signal(signal.SIGTERM, stop)
    try:
        while not stopped:
            time.sleep(0.1)
    finally:
        controller.stop()


if __name__ == "__main__":
    main()
