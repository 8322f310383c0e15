"""Issue 13's attacks on a real ``freehours serve`` (PostgreSQL, Redis when reachable) on
127.0.0.1, each figure printed beside its limit:

- each NEM12 bomb refused in under 1 s of the server's CPU;
- under 20 concurrent bombs, an unrelated GET's p99 under 1 s and never a 5xx;
- three unauthenticated 216 MB bodies: each a 401 in under 0.5 s, the server growing by under
  50 MB, ``/healthz`` never slower than 100 ms meanwhile;
- the server's peak memory under 300 MB throughout;
- issue 32's hostile plan bodies (``tests.bombs.PLAN_BOMBS``: a TOML key of 20,000 and of
  100,000 dotted parts, arrays and inline tables nested 5,000 deep, integers of 5,000 digits in
  TOML and in a CDR plan), each sent ten times with an admin key: each a 4xx, the server
  growing by under 50 MB and ``/healthz`` never slower than 100 ms while they run;
- the parsers (``tests/fuzz/targets.py``) in time linear in their input: every kept fuzz input,
  made 16 and 256 times longer, costs at most twice as much per byte at the larger size.

The server's CPU and memory are read with psutil from its process; the run takes about 30 s.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil
import redis

from benchmarks.bench_ingest import DEFAULT_SERVER
from benchmarks.scale import size
from freehours.meterdata.nem12 import ReadLimits
from tests.bombs import (
    HEADER,
    PLAN_BOMBS,
    blank_line_bomb,
    gzipped,
    overlapping_zip,
    short_rows_bomb,
    zeros_bomb,
)
from tests.databases import fresh_postgres_database
from tests.fuzz.targets import TARGETS
from tests.servers import api_process, freehours

BOMB_CPU_GOAL = 1.0  # seconds of server CPU per bomb
P99_GOAL = 1.0  # seconds, an unrelated GET under 20 concurrent bombs
PEAK_MEMORY_GOAL = 300e6  # bytes of server RSS
UNAUTHENTICATED_GOAL = 0.5  # seconds to the 401 of a 216 MB body
GROWTH_GOAL = 50e6  # bytes of server RSS growth meanwhile
HEALTHZ_GOAL = 0.1  # seconds, the slowest /healthz meanwhile
CONCURRENT_BOMBS = 20
CONCURRENT_SECONDS = size(6.0, 1.0)
REFUSED_PAUSE = 0.05  # seconds a refused attacker waits before its next bomb
HUGE = 216 * 1024 * 1024
PLAN_BOMB_ROUNDS = size(10, 1)  # each hostile plan body sent this many times
LINEAR_GOAL = 2.0  # per-byte time at 256x an input over that at 16x
#: Kept fuzz inputs timed of each parser, seeds and corpus each: every one, or a few in a smoke run
#: (where every input took more than a minute).
LINEAR_INPUTS = size(None, 3)
#: Each input's best of this many runs at each size, then the five worst's best of the second.
LINEAR_RUNS = size((3, 9), (1, 1))
FUZZ_INPUTS = [Path(__file__).parents[1] / "tests" / "fuzz" / kept for kept in ("seeds", "corpus")]
REDIS = "redis://127.0.0.1:6379/0"


@dataclass
class Api:
    url: str
    process: psutil.Process
    keys: dict[str, str]
    peak_rss: int = 0
    samples: list[int] = field(default_factory=list)

    def cpu(self) -> float:
        times = self.process.cpu_times()
        return float(times.user + times.system)

    def rss(self) -> int:
        return int(self.process.memory_info().rss)

    def auth(self, scope: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[scope]}"}


def run() -> None:
    server = os.environ.get("FREEHOURS_BENCH_DATABASE_URL", DEFAULT_SERVER)
    with (
        fresh_postgres_database(server, prefix="freehours_bench") as url,
        _serve(url) as api,
        _sampling(api),
    ):
        _plan_bombs(api)  # first: the NEM12 bombs' memory would hide its growth
        _bomb(api, "blank-line bomb (gzip of 20 million blank lines)", blank_line_bomb())
        _bomb(api, "zeros bomb (gzip of 1 GiB without a line end)", zeros_bomb())
        _bomb(api, "overlapping zip (20 entries over one 200 MB member)", _overlapping())
        _bomb(api, "short rows (gzip of 1.99 million one-field 300 records)", short_rows_bomb())
        _bomb(api, "blank lines just short of the line limit, then a bad one", _just_short())
        _concurrent_bombs(api)
        _unauthenticated(api)
    _linear()
    print(
        f"hostile server peak memory: {api.peak_rss / 1e6:.0f} MB:"
        f" {api.peak_rss / PEAK_MEMORY_GOAL:.2f} of the limit (goal < {PEAK_MEMORY_GOAL / 1e6:.0f}"
        " MB)"
    )


def _linear() -> None:
    """Each kept fuzz input made 16 and 256 times longer (a NEM12 input repeated, a batch's
    reads repeated): the worst ratio of its time per byte at 256x to that at 16x. Every input is
    timed once (best of 3), then the five worst again (best of 9), as a busy machine's noise
    weighs most on the shortest inputs (``LINEAR_RUNS``)."""
    cases: list[tuple[str, Callable[[bytes], None], bytes, bytes]] = []
    inputs = [
        path
        for folder in FUZZ_INPUTS
        for parser in sorted(folder.iterdir())
        for path in sorted(parser.glob("*"))[:LINEAR_INPUTS]
    ]
    for path in inputs:
        data = path.read_bytes()
        scaled = _scaled_json if path.parent.name == "readings" else _scaled_bytes
        small, large = scaled(data, 16), scaled(data, 256)
        if small is not None and large is not None:
            name = f"{path.parent.name}/{path.name}"
            cases.append((name, TARGETS[path.parent.name], small, large))

    def ratio(case: tuple[str, Callable[[bytes], None], bytes, bytes], runs: int) -> float:
        _, target, small, large = case
        per_byte_large = _best_time(target, large, runs) / len(large)
        return per_byte_large / (_best_time(target, small, runs) / len(small))

    runs, again = LINEAR_RUNS
    first = sorted(cases, key=lambda case: ratio(case, runs), reverse=True)[:5]
    worst, worst_name = max((ratio(case, again), case[0]) for case in first)
    print(
        f"hostile parsers: per-byte time at 256x a fuzz input over at 16x, worst {worst:.2f}"
        f" ({worst_name}, of {len(cases)} inputs): {worst / LINEAR_GOAL:.2f} of the limit"
        f" (goal <= {LINEAR_GOAL:g}: linear)"
    )


def _scaled_bytes(data: bytes, times: int) -> bytes | None:
    return data * times if data else None


def _scaled_json(data: bytes, times: int) -> bytes | None:
    try:
        body = json.loads(data)
    except ValueError:
        return None
    if not isinstance(body, dict) or not isinstance(body.get("reads"), list) or not body["reads"]:
        return None
    return json.dumps({**body, "reads": body["reads"] * times}).encode()


def _best_time(target: Callable[[bytes], None], data: bytes, runs: int) -> float:
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        target(data)
        best = min(best, time.perf_counter() - started)
    return best


def _overlapping() -> bytes:
    return overlapping_zip(b"100,NEM12,202607020000,MDA1,Ret1\n" + b"\n" * (200 * 2**20))


def _just_short() -> bytes:
    """Blank lines up to 10 short of the default line limit, then a line that is no record: the
    first pass passes it, the second reads every line to the bad one."""
    return gzipped(HEADER, b"\n" * (ReadLimits().max_lines - 10)) + gzipped(b"zz\n")


def _bomb(api: Api, what: str, body: bytes) -> None:
    before = api.cpu()
    response = httpx.post(
        f"{api.url}/v1/meter-readings/nem12",
        content=body,
        headers={**api.auth("ingest"), "Idempotency-Key": uuid.uuid4().hex},
        timeout=120,
    )
    cpu = api.cpu() - before
    print(
        f"hostile {what}, {len(body) / 1e3:,.0f} kB: {response.status_code} after {cpu:.2f} s of"
        f" server CPU: {cpu / BOMB_CPU_GOAL:.2f} of the limit (goal < {BOMB_CPU_GOAL:.0f} s)"
    )


def _concurrent_bombs(api: Api) -> None:
    """20 clients sending bombs back to back (from a process of their own, so that their
    threads do not slow this one's measurement), while one asks an unrelated GET."""
    until = time.monotonic() + CONCURRENT_SECONDS
    latencies: list[float] = []
    statuses: list[int] = []
    attackers = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.bench_hostile", "attack", api.url, api.keys["ingest"]],
        stdout=subprocess.PIPE,
        text=True,
    )

    def ask() -> None:
        with httpx.Client(base_url=api.url, headers=api.auth("read"), timeout=60) as client:
            while time.monotonic() < until:
                started = time.perf_counter()
                answer = client.get("/v1/free-energy/settlements/HOSTILE000/2026-07-01")
                latencies.append(time.perf_counter() - started)
                statuses.append(answer.status_code)
                time.sleep(0.01)

    _together([ask])
    out, _ = attackers.communicate(timeout=120)
    bombs = [int(status) for status in out.split()]
    p99 = statistics.quantiles(latencies, n=100)[98]
    errors = sum(status >= 500 for status in statuses)
    print(
        f"hostile {CONCURRENT_BOMBS} concurrent bombs ({len(bombs)} sent:"
        f" {_counts(bombs)}): unrelated GET p99 {p99 * 1e3:.0f} ms over {len(latencies)} requests,"
        f" {errors} 5xx ({_counts(statuses)}): {p99 / P99_GOAL:.2f} of the limit"
        f" (goal < {P99_GOAL * 1e3:.0f} ms, no 5xx)"
    )


