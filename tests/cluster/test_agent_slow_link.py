"""The meter agent on a slow, lossy link: 200 ms of delay and 5 % of packets lost between it and
the API, for its whole run; every read still arrives exactly once, within a bounded time, with
its retries counted and bounded.

Three hosts on a bridge (``tests.cluster.hosts``): ``db`` (its own PostgreSQL and Redis), ``api``
(``freehours serve`` and ``freehours worker``) and ``agent`` (``freehours agent --simulate``:
three meters through yesterday's SEQ free window, four hours in 16 s). The link is chosen at run
time, and the test prints which it got:

- where the kernel has sch_netem: ``tc netem delay 200ms loss 5%`` on the agent's eth0, the
  agent sending straight to the API (200 ms more per round trip);
- where it has not (this workplace's kernel): the delay from the test's own proxy
  (``tests.cluster.delay_proxy``, in the root namespace on the bridge's address, forwarding to
  the API), which delays every chunk by 200 ms in each direction (400 ms more per round trip: no
  kinder than netem's); and 5 % loss by nftables (``numgen random mod 100 < 5 drop``, in and
  out of the agent's eth0), TCP resending what was lost. Where nftables cannot do that, the proxy
  loses instead (once the round trips are measured): 5 % of its chunks end their connection,
  which the agent must retry.

Then, in the database and the agent's spool: every interval stored once with the meter's value,
every read counted once by the API, every quota COMPLETED with one ledger entry per version, the
spool drained (every batch delivered, none pending or set aside, its attempts those the agent
counted, each batch's first attempt made once); the retries the budget paid for (retried, less
the resends after a deferral) within what it allows; the time to drain, the round trips and the
retries printed (``agent link`` in the run's report).
"""

from __future__ import annotations

import json
import sqlite3
import time
from contextlib import ExitStack, closing, suppress
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from datetime import time as clock_time
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from freehours.agent.policy import RetryBudget
from freehours.domain.time import NEM_TIME
from freehours.store.database import Store
from freehours.store.tables import quotas
from tests.cluster.delay_proxy import DelayProxy
from tests.cluster.hosts import Host, Network, netem_available
from tests.cluster.services import (
    API_PORT,
    ApiNode,
    cluster_of,
    database_host,
    put_customers,
)
from tests.cluster.test_network_faults import (
    METERS,
    NODE_SETTINGS,
    SEED,
    SPEED,
    Settled,
    expected_reads,
    round_trips,
    stored_reads,
)
from tests.servers import FREEHOURS
from tests.support import eventually

pytestmark = [pytest.mark.slow]

DELAY_MS = 200
LOSS_PERCENT = 5
TIMEOUT = 10.0  # every request of the test's own: an answer that does not come in time is a hang
#: The spool must be empty this long after the meters' last interval ended. 48 batches, one
#: request each, at about half a second a request through the proxy (two 200 ms delays and the
#: API's work), take about 25 s with no loss; the rest is room for resends on a loaded machine.
DRAIN_TIMEOUT = 60
#: The agent's whole run: the simulated four hours (16 s), then at most ``DRAIN_TIMEOUT``.
RUN_WITHIN = 4 * 3600 / SPEED + DRAIN_TIMEOUT + 15


@dataclass
class Link:
    """The agent's slow, lossy link to the API."""

    url: str  # what the agent sends to
    how: str
    proxy: DelayProxy | None = None
    nftables_loss: bool = False  # the loss is nftables' (counted: ``Host.dropped``)

    def start_losing(self) -> None:
        """The proxy's loss switched on, once the round trips are measured (their requests
        are not retried; TCP resends what nftables or netem drop)."""
        if self.proxy is not None and not self.nftables_loss:
            self.proxy.cut_percent = LOSS_PERCENT


