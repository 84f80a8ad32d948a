"""``nmt-serve --http-port``: the gRPC service's methods as JSON over HTTP/1.1, for
clients without gRPC (curl, a browser's ``fetch``, a web backend).

Each route runs the gRPC servicer's own handler (``service/servicer.py``) with
:class:`HttpContext` in place of the ``grpc.aio.ServicerContext``: the same admission,
limits, validation, deadlines, cancellation, metrics (``nmt_requests_total`` by gRPC
method), access log and error messages as a gRPC call. Bodies are the messages in
proto3's JSON mapping (``google.protobuf.json_format``, as grpc-gateway and Envoy's
transcoder write them): fields by their proto names (lowerCamelCase is read too), fields
at their default left out, 64-bit integers as strings.

=====  ========================  =================================================
POST   ``/v1/translate``         ``TranslateRequest`` -> ``TranslateResponse``
POST   ``/v1/translate/stream``  ``TranslateStreamRequest`` -> server-sent events,
                                 one ``TranslateStreamResponse`` each
POST   ``/v1/score``             ``ScoreRequest`` -> ``ScoreResponse``
GET    ``/v1/models``            ``ListModelsResponse``
GET    ``/v1/health/live``       200 while the server runs
GET    ``/v1/health/ready``      200 ``SERVING`` or 503 ``NOT_SERVING``, as gRPC health
GET    ``/v1/openapi.json``      this API as OpenAPI 3.1 (generated: ``service/openapi.py``)
GET    ``/``                     a demo page (``service/static/index.html``) that
                                 translates through ``/v1/translate`` and draws attention
=====  ========================  =================================================

An error is the HTTP status of its gRPC code (:data:`HTTP_STATUS`, the mapping of
``google.rpc.Code``) with ``{"code", "status", "message"}``; on a stream that has begun,
an ``event: error`` with the same object. A deadline comes as grpc-gateway takes it, in
a ``Grpc-Timeout`` header (``2S``, ``500m``); ``X-Request-Id`` goes in and comes back as
gRPC's ``x-request-id`` metadata does.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import ssl
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import grpc
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestPayloadError
from google.protobuf.message import Message
from prometheus_client import Counter

from nmt_api import RETRY_HINT, TIMEOUT_HEADER
from nmt_api.nmt.v1 import translator_pb2 as pb
from service.calls import RpcConfig
from service.errors import DRAINED, InvalidRequest, TooLarge
from service.httpconn import OVER_CAPACITY, Connection, Server, compress
from service.httpgrpc import (
    HTTP_STATUS,
    MAX_ERROR_CHARS,
    Aborted,
    HttpContext,
    deadline_of,
    error_body,
    parse,
    to_json,
)
from service.listen import WILDCARDS, listen_hosts
from service.logs import REQUEST_ID_HEADER, request_id_from

log = logging.getLogger(__name__)

# Replies larger than this become JSON on a thread: the event loop keeps serving.
# (A request body as large is parsed there too: json_format takes a second on 4 MB.)
INLINE_JSON_BYTES = 64 * 1024
READ_CHUNK_BYTES = 64 * 1024
# The Server header of the API's answers (aiohttp's names Python's and its own versions).
SERVER = "nmt-serve"
# After the grace, how long cancelled handlers and their last writes may take.
CANCELLED_SECONDS = 1.0
# Pending connections the port queues (the kernel caps it at net.core.somaxconn).
BACKLOG = 4096
# What a cross-origin page may send (--http-cors-origins).
CORS_REQUEST_HEADERS = f"Content-Type, {TIMEOUT_HEADER}, {REQUEST_ID_HEADER}"
# A wildcard's IPv6 half fails with these where the machine has no IPv6.
NO_IPV6 = (errno.EAFNOSUPPORT, errno.EADDRNOTAVAIL, errno.EPROTONOSUPPORT)
# What a 503 (warming up, draining) or an overloaded 429 says in Retry-After.
RETRY_AFTER_SECONDS = 1


@dataclass(frozen=True)
class Route:
    """An HTTP route: the gRPC method it runs and the messages' types."""

    method: str
    request: type[Message]
    response: type[Message]
    stream: bool = False


