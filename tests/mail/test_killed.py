"""A mail worker SIGKILLed after the server accepted a document's message and before it
committed that: the message is sent again by the worker that takes the job over, with the same
Message-ID, and the delivery says it may have gone twice (docs/invoices.md, Delivery by email)."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from freehours.store.database import Store
from freehours.store.mail import MailStatus
from tests.children import Children
from tests.invoicing.support import AFTER_JULY, System
from tests.mail.conftest import Smtp
from tests.mail.test_delivery import JANE
from tests.support import eventually

ROOT = Path(__file__).resolve().parents[2]


class MailWorkers(Children):
    def start(self, url: str, smtp: Smtp, *options: str) -> subprocess.Popen[str]:
        server = smtp.server
        return self.start_module(
            "tests.mail.mail_worker",
            url,
            server.host,
            str(server.port),
            server.ca_file,
            server.username,
            server.password,
            *options,
        )


@pytest.fixture
def workers() -> Iterator[MailWorkers]:
    running = MailWorkers()
    yield running
    running.close()


def test_a_worker_killed_between_acceptance_and_commit_sends_it_again_marked(
    store: Store, store_url: str, smtp: Smtp, workers: MailWorkers
) -> None:
    system = System.on(store)
    (emailed,) = system.customers(1)
    with store.write() as unit:
        unit.catalog.put_contacts({emailed: JANE}, updated_at=system.clock.now())
    system.month([emailed])
    # The run on today's clock, as the workers run on it (July's invoice all the same): its
    # mail job is due now, not past its deadline for them.
    system.clock.advance((datetime.now(UTC) - system.clock.now()).total_seconds())
    system.invoicing.start_run(as_of=AFTER_JULY)
    system.settle()
    (invoice,) = system.documents()

    doomed = workers.start(store_url, smtp, "--hang-after-accept")
    workers.wait_for(doomed, "hanging")
    assert len(smtp.messages()) == 1  # accepted by the server
    doomed.send_signal(signal.SIGKILL)
    assert doomed.wait() == -signal.SIGKILL
    with store.read() as unit:
        (in_flight,) = unit.mail.of_document(invoice.number)
    assert in_flight.status is MailStatus.QUEUED  # its outcome never committed
    assert in_flight.attempt_started_at is not None

    rescuer = workers.start(store_url, smtp)
    workers.wait_for(rescuer, "ready")

    def sent() -> bool:
        with store.read() as unit:
            (delivery,) = unit.mail.of_document(invoice.number)
        return delivery.status is MailStatus.SENT

    eventually(sent, within=60.0, what="the delivery sent after the kill")
    with store.read() as unit:
        (delivery,) = unit.mail.of_document(invoice.number)
    assert delivery.possible_duplicate
    assert delivery.attempts == 2
    first, second = smtp.messages()  # twice, as the docs say it may be
    assert first["Message-ID"] == second["Message-ID"] == f"<{invoice.number}.1@retailer.example>"