def _unauthenticated(api: Api) -> None:
    """Three 216 MB bodies without a key, at once, as in issue 13, while /healthz is asked."""
    before = api.rss()
    peak_before = api.peak_rss = before
    done = threading.Event()
    answers: list[tuple[int, float]] = []
    healthz: list[float] = []

    def send() -> None:
        answers.append(_huge_body(api))

    def probe() -> None:
        with httpx.Client(base_url=api.url, timeout=10) as client:
            while not done.is_set():
                started = time.perf_counter()
                client.get("/healthz")
                healthz.append(time.perf_counter() - started)
                time.sleep(0.005)

    prober = threading.Thread(target=probe)
    prober.start()
    try:
        _together([send] * 3)
        time.sleep(0.5)
    finally:
        done.set()
        prober.join()
    growth = max(api.peak_rss - peak_before, 0)
    slowest = max(seconds for _, seconds in answers)
    print(
        f"hostile 3 unauthenticated 216 MB bodies: {sorted({s for s, _ in answers})}, the slowest"
        f" in {slowest * 1e3:.0f} ms: {slowest / UNAUTHENTICATED_GOAL:.2f} of the limit (goal <"
        f" {UNAUTHENTICATED_GOAL * 1e3:.0f} ms)"
    )
    print(
        f"hostile server memory growth meanwhile: {growth / 1e6:.1f} MB:"
        f" {growth / GROWTH_GOAL:.2f} of the limit (goal < {GROWTH_GOAL / 1e6:.0f} MB)"
    )
    print(
        f"hostile slowest /healthz meanwhile: {max(healthz) * 1e3:.1f} ms of {len(healthz)}:"
        f" {max(healthz) / HEALTHZ_GOAL:.2f} of the limit (goal < {HEALTHZ_GOAL * 1e3:.0f} ms)"
    )


