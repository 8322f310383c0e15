"""Several nodes under network faults: a free window run through hosts of the test's own.

Six hosts on a bridge (``tests.cluster.hosts``): ``db`` (its own PostgreSQL and Redis), ``api1``
and ``api2`` (``freehours serve``), ``worker1`` and ``worker2`` (``freehours worker``), ``agent``
(``freehours agent --simulate``: meters reading through yesterday's free window, in seconds,
sent to api1). Faults, with the kernel's tools:

- the agent's link: 200 ms more per round trip and 5 % of its packets lost, for its whole run;
- api1 killed (SIGKILL) while the agent sends, started again 2 s later;
- the worker that is settling a quota cut off from the database (nftables drops everything
  between it and the database host) after it claimed the quota and before its result is
  committed: the other worker must take the quota over once its lock expires;
- api2 partitioned from Redis: every answer still comes, from the database, without a 500.

After healing: every read the meters made is stored once with its value, every quota COMPLETED
with exactly one ledger entry, and the time each fault cost is reported (the test's
``fault timings`` section at the end of the run).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from datetime import time as clock_time
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from freehours.domain.time import NEM_TIME
from freehours.sim.agent_meters import SimulatedMeters
from freehours.store.database import Store
from freehours.store.tables import idempotency_keys, ledger_entries, quotas
from tests.cluster.hosts import Host, Network, netem_available
from tests.cluster.services import (
    API_PORT,
    REDIS_PORT,
    ApiNode,
    cluster_of,
    database_host,
    put_customers,
)
from tests.servers import FREEHOURS
from tests.support import eventually

pytestmark = [pytest.mark.slow]

METERS = 3
SEED = 11
#: Four simulated hours (10:30 to 14:30 AEST, around SEQ's 11:00-14:00 window) in 16 s.
SPEED = 900
DELAY_MS = 200
LOSS_PERCENT = 5
TIMEOUT = 10.0  # every request of the test's: an answer that does not come in time is a hang

NODE_SETTINGS = {
    "FREEHOURS_LOCK_TIMEOUT_SECONDS": "5",
    "FREEHOURS_JOB_LEASE_SECONDS": "5",
    "FREEHOURS_JOB_POLL_SECONDS": "0.2",
    "FREEHOURS_SETTLEMENT_GRACE_SECONDS": "0",
    "FREEHOURS_DATABASE_CONNECT_TIMEOUT_SECONDS": "2",
    "FREEHOURS_DATABASE_STATEMENT_TIMEOUT_SECONDS": "3",
    "FREEHOURS_DATABASE_POOL_TIMEOUT_SECONDS": "3",
    "FREEHOURS_DATABASE_TCP_TIMEOUT_SECONDS": "3",
    "FREEHOURS_REDIS_RETRY_SECONDS": "1",
    "FREEHOURS_RATE_LIMIT_PER_NMI": "100000/minute",
    "FREEHOURS_RATE_LIMIT_PER_CLIENT": "100000/minute",
    "FREEHOURS_WORKER_GRACE_SECONDS": "2",
}


@dataclass
class Timing:
    fault: str
    lasted: float  # from injection to healing
    cost: float  # the figure that says what the fault cost
    measured: str  # what ``cost`` is


@dataclass
class Run:
    timings: list[Timing] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def table(self) -> list[str]:
        lines = [f"{'fault':<44} {'lasted':>8} {'cost':>8}  what the cost is"]
        lines += [
            f"{t.fault:<44} {t.lasted:>7.2f}s {t.cost:>7.2f}s  {t.measured}" for t in self.timings
        ]
        return lines + self.notes


def expected_reads(day: date) -> dict[tuple[str, str, str], Decimal]:
    start = datetime.combine(day, clock_time(10, 30), NEM_TIME)
    end = start + timedelta(hours=4)
    found: dict[tuple[str, str, str], Decimal] = {}
    for batch in SimulatedMeters(METERS, SEED, start, end).due(end):
        body = json.loads(batch.body)
        for read in body["reads"]:
            found[body["nmi"], body["suffix"], read["start"]] = Decimal(read["kwh"])
    return found


def stored_reads(store: Store, nmis: list[str], day: date) -> dict[tuple[str, str, str], Decimal]:
    found: dict[tuple[str, str, str], Decimal] = {}
    with store.read() as unit:
        for nmi in nmis:
            for stored in unit.meter.days_for(nmi, [day]):
                for index, value in enumerate(stored.values):
                    if value is not None:
                        key = (nmi, stored.suffix, stored.interval_start(index).isoformat())
                        found[key] = value
    return found


@dataclass(frozen=True)
class Settled:
    """What the store holds after a run: every quota, every ledger entry, and every saved
    answer (its status code and body)."""

    quotas: Sequence[sa.Row[Any]]
    ledger: Sequence[sa.Row[Any]]
    saved: Sequence[sa.Row[Any, Any]]

    @classmethod
    def read(cls, store: Store) -> Settled:
        with store.read() as unit:
            return cls(
                unit.connection.execute(sa.select(quotas)).all(),
                unit.connection.execute(sa.select(ledger_entries)).all(),
                unit.connection.execute(
                    sa.select(idempotency_keys.c.status_code, idempotency_keys.c.response_body)
                ).all(),
            )

    def assert_booked_once(self) -> None:
        """Every quota settled once: one ledger entry per version, its credits the quota's
        free energy."""
        booked = sorted((r.nmi, r.day, r.version) for r in self.ledger)
        assert booked == sorted((r.nmi, r.day, r.version) for r in self.quotas)
        for quota in self.quotas:
            credits = [r.kwh for r in self.ledger if (r.nmi, r.day) == (quota.nmi, quota.day)]
            assert sum(credits, Decimal(0)) == quota.free_kwh, quota


def count(store: Store, query: sa.Select[Any]) -> int:
    with store.read() as unit:
        return int(unit.connection.execute(query).scalar_one())


def round_trips(agent: Host, url: str, n: int = 10) -> float:
    """The median time of ``n`` GET /healthz from the agent host over one connection."""
    script = (
        "import httpx,time,statistics,sys\n"
        "c=httpx.Client(timeout=10)\nc.get(sys.argv[1])\nts=[]\n"
        f"for _ in range({n}):\n t=time.perf_counter();c.get(sys.argv[1]);"
        "ts.append(time.perf_counter()-t)\n"
        "print(statistics.median(ts))\n"
    )
    done = agent.run(sys.executable, "-c", script, f"{url}/healthz")
    return float(done.stdout.strip())


def agent_link(agent: Host) -> tuple[float, str]:
    """The agent's link made slow and lossy: ``tc netem`` (200 ms, 5 %) on its eth0 where the
    kernel has sch_netem; else 5 % loss by nftables on its eth0 alone (no other part of the
    kernel delays packets). The delay it adds per round trip, and how it was made."""
    if netem_available():
        agent.netem(DELAY_MS, LOSS_PERCENT)
        return DELAY_MS / 1000, f"tc netem delay {DELAY_MS}ms loss {LOSS_PERCENT}% on its eth0"
    agent.lossy(LOSS_PERCENT)
    return 0.0, (
        f"this kernel has no sch_netem: {LOSS_PERCENT}% loss by nftables numgen on its eth0,"
        " no delay"
    )


class LockWatch:
    """Holds ``ledger_entries`` locked (EXCLUSIVE: reads pass, writes wait) so that a settlement
    stops after its claim, before its result is written; once a worker waits on it, cuts that
    worker off from the database and lets the lock go."""

    def __init__(self, url: str, workers: dict[str, Host], db: Host) -> None:
        self.engine = sa.create_engine(url)
        self.workers = {host.address: host for host in workers.values()}
        self.db = db
        self.cut: Host | None = None
        self.cut_at = 0.0
        self.held: list[tuple[str, date, int]] = []
        self._connection = self.engine.connect()
        self._transaction = self._connection.begin()
        # The database host ends a session idle in its transaction after 5 s: not this one.
        self._connection.execute(sa.text("SET LOCAL idle_in_transaction_session_timeout = 0"))
        self._connection.execute(sa.text("LOCK TABLE ledger_entries IN EXCLUSIVE MODE"))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self.error: BaseException | None = None
        self._thread.start()

    def _watch(self) -> None:
        try:
            with self.engine.connect() as look:
                while not self._stop.wait(0.02):
                    waiting = look.execute(
                        sa.text(
                            "SELECT host(client_addr) FROM pg_stat_activity"
                            " WHERE wait_event_type = 'Lock' AND client_addr IS NOT NULL"
                            # A settlement's write, not a worker's other waits (upkeep, the
                            # webhook outbox's pruning) that hold no quota.
                            " AND query ILIKE '%ledger_entries%'"
                        )
                    ).scalars()
                    hosts = [self.workers[a] for a in waiting if a in self.workers]
                    look.rollback()
                    if hosts:
                        self.cut = hosts[0]
                        self.cut.partition(self.db.address)
                        self.cut_at = time.monotonic()
                        rows = look.execute(
                            sa.select(quotas.c.nmi, quotas.c.day, quotas.c.version).where(
                                quotas.c.status == "LOCKED"
                            )
                        ).all()
                        self.held = [(r.nmi, r.day, r.version) for r in rows]
                        look.rollback()
                        self._transaction.commit()  # the lock goes: the others write on
                        return
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        with suppress(Exception):
            self._connection.close()
        self.engine.dispose()


def test_a_free_window_through_six_hosts_under_network_faults(
    network: Network, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    run = Run()
    db = network.add("db")
    api_hosts = [network.add("api1"), network.add("api2")]
    workers = {name: network.add(name) for name in ("worker1", "worker2")}
    agent = network.add("agent")
    day = datetime.now(NEM_TIME).date() - timedelta(days=1)
    expected = expected_reads(day)
    nmis = sorted({nmi for nmi, _, _ in expected})

    with database_host(db, str(network.subnet)) as (database_url, redis_url):
        cluster = cluster_of(network.id, database_url, redis_url, NODE_SETTINGS)
        env, admin, ingest = cluster.env, cluster.admin, cluster.ingest
        api1, api2 = (ApiNode(host, env) for host in api_hosts)
        for node in (api1, api2):
            node.process = node.host.start(
                "serve",
                *(FREEHOURS, "serve", "--host", node.host.address, "--port", str(API_PORT)),
                env=env,
            )
        for node in (api1, api2):
            node.wait_up()
        auth = {"Authorization": f"Bearer {admin}"}
        with httpx.Client(base_url=api2.url, headers=auth, timeout=TIMEOUT) as api:
            put_customers(api, nmis)

        store = Store.open(database_url)
        watch = LockWatch(database_url, workers, db)
        try:
            for host in workers.values():
                host.start("worker", FREEHOURS, "worker", "--concurrency", "2", env=env)

            clean_rtt = round_trips(agent, api1.url)
            delay, how = agent_link(agent)
            agent_url = api1.url
            faulted_rtt = round_trips(agent, agent_url)
            run.notes.append(f"agent link: {how}")
            if True:
                agent_started = time.monotonic()
                agent_process = agent.start(
                    "agent",
                    FREEHOURS,
                    *("agent", "--api", agent_url, "--simulate", str(METERS)),
                    *("--seed", str(SEED), "--speed", str(SPEED), "--duration", "4h"),
                    *("--start", datetime.combine(day, clock_time(10, 30)).isoformat()),
                    *("--spool", str(tmp_path / "spool.db"), "--drain-timeout", "90"),
                    *("--breaker-failures", "3", "--breaker-reset", "2", "--json"),
                    *("--name", "cluster-agent"),
                    env={"FREEHOURS_API_KEY": ingest},
                )
                batches = len(expected)  # one read per batch
                arrivals = sa.select(sa.func.count()).select_from(idempotency_keys)

                # api1 killed a third of the way through the agent's batches.
                eventually(
                    lambda: count(store, arrivals) >= batches // 3, what="a third sent", within=60
                )
                killed_at = time.monotonic()
                api1.kill()
                time.sleep(2)
                api1.start()
                restarted = time.monotonic()
                at_restart = count(store, arrivals)
                eventually(
                    lambda: count(store, arrivals) > at_restart,
                    what="reads after the restart",
                    within=60,
                )
                flowing = time.monotonic()
                run.timings.append(
                    Timing(
                        "api1 SIGKILLed, restarted 2 s later",
                        restarted - killed_at,
                        flowing - killed_at,
                        "kill to the agent's next batch stored (restart included)",
                    )
                )

                assert agent_process.wait(timeout=120) == 0, agent.log("agent")[-3000:]
                delivered = time.monotonic()
            agent.heal()
            summary = json.loads(agent.log("agent").strip().splitlines()[-1])
            nominal = 4 * 3600 / SPEED
            run.timings.append(
                Timing(
                    f"agent link +{DELAY_MS} ms, {LOSS_PERCENT}% loss"
                    if delay
                    else f"agent link {LOSS_PERCENT}% loss (no netem)",
                    delivered - agent_started,
                    (faulted_rtt - clean_rtt),
                    f"per round trip (median {clean_rtt * 1000:.1f} -> {faulted_rtt * 1000:.1f}"
                    f" ms); delivery {delivered - agent_started:.1f} s for {nominal:.0f} s of"
                    f" simulated time, {summary['failed_attempts']} failed attempts",
                )
            )

            # The worker cut off mid-settlement: the other one takes its quotas over.
            eventually(
                lambda: watch.cut is not None or watch.error, what="a settlement waiting", within=60
            )
            assert watch.error is None, watch.error
            assert watch.cut is not None
            assert watch.held, "no quota was LOCKED as its worker was cut off"
            held = watch.held

            def completed(keys: list[tuple[str, date, int]]) -> bool:
                with store.read() as unit:
                    rows = unit.connection.execute(
                        sa.select(quotas.c.nmi, quotas.c.day, quotas.c.version, quotas.c.status)
                    ).all()
                done = {(r.nmi, r.day, r.version) for r in rows if r.status == "COMPLETED"}
                return set(keys) <= done

            eventually(
                lambda: completed(held),
                what="the held quotas completed by the other worker",
                within=60,
            )
            taken_over = time.monotonic()
            watch.cut.heal()
            healed = time.monotonic()
            run.timings.append(
                Timing(
                    f"{watch.cut.name} cut from the database mid-settlement",
                    healed - watch.cut_at,
                    taken_over - watch.cut_at,
                    f"cut to its {len(held)} held quota(s) COMPLETED by the other worker",
                )
            )

            # api2 partitioned from Redis: answers from the database, never a 500 or a hang.
            keys = [(nmi, day) for nmi in nmis]
            api2.host.partition(db.address, REDIS_PORT)
            partitioned = time.monotonic()
            answers: list[tuple[str, int, float, str]] = []
            with httpx.Client(base_url=api2.url, headers=auth, timeout=TIMEOUT) as api:
                for nmi, quota_day in keys * 3:
                    for name, call in (
                        (
                            "settle",
                            lambda nmi=nmi, quota_day=quota_day: api.post(
                                "/v1/free-energy/settlements",
                                json={"nmi": nmi, "date": quota_day.isoformat()},
                            ),
                        ),
                        (
                            "read",
                            lambda nmi=nmi, quota_day=quota_day: api.get(
                                f"/v1/free-energy/settlements/{nmi}/{quota_day}"
                            ),
                        ),
                    ):
                        began = time.monotonic()
                        answer = call()
                        answers.append(
                            (name, answer.status_code, time.monotonic() - began, answer.text)
                        )
                ready = api.get("/readyz")
                assert ready.status_code == 200, ready.text
                assert ready.json()["redis"] != "ok", ready.json()
                api2.host.heal()
                healed = time.monotonic()
                eventually(
                    lambda: api.get("/readyz").json()["redis"] == "ok",
                    what="api2 using Redis again",
                    within=30,
                    every=0.1,
                )
                back = time.monotonic()
            assert [(n, s) for n, s, _, _ in answers if s != 200] == [], answers
            assert all(json.loads(text)["status"] == "COMPLETED" for _, _, _, text in answers), (
                answers
            )
            slowest = max(seconds for _, _, seconds, _ in answers)
            run.timings.append(
                Timing(
                    "api2 partitioned from Redis",
                    healed - partitioned,
                    slowest,
                    f"slowest of {len(answers)} answers (all 200 from the database); Redis"
                    f" used again {back - healed:.2f} s after healing",
                )
            )

            # After healing: no lost read, no duplicate credit, every quota settled.
            assert summary["pending"] == 0, summary
            assert summary["rejected"] == 0, summary
            assert stored_reads(store, nmis, day) == expected
            settled = Settled.read(store)
            assert sum(
                json.loads(row.response_body)["accepted"]
                for row in settled.saved
                if row.status_code == 200 and "accepted" in json.loads(row.response_body)
            ) == len(expected), "a read was counted twice, or not at all"
            assert {(r.nmi, r.day) for r in settled.quotas} == set(keys)
            assert {r.status for r in settled.quotas} == {"COMPLETED"}, settled.quotas
            settled.assert_booked_once()
            run.notes.append(
                f"{len(expected)} reads of {METERS} meters stored once each;"
                f" {len(settled.quotas)} quotas COMPLETED, {len(settled.ledger)} ledger entries"
            )
        finally:
            watch.close()
            with suppress(NameError):
                store.close()
            for host in (*api_hosts, *workers.values(), agent):
                host.stop()
            lines = run.table()
            (network.logs / "fault-timings.txt").write_text("\n".join(lines) + "\n")
            request.node.user_properties.append(("fault timings", "\n".join(lines)))
