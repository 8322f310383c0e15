"""Documents by email: how many a second the mail workers send (issue 35's goal: 10,000 emails to
the test SMTP server at 100 a second or more).

``ACCOUNTS`` customers (``FREEHOURS_BENCH_MAIL_ACCOUNTS``, default 10,000), each with an email
address and July 2026 settled (``bench_invoicing._load``), are invoiced by a run in this process:
each invoice's send is queued with it. Then the SMTP server of the tests (aiosmtpd as a process
of its own, STARTTLS on a certificate made here, AUTH; counting each message, keeping none) takes
them from two ``freehours worker`` processes (as the invoicing benchmark runs its batches), each
with 4 mail runners (the default), on this machine's 2 cores: each message rendered (its PDF) and
sent, each runner keeping its connection (TLS and AUTH once). Loading and the run are not
measured; the rate is the sends' from the first one sent to the last (the workers' start-up
left out), and the whole, from their start, is printed beside it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from benchmarks.bench_invoicing import AS_OF, DEFAULT_ADMIN_URL, _load, _nmi
from benchmarks.scale import size
from benchmarks.workers import start, stop_worker, warnings_only
from freehours.clock import SystemClock
from freehours.domain.contacts import Contact, Delivery
from freehours.invoicing.model import InvoicingPolicy
from freehours.invoicing.service import Invoicing
from freehours.store.database import Store
from tests.databases import fresh_postgres_database
from tests.mail.smtp_server import make_certificate
from tests.servers import free_port

ACCOUNTS = size(10_000, 20)
#: ``freehours worker`` processes, each with its default 4 mail runners.
WORKERS = 2
RUNNERS = 4
GOAL = 100.0  # emails a second


def run() -> None:
    admin_url = os.environ.get("FREEHOURS_BENCH_DATABASE_URL", DEFAULT_ADMIN_URL)
    accounts = int(os.environ.get("FREEHOURS_BENCH_MAIL_ACCOUNTS", ACCOUNTS))
    with warnings_only():
        _measure(admin_url, accounts)


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
            env = {
                "FREEHOURS_SMTP_HOST": "127.0.0.1",
                "FREEHOURS_SMTP_PORT": str(port),
                "FREEHOURS_SMTP_SECURITY": "starttls",
                "FREEHOURS_SMTP_USERNAME": "bench",
                "FREEHOURS_SMTP_PASSWORD": "bench-password",
                "FREEHOURS_SMTP_CA_FILE": str(cert),
                "FREEHOURS_MAIL_FROM": "billing@retailer.example",
            }
            started = time.perf_counter()
            workers = [
                start(["worker"], url, Path(scratch) / f"worker-{n}.log", env)
                for n in range(WORKERS)
            ]
            # Far more than the goal's rate needs: past it, the workers are stuck.
            deadline = started + 60 + accounts / 10
            try:
                while True:
                    with store.read() as unit:
                        counts = unit.mail.counts()
                    if counts["queued"] == 0:
                        break
                    if time.perf_counter() > deadline:
                        raise RuntimeError(f"mail: {counts} after {deadline - started:.0f} s")
                    for worker in workers:
                        if worker.poll() is not None:
                            raise RuntimeError(f"worker exited with {worker.returncode}")
                    time.sleep(0.2)
            finally:
                for worker in workers:
                    stop_worker(worker)
            took = time.perf_counter() - started
            with store.read() as unit:
                first, last = unit.mail.sent_between()
            received = int((directory / "count").read_text())
        finally:
            server.terminate()
            server.wait(10)
    steady = (counts["sent"] - 1) / max((last - first).total_seconds(), 1e-6)
    rate = counts["sent"] / took
    print(
        f"mail postgres {accounts:,} invoices emailed (PDF attached, STARTTLS and AUTH, each"
        f" runner keeping its connection) by {WORKERS} worker processes of {RUNNERS} mail runners:"
        f" {counts['sent']:,} sent,"
        f" {counts['failed']:,} failed, {received:,} received by the server: {steady:.0f} a second"
        f" from the first sent to the last (goal at least {GOAL:.0f}: {steady / GOAL:.2f}x the"
        f" goal); {took:.1f} s from the workers' start ({rate:.0f} a second)"
    )