def _plan_bombs(api: Api) -> None:
    """Each of issue 32's plan bodies ``PLAN_BOMB_ROUNDS`` times, one after another, while
    /healthz is asked and the server's RSS sampled, from a baseline taken before the first."""
    baseline = api.rss()
    peak = baseline
    healthz: list[float] = []
    done = threading.Event()

    def probe() -> None:
        nonlocal peak
        with httpx.Client(base_url=api.url, timeout=30) as client:
            while not done.is_set():
                started = time.perf_counter()
                client.get("/healthz")
                healthz.append(time.perf_counter() - started)
                peak = max(peak, api.rss())
                time.sleep(0.01)

    prober = threading.Thread(target=probe)
    prober.start()
    try:
        headers = api.auth("admin")
        with httpx.Client(base_url=api.url, timeout=60) as client:
            for name, media_type, body, _ in PLAN_BOMBS:
                statuses: list[int] = []
                slowest = 0.0
                for _ in range(PLAN_BOMB_ROUNDS):
                    started = time.perf_counter()
                    answer = client.put(
                        "/v1/plans/hostile",
                        content=body,
                        headers={**headers, "Content-Type": media_type},
                    )
                    slowest = max(slowest, time.perf_counter() - started)
                    statuses.append(answer.status_code)
                print(
                    f"hostile plan body, {name} ({len(body) / 1e3:.0f} kB):"
                    f" {_counts(statuses)}, the slowest in {slowest * 1e3:.0f} ms"
                )
    finally:
        done.set()
        prober.join()
    growth = max(peak - baseline, 0)
    print(
        f"hostile plan bodies: server memory growth {growth / 1e6:.1f} MB:"
        f" {growth / GROWTH_GOAL:.2f} of the limit (goal < {GROWTH_GOAL / 1e6:.0f} MB)"
    )
    print(
        f"hostile plan bodies: slowest /healthz meanwhile {max(healthz) * 1e3:.1f} ms of"
        f" {len(healthz)}: {max(healthz) / HEALTHZ_GOAL:.2f} of the limit (goal <"
        f" {HEALTHZ_GOAL * 1e3:.0f} ms)"
    )


