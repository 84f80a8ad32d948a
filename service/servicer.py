"""The gRPC servicer: proto <-> domain only, and domain errors -> status codes."""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from collections.abc import Iterator

import grpc

from models.options import DecodeOptions
from service.engine import Engine, Job, TranslationResult, decode_options
from service.errors import (
    Cancelled,
    DeadlineExpired,
    InvalidRequest,
    NotReady,
    Overloaded,
    ServiceError,
)
from service.metrics import Metrics
from service.proto.nmt.v1 import translator_pb2 as pb
from service.proto.nmt.v1 import translator_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)

STATUS = {
    InvalidRequest: grpc.StatusCode.INVALID_ARGUMENT,
    Overloaded: grpc.StatusCode.RESOURCE_EXHAUSTED,
    NotReady: grpc.StatusCode.UNAVAILABLE,
    DeadlineExpired: grpc.StatusCode.DEADLINE_EXCEEDED,
    Cancelled: grpc.StatusCode.CANCELLED,
}
DEFAULT_BEAM = 5
# grpc reports "no deadline" as a remaining time of ~9e18 s, which overflows
# Future.result(); anything beyond a day is treated as no deadline at all.
NO_DEADLINE_SECONDS = 86400.0


def remaining_seconds(context: grpc.ServicerContext) -> float | None:
    """Seconds until the client's deadline, or ``None`` when it set none."""
    remaining = context.time_remaining()
    if remaining is None or remaining > NO_DEADLINE_SECONDS:
        return None
    return max(0.0, remaining)


def to_options(
    msg: pb.DecodeOptions, *, default_max_length: int, defaults: DecodeOptions | None = None
) -> DecodeOptions:
    """Proto options -> domain options: what the request sets, else the model's decoding
    defaults (``defaults``, from its manifest), else the documented ones."""
    defaults = defaults or DecodeOptions()
    beam = msg.beam_size
    if msg.strategy == pb.STRATEGY_GREEDY:
        if beam > 1:
            raise InvalidRequest(
                f"strategy GREEDY with beam_size {beam}: use STRATEGY_BEAM or beam_size 0/1"
            )
        beam = 1
    elif msg.strategy == pb.STRATEGY_BEAM:
        beam = beam or DEFAULT_BEAM
    elif msg.strategy == pb.STRATEGY_UNSPECIFIED:
        beam = beam or 1
    else:  # a client built against a newer proto: refuse rather than guess
        raise InvalidRequest(
            f"unknown strategy {msg.strategy}: use STRATEGY_GREEDY (1), STRATEGY_BEAM (2) "
            "or leave it unset"
        )
    return decode_options(
        defaults,
        beam_size=beam,
        n_best=msg.n_best or 1,
        length_penalty=(
            msg.length_penalty if msg.HasField("length_penalty") else defaults.length_penalty
        ),
        max_length=msg.max_length or min(default_max_length, defaults.max_length),
        max_length_ratio=(
            msg.max_length_ratio if msg.HasField("max_length_ratio") else defaults.max_length_ratio
        ),
        return_attention=msg.return_attention,
    )


class _Once:
    """Calls ``count(options, code)`` the first time it is called; later calls do nothing."""

    def __init__(self, count) -> None:
        self._count = count
        self._lock = threading.Lock()
        self._done = False
        self.options: DecodeOptions | None = None

    def __call__(self, code: grpc.StatusCode) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
        self._count(self.options, code)


def strategy_label(options: DecodeOptions | None) -> str:
    if options is None:
        return "unknown"
    return "greedy" if options.beam_size == 1 else "beam"


def to_translation(result: TranslationResult, *, scores: bool) -> pb.Translation:
    out = pb.Translation(source_tokens=len(result.source_pieces))
    for text, pieces, hyp in result.hypotheses:
        h = out.hypotheses.add(text=text, tokens=pieces)
        if scores:
            h.score, h.log_prob = hyp.score, hyp.log_prob
        if hyp.attention is not None:
            rows, cols = hyp.attention.shape
            h.attention.rows, h.attention.cols = rows, cols
            h.attention.values.extend(hyp.attention.astype(float).ravel().tolist())
            h.attention.source_tokens.extend(result.source_pieces)
            h.attention.target_tokens.extend([*pieces, "</s>"])
    return out


