"""A real SMTP server for each mail test, started as a process of its own (STARTTLS with a
certificate made for the test, AUTH), and what it received, read back."""

from __future__ import annotations

import email
import email.policy
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from email.message import EmailMessage
from pathlib import Path

import pytest

from freehours.invoicing.smtp import SmtpServer
from tests.mail.smtp_server import make_certificate
from tests.servers import free_port

USER, PASSWORD = "freehours", "s3cret-for-the-test"


@dataclass
class Smtp:
    """The test's SMTP server: how freehours reaches it, and what it accepted."""

    server: SmtpServer
    directory: Path
    process: subprocess.Popen[bytes]

    def messages(self) -> list[EmailMessage]:
        """Every message accepted, in order."""
        found = []
        for path in sorted(self.directory.glob("*.eml")):
            message = email.message_from_bytes(path.read_bytes(), policy=email.policy.default)
            assert isinstance(message, EmailMessage)
            found.append(message)
        return found

    def reply_next(self, stage: str, reply: str) -> None:
        """Answer ``reply`` the next time ``stage`` (rcpt, data) is reached, instead of OK."""
        with (self.directory / "replies").open("a") as replies:
            replies.write(f"{stage} {reply}\n")

    def delay_data(self, seconds: float) -> None:
        (self.directory / "delay").write_text(str(seconds))


@pytest.fixture
def smtp(tmp_path: Path) -> Iterator[Smtp]:
    directory = tmp_path / "smtp"
    directory.mkdir()
    cert, key = make_certificate(tmp_path)
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.mail.smtp_server",
            "--port",
            str(port),
            "--cert",
            str(cert),
            "--key",
            str(key),
            "--dir",
            str(directory),
            "--user",
            USER,
            "--password",
            PASSWORD,
        ],
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 20
        while not (directory / "ready").exists():
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            assert time.monotonic() < deadline, "the SMTP server did not start"
            time.sleep(0.05)
        server = SmtpServer(
            "127.0.0.1", port, "starttls", USER, PASSWORD, str(cert), deadline_seconds=10
        )
        yield Smtp(server, directory, process)
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stderr is not None:
            process.stderr.close()
