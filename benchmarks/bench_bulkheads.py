"""Bulkheads (issue 32): a day's settlements and an invoice run beside 50 webhook endpoints that
never answer, and beside 50 that trickle a byte every 3 s, against the same run with no endpoint;
then the endpoints answer and every event written is delivered.

The load, not measured, is written once into a PostgreSQL database
(``FREEHOURS_BENCH_DATABASE_URL``, default the local server): ``SETTLEMENTS`` customers with a
day's meter data (``bench_api.prepare``) and ``INVOICE_ACCOUNTS`` accounts with July settled
(``bench_invoicing``'s load). Each variant runs in a copy of it (``CREATE DATABASE ...
TEMPLATE``), every database dropped after, with ``WORKERS`` ``freehours worker`` processes as
deployed (default settings, ``FREEHOURS_WEBHOOK_ALLOWED_NETWORKS=127.0.0.0/8`` so that they may
send to the receiver on 127.0.0.1), started and listening before the clock starts. Then, at
once, the ``SETTLEMENTS`` settle jobs fall due (one statement, as ``schedule_settlements`` writes
them) and an invoice run starts as of 10 August (its batches also draft the settlements'
customers, whose July waits for its other days).

The figures, for each variant: the settle jobs' p99 from falling due to done (the job table's
``run_at`` to ``finalized_at``), the settlement's duration (the first job due to the last done),
and the invoice run's (requested to finished), each with its ratio to the run without endpoints
(goal: within 10%, at most 1.10x).

**The subscription mix, and what it covers.** 50 endpoints, each a URL of its own on one
receiver (the circuit breaker and in-flight cap are each endpoint's), all subscribed to the
invoice events (``invoice.finalised``, ``credit_note.issued``) and to ``quota.aborted`` and
``quota.revised``; ``QUOTA_SUBSCRIBERS`` of them to ``quota.completed`` too. So every settlement
and every invoice writes its event, the event's fan-out job runs beside them on the same
workers, and silent receivers hold the webhook runners throughout; what is not in it is 50
deliveries of each of the 10,000 settlements: 500,000 deliveries cannot be delivered on this
2-core machine within the module's five minutes (a few hundred a second), and the point, that a
settlement's own cost does not grow with the endpoints (its transaction writes its event and one
fan-out job however many there are: ``tests/webhooks/test_outbox.py``), is made with one.

Then the receiver answers 200 to every request, and the run waits until every fan-out job is
done and no delivery pending: every event written (one per settled quota, one per document) has
a delivery to each endpoint subscribed to its type, and every delivery succeeded, counted in the
store (each drain with ``DRAIN_WORKERS`` more worker processes: a process sends at most 2
attempts to an endpoint at once, and 10,000 deliveries to one endpoint drain at some 30 a second
through two). The run without endpoints goes first and last, each variant compared with their
mean, the two printed: on a shared machine they differ by a third or more.

It took 16 minutes on the 2-core machine at a load average of 13 to 29 (other work), the drains
most of it; 18.7 s and 12.6 s to settle the 10,000 alone, 38.7 s beside the silent endpoints,
28.9 s beside the trickling ones.
"""

from __future__ import annotations

import logging
import os
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import sqlalchemy as sa
import structlog

from benchmarks.bench_api import prepare, quotas
from benchmarks.bench_invoicing import AS_OF, _load
from benchmarks.bench_jobs import settle_job_rows
from benchmarks.scale import size
from benchmarks.workers import failures, start, stop_worker
from freehours.clock import SystemClock
from freehours.domain.webhooks import DeliveryStatus, Destinations
from freehours.invoicing.service import Invoicing
from freehours.jobs.job import JobState
from freehours.store.database import Store
from freehours.store.jobs import NOTIFY_CHANNEL
from freehours.store.tables import (
    documents,
    jobs,
    webhook_deliveries,
    webhook_endpoints,
    webhook_events,
)
from freehours.store.tables import quotas as quota_table
from freehours.store.webhooks import FANOUT_KIND
from freehours.webhooks.service import Webhooks
from freehours.workers import settle
from tests.databases import fresh_postgres_database