def to_timing(job: Job) -> pb.Timing:
    t = job.timing
    return pb.Timing(
        queue_ms=t.queue_ms, encode_ms=t.encode_ms, decode_ms=t.decode_ms, total_ms=t.total_ms
    )


class TranslatorServicer(pb_grpc.TranslatorServicer):
    def __init__(
        self,
        engines: dict[str, Engine],
        default_model: str,
        metrics: Metrics,
        *,
        max_inflight: int = 1 << 30,
    ) -> None:
        self.engines = engines
        self.default_model = default_model
        self.metrics = metrics
        self.ready = False
        # Translation RPCs beyond this are refused at once, so some server threads always
        # stay free for health checks and ListModels under overload.
        self.max_inflight = max_inflight
        self._inflight = 0
        self._lock = threading.Lock()

    def _enter(self) -> None:
        with self._lock:
            if self._inflight >= self.max_inflight:
                self.metrics.rejected.labels("too_many_inflight").inc()
                raise Overloaded(
                    f"{self._inflight} translations in flight (limit {self.max_inflight})"
                )
            self._inflight += 1
        self.metrics.inflight.inc()

    def _leave(self) -> None:
        with self._lock:
            self._inflight -= 1
        self.metrics.inflight.dec()

    @staticmethod
    def _cancel_with_client(context: grpc.ServicerContext, job: Job) -> None:
        # add_callback returns False when the RPC has already ended (the client left
        # between submit and here): the callback would never run, so cancel now.
        if not context.add_callback(job.cancel):
            job.cancel()

    def _engine(self, name: str) -> Engine:
        if not self.ready:
            raise NotReady("the server is warming up or shutting down; retry shortly")
        engine = self.engines.get(name or self.default_model)
        if engine is None:
            shown = name if len(name) <= 64 else name[:64] + "..."  # never echo 16 KB back
            raise InvalidRequest(
                f"unknown model {shown!r}; loaded models: {', '.join(sorted(self.engines))}"
            )
        return engine

    def _finish_once(self, method: str, start: float, context) -> _Once:
        """Counts a streaming call exactly once. A stream the client cancels (or whose
        deadline passes) while its handler is suspended at a ``yield`` is closed by gRPC
        whenever the generator is collected, maybe never; the RPC's termination callback
        counts it instead, unless the handler already did."""
        once = _Once(lambda options, code: self._finish(method, options, start, code))

        def terminated() -> None:
            left = context.time_remaining()
            late = left is not None and left <= 0
            once(grpc.StatusCode.DEADLINE_EXCEEDED if late else grpc.StatusCode.CANCELLED)

        if not context.add_callback(terminated):
            terminated()
        return once

    def _finish(self, method: str, options, start: float, code: grpc.StatusCode) -> None:
        label = code.name
        self.metrics.requests.labels(method, label).inc()
        self.metrics.request_latency.labels(method, strategy_label(options), label).observe(
            time.monotonic() - start
        )

    def _abort(self, context: grpc.ServicerContext, exc: Exception) -> grpc.StatusCode:
        if isinstance(exc, ServiceError):
            code = STATUS.get(type(exc), grpc.StatusCode.INTERNAL)
            message = str(exc)
        else:
            log.exception("unexpected error")
            code = grpc.StatusCode.INTERNAL
            message = f"internal error ({type(exc).__name__}); the server logged the details"
        context.set_code(code)
        context.set_details(message)
        return code

    def Translate(self, request: pb.TranslateRequest, context) -> pb.TranslateResponse:
        start, options, entered = time.monotonic(), None, False
        try:
            self._enter()
            entered = True
            engine = self._engine(request.model)
            options = to_options(
                request.options,
                default_max_length=min(256, engine.config.max_target_length),
                defaults=engine.bundle.decoding,
            )
            timeout = remaining_seconds(context)
            job = engine.submit(list(request.texts), options, timeout=timeout)
            self._cancel_with_client(context, job)
            results = engine.render(job, engine.wait(job, timeout))
            response = pb.TranslateResponse(
                translations=[
                    to_translation(r, scores=request.options.return_scores) for r in results
                ],
                model=engine.bundle.manifest.get("name", ""),
                model_version=str(engine.bundle.manifest.get("version", "")),
                timing=to_timing(job),
            )
            self._finish("Translate", options, start, grpc.StatusCode.OK)
            return response
        except Exception as exc:  # noqa: BLE001 - every failure becomes a status code
            code = self._abort(context, exc)
            self._finish("Translate", options, start, code)
            return pb.TranslateResponse()
        finally:
            if entered:
                self._leave()

    def TranslateStream(
        self, request: pb.TranslateStreamRequest, context
    ) -> Iterator[pb.TranslateStreamResponse]:
        start, options, entered = time.monotonic(), None, False
        finish = self._finish_once("TranslateStream", start, context)
        try:
            self._enter()
            entered = True
            engine = self._engine(request.model)
            options = to_options(
                request.options,
                default_max_length=min(256, engine.config.max_target_length),
                defaults=engine.bundle.decoding,
            )
            finish.options = options
            # One update per new prefix length (prefixes only grow) plus the final one:
            # at most max_length + 1 puts, so this bound never makes the scheduler wait.
            updates: queue.Queue[tuple[tuple[int, ...], bool]] = queue.Queue(
                maxsize=options.max_length + 2
            )
            last: list[int] = [-1]

            def on_prefix(tokens: tuple[int, ...], final: bool) -> None:
                # Runs in the scheduler thread: hand over real changes, never block.
                if final or len(tokens) != last[0]:
                    last[0] = len(tokens)
                    try:
                        updates.put_nowait((tokens, final))
                    except queue.Full:  # the bound above rules it out; drop, don't stall
                        log.warning("stream update dropped: queue full")

            timeout = remaining_seconds(context)
            job = engine.submit([request.text], options, timeout=timeout, on_prefix=on_prefix)
            self._cancel_with_client(context, job)
            text = ""
            while True:
                try:
                    tokens, final = updates.get(timeout=0.1)
                except queue.Empty:
                    if job.future.done():
                        engine.wait(job, 0)  # raises the job's error
                        # Every update is put before the job resolves: none is coming.
                        if updates.empty():
                            break
                    continue
                if final:
                    break
                new = engine.bundle.tgt_tokenizer.decode(tokens)
                if new != text:
                    delta = new[len(text) :] if new.startswith(text) else new
                    text = new
                    yield pb.TranslateStreamResponse(text=text, delta=delta)
            results = engine.render(job, engine.wait(job, timeout))
            best = results[0].hypotheses[0][0]
            yield pb.TranslateStreamResponse(
                text=best,
                delta=best[len(text) :] if best.startswith(text) else best,
                final=True,
                translation=to_translation(results[0], scores=request.options.return_scores),
                timing=to_timing(job),
            )
            finish(grpc.StatusCode.OK)
        except Exception as exc:  # noqa: BLE001
            finish(self._abort(context, exc))
        finally:
            if entered:
                self._leave()

    def ListModels(self, request: pb.ListModelsRequest, context) -> pb.ListModelsResponse:
        start = time.monotonic()
        out = pb.ListModelsResponse()
        for name, engine in sorted(self.engines.items()):
            m = engine.bundle.manifest
            summary = {
                "parity": m.get("parity", {}),
                "versions": m.get("versions", {}),
                "created": m.get("created"),
                "checkpoint": m.get("checkpoint", {}).get("meta", {}),
                "source_model": m.get("source_model"),
                "tokenizers": m.get("tokenizers"),
            }
            out.models.add(
                name=name,
                version=str(m.get("version", "")),
                precision=m.get("precision", "fp32"),
                execution_provider=engine.bundle.model.provider,
                config_json=json.dumps(m.get("model_config", {}), sort_keys=True),
                parameters=int(m.get("parameters", 0)),
                src_vocab_size=int(m.get("src_vocab_size", 0)),
                tgt_vocab_size=int(m.get("tgt_vocab_size", 0)),
                max_source_tokens=engine.max_source_tokens,
                manifest_summary_json=json.dumps(summary, sort_keys=True, default=str),
                is_default=name == self.default_model,
            )
        self._finish("ListModels", None, start, grpc.StatusCode.OK)
        return out
