"""A small HTTP/1.1 load generator: keep-alive connections on raw asyncio sockets.

It sends prepared requests as fast as the server answers, each connection one request at a time,
and records every latency. Written here rather than taken from wrk so that ``make bench`` needs
nothing outside the project; its cost per request (tens of microseconds) is the same for the
floor and for the endpoint measured against it, which are compared in one run.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LoadResult:
    requests: int
    seconds: float
    latencies: list[float]
    statuses: dict[int, int]

    @property
    def rate(self) -> float:
        return self.requests / self.seconds

    def percentile(self, p: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]

    @property
    def p50_ms(self) -> float:
        return statistics.median(self.latencies) * 1000

    @property
    def p99_ms(self) -> float:
        return self.percentile(99) * 1000


def request(method: str, path: str, headers: dict[str, str], body: bytes = b"") -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    if body or method in ("POST", "PUT"):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def _connection(
    host: str, port: int, requests: Iterator[bytes], result: LoadResult, *, think: float, seed: int
) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    pauses = random.Random(seed)
    try:
        for raw in requests:
            if think:
                await asyncio.sleep(pauses.expovariate(1 / think))
                if reader.at_eof():  # the server closed it while idle (its keep-alive timeout)
                    writer.close()
                    reader, writer = await asyncio.open_connection(host, port)
            started = time.perf_counter()
            writer.write(raw)
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head[9:12])
            length = 0
            for line in head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            if length:
                await reader.readexactly(length)
            result.latencies.append(time.perf_counter() - started)
            result.statuses[status] = result.statuses.get(status, 0) + 1
    finally:
        writer.close()


async def _run(
    host: str, port: int, requests: Iterator[bytes], connections: int, think: float
) -> LoadResult:
    result = LoadResult(0, 0.0, [], {})
    started = time.perf_counter()
    await asyncio.gather(
        *(
            _connection(host, port, requests, result, think=think, seed=n)
            for n in range(connections)
        )
    )
    seconds = time.perf_counter() - started
    return LoadResult(len(result.latencies), seconds, result.latencies, result.statuses)


def load(
    host: str, port: int, requests: Iterator[bytes], connections: int = 32, think: float = 0.0
) -> LoadResult:
    """Send every request in ``requests`` over ``connections`` keep-alive connections; with
    ``think``, each connection pauses before each request for a time drawn from an exponential
    distribution of that mean (seconds): users reading what they were sent, not flat out."""
    return asyncio.run(_run(host, port, requests, connections, think))
