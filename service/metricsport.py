"""The ``/metrics`` port (``--metrics-port``): prometheus_client's exposition, served by
a thread per connection as its ``start_http_server`` serves it, but with what that one
lacks for a port that may face a network: a deadline on each connection, its request
and answer together (a client that opens a connection and sends half a request line,
or a byte every few seconds, held its thread for ever: 1,000 such connections, 1,000
threads, helper-84's and helper-86's audits), a cap on the threads and on one peer's
share of them (a connection past either is closed at once) and a listen backlog of more
than 5.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from http.server import ThreadingHTTPServer

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import MetricsHandler

# Seconds a connection may last, its request and the answer together (a scrape takes
# milliseconds; Prometheus's default scrape timeout is 10 s); also each read's timeout.
READ_SECONDS = 5.0
# Connections served at once (a thread each); more are closed when they arrive.
MAX_CONNECTIONS = 128
# Of those, from one peer address: one client holding every slot, re-opening its idle
# connections as they were closed, shut out every scrape (0 of 24, helper-89), while
# Prometheus scrapes a target over one connection at a time.
MAX_PER_PEER = 8
# How often the connections past their deadline are looked for.
REAP_SECONDS = 0.5
BACKLOG = 128


class MetricsServer(ThreadingHTTPServer):
    """``ThreadingHTTPServer`` with at most :data:`MAX_CONNECTIONS` handler threads."""

    daemon_threads = True
    request_queue_size = BACKLOG

    def __init__(self, address: tuple[str, int], handler, family: socket.AddressFamily) -> None:
        self.address_family = family
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._deadlines: dict[socket.socket, float] = {}  # open connections' deadlines
        self._peers: dict[socket.socket, str] = {}  # and their peers' addresses
        self._per_peer: dict[str, int] = {}
        self._lock = threading.Lock()
        self._closing = threading.Event()
        super().__init__(address, handler)
        threading.Thread(target=self._reap, name="nmt-metrics-reaper", daemon=True).start()

    def process_request(self, request, client_address) -> None:
        peer = str(client_address[0])
        with self._lock:
            crowded = self._per_peer.get(peer, 0) >= MAX_PER_PEER
        if crowded or not self._slots.acquire(blocking=False):
            self.shutdown_request(request)  # every thread (or the peer's) busy: closed
            return
        with self._lock:
            self._deadlines[request] = time.monotonic() + READ_SECONDS
            self._peers[request] = peer
            self._per_peer[peer] = self._per_peer.get(peer, 0) + 1
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._done(request)
            raise

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._done(request)

    def _done(self, request: socket.socket) -> None:
        with self._lock:
            if self._deadlines.pop(request, None) is not None:
                self._slots.release()
                peer = self._peers.pop(request)
                left = self._per_peer[peer] - 1
                if left:
                    self._per_peer[peer] = left
                else:
                    del self._per_peer[peer]

    def _reap(self) -> None:
        """Shut the connections past their deadline: their thread's read or write fails
        and the thread ends (a per-read timeout alone let a byte every few seconds in)."""
        while not self._closing.wait(REAP_SECONDS):
            now = time.monotonic()
            with self._lock:
                late = [s for s, deadline in self._deadlines.items() if deadline < now]
            for sock in late:
                with contextlib.suppress(OSError):  # closed meanwhile
                    sock.shutdown(socket.SHUT_RDWR)

    def server_close(self) -> None:
        self._closing.set()
        super().server_close()


def start_metrics_server(
    port: int, host: str, registry: CollectorRegistry
) -> tuple[MetricsServer, threading.Thread]:
    """Serve ``registry`` on ``host:port`` (0: a free port) from a thread of its own;
    raises ``OSError`` (``socket.gaierror`` for a host that is not this machine's) as
    ``prometheus_client.start_http_server`` does."""
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]

    class Handler(MetricsHandler.factory(registry)):  # type: ignore[misc]
        timeout = READ_SECONDS  # StreamRequestHandler sets it on the socket

        def log_message(self, format: str, *args) -> None:  # noqa: A002 - the base's name
            pass  # a scrape every few seconds is not news

    httpd = MetricsServer((host, port), Handler, family)
    thread = threading.Thread(target=httpd.serve_forever, name="nmt-metrics", daemon=True)
    thread.start()
    return httpd, thread