ROUTES: dict[tuple[str, str], Route] = {
    ("POST", "/v1/translate"): Route("Translate", pb.TranslateRequest, pb.TranslateResponse),
    ("POST", "/v1/translate/stream"): Route(
        "TranslateStream", pb.TranslateStreamRequest, pb.TranslateStreamResponse, stream=True
    ),
    ("POST", "/v1/score"): Route("Score", pb.ScoreRequest, pb.ScoreResponse),
    ("GET", "/v1/models"): Route("ListModels", pb.ListModelsRequest, pb.ListModelsResponse),
}
LIVE, READY, OPENAPI = "/v1/health/live", "/v1/health/ready", "/v1/openapi.json"
SERVING, NOT_SERVING = "SERVING", "NOT_SERVING"  # the health routes' answers, gRPC health's names
GET_ONLY = (LIVE, READY, OPENAPI, "/")  # health, this API's description, the demo page
STATIC = Path(__file__).resolve().parent / "static"
PAGE = STATIC / "index.html"
# generated from translator.proto and ROUTES by service/openapi.py
OPENAPI_FILE = STATIC / "openapi.json"
ROUTE_LIST = ", ".join(
    [f"{verb} {path}" for verb, path in ROUTES]
    + [f"GET {LIVE}", f"GET {READY}", f"GET {OPENAPI}", "GET / (a demo page)"]
)


def verbs_of(path: str) -> list[str]:
    """The methods ``path`` takes (none: no such route); HEAD goes with GET, answered as
    GET is without the body (:func:`allowed`)."""
    if path in GET_ONLY:
        return ["GET"]
    return [verb for verb, route_path in ROUTES if route_path == path]


def allowed(path: str) -> list[str]:
    """What a 405 answer's ``Allow`` lists for ``path``: its methods, HEAD with GET."""
    verbs = verbs_of(path)
    return [*verbs, "HEAD"] if "GET" in verbs else verbs


class HttpApiError(RuntimeError):
    """The HTTP API cannot start as configured; the message says how to fix it."""


