"""The cluster test's delay proxy (``tests.cluster.delay_proxy``) on loopback: it delays each
direction by its delay, keeps the bytes and their order, and with ``cut_percent`` ends
connections. No namespaces needed."""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from collections.abc import Iterator

import pytest

from tests.cluster.delay_proxy import DelayProxy

DELAY = 0.1


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(4096):
            self.request.sendall(data)


@pytest.fixture
def echo() -> Iterator[tuple[str, int]]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[0], server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def _exchange(conn: socket.socket, data: bytes) -> bytes:
    conn.sendall(data)
    got = b""
    while len(got) < len(data):
        chunk = conn.recv(65536)
        if not chunk:
            break
        got += chunk
    return got


def test_a_round_trip_costs_twice_the_delay_and_keeps_every_byte(echo: tuple[str, int]) -> None:
    with (
        DelayProxy("127.0.0.1", echo, DELAY) as proxy,
        socket.create_connection(proxy.address, timeout=5) as conn,
    ):
        _exchange(conn, b"warm")
        timings = []
        for n in range(5):
            data = bytes([n]) * (100_000 + n)  # several chunks each way
            began = time.monotonic()
            assert _exchange(conn, data) == data
            timings.append(time.monotonic() - began)
    assert min(timings) >= 2 * DELAY, timings
    assert max(timings) < 2 * DELAY + 1.0, timings  # a delay line, not a pause per chunk
    assert proxy.passed.connections == 1
    assert proxy.passed.cuts == 0


def test_chunks_in_flight_do_not_wait_for_each_other(echo: tuple[str, int]) -> None:
    with (
        DelayProxy("127.0.0.1", echo, DELAY) as proxy,
        socket.create_connection(proxy.address, timeout=5) as conn,
    ):
        began = time.monotonic()
        for n in range(10):
            conn.sendall(bytes([n]) * 10)
            time.sleep(0.01)  # ten chunks, each read on its own
        got = b""
        while len(got) < 100:
            got += conn.recv(100)
        took = time.monotonic() - began
    assert got == b"".join(bytes([n]) * 10 for n in range(10))
    assert 2 * DELAY <= took < 2 * DELAY + 0.5, took  # not ten delays one after another


def test_a_cut_ends_the_connection(echo: tuple[str, int]) -> None:
    with (
        DelayProxy("127.0.0.1", echo, DELAY, cut_percent=100) as proxy,
        socket.create_connection(proxy.address, timeout=5) as conn,
    ):
        conn.sendall(b"lost")
        got = b""
        try:
            while chunk := conn.recv(100):
                got += chunk
        except ConnectionResetError:
            pass
    assert got == b""  # ended, not answered
    assert proxy.passed.cuts == 1
