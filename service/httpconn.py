"""The HTTP port's connections (``service/httpapi.py``'s server): what one client may hold
and how long, and what its malformed bytes may write to the log.

aiohttp bounds the size of a request line and of each header, but not the time a client
may take to send them: a client dripping headers (slowloris), or a thousand of them each
holding ``max_headers`` fields of 8 KB, held connections and memory for as long as the
keep-alive timeout. Here each request's headers must be complete within
``header_seconds`` of their first byte (the gRPC port's ``--receive-timeout``), or the
connection closes; a connection past ``max_age_seconds`` (``--max-connection-age``) is
told ``Connection: close`` with its next answer, so that clients reconnect and spread
over the replicas again, as gRPC's GOAWAY makes them do. Past ``max_connections`` open
at once (``--http-max-connections``), a new connection is answered 503 at once and
closed, before the open-files limit is reached (where accept() fails, asyncio logs each
failure with a traceback, and no client gets an answer). An answer its client leaves
unread, the bytes waiting to be sent not shrinking for ``send_seconds``, aborts the
connection (aiohttp has no write timeout: 12 clients that never read their 7.5 MB
answers held 70 MB and their connections for as long as they liked; a stream's
client that stopped reading held a call in flight to its deadline). aiohttp's own complaints about
malformed requests (a bad header line, a broken chunked or gzip body) go to a logger that
writes at most one line a minute and no traceback. Large answers are compressed as the
client's ``Accept-Encoding`` weighs the codings (:func:`compress`), and every answer is
counted by the ``answered`` callback.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

try:  # the socket's unsent bytes (Linux); elsewhere the transport's buffer alone
    import fcntl
    import termios

    _OUTQ: int | None = termios.TIOCOUTQ
except (ImportError, AttributeError):
    _OUTQ = None

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import ERROR as UNPARSED  # aiohttp's message for a malformed request
from aiohttp.web_protocol import RequestHandler, RequestPayloadError
from aiohttp.web_response import ContentCoding

log = logging.getLogger(__name__)

# How many header fields a request may carry (aiohttp's default, 128, let 8 KB fields
# add up to 1 MB a connection); browsers and proxies send a few dozen at most.
MAX_HEADERS = 64
BAD_REQUEST_LOG_SECONDS = 60.0
# What a malformed request raises: its headers, or its chunked or gzip framing.
MALFORMED = (HttpProcessingError, RequestPayloadError)
# Told of each answer written: the request's path (None: a request that could not be
# parsed) and the HTTP status.
Answered = Callable[[str | None, int], None]
_UNPARSED_KEY = web.RequestKey("nmt_unparsed", bool)
# Answers this large are compressed for a client that takes gzip or deflate (aiohttp
# compresses them on a thread: the event loop keeps serving); smaller ones gain little.
COMPRESS_BYTES = 4096
# What the ``answered`` callback is told for a connection refused past the cap.
OVER_CAPACITY = "(over --http-max-connections)"
# How long a refused connection stays open for its client to read the 503 (closing at
# once, with the client's request unread, makes the kernel reset it: the answer is lost).
REFUSED_LINGER_SECONDS = 1.0
# Refused connections kept open at once for their clients to read the 503; more are reset.
MAX_LINGERING = 64
# How often a connection with bytes waiting to be sent checks that its client reads them.
SEND_CHECK_SECONDS = 1.0


def _unsent(transport: asyncio.BaseTransport) -> int:
    """Bytes of the answer not yet taken by the client: the transport's buffer and, where
    the system says (Linux's TIOCOUTQ), the socket's own send queue. The buffer alone
    shrinks only when the kernel wakes the writer, after a third of its queue (MBs)
    drained: a client reading 64 KB/s went 20 s without it and was cut off (helper-86)."""
    assert isinstance(transport, asyncio.WriteTransport)
    unsent = transport.get_write_buffer_size()
    sock = transport.get_extra_info("socket")
    if _OUTQ is not None and sock is not None:
        # (OSError: closed meanwhile, or a socket without a send queue to read)
        with contextlib.suppress(OSError):
            unsent += struct.unpack("i", fcntl.ioctl(sock.fileno(), _OUTQ, b"\0" * 4))[0]
    return unsent


class _OncePerPeriod(logging.Filter):
    """Of the records :meth:`matches` picks (a flood's: logged at ERROR with a stack each),
    lets one through per ``period`` seconds as a one-line warning (:meth:`line`), counting
    the ones it held back: the next one let through says how many, or, when none comes,
    one line at the period's end (a flood's 999 held back went unmentioned). Any other
    record (a real error in a handler) passes as it is."""

    #: what the period's-end line says was held back, e.g. "malformed HTTP requests"
    HELD = ""

    def __init__(self, period: float) -> None:
        super().__init__()
        self.period = period
        self._next = 0.0
        self._held = 0
        self._lock = threading.Lock()
        self._report: threading.Timer | None = None

    def matches(self, record: logging.LogRecord) -> bool:
        raise NotImplementedError

    def line(self, record: logging.LogRecord) -> str:
        """The warning that stands for ``record`` (and the ones held back since)."""
        raise NotImplementedError

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.matches(record):
            return True
        now = time.monotonic()
        with self._lock:
            if now < self._next:
                self._held += 1
                if self._report is None:  # said at the period's end unless one passes first
                    self._report = threading.Timer(self._next - now, self._say_held, [record.name])
                    self._report.daemon = True
                    self._report.start()
                return False
            if self._report is not None:
                self._report.cancel()
                self._report = None
            more = f" (and {self._held} more since the last report)" if self._held else ""
            self._next, self._held = now + self.period, 0
        record.msg = self.line(record) + more
        record.args = None
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        record.exc_info = record.exc_text = None
        return True

    def _say_held(self, name: str) -> None:
        with self._lock:
            held, self._held, self._report = self._held, 0, None
            self._next = time.monotonic() + self.period  # this line counts as the period's
        if held:
            logging.getLogger(name).warning(
                "%d more %s in the last %g s", held, self.HELD, self.period
            )


class _MalformedRequests(_OncePerPeriod):
    """aiohttp logs each malformed request (:data:`MALFORMED`) at ERROR with a stack."""

    HELD = "malformed HTTP requests refused"

    def matches(self, record: logging.LogRecord) -> bool:
        return bool(record.exc_info and isinstance(record.exc_info[1], MALFORMED))

    def line(self, record: logging.LogRecord) -> str:
        # aiohttp's message quotes the offending bytes and a caret on lines of their own
        # (and the bytes are the client's: repr keeps them printable)
        error = record.exc_info[1] if record.exc_info else None
        words = [line.strip() for line in str(error or "").splitlines()]
        text = " ".join(w for w in words if w and w != "^")[:300]
        reason = f": {text}" if text else ""
        return f"refused a malformed HTTP request ({record.getMessage()}{reason})"


class _AcceptFailures(_OncePerPeriod):
    """asyncio logs every failed accept() at ERROR with a traceback: at the open-files
    limit, thousands a second (a 56 MB log in 10 s was measured)."""

    HELD = "failed accepts on the HTTP port"
    PREFIX = "socket.accept() out of system resource"

    def matches(self, record: logging.LogRecord) -> bool:
        return str(record.msg).startswith(self.PREFIX)

    def line(self, record: logging.LogRecord) -> str:
        error = record.exc_info[1] if record.exc_info else None
        reason = f" ({error.strerror})" if isinstance(error, OSError) and error.strerror else ""
        return (
            f"the HTTP port could not accept a connection{reason}: raise the open-files "
            "limit (ulimit -n) or lower --http-max-connections"
        )


# aiohttp's request handlers write here (logger=); one filter for the process.
protocol_log = logging.getLogger(f"{__name__}.protocol")
protocol_log.addFilter(_MalformedRequests(BAD_REQUEST_LOG_SECONDS))


logging.getLogger("asyncio").addFilter(_AcceptFailures(BAD_REQUEST_LOG_SECONDS))


def accepted_coding(accept_encoding: str) -> ContentCoding | None:
    """The coding to compress an answer with for this ``Accept-Encoding``: gzip or
    deflate, whichever the client weighs higher (gzip on a tie), none that it gives
    ``q=0`` (aiohttp's own choice looks for the names alone and prefers deflate)."""
    weights: dict[str, float] = {}
    for item in accept_encoding.lower().split(","):
        name, *params = (part.strip() for part in item.split(";"))
        q = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        weights[{"x-gzip": "gzip"}.get(name, name)] = q
    anything = weights.get("*", 0.0)
    best = max(("gzip", "deflate"), key=lambda c: (weights.get(c, anything), c == "gzip"))
    return ContentCoding(best) if weights.get(best, anything) > 0 else None


def compress(response: web.StreamResponse, accept_encoding: str) -> None:
    """Compress an answer of :data:`COMPRESS_BYTES` or more if the client takes it
    (aiohttp then compresses it on a thread); caches are told it depends on the header."""
    body = response.body if isinstance(response, web.Response) else None
    if not isinstance(body, bytes) or len(body) < COMPRESS_BYTES:
        return  # a stream, or too small to gain
    vary = [v for v in response.headers.getall("Vary", ()) if v]
    response.headers["Vary"] = ", ".join([*vary, "Accept-Encoding"])
    coding = accepted_coding(accept_encoding)
    if coding is not None:
        response.enable_compression(coding)


class Connection(RequestHandler):
    """aiohttp's HTTP/1.1 protocol with a deadline on each request's headers and an age.

    ``busy`` is set from the request's creation (its headers are complete) until its
    answer is written; bytes that arrive while it is not start the header timer, unless
    one runs. (Bytes of a next request that come with or during one are not timed: a
    partial request pipelined behind a complete one waits for the keep-alive timeout.)"""

    def __init__(
        self,
        manager: web.Server,
        *,
        header_seconds: float,
        max_age_seconds: float,
        max_connections: int,
        send_seconds: float,
        refusal: bytes,
        answered: Answered,
        **kwargs,
    ) -> None:
        super().__init__(manager, **kwargs)
        self.header_seconds = header_seconds
        self.max_age_seconds = max_age_seconds
        self.max_connections = max_connections
        self.send_seconds = send_seconds
        self._send_timer: asyncio.TimerHandle | None = None
        self._unsent = 0  # bytes waiting to be sent at the last check
        self._stalled_since: float | None = None
        self._refusal = refusal
        self._answered = answered
        self.opened = time.monotonic()
        self.busy = False
        self.refused = False
        self.last_used = time.monotonic()
        self._lingers: Server | None = None  # counted among the server's lingering
        self._header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        loop = asyncio.get_running_loop()
        cap, manager = self.max_connections, self._manager
        if cap and isinstance(manager, Server) and len(manager.connections) > cap:
            # (this one is counted) an idle keep-alive connection makes room: its client
            # opens another when it needs one
            idle = [
                c
                for c in manager.connections
                if isinstance(c, Connection) and c is not self and c.idle()
            ]
            if idle:
                min(idle, key=lambda c: c.last_used).force_close()
            else:
                self._refuse(transport, manager)
                return
        # the first request's headers too must come within header_seconds: a client that
        # connects and sends nothing held its place until the keep-alive timeout (300 s)
        self._header_timer = loop.call_later(self.header_seconds, self._too_slow)

    def idle(self) -> bool:
        """Between requests on a kept-alive connection: nothing being read or answered."""
        timer_running = self._header_timer is not None
        return not (self.busy or self.refused or timer_running) and self.transport is not None

    def _refuse(self, transport: asyncio.BaseTransport, manager: Server) -> None:
        """Answer 503 at once; keep the connection a moment for its client to read it
        (closing with its request unread resets it), unless :data:`MAX_LINGERING` already
        linger: then reset it now, so that a flood cannot reach the open-files limit."""
        self.refused = True
        self._answered(OVER_CAPACITY, 503)
        assert isinstance(transport, asyncio.WriteTransport)
        if manager.lingering >= MAX_LINGERING:
            transport.abort()
            return
        manager.lingering += 1
        self._lingers = manager
        transport.write(self._refusal)
        asyncio.get_running_loop().call_later(REFUSED_LINGER_SECONDS, self.force_close)

    def data_received(self, data: bytes) -> None:
        if self.refused:  # answered already: its request is read, dropped, and the
            if self.transport is not None:  # connection closed (no reset: nothing unread)
                self.transport.close()
            return
        if not self.busy and self._header_timer is None and data:
            loop = asyncio.get_running_loop()
            self._header_timer = loop.call_later(self.header_seconds, self._too_slow)
        super().data_received(data)

    def request_started(self) -> None:
        self.busy = True
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None
        if self._send_timer is None and self.send_seconds > 0:
            self._send_timer = asyncio.get_running_loop().call_later(
                SEND_CHECK_SECONDS, self._check_sending
            )

    def _check_sending(self) -> None:
        """Every :data:`SEND_CHECK_SECONDS` while a request is answered or its answer is
        being sent: abort the connection once the bytes waiting to be sent have not
        shrunk for ``send_seconds`` (a client that stopped reading)."""
        self._send_timer = None
        transport = self.transport
        if transport is None:
            return
        unsent = _unsent(transport)
        now = time.monotonic()
        if unsent == 0 or unsent < self._unsent:
            self._stalled_since = None  # sent, or sending
        elif self._stalled_since is None:
            self._stalled_since = now
        elif now - self._stalled_since >= self.send_seconds:
            log.debug("aborted a connection: its answer unread for %g s", self.send_seconds)
            transport.abort()  # the write waiting on it fails: the handler ends
            return
        self._unsent = unsent
        if self.busy or unsent:
            self._send_timer = asyncio.get_running_loop().call_later(
                SEND_CHECK_SECONDS, self._check_sending
            )

    async def finish_response(self, request, resp, start_time):
        # Every answer passes here: the handler's, and aiohttp's own 400 / 500; counted
        # before it is written, so a client that has it sees it counted (a stream: once
        # written to its end, by the status its headers carried). A client that hangs up
        # first gets no answer: not counted here (nmt_requests_total has it).
        self._answered(None if request.get(_UNPARSED_KEY) else request.path, resp.status)
        try:
            return await super().finish_response(request, resp, start_time)
        finally:
            self.busy = False  # written: what comes next is a new request
            self.last_used = time.monotonic()

    def too_old(self) -> bool:
        age = self.max_age_seconds
        return age > 0 and time.monotonic() - self.opened > age

    def _too_slow(self) -> None:
        self._header_timer = None
        if not self.busy:
            log.debug("closed a connection: request headers took over %g s", self.header_seconds)
            self.force_close()

    def connection_lost(self, exc: BaseException | None) -> None:
        if self._lingers is not None:
            self._lingers.lingering -= 1
            self._lingers = None
        for timer in (self._header_timer, self._send_timer):
            if timer is not None:
                timer.cancel()
        self._header_timer = self._send_timer = None
        super().connection_lost(exc)


class Server(web.Server):
    """aiohttp's low-level server making :class:`Connection` protocols."""

    def __init__(
        self,
        handler,
        *,
        header_seconds: float,
        max_age_seconds: float,
        max_connections: int,
        send_seconds: float,
        refusal: bytes,
        answered: Answered,
        **kwargs: Any,
    ):
        """``max_connections``: open at once (0: no cap); past it a new connection is
        sent ``refusal``, a whole HTTP answer, and closed."""
        super().__init__(handler, request_factory=self._request, **kwargs)
        self.lingering = 0  # refused connections kept open for their client to read the 503
        self._connection_args = {
            "header_seconds": header_seconds,
            "max_age_seconds": max_age_seconds,
            "max_connections": max_connections,
            "send_seconds": send_seconds,
            "refusal": refusal,
            "answered": answered,
            "max_headers": MAX_HEADERS,
            "logger": protocol_log,
        }

    def __call__(self) -> Connection:
        return Connection(self, loop=self._loop, **self._kwargs, **self._connection_args)

    def _request(self, message, payload, protocol, writer, task) -> web.BaseRequest:
        # called once a request's headers are complete, before its handler runs
        if isinstance(protocol, Connection):
            protocol.request_started()
        request = self._make_request(message, payload, protocol, writer, task)
        if message is UNPARSED:  # its path is aiohttp's placeholder, "/"
            request[_UNPARSED_KEY] = True
        return request