DEFAULT_ADMIN_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
SETTLEMENTS = size(10_000, 100)
INVOICE_ACCOUNTS = 20
#: A smoke run's 10 endpoints and one drainer: its deliveries (300, not 1,100) and worker processes
#: were most of its CPU.
ENDPOINTS = size(50, 10)
#: Endpoints subscribed to ``quota.completed`` as well (see the module's docstring).
QUOTA_SUBSCRIBERS = 1
WORKERS = 2
#: Rounds of the three runs: on the 2-core machine one run without endpoints took 5.5 s and the
#: next 6.4 s, more than the goal's 10%; the medians of five hold still.
ROUNDS = size(5, 1)
#: Worker processes started beside them once the receiver answers (see ``_variant``).
DRAIN_WORKERS = size(4, 1)
ALLOWED = "127.0.0.0/8"
TRICKLE = size(3.0, 0.5)  # seconds between the trickling receiver's bytes
#: The workers' settings beyond the defaults: the receiver on 127.0.0.1 allowed; in a smoke run
#: (``benchmarks.scale``), a webhook attempt's deadline of 2 s, not 15 s, which the drain waits
#: out for the attempts in flight when the receiver starts answering (still longer than a
#: trickle's pause, so that only the deadline ends a trickled attempt).
WORKER_ENV = {"FREEHOURS_WEBHOOK_ALLOWED_NETWORKS": ALLOWED} | size(
    {}, {"FREEHOURS_WEBHOOK_DEADLINE_SECONDS": "2"}
)
GOAL_RATIO = 1.10  # within 10% of the run without endpoints
#: A run that has not finished in this long is broken, not slow.
RUN_TIMEOUT = 300.0
#: Every delivery done once the receiver answers: a delivery that failed twice waits a minute
#: (the schedule), one postponed by an open circuit up to its 60 s; then a few hundred a second.
DRAIN_TIMEOUT = 600.0
EVERY_ENDPOINT = ["invoice.finalised", "credit_note.issued", "quota.aborted", "quota.revised"]
_FINISHED = [state.value for state in JobState if state.is_finished]
Worker = subprocess.Popen[bytes]


@dataclass(frozen=True)
class Figures:
    settle_p99: float
    settle_seconds: float
    invoice_seconds: float


def run() -> None:
    # Warnings only: a line per attempt and postponement would measure the log sink.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    server = os.environ.get("FREEHOURS_BENCH_DATABASE_URL", DEFAULT_ADMIN_URL)
    with _loaded(server) as template:
        _variants(server, template)


def _variants(server: str, template: str) -> None:
    """``ROUNDS`` rounds of the three runs (without endpoints, beside the silent ones, beside the
    trickling ones), their order turned each round so that none always runs first; each figure
    the median of its rounds, and its ratio to the runs without endpoints. The first round's
    endpoints answer at its end and every event is delivered; later rounds time only."""
    # Each run's name: whether it has endpoints, and their trickle.
    variants: dict[str, tuple[bool, float | None]] = {
        "no endpoint": (False, None),
        "silent": (True, None),
        f"trickling a byte every {TRICKLE:g} s": (True, TRICKLE),
    }
    runs: dict[str, list[Figures]] = {name: [] for name in variants}
    names = list(variants)
    for round_ in range(ROUNDS):
        for name in names[round_ % 3 :] + names[: round_ % 3]:
            endpoints, trickle = variants[name]
            figures = _variant(
                server, template, endpoints=endpoints, trickle=trickle, drain=round_ == 0
            )
            runs[name].append(figures)
            print(
                f"bulkheads postgres, round {round_ + 1} of {ROUNDS}, {name}: settle p99"
                f" {figures.settle_p99:.2f} s, settled in {figures.settle_seconds:.2f} s,"
                f" invoice run {figures.invoice_seconds:.2f} s",
                flush=True,
            )
    alone = _median(runs[names[0]])
    print(
        f"bulkheads postgres, {SETTLEMENTS:,} settlements and an invoice run ({INVOICE_ACCOUNTS}"
        f" accounts invoiced) on {WORKERS} worker processes, no endpoint (median of {ROUNDS}):"
        f" settle p99 {alone.settle_p99:.2f} s, settled in {alone.settle_seconds:.2f} s, invoice"
        f" run {alone.invoice_seconds:.2f} s"
    )
    for name in names[1:]:
        beside = _median(runs[name])
        print(
            f"bulkheads postgres, beside {ENDPOINTS} endpoints {name} (median of {ROUNDS}): "
            + "; ".join(
                f"{what} {value:.2f} s vs {base:.2f} s: {value / base:.2f}x"
                f" (goal <= {GOAL_RATIO:.2f}x)"
                for what, value, base in (
                    ("settle p99", beside.settle_p99, alone.settle_p99),
                    ("settled in", beside.settle_seconds, alone.settle_seconds),
                    ("invoice run", beside.invoice_seconds, alone.invoice_seconds),
                )
            )
        )


def _median(runs: list[Figures]) -> Figures:
    return Figures(
        settle_p99=statistics.median(run.settle_p99 for run in runs),
        settle_seconds=statistics.median(run.settle_seconds for run in runs),
        invoice_seconds=statistics.median(run.invoice_seconds for run in runs),
    )