def slow_lossy_link(network: Network, agent: Host, api: ApiNode, stack: ExitStack) -> Link:
    """The agent's link to ``api`` made slow and lossy, the proxy closed by ``stack``."""
    if netem_available():
        agent.netem(DELAY_MS, LOSS_PERCENT)
        how = f"tc netem delay {DELAY_MS}ms loss {LOSS_PERCENT}% on the agent's eth0"
        return Link(api.url, how)
    proxy = stack.enter_context(
        DelayProxy(network.gateway, (api.host.address, API_PORT), DELAY_MS / 1000)
    )
    host, port = proxy.address
    url = f"http://{host}:{port}"
    try:
        agent.lossy(LOSS_PERCENT)
    except RuntimeError as exc:
        how = (
            f"no sch_netem and nftables cannot drop at random ({exc}): the test's proxy delays"
            f" each chunk {DELAY_MS} ms each way and ends {LOSS_PERCENT}% of them with their"
            " connection"
        )
        return Link(url, how, proxy)
    how = (
        f"no sch_netem: the test's proxy delays each chunk {DELAY_MS} ms each way;"
        f" {LOSS_PERCENT}% loss by nftables numgen on the agent's eth0"
    )
    return Link(url, how, proxy, nftables_loss=True)


def log_events(log: str) -> list[str]:
    """The events of the agent's JSON log lines (its summary, also JSON, has none)."""
    events = []
    for line in log.splitlines():
        with suppress(ValueError):
            events.append(json.loads(line))
    return [event["event"] for event in events if isinstance(event, dict) and "event" in event]


def spool_batches(path: Path) -> dict[str, tuple[int, int]]:
    """The spool's batches by state: how many, and their attempts in all."""
    with closing(sqlite3.connect(path)) as spool:
        rows = spool.execute(
            "SELECT state, count(*), sum(attempts) FROM batches GROUP BY state"
        ).fetchall()
    return {state: (n, attempts) for state, n, attempts in rows}