class HttpApi:
    """The HTTP/JSON routes over ``methods`` (:meth:`TranslatorServicer.methods`), on the
    running event loop. ``serving()``: what gRPC health says of the service."""

    def __init__(
        self,
        methods: dict[str, Callable],
        serving: Callable[[], bool],
        rpc: RpcConfig,
        *,
        idle_seconds: float,
        max_age_seconds: float = 0.0,
        max_connections: int = 0,
        send_seconds: float = 0.0,
        answers: Counter,
        cors_origins: tuple[str, ...] = (),
    ) -> None:
        """``idle_seconds``: keep-alive (``--max-connection-idle``); ``max_age_seconds``:
        answers past it close their connection (``--max-connection-age``; 0: never);
        ``max_connections``: open at once, more answered 503 and closed
        (``--http-max-connections``; 0: no cap); ``send_seconds``: how long an answer's
        unsent bytes may stay unread before the connection closes (``--http-send-timeout``;
        0: never); ``cors_origins``: origins whose pages may call (``*``: any); ``answers``: counts
        each answer by route and status (``nmt_http_responses_total``)."""
        self._cors_origins = cors_origins
        self._answers = answers
        self._methods = methods
        self._serving = serving
        self._rpc = rpc
        self._idle_seconds = idle_seconds
        self._max_age_seconds = max_age_seconds
        self._max_connections = max_connections
        self._send_seconds = send_seconds
        self._runner: web.ServerRunner | None = None
        self._page = PAGE.read_bytes()
        self._openapi = OPENAPI_FILE.read_bytes()
        self._handlers: set[asyncio.Task] = set()
        self._draining = False

    async def start(
        self, host: str, port: int, *, ssl_context: ssl.SSLContext | None, reuse_port: bool
    ) -> int:
        """Bind ``host:port`` (0: a free port) and serve; returns the port. A wildcard
        host binds every address of both families, as the gRPC port does."""
        server = Server(
            self._handle,
            header_seconds=self._rpc.receive_timeout,
            max_age_seconds=self._max_age_seconds,
            max_connections=self._max_connections,
            send_seconds=self._send_seconds,
            refusal=_refusal(self._max_connections),
            answered=self._answered,
            handler_cancellation=True,  # a client that hangs up cancels its call
            access_log=None,  # --access-log writes the servicer's line per call
            keepalive_timeout=self._idle_seconds,
        )
        runner = web.ServerRunner(server)
        await runner.setup()
        # Every address the gRPC port binds for this host, all on one port (the first
        # bind's, when 0 asks for any); a wildcard binds both families, as gRPC's does,
        # IPv6 only where the machine has it.
        if host in WILDCARDS:
            addresses = ["0.0.0.0", "::"]
        else:
            addresses = [a.removeprefix("[").removesuffix("]") for a in listen_hosts(host)]
        for i, address in enumerate(addresses):
            site = web.TCPSite(
                runner,
                address,
                port,
                ssl_context=ssl_context,
                reuse_port=reuse_port or None,
                backlog=BACKLOG,
            )
            try:
                await site.start()
            except OSError as exc:
                if host in WILDCARDS and i > 0 and exc.errno in NO_IPV6:
                    continue
                await runner.cleanup()
                raise HttpApiError(
                    f"could not serve HTTP on {address}:{port} ({exc.strerror or exc}): "
                    "choose another --http-port, or -1 to turn the HTTP API off"
                ) from None
            port = runner.addresses[0][1]
        self._runner = runner
        return port

    async def stop(self, grace: float) -> None:
        """Close the port at once; requests in flight get ``grace`` seconds to finish,
        then they are cancelled, each counted and its job freed as a gRPC call's, and
        answered 503 UNAVAILABLE (a stream: an ``error`` event) as gRPC answers them."""
        runner, self._runner = self._runner, None
        if runner is None:
            return
        self._draining = True
        for site in list(runner.sites):
            await site.stop()
        assert runner.server is not None
        for connection in runner.server.connections:
            if isinstance(connection, Connection) and not connection.busy:
                connection.force_close()  # idle: closed now, the client retries elsewhere
        runner.server.pre_shutdown()  # busy ones close once answered
        if self._handlers:
            _, late = await asyncio.wait(set(self._handlers), timeout=grace)
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late, timeout=CANCELLED_SECONDS)
        # what is left: answers being written (aiohttp reads 0 as "no limit")
        await runner.server.shutdown(CANCELLED_SECONDS)
        await runner.cleanup()

    def _answered(self, path: str | None, status: int) -> None:
        # the label takes only the routes' paths: a scan of random paths adds no series
        if path == OVER_CAPACITY:
            route = "over_capacity"
        else:
            route = "malformed" if path is None else path if verbs_of(path) else "other"
        self._answers.labels(route, str(status)).inc()

    # -- one request ------------------------------------------------------------------

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        connection = request.protocol
        try:
            response = await self._route(request)
            if not response.prepared:  # (a stream has sent its headers already)
                response.headers.update(self._cors(request))
                response.headers["Server"] = SERVER  # not aiohttp's, with its version
                if isinstance(connection, Connection) and connection.too_old():
                    response.force_close()  # Connection: close: the client reconnects
                compress(response, request.headers.get("Accept-Encoding", ""))
            return response
        finally:
            self._handlers.discard(task)

    def _drained(self) -> bool:
        """Whether the cancel just caught was :meth:`stop`'s, once the grace ran out; if so
        the task takes it back, to answer the call."""
        task = asyncio.current_task()
        if not self._draining or task is None:
            return False
        task.uncancel()
        return True

    def _cors(self, request: web.BaseRequest) -> dict[str, str]:
        """The CORS headers an answer to this request carries (none: same origin only)."""
        if not self._cors_origins:
            return {}
        # the answer depends on Origin unless any origin is allowed: caches must know
        vary = {} if "*" in self._cors_origins else {"Vary": "Origin"}
        origin = request.headers.get("Origin", "").lower()
        if not origin:
            return vary
        if not self._named(origin):
            return vary
        allowed = "*" if "*" in self._cors_origins else origin
        return {
            "Access-Control-Allow-Origin": allowed,
            "Access-Control-Expose-Headers": f"{REQUEST_ID_HEADER}, Retry-After",
            **vary,
        }

    def _named(self, origin: str) -> bool:
        """Whether ``--http-cors-origins`` lets pages of ``origin`` (lower-case) call."""
        return "*" in self._cors_origins or origin in self._cors_origins

    def _may_post(self, request: web.BaseRequest) -> bool:
        """Whether a POST may run: sent by no browser page (no ``Origin``), by this
        server's own page (the origin is the request's host, or the host a proxy says
        it forwarded: ``X-Forwarded-Host``, which a page cannot set without asking
        first), or by a page of an origin ``--http-cors-origins`` lets call."""
        origin = request.headers.get("Origin")
        if origin is None:
            return True
        origin = origin.lower()
        if self._named(origin):
            return True
        hosts = [request.headers.get("Host", "")]
        hosts += request.headers.get("X-Forwarded-Host", "").split(",")
        own = {h.strip().lower() for h in hosts if h.strip()}
        return origin.partition("://")[2] in own

    def _preflight(self, request: web.BaseRequest) -> web.StreamResponse:
        """A browser's OPTIONS before a cross-origin call (``--http-cors-origins``)."""
        verbs = verbs_of(request.path)
        if not verbs:
            return _error_response(grpc.StatusCode.NOT_FOUND, f"no route {request.path[:100]}")
        allowed = self._cors(request)
        if "Access-Control-Allow-Origin" not in allowed:
            return _foreign_origin(request)
        return web.Response(
            status=204,
            headers={
                **allowed,
                "Access-Control-Allow-Methods": ", ".join(verbs),
                "Access-Control-Allow-Headers": CORS_REQUEST_HEADERS,
                "Access-Control-Max-Age": "600",
            },
        )

    async def _route(self, request: web.BaseRequest) -> web.StreamResponse:
        if request.method == "OPTIONS" and self._cors_origins:
            return self._preflight(request)
        # HEAD is GET without the body (aiohttp writes none for it)
        method = "GET" if request.method == "HEAD" else request.method
        if method == "GET" and request.path in (LIVE, READY):
            up = request.path == LIVE or self._serving()
            status = SERVING if up else NOT_SERVING
            # not ready (warming up, draining): ask again shortly, as every other 503
            retry = {} if up else {"Retry-After": str(RETRY_AFTER_SECONDS)}
            return web.json_response({"status": status}, status=200 if up else 503, headers=retry)
        if method == "GET" and request.path == "/":
            return web.Response(body=self._page, content_type="text/html", charset="utf-8")
        if method == "GET" and request.path == OPENAPI:
            return web.Response(body=self._openapi, content_type="application/json")
        route = ROUTES.get((method, request.path))
        if route is not None and method == "POST" and not self._may_post(request):
            # A page elsewhere: browsers send a POST of text/plain or form data without
            # asking first (no preflight), so refusing to share the answer is not enough
            # to keep another site's page from spending this server (helper-87).
            return _foreign_origin(request, _error_id(request))
        if route is None:
            rid = _error_id(request)
            if verbs := allowed(request.path):
                return _error_response(
                    grpc.StatusCode.UNIMPLEMENTED,
                    f"{request.path} takes {' or '.join(verbs)}",
                    rid,
                    status=405,
                    headers={"Allow": ", ".join(verbs)},
                )
            return _error_response(
                grpc.StatusCode.NOT_FOUND,
                f"no route {request.method} {request.path[:100]}; routes: {ROUTE_LIST}",
                rid,
            )
        asked_id = request.headers.get(REQUEST_ID_HEADER)
        try:
            deadline = deadline_of(request.headers.get(TIMEOUT_HEADER))
            bad_deadline = None
        except InvalidRequest as exc:
            deadline, bad_deadline = None, exc
        if route.stream:
            return await self._stream(request, route, asked_id, deadline, bad_deadline)
        context = HttpContext(asked_id, deadline)
        call = self._methods[route.method]
        try:
            async with asyncio.timeout_at(deadline):
                reply = await call(self._requests(request, route, bad_deadline), context)
        except asyncio.CancelledError:
            if not self._drained():
                raise  # the client hung up
            return _error_response(grpc.StatusCode.UNAVAILABLE, DRAINED, context.request_id)
        except Aborted as exc:
            return _error_response(exc.code, exc.message, context.request_id)
        except TimeoutError:
            return _error_response(
                grpc.StatusCode.DEADLINE_EXCEEDED, _past_deadline(), context.request_id
            )
        message = route.response.FromString(reply)
        if len(reply) > INLINE_JSON_BYTES:
            body = await asyncio.to_thread(to_json, message)
        else:
            body = to_json(message)
        return web.Response(
            body=body,
            content_type="application/json",
            headers={REQUEST_ID_HEADER: context.request_id},
        )

    async def _stream(
        self,
        request: web.BaseRequest,
        route: Route,
        asked_id: str | None,
        deadline: float | None,
        bad_deadline: InvalidRequest | None,
    ) -> web.StreamResponse:
        """TranslateStream as server-sent events: ``data: <message JSON>`` each."""
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )

        final = [False]  # the final message was handed to the connection

        async def write(data: bytes) -> None:
            message = route.response.FromString(data)
            if not response.prepared:
                response.headers[REQUEST_ID_HEADER] = context.request_id
                response.headers.update(self._cors(request))
                response.headers["Server"] = SERVER
                connection = request.protocol
                if isinstance(connection, Connection) and connection.too_old():
                    response.force_close()
                await response.prepare(request)
            final[0] = bool(getattr(message, "final", False))
            await response.write(b"data: " + to_json(message) + b"\n\n")

        context = HttpContext(asked_id, deadline, write)
        call = self._methods[route.method]
        try:
            async with asyncio.timeout_at(deadline):
                await call(self._requests(request, route, bad_deadline), context)
        except asyncio.CancelledError:
            if not self._drained():
                raise  # the client hung up
            code, message = grpc.StatusCode.UNAVAILABLE, DRAINED
        except Aborted as exc:
            code, message = exc.code, exc.message
        except TimeoutError:
            code, message = grpc.StatusCode.DEADLINE_EXCEEDED, _past_deadline()
        except Exception:  # noqa: BLE001 - a write failed: the client left (counted CANCELLED)
            if response.prepared:
                return response
            return _error_response(grpc.StatusCode.CANCELLED, "the client left", context.request_id)
        else:
            await response.write_eof()
            return response
        if not response.prepared:
            return _error_response(code, message, context.request_id)
        if final[0]:
            # The whole answer was handed over before the deadline passed while the client
            # read it: it is sent on (bounded by --http-send-timeout), not followed by an
            # error the client would read after the answer.
            return response
        try:
            async with asyncio.timeout(CANCELLED_SECONDS):  # a reader that stopped reading
                await response.write(b"event: error\ndata: " + error_body(code, message) + b"\n\n")
                await response.write_eof()
        except (ConnectionError, TimeoutError):
            pass  # it hung up meanwhile, or reads no more
        except asyncio.CancelledError:
            # aiohttp's wait for the reader, cancelled by the deadline, cancels this write
            # too: not this task's cancellation (that is re-raised)
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise
        return response

    async def _requests(
        self, request: web.BaseRequest, route: Route, bad_deadline: InvalidRequest | None
    ) -> AsyncIterator[bytes]:
        """The request message's bytes, read and parsed as the servicer awaits them (its
        ``--receive-timeout`` bounds a slow body; what fails here it counts)."""
        if bad_deadline is not None:
            raise bad_deadline
        body = await self._body(request)
        if not body.strip() and request.method in ("GET", "HEAD"):
            yield b""
            return
        if len(body) > INLINE_JSON_BYTES:
            yield await asyncio.to_thread(parse, body, route.request)
        else:
            yield parse(body, route.request)

    async def _body(self, request: web.BaseRequest) -> bytes:
        limit = self._rpc.max_message_bytes
        too_large = TooLarge(f"the request body is larger than {limit} bytes (--max-message-bytes)")
        if (request.content_length or 0) > limit:
            raise too_large
        if request.version >= (1, 1) and request.headers.get("Expect", "").lower() == (
            "100-continue"
        ):
            # curl asks this before sending a body over 1 MB, and waits a second without it
            await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        chunks, size = [], 0
        try:
            while chunk := await request.content.read(READ_CHUNK_BYTES):
                size += len(chunk)
                if size > limit:
                    raise too_large
                chunks.append(chunk)
        except (RequestPayloadError, HttpProcessingError) as exc:
            raise InvalidRequest(
                f"the request body could not be read (its chunked or Content-Encoding "
                f"framing is broken): {str(exc)[:MAX_ERROR_CHARS]}"
            ) from None
        return b"".join(chunks)