@contextmanager
def _loaded(server: str) -> Iterator[str]:
    """A database on ``server`` with the load (see the module's docstring), every variant's
    template: its name."""
    with fresh_postgres_database(server, prefix="freehours_bench") as url:
        prepare(url, nmis=SETTLEMENTS, days=1)
        with Store.open(url) as store:
            _load(store, url, INVOICE_ACCOUNTS)
            with store.write() as unit:
                unit.connection.execute(sa.text("ANALYZE"))
        database = sa.make_url(url).database
        assert database is not None
        yield database


def _variant(
    server: str, template: str, *, endpoints: bool, trickle: float | None, drain: bool
) -> Figures:
    """One run in a copy of ``template``, with ``ENDPOINTS`` endpoints whose receiver never
    answers (or trickles a byte every ``trickle`` seconds) or none; then, with endpoints and
    ``drain``, the receiver answers and every event is delivered."""
    with (
        fresh_postgres_database(server, prefix="freehours_bench", template=template) as url,
        Store.open(url) as store,
        _receiver(trickle) as receiver,
        tempfile.TemporaryDirectory() as logs,
    ):
        paths = [Path(logs) / f"worker-{n}.log" for n in range(WORKERS)]
        workers = [start(["worker"], url, path, WORKER_ENV) for path in paths]
        try:
            if endpoints:
                _register(store, receiver.base)
            _until(lambda: _listening(store) >= WORKERS, RUN_TIMEOUT, "the start", workers)
            figures = _settle_and_invoice(store, workers)
            if endpoints and drain:
                receiver.answer()
                # More workers drain the backlog, as an operator scales out after an outage:
                # each sends at most MAX_IN_FLIGHT attempts to an endpoint at once.
                drainers = [Path(logs) / f"drainer-{n}.log" for n in range(DRAIN_WORKERS)]
                workers += [start(["worker"], url, path, WORKER_ENV) for path in drainers]
                paths += drainers
                _drain(store, workers)
        finally:
            for worker in workers:
                stop_worker(worker)
        if endpoints and drain:
            _check_delivered(store, receiver)
        failed = [note for note in failures(paths) if "RetryAfter" not in note]
        if failed:
            print(f"bulkheads: {len(failed)} job attempts failed, the first: {failed[0][:200]}")
        return figures


def _listening(store: Store) -> int:
    """The worker processes started: each LISTENs for jobs on a connection of its own."""
    with store.read() as unit:
        return int(
            unit.connection.scalar(
                sa.text(
                    "SELECT count(*) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND query LIKE 'LISTEN %'"
                )
            )
            or 0
        )


def _register(store: Store, base: str) -> None:
    hooks = Webhooks(store, SystemClock(), destinations=Destinations.parse(ALLOWED))
    for n in range(ENDPOINTS):
        extra = ["quota.completed"] if n < QUOTA_SUBSCRIBERS else []
        hooks.register(f"{base}/{n}", [*EVERY_ENDPOINT, *extra])


def _settle_and_invoice(store: Store, workers: list[Worker]) -> Figures:
    """The settle jobs due at once and an invoice run started: their figures once both end."""
    now = datetime.now(UTC)
    rows = settle_job_rows(quotas(SETTLEMENTS, 1), now)
    with store.write() as unit:
        unit.connection.execute(jobs.insert(), rows)
        store.driver.notify(unit.connection, NOTIFY_CHANNEL)
    invoice_run = Invoicing(store, SystemClock()).start_run(as_of=AS_OF)
    settled = sa.select(sa.func.count()).where(
        jobs.c.kind == settle.KIND, jobs.c.state.in_(_FINISHED)
    )

    def done() -> bool:
        with store.read() as unit:
            run = unit.invoices.get_run(invoice_run.run_id)
            count = unit.connection.scalar(settled) or 0
        return run is not None and run.finished and count == SETTLEMENTS

    _until(done, RUN_TIMEOUT, "the settlements and the invoice run", workers)
    j = jobs.c
    with store.read() as unit:
        rows_done = unit.connection.execute(
            sa.select(j.run_at, j.finalized_at, j.state).where(j.kind == settle.KIND)
        ).all()
        run = unit.invoices.get_run(invoice_run.run_id)
    assert run is not None
    assert run.finished_at is not None
    if any(row.state != JobState.COMPLETED.value for row in rows_done):
        raise SystemExit("bulkheads: a settle job did not complete")
    waits = [(row.finalized_at - row.run_at).total_seconds() for row in rows_done]
    first = min(row.run_at for row in rows_done)
    last = max(row.finalized_at for row in rows_done)
    return Figures(
        settle_p99=statistics.quantiles(waits, n=100, method="inclusive")[98],
        settle_seconds=(last - first).total_seconds(),
        invoice_seconds=(run.finished_at - run.requested_at).total_seconds(),
    )


