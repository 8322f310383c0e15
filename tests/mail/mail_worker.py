"""A mail worker process for the SIGKILL test: ``python -m tests.mail.mail_worker URL HOST PORT
CA USER PASSWORD [--hang-after-accept]``.

Sends the database's ``mail-delivery`` jobs through the SMTP server given (STARTTLS, AUTH) until
SIGTERM, on the real clock, leases of 1 s. With ``--hang-after-accept`` the first attempt hangs
once the server has accepted its message, before its outcome is committed: the test kills the
process there. Prints ``ready`` once the worker runs, and ``hanging`` when it hangs.
"""

from __future__ import annotations

import argparse
import threading
from datetime import timedelta

from freehours.clock import SystemClock
from freehours.invoicing.mail import DocumentMail, MailFaultPoint, Sender
from freehours.invoicing.smtp import SmtpServer
from freehours.store.database import Store
from freehours.workers.mail import mail_tasks
from freehours.workers.worker import Worker, WorkerConfig
from tests.children import child_set_up


class HangAfterAccept:
    def check(self, point: MailFaultPoint, delivery: int) -> None:
        if point is MailFaultPoint.ACCEPTED:
            print("hanging", flush=True)
            threading.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("url", "host", "port", "ca", "user", "password"):
        parser.add_argument(name)
    parser.add_argument("--hang-after-accept", action="store_true")
    args = parser.parse_args()
    stop = child_set_up()
    server = SmtpServer(args.host, int(args.port), "starttls", args.user, args.password, args.ca)
    with Store.open(args.url) as store:
        clock = SystemClock()
        faults = HangAfterAccept() if args.hang_after_accept else None
        mail = DocumentMail(store, clock, Sender(server, "billing@retailer.example"), faults)
        config = WorkerConfig(
            concurrency=1, lease=timedelta(seconds=1), poll=timedelta(seconds=0.2)
        )
        worker = Worker(store, mail_tasks(mail), config=config, clock=clock)
        worker.start()
        print("ready", flush=True)
        stop.wait()
        worker.stop(grace=5.0)


if __name__ == "__main__":
    main()
