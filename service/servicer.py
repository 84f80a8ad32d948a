"""The gRPC servicer (``grpc.aio``): how a call enters, is counted and ends.

Every method is registered with a *streaming* request side and raw bytes, whatever the
proto says (the wire format is the same), so the handler runs as soon as a call's headers
arrive. That lets the server bound the time a call may take to send its request message
(a client that opens calls and never sends them parks nothing but a coroutine, and only
for ``receive_timeout``), and parse the bytes itself: a body that is not a valid message
(a string field that is not UTF-8...) is INVALID_ARGUMENT with a reason, counted, and
logged at most once a minute, instead of gRPC's INTERNAL plus a traceback per call.

Each RPC ends in exactly one ``nmt_requests_total`` increment and one latency observation
with its real status code: OK, a domain error mapped here (and only here) to its code,
or CANCELLED / DEADLINE_EXCEEDED when the client leaves or its deadline passes while the
handler waits (asyncio cancels the handler; no path escapes the count).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import grpc
from google.protobuf.message import DecodeError, Message

from nmt_api import NOT_READY_HINT, SERVICE_NAME
from nmt_api.nmt.v1 import translator_pb2 as pb
from service.calls import Call, RpcConfig, call_soon, job_result, remaining_seconds
from service.errors import (
    DRAINED,
    Cancelled,
    DeadlineExpired,
    EngineFailure,
    InvalidRequest,
    NotReady,
    Overloaded,
    ServiceError,
    TooLarge,
)
from service.front import DEADLINE_MESSAGE, EngineFront
from service.jobs import Job
from service.logs import REQUEST_ID_HEADER, RateLimitedLog
from service.messages import (
    model_info,
    split_options,
    strategy_label,
    to_options,
    to_score_options,
    to_timing,
)
from service.metrics import Metrics
from service.replies import Replies

log = logging.getLogger(__name__)

STATUS = {
    InvalidRequest: grpc.StatusCode.INVALID_ARGUMENT,
    Overloaded: grpc.StatusCode.RESOURCE_EXHAUSTED,
    TooLarge: grpc.StatusCode.RESOURCE_EXHAUSTED,
    NotReady: grpc.StatusCode.UNAVAILABLE,
    DeadlineExpired: grpc.StatusCode.DEADLINE_EXCEEDED,
    Cancelled: grpc.StatusCode.CANCELLED,
    EngineFailure: grpc.StatusCode.INTERNAL,
}
BAD_BODY_LOG_SECONDS = 60.0
# put in a stream's update queue by fail_in_flight: the stream ends UNAVAILABLE, DRAINED
_DRAINED_MARK: tuple[int, ...] = ("drained",)  # type: ignore[assignment] - compared by identity
# A deadline the client set is gRPC's to enforce; the engine's own backstop is this later.
CLIENT_DEADLINE_SLACK = 1.0
# A cancel this close to the deadline is the deadline (see _fail).
DEADLINE_SKEW = 0.25


class _ClientGone(Exception):
    """A write failed: the call ended under us (the client left, or its deadline)."""


class TranslatorServicer:
    """``nmt.v1.Translator`` over the engines; register it with :meth:`handler`."""

    def __init__(
        self,
        engines: dict[str, EngineFront],
        default_model: str,
        metrics: Metrics,
        config: RpcConfig | None = None,
        *,
        access_log: bool = False,
    ) -> None:
        self.engines = engines
        self.access_log = access_log
        self.default_model = default_model
        self.metrics = metrics
        self.config = config or RpcConfig()
        self.ready = False
        self._inflight = 0  # touched on the event loop's thread only
        # Calls waiting for their results, and streams' update queues: what
        # fail_in_flight ends when a shutdown's grace runs out (event loop only)
        self._waiting: dict[asyncio.Future, Job] = {}
        self._streams: set[asyncio.Queue] = set()
        self._bad_bodies = RateLimitedLog(log, BAD_BODY_LOG_SECONDS)
        self.replies = Replies(metrics, default_model, self.config.max_message_bytes)

    def handler(self) -> grpc.GenericRpcHandler:
        """The service's methods, request side streaming and raw (see the module doc)."""
        unary, stream = grpc.stream_unary_rpc_method_handler, grpc.stream_stream_rpc_method_handler
        return grpc.method_handlers_generic_handler(
            SERVICE_NAME,
            {
                name: (stream if name == "TranslateStream" else unary)(call)
                for name, call in self.methods().items()
            },
        )

    def methods(self) -> dict[str, Callable]:
        """Each method's handler, ``await handler(requests, context)``: ``requests`` an
        async iterator of the request message's bytes, ``context`` a
        ``grpc.aio.ServicerContext`` (or what ``service/httpapi.py`` gives in its place).
        A unary method returns the reply's bytes; TranslateStream writes them."""
        return {
            "Translate": self._unary_call("Translate", pb.TranslateRequest),
            "TranslateStream": self._stream_call,
            "Score": self._unary_call("Score", pb.ScoreRequest),
            "ListModels": self._unary_call("ListModels", pb.ListModelsRequest),
        }

    # -- the edge: receive, parse, count, map errors -------------------------------

    def _unary_call(self, method: str, request_type: type[Message]):
        handle: Callable[[Message, grpc.aio.ServicerContext, Call], Awaitable[bytes]] = {
            "Translate": self.translate,
            "Score": self.score,
            "ListModels": self.list_models,
        }[method]

        async def call(requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext):
            record = Call.begin(method, context)
            try:
                request = await self._receive(requests, request_type)
                reply = await handle(request, context, record)
            except BaseException as exc:  # every path is counted, then goes on as it would
                await self._fail(context, record, exc)
                raise
            self._count(record, grpc.StatusCode.OK)
            return reply

        return call

    async def _stream_call(self, requests: AsyncIterator[bytes], context) -> None:
        # A coroutine writing with context.write, not an async generator: a deadline or a
        # cancel then lands in our own await, never in gRPC's send between two yields
        # (where it would end the call without a status).
        record = Call.begin("TranslateStream", context)
        try:
            request = await self._receive(requests, pb.TranslateStreamRequest)
            await self.translate_stream(request, context, record)
        except BaseException as exc:  # CancelledError included
            await self._fail(context, record, exc)
            raise
        self._count(record, grpc.StatusCode.OK)

    async def _receive(self, requests: AsyncIterator[bytes], request_type: type[Message]):
        try:
            async with asyncio.timeout(self.config.receive_timeout):
                raw = await anext(requests)
        except TimeoutError:
            raise DeadlineExpired(
                f"no request message within {self.config.receive_timeout:g} s of the call "
                "starting (--receive-timeout)"
            ) from None
        except StopAsyncIteration:
            # A unary client always sends its message: none arriving means gRPC refused
            # one over the size limit (the client already has gRPC's own status).
            raise TooLarge(
                f"no request message: larger than {self.config.max_message_bytes} bytes "
                "(--max-message-bytes) or none sent"
            ) from None
        try:
            return request_type.FromString(raw)
        except DecodeError:
            name = request_type.DESCRIPTOR.full_name
            self._bad_bodies.warning("refused a request body that is not a valid %s", name)
            raise InvalidRequest(
                f"the request body is not a valid {name}: string fields must be UTF-8 and "
                "the bytes a protobuf encoding of the message"
            ) from None

    async def _send(self, context, data: bytes) -> None:
        try:
            await context.write(data)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a write fails only once the call is over
            raise _ClientGone() from exc

    async def _fail(self, context, record: Call, exc: BaseException) -> None:
        """Count a call that did not end OK; answer it with its status where it still can
        be (an exception that is not ours: logged, INTERNAL)."""
        if isinstance(exc, (asyncio.CancelledError, GeneratorExit, _ClientGone)):
            # A client whose deadline passes resets the stream itself, a moment before the
            # server's copy of the deadline (it started later) passes: a cancel that
            # close to the deadline is the deadline.
            left = context.time_remaining()
            late = left is not None and left <= DEADLINE_SKEW
            gone = grpc.StatusCode.DEADLINE_EXCEEDED if late else grpc.StatusCode.CANCELLED
            self._count(record, gone)
            return
        if not isinstance(exc, Exception):
            self._count(record, grpc.StatusCode.INTERNAL)
            return
        if isinstance(exc, ServiceError):
            code, message = STATUS.get(type(exc), grpc.StatusCode.INTERNAL), str(exc)
        else:
            log.error("unexpected error in %s", record.method, exc_info=exc)
            code = grpc.StatusCode.INTERNAL
            message = f"internal error ({type(exc).__name__}); the server logged the details"
        if code == grpc.StatusCode.INTERNAL and not self.access_log:
            # The engine logged the incident once; this line ties it to the call's id.
            log.warning("%s failed: %s", record.method, message)
        self._count(record, code)
        # abort() sends its own trailing metadata: the request id goes with it.
        await context.abort(
            code, message, trailing_metadata=((REQUEST_ID_HEADER, record.request_id),)
        )  # raises; the caller's `raise` is not reached

    def _count(self, record: Call, code: grpc.StatusCode) -> None:
        if record.counted:
            return
        record.counted = True
        seconds = time.monotonic() - record.start
        # a Score call searches nothing: its own label, not its options' "greedy"
        strategy = "forced" if record.method == "Score" else strategy_label(record.options)
        self.metrics.requests.labels(record.method, code.name).inc()
        self.metrics.request_latency.labels(record.method, strategy, code.name).observe(seconds)
        if self.access_log:
            log.info(
                "%s %s %.3f s sentences=%d strategy=%s",
                record.method,
                code.name,
                seconds,
                record.sentences,
                strategy,
                extra={
                    "method": record.method,
                    "code": code.name,
                    "seconds": round(seconds, 6),
                    "sentences": record.sentences,
                    "strategy": strategy,
                },
            )

    # -- admission -----------------------------------------------------------------------

    def _enter(self) -> None:
        if self._inflight >= self.config.max_inflight:
            self.metrics.rejected.labels("too_many_inflight").inc()
            raise Overloaded(
                f"{self._inflight} translations in flight (limit {self.config.max_inflight})"
            )
        self._inflight += 1
        self.metrics.inflight.inc()

    def _leave(self) -> None:
        self._inflight -= 1
        self.metrics.inflight.dec()

    def fail_in_flight(self) -> None:
        """End every call still waiting for its translation with UNAVAILABLE and
        :data:`DRAINED` (on the event loop, shortly before a shutdown's grace runs out):
        gRPC would end them with its own "Cancelling all calls", which says nothing of
        what to do. Each call's handler then cancels its job, as on any error."""
        for waiter, job in list(self._waiting.items()):
            # a job that finished has its answer on the way: it goes out, not an error
            if not waiter.done() and not job.future.done():
                waiter.set_exception(NotReady(DRAINED))
        for updates in list(self._streams):
            updates.put_nowait(_DRAINED_MARK)

    def _engine(self, name: str) -> EngineFront:
        if not self.ready:
            raise NotReady(f"the server is warming up or shutting down; {NOT_READY_HINT}")
        engine = self.engines.get(name or self.default_model)
        if engine is None:
            shown = name if len(name) <= 64 else name[:64] + "..."  # never echo 16 KB back
            raise InvalidRequest(
                f"unknown model {shown!r}; loaded models: {', '.join(sorted(self.engines))}"
            )
        return engine

    def _timeout(self, context) -> float:
        """How long the engine may take: the default for a call without a deadline; for
        one with a deadline a little longer, as a backstop only. gRPC ends such a call at
        its deadline itself (the handler is cancelled, which cancels the job at the next
        step); ending it here at the same instant would race gRPC's own status."""
        remaining = remaining_seconds(context)
        if remaining is None:
            return self.config.default_timeout
        return remaining + CLIENT_DEADLINE_SLACK

    # -- methods ---------------------------------------------------------------------------

    async def translate(self, request: pb.TranslateRequest, context, record: Call):
        def submit(engine: EngineFront, timeout: float) -> Job:
            record.options = to_options(
                request.options,
                default_max_length=engine.config.default_max_length,
                defaults=engine.bundle.decoding,
                target_index=engine.bundle.target_index,
            )
            if request.split_sentences:
                record.options = split_options(request, record.options)
            return engine.submit(
                list(request.texts),
                record.options,
                timeout=timeout,
                prefixes=list(request.target_prefix),
                constraints=[(list(c.phrases), c.ordered) for c in request.constraints],
                split=request.split_sentences,
            )

        return await self._answer(
            request.model, len(request.texts), context, record, submit,
            pb.TranslateResponse, request.options,
        )  # fmt: skip

    async def score(self, request: pb.ScoreRequest, context, record: Call):
        def submit(engine: EngineFront, timeout: float) -> Job:
            record.options = to_score_options(
                request.options,
                max_length=engine.config.max_target_length,
                defaults=engine.bundle.decoding,
            )
            texts, targets = list(request.texts), list(request.targets)
            return engine.score(texts, targets, record.options, timeout=timeout)

        # what each sentence's message carries: its scores always
        shown = pb.DecodeOptions(
            return_scores=True,
            return_attention=request.options.return_attention,
            return_diagnostics=request.options.return_diagnostics,
            return_alignment=request.options.return_alignment,
        )
        return await self._answer(
            request.model, len(request.texts), context, record, submit, pb.ScoreResponse, shown
        )

    async def _answer(
        self,
        model: str,
        sentences: int,
        context,
        record: Call,
        submit: Callable[[EngineFront, float], Job],
        response: type[pb.TranslateResponse] | type[pb.ScoreResponse],
        shown: pb.DecodeOptions,
    ) -> bytes:
        """What Translate and Score share: ``submit(engine, timeout)`` a job on the model's
        engine, wait for it, and reply (``response``, each sentence's message as ``shown``
        asks; built off the event loop when large); a job the call leaves behind (the
        client left, the deadline passed) is cancelled, freeing its rows."""
        self._enter()
        job = None
        try:
            record.sentences = sentences
            engine = self._engine(model)
            timeout = self._timeout(context)
            job = submit(engine, timeout)
            nbest = await job_result(job, timeout, self._waiting)

            def reply() -> pb.TranslateResponse | pb.ScoreResponse:
                return response(
                    translations=[
                        self.replies.translation(
                            engine, model, r, shown, finish_reasons=response is pb.TranslateResponse
                        )
                        for r in engine.render(job, nbest)
                    ],
                    model=engine.bundle.manifest.get("name", ""),
                    model_version=str(engine.bundle.manifest.get("version", "")),
                    timing=to_timing(job),
                )

            attention = shown.return_attention
            return await self.replies.off_loop(
                lambda: self.replies.build(reply, nbest, attention), nbest, attention
            )
        finally:
            if job is not None and not job.future.done():
                job.cancel()  # the client left, or the deadline passed: free its rows
            self._leave()

    async def translate_stream(
        self, request: pb.TranslateStreamRequest, context, record: Call
    ) -> None:
        """Writes a message per change of the stable prefix's text, then the final one."""
        self._enter()
        job = updates = None
        try:
            record.sentences = 1
            if not request.text.strip():  # (the request's field is text, not texts[0])
                raise InvalidRequest("text is empty or whitespace only: send non-empty text")
            engine = self._engine(request.model)
            record.options = to_options(
                request.options,
                default_max_length=engine.config.default_max_length,
                defaults=engine.bundle.decoding,
                target_index=engine.bundle.target_index,
            )
            if record.options.replace_unk and not request.options.replace_unk:
                # the model's default: a stream's text is sent before the attention that
                # would pick the replacements is final, so it streams the tokens as they are
                record.options = dataclasses.replace(
                    record.options,
                    replace_unk=False,
                    return_attention=bool(
                        request.options.return_attention
                        or request.options.return_diagnostics
                        or request.options.return_alignment
                    ),
                )
            if record.options.replace_unk:
                raise InvalidRequest(
                    "replace_unk is for Translate: a stream sends its text before the "
                    "attention that picks each replacement is final"
                )
            loop = asyncio.get_running_loop()
            # Prefixes from the scheduler thread, then None once the job resolves: both go
            # through call_soon_threadsafe from that one thread, so None comes last.
            updates: asyncio.Queue[tuple[int, ...] | None] = asyncio.Queue()
            self._streams.add(updates)
            last = [-1]

            def on_prefix(tokens: tuple[int, ...], final: bool) -> None:
                # Runs in the scheduler thread: hand over real changes, never block.
                if not final and len(tokens) != last[0]:
                    last[0] = len(tokens)
                    call_soon(loop, updates.put_nowait, tokens)

            timeout = self._timeout(context)
            job = engine.submit(
                [request.text],
                record.options,
                timeout=timeout,
                on_prefix=on_prefix,
                prefixes=[request.target_prefix],
                constraints=[(list(request.constraints.phrases), request.constraints.ordered)],
            )
            job.future.add_done_callback(lambda _: call_soon(loop, updates.put_nowait, None))
            text = ""
            async with asyncio.timeout(timeout):  # writes to a slow reader included
                while (tokens := await updates.get()) is not None:
                    if tokens is _DRAINED_MARK:
                        if job.future.done():  # its answer is on the way: it goes out
                            continue
                        raise NotReady(DRAINED)
                    new = engine.bundle.tgt_tokenizer.decode(tokens)
                    if new != text:
                        delta = new[len(text) :] if new.startswith(text) else new
                        text = new
                        update = pb.TranslateStreamResponse(text=text, delta=delta)
                        await self._send(context, self.replies.serialize(update))
                nbest = job.future.result()  # done: raises its error

                def final() -> pb.TranslateStreamResponse:
                    result = engine.render(job, nbest)[0]
                    # a search can end without a hypothesis (every beam at -inf)
                    best = result.hypotheses[0][0] if result.hypotheses else ""
                    return pb.TranslateStreamResponse(
                        text=best,
                        delta=best[len(text) :] if best.startswith(text) else best,
                        final=True,
                        translation=self.replies.translation(
                            engine, request.model, result, request.options
                        ),
                        timing=to_timing(job),
                        model=engine.bundle.manifest.get("name", ""),
                        model_version=str(engine.bundle.manifest.get("version", "")),
                    )

                attention = request.options.return_attention
                built = await self.replies.off_loop(
                    lambda: self.replies.build(final, nbest, attention), nbest, attention
                )
                await self._send(context, built)
        except TimeoutError:
            raise DeadlineExpired(DEADLINE_MESSAGE) from None
        finally:
            if updates is not None:
                self._streams.discard(updates)
            if job is not None and not job.future.done():
                job.cancel()
            self._leave()

    def models(self) -> pb.ListModelsResponse:
        return pb.ListModelsResponse(
            models=[
                model_info(
                    name,
                    engine,
                    default=name == self.default_model,
                    max_message_bytes=self.config.max_message_bytes,
                )
                for name, engine in sorted(self.engines.items())
            ]
        )

    async def list_models(self, request: pb.ListModelsRequest, context, record: Call) -> bytes:
        return self.replies.serialize(self.models())