def _drain(store: Store, workers: list[Worker]) -> None:
    """Wait until every fan-out job is done and no delivery is pending."""
    fanouts = sa.select(sa.func.count()).where(
        jobs.c.kind == FANOUT_KIND, jobs.c.state.not_in(_FINISHED)
    )
    pending = sa.select(sa.func.count()).where(
        webhook_deliveries.c.status == DeliveryStatus.PENDING.value
    )

    def done() -> bool:
        with store.read() as unit:
            return not unit.connection.scalar(fanouts) and not unit.connection.scalar(pending)

    _until(done, DRAIN_TIMEOUT, "the deliveries", workers)


def _check_delivered(store: Store, receiver: _Receiver) -> None:
    """Every event written has its deliveries, all succeeded; one event per settled quota and
    per document."""
    e, v, d = webhook_endpoints.c, webhook_events.c, webhook_deliveries.c
    with store.read() as unit:
        conn = unit.connection
        subscriptions = [str(types).split() for types in conn.scalars(sa.select(e.events))]
        events: dict[str, int] = {
            str(kind): int(count)
            for kind, count in conn.execute(sa.select(v.type, sa.func.count()).group_by(v.type))
        }
        subscribed = {kind: sum(kind in types for types in subscriptions) for kind in events}
        completed = conn.scalar(
            sa.select(sa.func.count()).where(
                quota_table.c.status == "COMPLETED", quota_table.c.nmi.like("BENCH%")
            )
        )
        finalised = conn.scalar(sa.select(sa.func.count()).select_from(documents))
        statuses: dict[str, int] = {
            str(status): int(count)
            for status, count in conn.execute(
                sa.select(d.status, sa.func.count()).group_by(d.status)
            )
        }
    expected = sum(count * subscribed[kind] for kind, count in events.items())
    succeeded = statuses.get(DeliveryStatus.SUCCEEDED.value, 0)
    checks = (
        events.get("quota.completed", 0) == completed == SETTLEMENTS,
        events.get("invoice.finalised", 0) == finalised,
        sum(statuses.values()) == succeeded == expected,
        receiver.delivered() == expected,
    )
    print(
        f"bulkheads: events {events} for {completed:,} quotas settled and {finalised} documents;"
        f" {expected:,} deliveries expected, {succeeded:,} succeeded, {receiver.delivered():,}"
        f" distinct (endpoint, webhook-id) received: {'none lost' if all(checks) else 'LOST'}"
    )
    if not all(checks):
        raise SystemExit(f"bulkheads: events lost or undelivered: {checks}, {statuses}")


# --- the receiver -------------------------------------------------------------------------------


class _Receiver:
    """50 endpoints' URLs on one server on 127.0.0.1: each request held without an answer (or
    answered a byte every ``trickle`` seconds, a status line that never ends) until ``answer``,
    then 200 to each; the (path, webhook-id) answered 200."""

    def __init__(self, trickle: float | None, server: ThreadingHTTPServer) -> None:
        self.trickle = trickle
        self.server = server
        self.answering = threading.Event()
        self.lock = threading.Lock()
        self.received: set[tuple[str, str]] = set()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hooks"

    def answer(self) -> None:
        self.answering.set()

    def delivered(self) -> int:
        with self.lock:
            return len(self.received)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        """A sender that gave up closed its connection mid-trickle: nothing to say."""


@contextmanager
def _receiver(trickle: float | None) -> Iterator[_Receiver]:
    owner: list[_Receiver] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            receiver = owner[0]
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if not receiver.answering.is_set():
                # Held until the receiver answers (the sender has long given up by then).
                line = b"HTTP/1.1 200 OK\r\n" * 100
                sent = 0
                while not receiver.answering.wait(receiver.trickle or 1.0):
                    if receiver.trickle is not None:
                        self.wfile.write(line[sent : sent + 1])
                        self.wfile.flush()
                        sent += 1
                self.close_connection = True
                return
            with receiver.lock:
                receiver.received.add((self.path, self.headers.get("webhook-id", "")))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = _Server(("127.0.0.1", 0), Handler)
    receiver = _Receiver(trickle, server)
    owner.append(receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.answer()
        server.shutdown()
        server.server_close()


def _until(done: Callable[[], bool], timeout: float, what: str, workers: list[Worker]) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        for worker in workers:
            if worker.poll() is not None:
                raise SystemExit(f"bulkheads: a worker process exited during {what}")
        if time.monotonic() > deadline:
            raise SystemExit(f"bulkheads: {what} did not finish in {timeout:g} s")
        time.sleep(0.1)


if __name__ == "__main__":
    run()