def _huge_body(api: Api) -> tuple[int, float]:
    """POST /v1/meter-readings with a 216 MB JSON body and no key, the body streamed while the
    answer is awaited: (status, seconds to the answer's status line)."""
    port = int(api.url.rsplit(":", 1)[1])
    head = (
        "POST /v1/meter-readings HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\nContent-Length: {HUGE}\r\n\r\n"
    ).encode()
    chunk = b"[" * 2**20
    answered = threading.Event()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        started = time.perf_counter()
        sock.sendall(head)

        def stream() -> None:
            sent = 0
            try:
                while sent < HUGE and not answered.is_set():
                    sock.sendall(chunk)
                    sent += len(chunk)
            except OSError:
                return  # the server closed the connection: it read no more

        sender = threading.Thread(target=stream)
        sender.start()
        received = b""
        while b"\r\n" not in received:
            part = sock.recv(4096)
            if not part:
                break
            received += part
        seconds = time.perf_counter() - started
        answered.set()
        sock.shutdown(socket.SHUT_RDWR)
        sender.join()
    return int(received.split(b" ", 2)[1]), seconds


def _together(calls: list[Callable[[], None]]) -> None:
    threads = [threading.Thread(target=call) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _counts(statuses: list[int]) -> str:
    return ", ".join(f"{statuses.count(s)}x {s}" for s in sorted(set(statuses)))


@contextmanager
def _sampling(api: Api) -> Iterator[None]:
    """The server's RSS sampled every 10 ms into ``api.peak_rss``."""
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            api.peak_rss = max(api.peak_rss, api.rss())
            time.sleep(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield
    finally:
        stop.set()
        sampler.join()


@contextmanager
def _serve(url: str) -> Iterator[Api]:
    env = {
        "FREEHOURS_DATABASE_URL": url,
        "FREEHOURS_RATE_LIMIT_PER_CLIENT": "1000000/minute",
        "FREEHOURS_LOG_LEVEL": "warning",
    }
    redis_url = os.environ.get("FREEHOURS_BENCH_REDIS_URL", REDIS)
    try:
        redis.Redis.from_url(redis_url, socket_connect_timeout=2).ping()
    except redis.RedisError:
        print(f"hostile: Redis at {redis_url} not reachable: rate limits in process")
    else:
        env |= {
            "FREEHOURS_REDIS_URL": redis_url,
            "FREEHOURS_REDIS_PREFIX": f"bench-{uuid.uuid4().hex[:8]}:",
        }
    keys = {
        scope: freehours("keys", "create", "--scope", scope, env=env)
        for scope in ("ingest", "read", "admin")
    }
    with api_process(env) as (base, process):
        yield Api(base, psutil.Process(process.pid), keys)


def attack(url: str, key: str) -> None:
    """``CONCURRENT_BOMBS`` clients posting the blank-line bomb back to back for
    ``CONCURRENT_SECONDS`` (``REFUSED_PAUSE`` after a 503 or 429); prints the statuses."""
    bomb = blank_line_bomb()
    until = time.monotonic() + CONCURRENT_SECONDS
    bombs: list[int] = []

    def one() -> None:
        headers = {"Authorization": f"Bearer {key}"}
        with httpx.Client(base_url=url, headers=headers, timeout=60) as client:
            while time.monotonic() < until:
                answer = client.post(
                    "/v1/meter-readings/nem12",
                    content=bomb,
                    headers={"Idempotency-Key": uuid.uuid4().hex},
                )
                bombs.append(answer.status_code)
                if answer.status_code in {429, 503}:
                    time.sleep(REFUSED_PAUSE)  # in a hurry, not waiting the Retry-After

    _together([one] * CONCURRENT_BOMBS)
    print(" ".join(map(str, bombs)))


if __name__ == "__main__":
    if sys.argv[1:2] == ["attack"]:
        attack(sys.argv[2], sys.argv[3])
    else:
        run()
