"""What one HTTP connection may hold (``service/httpconn.py``): the cap on connections
open at once, what a refused one is told, the open-files limit behind it, and the log
when accept() fails anyway."""

from __future__ import annotations

import json
import logging
import os
import resource
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from service import httpconn
from service.config import ServerConfig
from service.flags import parse_args
from service.listen import RESERVED_FDS, connection_room, raise_open_files_limit
from tests.service.server_helpers import TIMEOUT, free_port, spawn_serve, wait_until

CAP = 3


def _answer(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    sock.settimeout(TIMEOUT)
    data = b""
    while chunk := sock.recv(4096):
        data += chunk
    return data


def _refused(data: bytes) -> dict:
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0] == "HTTP/1.1 503 Service Unavailable", lines
    headers = dict(line.split(": ", 1) for line in lines[1:])
    assert headers["Retry-After"] == "1" and headers["Connection"] == "close"
    assert int(headers["Content-Length"]) == len(body)
    return json.loads(body)


def _over_capacity(server) -> float:
    labels = {"route": "over_capacity", "status": "503"}
    return server.registry.get_sample_value("nmt_http_responses_total", labels) or 0.0


def _narrow(server, recv_bytes: int, send_bytes: int):
    """A client socket with a receive buffer of ``recv_bytes`` connected to ``server``'s
    HTTP port, and the server's side of it with a send buffer of ``send_bytes``: an
    answer then waits to be read where the test wants it to."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, recv_bytes)
    sock.connect(("127.0.0.1", server.http_port))
    assert wait_until(lambda: len(server.http._runner.server.connections) == 1)
    (connection,) = server.http._runner.server.connections
    connection.transport.get_extra_info("socket").setsockopt(
        socket.SOL_SOCKET, socket.SO_SNDBUF, send_bytes
    )
    return sock, connection


def _post(sock: socket.socket, path: str, body: bytes, *headers: str) -> None:
    head = "".join(f"{h}\r\n" for h in ("Host: x", *headers, f"Content-Length: {len(body)}"))
    sock.sendall(f"POST {path} HTTP/1.1\r\n{head}\r\n".encode() + body)


def test_connections_past_the_cap_are_answered_503_and_closed(server_factory):
    server = server_factory(server={"http_port": 0, "http_max_connections": CAP})
    address = ("127.0.0.1", server.http_port)
    held = [socket.create_connection(address, timeout=TIMEOUT) for _ in range(CAP)]
    try:
        assert wait_until(lambda: len(server.http._runner.server.connections) == CAP)
        # one more that sends nothing: answered at once, closed within the linger
        start = time.monotonic()
        with socket.create_connection(address, timeout=TIMEOUT) as sock:
            body = _refused(_answer(sock))
        assert time.monotonic() - start < httpconn.REFUSED_LINGER_SECONDS + 2
        assert body["status"] == "UNAVAILABLE" and body["code"] == 14
        assert "limit of 3 HTTP connections (--http-max-connections)" in body["message"]
        # one that sends its request: it reads the same answer, and is closed without
        # waiting for the linger
        request = b"POST /v1/translate HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
        with socket.create_connection(address, timeout=TIMEOUT) as sock:
            sock.sendall(request)
            start = time.monotonic()
            _refused(_answer(sock))
        assert _over_capacity(server) == 2
        # the held connections were not disturbed, and a place freed is taken again
        held.pop().close()
        assert wait_until(lambda: len(server.http._runner.server.connections) == CAP - 1)
        url = f"http://127.0.0.1:{server.http_port}/v1/health/live"
        with urllib.request.urlopen(url, timeout=TIMEOUT) as reply:
            assert reply.status == 200
        held[0].sendall(b"GET /v1/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
        assert held[0].recv(4096).startswith(b"HTTP/1.1 200 OK")
    finally:
        for sock in held:
            sock.close()


def test_no_cap_takes_every_connection(server_factory):
    server = server_factory(server={"http_port": 0, "http_max_connections": 0})
    address = ("127.0.0.1", server.http_port)
    held = [socket.create_connection(address, timeout=TIMEOUT) for _ in range(20)]
    try:
        held[-1].sendall(b"GET /v1/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
        assert held[-1].recv(4096).startswith(b"HTTP/1.1 200 OK")
        assert _over_capacity(server) == 0
    finally:
        for sock in held:
            sock.close()


@pytest.mark.parametrize(
    ("wanted", "open_files", "room"),
    [
        (1000, 20000, 1000),
        (0, 20000, 20000 - RESERVED_FDS),  # no cap asked: the limit's room
        (1000, 1024, 1024 - RESERVED_FDS),
        (1000, 200, 100),  # a very low limit keeps half for the rest of the process
        (5, 200, 5),
        (10, 1, 1),
    ],
)
def test_the_cap_fits_in_the_open_files_limit(wanted, open_files, room):
    assert connection_room(wanted, open_files) == room


def test_the_flag_and_its_variable():
    assert parse_args([]).http_max_connections == ServerConfig().http_max_connections > 0
    assert parse_args(["--http-max-connections", "5"]).http_max_connections == 5
    environ = {"NMT_HTTP_MAX_CONNECTIONS": "0"}
    assert parse_args([], environ=environ).http_max_connections == 0
    with pytest.raises(ValueError, match="--http-max-connections must be >= 0"):
        ServerConfig(http_max_connections=-1)


def test_the_soft_open_files_limit_is_raised_to_the_hard_one():
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    code = (
        "import resource\n"
        "from service.listen import raise_open_files_limit\n"
        "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))\n"
        "print(raise_open_files_limit(), resource.getrlimit(resource.RLIMIT_NOFILE)[0])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    reported, now = map(int, out.stdout.split())
    expected = 1 << 20 if hard == resource.RLIM_INFINITY else hard
    assert reported == now == expected
    assert raise_open_files_limit() == resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def test_failed_accepts_are_one_warning_a_minute(monkeypatch, caplog):
    (accepts,) = [
        f for f in logging.getLogger("asyncio").filters if isinstance(f, httpconn._AcceptFailures)
    ]
    monkeypatch.setattr(accepts, "_next", 0.0)
    monkeypatch.setattr(accepts, "_held", 0)
    asyncio_log = logging.getLogger("asyncio")
    caplog.set_level(logging.WARNING, logger="asyncio")
    error = OSError(24, "Too many open files")
    for _ in range(5):
        try:
            raise error
        except OSError:
            asyncio_log.error("socket.accept() out of system resource", exc_info=True)
    asyncio_log.error("some other asyncio error")  # not ours: passes as it is
    ours = [r for r in caplog.records if "accept" in r.getMessage()]
    assert len(ours) == 1 and ours[0].levelno == logging.WARNING and not ours[0].exc_info
    assert "(Too many open files)" in ours[0].getMessage()
    assert "ulimit -n" in ours[0].getMessage()
    assert any(r.getMessage() == "some other asyncio error" for r in caplog.records)
    # a minute on, the next one says how many were held back
    monkeypatch.setattr(accepts, "_next", 0.0)
    asyncio_log.error("socket.accept() out of system resource", exc_info=False)
    assert "(and 4 more since the last report)" in caplog.records[-1].getMessage()


def test_a_flood_at_a_low_open_files_limit_is_answered_not_logged(tiny_bundle, tmp_path):
    """nmt-serve under ``ulimit -n 160``: its HTTP cap is lowered (warned once), a flood of
    idle connections past it is refused 503, the log stays a few lines, and the port
    serves again once the flood leaves. (Before the cap, asyncio wrote a traceback per
    failed accept: 56 MB of log in 10 s at ``ulimit -n 200``.)"""
    limit = 160

    def low_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
        os.nice(10)

    port, http_port = free_port(), free_port()
    path = tmp_path / "server.log"
    with open(path, "w+") as log:
        proc = spawn_serve(
            tiny_bundle.repo, port, log, "--http-port", str(http_port), preexec_fn=low_limit
        )
        url = f"http://127.0.0.1:{http_port}/v1/health/live"
        flood: list[socket.socket] = []
        try:

            def live() -> bool:
                assert proc.poll() is None, path.read_text()
                try:
                    with urllib.request.urlopen(url, timeout=1) as reply:
                        return reply.status == 200
                except (OSError, urllib.error.URLError):
                    return False

            assert wait_until(live, timeout=60, every=0.2)
            for _ in range(2 * limit):
                try:
                    flood.append(socket.create_connection(("127.0.0.1", http_port), timeout=2))
                except OSError:
                    break
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(url, timeout=TIMEOUT)
            assert refused.value.code == 503
            assert "--http-max-connections" in json.loads(refused.value.read())["message"]
            for sock in flood:
                sock.close()
            flood.clear()
            assert wait_until(live, timeout=10, every=0.2)
        finally:
            for sock in flood:
                sock.close()
            proc.kill()
            proc.wait(10)
        text = path.read_text()
    assert "HTTP connections capped at 80, not 1000: the open-files limit is 160" in text
    assert "Traceback" not in text, text[-3000:]
    assert len(text.splitlines()) < 40, text[-3000:]


def test_an_answer_left_unread_closes_its_connection(server_factory, tiny_bundle, monkeypatch):
    """A client that asks for a large answer and never reads it: once the bytes waiting
    to be sent stop shrinking for --http-send-timeout, the connection is aborted (it was
    held for as long as the client liked, its answer in memory)."""
    monkeypatch.setattr(httpconn, "SEND_CHECK_SECONDS", 0.1)
    server = server_factory(server={"http_port": 0, "http_send_timeout": 0.5})
    body = json.dumps(
        {"texts": list(tiny_bundle.sentences[:48]), "options": {"return_attention": True}}
    ).encode()
    # the server's kernel buffer small too, so the answer waits in the process
    sock, connection = _narrow(server, 4096, 4096)
    try:
        _post(sock, "/v1/translate", body)
        assert wait_until(lambda: connection.transport is not None and connection.busy)
        start = time.monotonic()
        connections = server.http._runner.server
        assert wait_until(lambda: not connections.connections, timeout=10)  # aborted
        assert time.monotonic() - start < 5
    finally:
        sock.close()
    # the port serves on
    with urllib.request.urlopen(f"http://127.0.0.1:{server.http_port}/v1/health/live") as r:
        assert r.status == 200


def test_the_send_timeout_flag():
    assert parse_args(["--http-send-timeout", "5"]).http_send_timeout == 5.0
    assert parse_args([]).http_send_timeout == ServerConfig().http_send_timeout > 0
    for bad in ("-1", "nan"):
        with pytest.raises(ValueError, match="--http-send-timeout must be in 0"):
            parse_args(["--http-send-timeout", bad])


def test_a_streams_answer_read_after_its_deadline_is_not_followed_by_an_error(
    server_factory, tiny_bundle
):
    """The final event handed over, then the deadline passed while the client was slow to
    read it: the client reads the answer, and no error event after it (it read both)."""
    server = server_factory(server={"http_port": 0})
    text = tiny_bundle.sentences[0]
    body = json.dumps(
        {"text": text, "options": {"beam_size": 8, "n_best": 8, "return_attention": True}}
    ).encode()
    sock, _ = _narrow(server, 4096, 4096)
    try:
        _post(sock, "/v1/translate/stream", body, "Grpc-Timeout: 1S")
        time.sleep(2.0)  # the deadline passes while the answer waits to be read
        sock.settimeout(5)
        data = b""
        while not data.endswith(b"0\r\n\r\n"):  # the chunked stream's end
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                break
            data += chunk
    finally:
        sock.close()
    assert b'"final":true' in data
    assert b"event: error" not in data, data[-300:]


def _malformed(log: logging.Logger) -> None:
    from aiohttp.http_exceptions import BadHttpMessage

    try:
        raise BadHttpMessage("Bad header")
    except BadHttpMessage:
        log.error("Error handling request", exc_info=True)


def _failed_accept(log: logging.Logger) -> None:
    log.error("socket.accept() out of system resource")


@pytest.mark.parametrize(
    ("make", "flood", "first", "held"),
    [
        (httpconn._MalformedRequests, _malformed, "refused a malformed HTTP request (",
         "3 more malformed HTTP requests refused in the last 0.2 s"),
        (httpconn._AcceptFailures, _failed_accept, "the HTTP port could not accept a connection",
         "3 more failed accepts on the HTTP port in the last 0.2 s"),
    ],
    ids=["malformed", "accept"],
)  # fmt: skip
def test_a_floods_held_back_lines_are_counted_at_the_periods_end(caplog, make, flood, first, held):
    """A flood: one line at once, then one saying how many more when no later one comes
    to say it (a flood's 999 others went unmentioned)."""
    period = make(0.2)
    log = logging.getLogger(f"service.httpconn.test.{make.__name__}")
    log.addFilter(period)
    caplog.set_level(logging.WARNING, logger=log.name)
    try:
        for _ in range(4):
            flood(log)
        lines = [r.getMessage() for r in caplog.records if r.name == log.name]
        assert len(lines) == 1 and lines[0].startswith(first)
        assert wait_until(lambda: len([r for r in caplog.records if r.name == log.name]) == 2)
        last = [r for r in caplog.records if r.name == log.name][-1]
        assert last.getMessage() == held
        assert last.levelno == logging.WARNING and not last.exc_info
    finally:
        log.removeFilter(period)


def test_a_connection_that_sends_nothing_is_closed_at_the_header_deadline(server_factory):
    """Connections that never send a byte held their places (1,000 of them: the whole
    cap) for the keep-alive timeout, 300 s (helper-87)."""
    from service.calls import RpcConfig

    server = server_factory(server={"http_port": 0, "rpc": RpcConfig(receive_timeout=0.5)})
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=TIMEOUT) as sock:
        start = time.monotonic()
        assert sock.recv(1024) == b""  # closed by the server
        assert time.monotonic() - start < 3


