"""The ``/metrics`` port (``service/metricsport.py``): what Prometheus reads, and what a
client that connects and never finishes its request may hold."""

from __future__ import annotations

import socket
import threading
import time
import urllib.request

import pytest
from prometheus_client import CollectorRegistry, Counter

from service import metricsport
from tests.service.server_helpers import TIMEOUT, wait_until


@pytest.fixture
def metrics(monkeypatch):
    monkeypatch.setattr(metricsport, "READ_SECONDS", 0.5)
    monkeypatch.setattr(metricsport, "MAX_CONNECTIONS", 3)
    registry = CollectorRegistry()
    Counter("nmt_test_scrapes", "a counter to find", registry=registry).inc(7)
    httpd, thread = metricsport.start_metrics_server(0, "127.0.0.1", registry)
    yield httpd
    httpd.shutdown()
    httpd.server_close()
    thread.join(5)


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=TIMEOUT) as r:
        assert r.status == 200
        return r.read().decode()


def test_it_serves_the_registry(metrics):
    assert "nmt_test_scrapes_total 7.0" in _scrape(metrics.server_port)


def test_a_request_never_finished_is_closed_at_the_read_timeout(metrics):
    with socket.create_connection(("127.0.0.1", metrics.server_port), timeout=TIMEOUT) as sock:
        sock.sendall(b"GET /metr")  # and nothing more
        start = time.monotonic()
        assert sock.recv(1024) == b""  # closed by the server
        assert time.monotonic() - start < 5
    assert "nmt_test_scrapes_total" in _scrape(metrics.server_port)


def test_connections_past_the_thread_cap_are_closed_at_once(metrics):
    before = threading.active_count()
    held = [
        socket.create_connection(("127.0.0.1", metrics.server_port), timeout=TIMEOUT)
        for _ in range(20)
    ]
    try:
        # three hold a thread each; the others are closed as they arrive
        assert wait_until(lambda: threading.active_count() == before + 3)
        closed = 0
        for sock in held[3:]:
            sock.settimeout(2)
            closed += sock.recv(1024) == b""
        assert closed == 17
        assert threading.active_count() <= before + 3
    finally:
        for sock in held:
            sock.close()
    # once the held ones time out or close, Prometheus is served again
    assert wait_until(lambda: "nmt_test_scrapes_total" in _scrape(metrics.server_port), timeout=5)


def test_one_peer_cannot_hold_every_slot(metrics, monkeypatch):
    """A client holding every slot (re-opening its idle connections as they were closed)
    shut out every scrape (helper-89): one peer address holds MAX_PER_PEER at most, and
    Prometheus, from another, is served meanwhile."""
    monkeypatch.setattr(metricsport, "MAX_PER_PEER", 2)
    held = [
        socket.create_connection(("127.0.0.1", metrics.server_port), timeout=TIMEOUT)
        for _ in range(10)
    ]
    try:
        closed = 0
        for sock in held[2:]:
            sock.settimeout(2)
            closed += sock.recv(1024) == b""
        assert closed == 8  # past the peer's two, each closed as it came
        scraper = socket.create_connection(
            ("127.0.0.1", metrics.server_port), timeout=TIMEOUT, source_address=("127.0.0.2", 0)
        )
        with scraper:
            scraper.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
            answer = b""
            while chunk := scraper.recv(65536):
                answer += chunk
        assert answer.startswith(b"HTTP/1.0 200") and b"nmt_test_scrapes_total 7.0" in answer
    finally:
        for sock in held:
            sock.close()


def test_a_request_trickled_a_byte_at_a_time_is_closed_at_the_connections_deadline(metrics):
    """Each read within its timeout, the request never finished: the connection ends at
    its deadline all the same (helper-86, helper-87: 64 tricklers shut out every scrape)."""
    with socket.create_connection(("127.0.0.1", metrics.server_port), timeout=TIMEOUT) as sock:
        start = time.monotonic()
        closed = False
        for byte in b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100:
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                closed = True
                break
            if _readable(sock) and sock.recv(1024) == b"":
                closed = True
                break
            time.sleep(0.2)  # under the read timeout (0.5 s) every time
        assert closed and time.monotonic() - start < 5


def _readable(sock: socket.socket) -> bool:
    import select

    return bool(select.select([sock], [], [], 0)[0])
