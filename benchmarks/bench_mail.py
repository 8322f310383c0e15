"""Documents by email: how many a second the mail workers send (issue 35's goal: 10,000 emails to
the test SMTP server at 100 a second or more).

``ACCOUNTS`` customers (``FREEHOURS_BENCH_MAIL_ACCOUNTS``, default 10,000), each with an email
address and July 2026 settled (``bench_invoicing._load``), are invoiced by a run in this process:
each invoice's send is queued with it. Then the SMTP server of the tests (aiosmtpd as a process
of its own, STARTTLS on a certificate made here, AUTH; counting each message, keeping none) takes
them from a worker whose mail queue has ``RUNNERS`` runners (the default 4), on this machine's 2
cores, each message rendered (its PDF) and sent, each runner keeping its connection (TLS and AUTH
once). Loading and the run
are not measured; the rate is the sends' alone, from the worker's start to the last one sent.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from logging import WARNING
from pathlib import Path

import structlog

from benchmarks.bench_invoicing import AS_OF, DEFAULT_ADMIN_URL, _load, _nmi
from freehours.clock import SystemClock
from freehours.domain.contacts import Contact, Delivery
from freehours.invoicing.mail import DocumentMail, Sender
from freehours.invoicing.model import InvoicingPolicy
from freehours.invoicing.service import Invoicing
from freehours.invoicing.smtp import SmtpServer
from freehours.store.database import Store
from freehours.workers.mail import mail_tasks
from freehours.workers.worker import Worker, WorkerConfig
from tests.databases import fresh_postgres_database
from tests.mail.smtp_server import make_certificate
from tests.servers import free_port

ACCOUNTS = 10_000
RUNNERS = 4
GOAL = 100.0  # emails a second


def run() -> None:
    admin_url = os.environ.get("FREEHOURS_BENCH_DATABASE_URL", DEFAULT_ADMIN_URL)
    accounts = int(os.environ.get("FREEHOURS_BENCH_MAIL_ACCOUNTS", ACCOUNTS))
    logging = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(WARNING))
    try:
        _measure(admin_url, accounts)
    finally:
        structlog.configure(**logging)


def _measure(admin_url: str, accounts: int) -> None:
    with (
        tempfile.TemporaryDirectory() as scratch,
        fresh_postgres_database(admin_url, prefix="freehours_bench") as url,
        Store.open(url) as store,
    ):
        _load(store, url, accounts)
        contacts = {
            _nmi(n): Contact(
                f"Customer {n}",
                (f"{n} Sun Street", "Newtown NSW 2042"),
                email=f"customer{n}@example.net",
                delivery=Delivery.EMAIL,
            )
            for n in range(accounts)
        }
        with store.write() as unit:
            unit.catalog.put_contacts(contacts, updated_at=datetime.now(UTC))
        clock = SystemClock()
        done = Invoicing(store, clock, InvoicingPolicy()).run_once(as_of=AS_OF)
        with store.read() as unit:
            queued = unit.mail.counts()["queued"]
        assert queued == done.counts.invoices == accounts, (queued, done.counts)
        directory = Path(scratch) / "smtp"
        directory.mkdir()
        cert, key = make_certificate(Path(scratch))
        port = free_port()
        server = subprocess.Popen(
            [
                sys.executable, "-m", "tests.mail.smtp_server", "--port", str(port),
                "--cert", str(cert), "--key", str(key), "--dir", str(directory),
                "--user", "bench", "--password", "bench-password", "--discard",
            ]
        )  # fmt: skip
        try:
            while not (directory / "ready").exists():
                assert server.poll() is None, "the SMTP server did not start"
                time.sleep(0.05)
            smtp = SmtpServer("127.0.0.1", port, "starttls", "bench", "bench-password", str(cert))
            mail = DocumentMail(store, clock, Sender(smtp, "billing@retailer.example"))
            worker = Worker(
                store,
                mail_tasks(mail),
                config=WorkerConfig(concurrency=RUNNERS),
                clock=clock,
            )
            started = time.perf_counter()
            worker.start()
            try:
                while True:
                    with store.read() as unit:
                        counts = unit.mail.counts()
                    if counts["queued"] == 0:
                        break
                    time.sleep(0.2)
            finally:
                worker.stop(grace=5.0)
            took = time.perf_counter() - started
            received = int((directory / "count").read_text())
        finally:
            server.terminate()
            server.wait(10)
    rate = counts["sent"] / took
    print(
        f"mail postgres {accounts:,} invoices emailed (PDF attached, STARTTLS and AUTH, each"
        f" runner keeping its connection) by {RUNNERS} mail runners: {counts['sent']:,} sent,"
        f" {counts['failed']:,} failed, {received:,} received by the server, in {took:.1f} s:"
        f" {rate:.0f} a second (goal at least {GOAL:.0f}: {rate / GOAL:.2f}x the goal)"
    )