def test_at_the_cap_an_idle_kept_alive_connection_makes_room(server_factory):
    server = server_factory(server={"http_port": 0, "http_max_connections": 2})
    address = ("127.0.0.1", server.http_port)
    kept = []
    for _ in range(2):  # each asks once and keeps its connection
        sock = socket.create_connection(address, timeout=TIMEOUT)
        sock.sendall(b"GET /v1/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
        assert sock.recv(4096).startswith(b"HTTP/1.1 200 OK")
        kept.append(sock)
        time.sleep(0.05)  # the first is the older
    try:
        url = f"http://127.0.0.1:{server.http_port}/v1/health/live"
        with urllib.request.urlopen(url, timeout=TIMEOUT) as reply:  # not refused
            assert reply.status == 200
        assert kept[0].recv(1024) == b""  # the oldest idle one was closed for it
        kept[1].sendall(b"GET /v1/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
        assert kept[1].recv(4096).startswith(b"HTTP/1.1 200 OK")
        assert _over_capacity(server) == 0
    finally:
        for sock in kept:
            sock.close()


def test_refused_connections_past_the_lingering_bound_are_reset(server_factory, monkeypatch):
    """Each refused connection lingers a second for its client to read the 503; past
    MAX_LINGERING of them a flood is reset at once, so it cannot reach the open-files
    limit (a burst of 600 against a cap of 150 did, helper-86)."""
    monkeypatch.setattr(httpconn, "MAX_LINGERING", 2)
    server = server_factory(server={"http_port": 0, "http_max_connections": 1})
    address = ("127.0.0.1", server.http_port)
    held = socket.create_connection(address, timeout=TIMEOUT)  # the one place
    flood = [socket.create_connection(address, timeout=TIMEOUT) for _ in range(6)]
    try:
        answered = reset = 0
        for sock in flood:
            try:
                data = _answer(sock)
            except ConnectionResetError:
                data = b""
            answered += data.startswith(b"HTTP/1.1 503")
            reset += not data
        assert answered >= 2 and reset >= 1 and answered + reset == 6
        assert server.http._runner.server.lingering <= 2
        assert wait_until(lambda: server.http._runner.server.lingering == 0, timeout=5)
        assert _over_capacity(server) == 6
    finally:
        held.close()
        for sock in flood:
            sock.close()


def test_a_slow_steady_reader_gets_its_whole_answer(server_factory, tiny_bundle, monkeypatch):
    """The watchdog counts the socket's own send queue too: the transport's buffer shrinks
    only when the kernel wakes the writer, after a third of that queue drained, which at
    a slow reader's pace took longer than the timeout (a 64 KB/s reader was cut off after
    5.4 of 9.8 MB, helper-86)."""
    monkeypatch.setattr(httpconn, "SEND_CHECK_SECONDS", 0.1)
    server = server_factory(
        server={"http_port": 0, "http_send_timeout": 0.5}, max_beam_size=8, max_n_best=8
    )
    texts = [tiny_bundle.sentences[0]] * 4  # the looping one: long, with attention
    options = {"beam_size": 8, "n_best": 8, "return_attention": True}
    body = json.dumps({"texts": texts, "options": options}).encode()
    # a send queue of 2 MB: the writer is woken after ~700 KB drained, at this reader's
    # 640 KB/s about once a second, past the 0.5 s timeout
    sock, _ = _narrow(server, 65536, 1024 * 1024)
    try:
        _post(sock, "/v1/translate", body, "Connection: close")
        sock.settimeout(TIMEOUT)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
            time.sleep(0.1)
    finally:
        sock.close()
    head, _, payload = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK")
    length = int(
        dict(line.split(": ", 1) for line in head.decode().split("\r\n")[1:])["Content-Length"]
    )
    assert len(payload) == length > 2_500_000, (len(payload), length)
    assert len(json.loads(payload)["translations"]) == 4