def test_the_agent_delivers_every_read_once_over_a_slow_lossy_link(
    network: Network, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    db = network.add("db")
    api_host = network.add("api")
    agent = network.add("agent")
    day = datetime.now(NEM_TIME).date() - timedelta(days=1)
    expected = expected_reads(day)
    nmis = sorted({nmi for nmi, _, _ in expected})
    report: list[str] = []
    began = time.monotonic()

    with database_host(db, str(network.subnet)) as (database_url, redis_url), ExitStack() as stack:
        cluster = cluster_of(network.id, database_url, redis_url, NODE_SETTINGS)
        env, admin, ingest = cluster.env, cluster.admin, cluster.ingest
        api = ApiNode(api_host, env)
        stack.callback(api_host.stop)
        stack.callback(agent.stop)
        api.start()
        api_host.start("worker", FREEHOURS, "worker", "--concurrency", "2", env=env)
        auth = {"Authorization": f"Bearer {admin}"}
        with httpx.Client(base_url=api.url, headers=auth, timeout=TIMEOUT) as client:
            put_customers(client, nmis)
        store = Store.open(database_url)
        stack.callback(store.close)

        report.append(f"hosts, database and API up in {time.monotonic() - began:.1f} s")
        clean_rtt = round_trips(agent, api.url)
        link = slow_lossy_link(network, agent, api, stack)
        slow_rtt = round_trips(agent, link.url)
        link.start_losing()
        print(f"agent link: {link.how}")
        report.append(f"agent link: {link.how}")

        spool = tmp_path / "spool.db"
        started = time.monotonic()
        process = agent.start(
            "agent",
            FREEHOURS,
            *("agent", "--api", link.url, "--simulate", str(METERS)),
            *("--seed", str(SEED), "--speed", str(SPEED), "--duration", "4h"),
            *("--start", datetime.combine(day, clock_time(10, 30)).isoformat()),
            *("--spool", str(spool), "--drain-timeout", str(DRAIN_TIMEOUT)),
            *("--breaker-failures", "3", "--breaker-reset", "2", "--json"),
            *("--name", "slow-link-agent"),
            env={"FREEHOURS_API_KEY": ingest},
        )
        assert process.wait(timeout=RUN_WITHIN) == 0, agent.log("agent")[-3000:]
        ran = time.monotonic() - started
        summary = json.loads(agent.log("agent").strip().splitlines()[-1])

        # Every quota of the day settled, by the worker, once the window's reads are in.
        keys = {(nmi, day) for nmi in nmis}

        def settled() -> bool:
            with store.read() as unit:
                rows = unit.connection.execute(sa.select(quotas.c.nmi, quotas.c.day)).all()
                done = unit.connection.execute(
                    sa.select(quotas.c.nmi, quotas.c.day).where(quotas.c.status == "COMPLETED")
                ).all()
            return {tuple(r) for r in rows} == keys and len(done) == len(keys)

        eventually(settled, what="every quota COMPLETED", within=60)

        # The spool drained: every batch delivered (kept as a tombstone), none left or set aside.
        assert summary["pending"] == 0, summary
        assert summary["rejected"] == 0, summary
        assert summary["sent"] == len(expected), summary
        assert spool_batches(spool) == {"sent": (len(expected), summary["attempts"])}

        # Every interval stored once, with the meter's value; every read counted once.
        assert stored_reads(store, nmis, day) == expected
        stored = Settled.read(store)
        answers = [json.loads(r.response_body) for r in stored.saved if r.status_code == 200]
        # One request ran per batch (a resend replayed its answer), and none found its read
        # already stored.
        assert len(answers) == len(stored.saved) == len(expected), stored.saved
        assert sum(a["accepted"] for a in answers) == len(expected), answers
        assert sum(a["superseded"] + a["unchanged"] for a in answers) == 0, answers

        # Every quota settled once: one ledger entry per version, the credit its free energy.
        stored.assert_booked_once()

        # Retries counted, and bounded: a retry within a send is one the retry budget paid for
        # (ten saved, a tenth per request, one per 10 s); a batch deferred (its three attempts
        # failed, or the budget or the breaker said no) is sent again, once per deferral, paced
        # by a backoff or the breaker.
        budget = {f.name: f.default for f in fields(RetryBudget)}
        deferred = log_events(agent.log("agent")).count("batch_deferred")
        first = summary["attempts"] - summary["retried"]
        allowed = budget["capacity"] + budget["ratio"] * (first + deferred)
        allowed += budget["allowance_per_second"] * ran
        assert summary["retried"] - deferred <= allowed, (summary, deferred)
        assert first == len(expected), summary

        drained = ran - 4 * 3600 / SPEED
        report += [
            f"round trip (median /healthz from the agent host): {clean_rtt * 1000:.1f} ms clean,"
            f" {slow_rtt * 1000:.1f} ms on the slow link",
            f"{len(expected)} batches of {METERS} meters: agent ran {ran:.1f} s for"
            f" {4 * 3600 / SPEED:.0f} s of simulated time (spool empty {drained:.1f} s after the"
            f" last interval ended)",
            f"attempts {summary['attempts']}, failed {summary['failed_attempts']}, retried"
            f" {summary['retried']} ({deferred} after a deferral; the budget allowed"
            f" {allowed:.1f}), breaker trips"
            f" {summary['breaker_trips']}, budget refusals {summary['budget_exhausted']}",
            f"{len(stored.quotas)} quotas COMPLETED, {len(stored.ledger)} ledger entries",
        ]
        if link.nftables_loss:
            dropped = agent.dropped()
            assert dropped > 0, "the link lost nothing"
            report.append(f"packets nftables dropped on the agent's eth0: {dropped}")
        if link.proxy is not None:
            assert link.nftables_loss or link.proxy.passed.cuts > 0, "the link lost nothing"
            report.append(f"through the proxy: {link.proxy.passed}")
        print("\n".join(report))
        (network.logs / "agent-link.txt").write_text("\n".join(report) + "\n")
        request.node.user_properties.append(("agent link", "\n".join(report)))
