"""The ``/metrics`` port (``--metrics-port``): prometheus_client's exposition, served by
a thread per connection as its ``start_http_server`` serves it, but with what that one
lacks for a port that may face a network: a read timeout (a client that opens a
connection and sends half a request line held its thread for ever: 1,000 such
connections, 1,000 threads, helper-84's audit), a cap on the threads (a connection past
it is closed at once) and a listen backlog of more than 5.
"""

from __future__ import annotations

import socket
import threading
from http.server import ThreadingHTTPServer

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import MetricsHandler

# Seconds a connection may take to send its request, and to read each part of the
# answer (Prometheus scrapes in milliseconds; its default scrape timeout is 10 s).
READ_SECONDS = 10.0
# Connections served at once (a thread each); more are closed when they arrive.
MAX_CONNECTIONS = 64
BACKLOG = 128


class MetricsServer(ThreadingHTTPServer):
    """``ThreadingHTTPServer`` with at most :data:`MAX_CONNECTIONS` handler threads."""

    daemon_threads = True
    request_queue_size = BACKLOG

    def __init__(self, address: tuple[str, int], handler, family: socket.AddressFamily) -> None:
        self.address_family = family
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        super().__init__(address, handler)

    def process_request(self, request, client_address) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)  # every thread busy: closed, not queued
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


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