def _error_id(request: web.BaseRequest) -> str:
    """The request id an error answered before any call comes back with, as a call's."""
    return request_id_from([(REQUEST_ID_HEADER, request.headers.get(REQUEST_ID_HEADER))])


def _foreign_origin(request: web.BaseRequest, request_id: str = "") -> web.Response:
    """403 for a page whose origin ``--http-cors-origins`` does not name."""
    return _error_response(
        grpc.StatusCode.PERMISSION_DENIED,
        f"origin {request.headers.get('Origin', '')[:100]!r} may not call this API "
        "(--http-cors-origins)",
        request_id,
    )


def _refusal(max_connections: int) -> bytes:
    """The whole HTTP answer a connection past the cap gets, before its request is read."""
    body = error_body(
        grpc.StatusCode.UNAVAILABLE,
        f"this server holds its limit of {max_connections} HTTP connections "
        f"(--http-max-connections): {RETRY_HINT}",
    )
    head = (
        "HTTP/1.1 503 Service Unavailable\r\n"
        "Content-Type: application/json; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\n"
        f"Retry-After: {RETRY_AFTER_SECONDS}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode() + body


def _past_deadline() -> str:
    return (
        f"the request's deadline ({TIMEOUT_HEADER}) passed before the translation finished: "
        f"allow a longer {TIMEOUT_HEADER}, send fewer sentences or lower max_length"
    )


def _error_response(
    code: grpc.StatusCode,
    message: str,
    request_id: str = "",
    *,
    status: int | None = None,
    headers: dict[str, str] | None = None,
) -> web.Response:
    out = dict(headers or {})
    if request_id:
        out[REQUEST_ID_HEADER] = request_id
    if code == grpc.StatusCode.UNAVAILABLE or message.endswith(RETRY_HINT):
        # the same call succeeds shortly (warming up, draining: elsewhere; busy: later);
        # a 429 for a body over the limit carries no hint, and no Retry-After
        out["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return web.Response(
        body=error_body(code, message),
        status=status or HTTP_STATUS[code],
        content_type="application/json",
        headers=out,
    )


def ssl_context(cert, key, client_ca) -> ssl.SSLContext:
    """The gRPC port's TLS (``--tls-cert``/``--tls-key``, ``--tls-client-ca`` for mutual
    TLS) for the HTTP port."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    if client_ca is not None:
        context.load_verify_locations(client_ca)
        context.verify_mode = ssl.CERT_REQUIRED
    return context
