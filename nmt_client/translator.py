"""The :class:`Translator`: a connection to ``nmt-serve`` and its calls."""

from __future__ import annotations

import math
import numbers
import os
import queue
import random
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import fields
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from nmt_api import DEFAULT_BEAM, REQUEST_ID_HEADER, SERVICE_NAME
from nmt_api.nmt.v1 import translator_pb2 as pb
from nmt_api.nmt.v1 import translator_pb2_grpc as pb_grpc
from nmt_client.errors import (
    DeadlineExceeded,
    InvalidOptions,
    InvalidRequest,
    TranslatorError,
    from_rpc_error,
    renumbered,
    retryable,
    sentence_index,
    shifted,
)
from nmt_client.options import (
    DecodeOptions,
    PenaltyForm,
    Strategy,
    check_texts,
    score_request,
    stream_request,
    translate_request,
)
from nmt_client.results import (
    ModelInfo,
    RequestLimits,
    Result,
    StreamUpdate,
    result_from_proto,
    results_from_proto,
)
from nmt_client.results import Timing as _Timing

DEFAULT_TARGET = "127.0.0.1:50051"
# Rows (sentences x beam) a request may take from any server as configured by default
# (--max-sentences 64, --max-live-rows 256): up to here a batch is not sized to limits.
MIN_LIVE_ROWS = 32
_DECODE_FIELDS = tuple(f.name for f in fields(DecodeOptions))  # keywords of translate()
DEFAULT_TIMEOUT = 30.0  # seconds a call may take, retries included
DEFAULT_RETRIES = 3
T = TypeVar("T")
Pem = bytes | str | os.PathLike


def read_pem(value: Pem | None, what: str) -> bytes | None:
    """PEM bytes from bytes, PEM text or a file path (``what`` names it in errors)."""
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str) and value.lstrip().startswith("-----BEGIN"):
        return value.encode()
    try:
        return Path(value).read_bytes()
    except OSError as exc:
        raise OSError(exc.errno, f"cannot read the {what} {value}: {exc.strerror}") from None


class Translator:
    """A client of an ``nmt.v1.Translator`` server; thread-safe, one channel.

    ``target``: ``HOST:PORT``. TLS when ``tls`` is true, or when it is ``None`` and any
    certificate is given: ``root_certificates`` (the CA that signed the server's
    certificate; system roots if ``None``), ``certificate_chain`` and ``private_key``
    (a client certificate, for servers that require one: mTLS) - each PEM bytes, PEM
    text or a file path. ``server_name`` overrides the name the server's certificate
    is checked against. ``timeout``: seconds a call may take, retries included.
    ``retries``: how many times a call is sent again when the server was busy
    (RESOURCE_EXHAUSTED "retry with backoff") or the call was never served (no
    connection, server not ready), with exponential backoff from ``backoff`` s up to
    ``max_backoff`` s and jitter; never past the deadline. ``model``: the model calls
    use unless they name one (``None``: the server's default). ``metadata``: pairs sent
    with every call. ``channel``: an existing channel to use instead (not closed here).

    Use as a context manager, or call :meth:`close`."""

    def __init__(
        self,
        target: str = DEFAULT_TARGET,
        *,
        tls: bool | None = None,
        root_certificates: Pem | None = None,
        certificate_chain: Pem | None = None,
        private_key: Pem | None = None,
        server_name: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = DEFAULT_RETRIES,
        backoff: float = 0.05,
        max_backoff: float = 2.0,
        model: str | None = None,
        metadata: Sequence[tuple[str, str]] = (),
        max_message_bytes: int | None = None,
        channel_options: Sequence[tuple[str, Any]] = (),
        channel: grpc.Channel | None = None,
    ) -> None:
        _seconds(timeout, "timeout")
        if retries < 0:
            raise ValueError(f"retries must be >= 0, got {retries}")
        if (certificate_chain is None) != (private_key is None):
            raise ValueError("a client certificate needs its key: give both or neither")
        self.target = target
        self.timeout, self.retries, self.model = float(timeout), retries, model
        self._infos: dict[str | None, ModelInfo | None] = {}  # ListModels, by model name
        self.backoff, self.max_backoff = backoff, max_backoff
        self.metadata = tuple(metadata)
        self._random = random.Random()
        self._own_channel = channel is None
        self.tls = False  # of a channel given: unknown, reported as plaintext
        if channel is None:
            options = list(channel_options)
            if max_message_bytes is not None:
                options += [
                    ("grpc.max_receive_message_length", max_message_bytes),
                    ("grpc.max_send_message_length", max_message_bytes),
                ]
            if server_name:
                options.append(("grpc.ssl_target_name_override", server_name))
            certs = (root_certificates, certificate_chain, private_key)
            self.tls = bool(tls or (tls is None and any(c is not None for c in certs)))
            if self.tls:
                creds = grpc.ssl_channel_credentials(
                    read_pem(root_certificates, "CA certificate"),
                    read_pem(private_key, "client key"),
                    read_pem(certificate_chain, "client certificate"),
                )
                channel = grpc.secure_channel(target, creds, options)
            else:
                channel = grpc.insecure_channel(target, options)
        self.channel = channel
        self._stub = pb_grpc.TranslatorStub(channel)
        self._health = health_pb2_grpc.HealthStub(channel)
        self._closed = threading.Event()

    # -- lifecycle ---------------------------------------------------------------------

    def close(self) -> None:
        """Close the channel (when this translator opened it). Idempotent."""
        if not self._closed.is_set():
            self._closed.set()
            if self._own_channel:
                self.channel.close()

    def __enter__(self) -> Translator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Translator({self.target!r}, model={self.model!r}, timeout={self.timeout})"

    # -- calls -------------------------------------------------------------------------

    def translate(
        self,
        texts: Sequence[str],
        *,
        beam_size: int | None = None,
        n_best: int | None = None,
        length_penalty: float | None = None,
        max_length: int | None = None,
        max_length_ratio: float | None = None,
        return_attention: bool | None = None,
        return_scores: bool | None = None,
        return_diagnostics: bool | None = None,
        strategy: Strategy | None = None,
        coverage_penalty: float | None = None,
        min_length: int | None = None,
        ban_unk: bool | None = None,
        block_ngram_repeat: int | None = None,
        ignore_when_blocking: Sequence[str] | None = None,
        replace_unk: bool | None = None,
        sampling_topk: int | None = None,
        sampling_temperature: float | None = None,
        sampling_topp: float | None = None,
        seed: int | None = None,
        return_token_scores: bool | None = None,
        return_alignment: bool | None = None,
        diversity_rate: float | None = None,
        length_penalty_form: PenaltyForm | None = None,
        diverse_beam_groups: int | None = None,
        diverse_beam_strength: float | None = None,
        options: DecodeOptions | None = None,
        model: str | None = None,
        timeout: float | None = None,
        request_id: str | None = None,
        target_prefix: Sequence[str] = (),
        constraints: Sequence[Sequence[str]] = (),
        ordered_constraints: bool = False,
        split_sentences: bool = False,
    ) -> list[Result]:
        """Translate ``texts`` (one request, one :class:`Result` per text, in order).

        Decode options are :class:`DecodeOptions` fields (every one is a keyword here);
        given ones override ``options``. ``timeout`` overrides the translator's;
        ``request_id`` names the call in the server's logs; ``target_prefix``: per text,
        the start its translation is forced to ("" for none); ``constraints``: per text,
        target phrases its translation must hold (``[]`` for none; lexically constrained
        beam search), in the order given when ``ordered_constraints``;
        ``split_sentences``: each text cut into its sentences, translated one by one and
        joined (one hypothesis; every sentence counts against the server's sentences per
        request). Raises :class:`TranslatorError` (a subclass by code)."""
        sources = check_texts(texts)
        if not sources:
            return []
        given = locals()
        opts = (options or DecodeOptions()).with_(**{f: given[f] for f in _DECODE_FIELDS})
        request = translate_request(
            sources, opts, model=self._model(model), target_prefix=target_prefix,
            constraints=constraints, ordered_constraints=ordered_constraints,
            split_sentences=split_sentences,
        )  # fmt: skip

        def attempt(remaining: float, metadata) -> list[Result]:
            reply, call = self._stub.Translate.with_call(
                request, timeout=remaining, metadata=metadata
            )
            rid = _request_id(call.trailing_metadata())
            return results_from_proto(
                sources,
                reply,
                scores=opts.return_scores,
                token_scores=opts.return_token_scores,
                alignment=opts.return_alignment,
                request_id=rid,
            )

        return self._retrying(attempt, timeout, request_id)

    def score(
        self,
        texts: Sequence[str],
        targets: Sequence[str],
        *,
        length_penalty: float | None = None,
        coverage_penalty: float | None = None,
        return_attention: bool = False,
        return_diagnostics: bool = False,
        model: str | None = None,
        timeout: float | None = None,
        request_id: str | None = None,
        length_penalty_form: PenaltyForm | None = None,
        return_alignment: bool = False,
    ) -> list[Result]:
        """Score ``targets`` (one per text: a translation written elsewhere) under the
        model: one :class:`Result` per text, its one hypothesis the target as the model
        reads it, with ``log_prob``, ``score`` (``length_penalty``, its
        ``length_penalty_form`` and ``coverage_penalty``: the model's unless given) and
        ``token_log_probs``; ``return_alignment``: the target's hard alignment to its
        source (:attr:`Hypothesis.alignment`). Nothing is searched (forced decoding). Raises
        :class:`TranslatorError`."""
        request = score_request(
            texts,
            targets,
            length_penalty=length_penalty,
            length_penalty_form=length_penalty_form,
            coverage_penalty=coverage_penalty,
            return_attention=return_attention,
            return_diagnostics=return_diagnostics,
            return_alignment=return_alignment,
            model=self._model(model),
        )
        sources = list(request.texts)
        if not sources:
            return []

        def attempt(remaining: float, metadata) -> list[Result]:
            reply, call = self._stub.Score.with_call(request, timeout=remaining, metadata=metadata)
            rid = _request_id(call.trailing_metadata())
            return results_from_proto(
                sources,
                reply,
                scores=True,
                token_scores=True,
                alignment=return_alignment,
                request_id=rid,
            )

        return self._retrying(attempt, timeout, request_id)

    def score_many(
        self,
        pairs: Iterable[tuple[str, str]],
        *,
        batch_size: int = 32,
        concurrency: int = 4,
        **kwargs: Any,
    ) -> Iterator[Result]:
        """:meth:`score` of any number of ``(text, target)`` pairs, as
        :meth:`translate_many` does it: ``batch_size`` a request, ``concurrency`` in
        flight, results in input order."""

        def call(batch: list[tuple[str, str]]) -> list[Result]:
            return self.score([s for s, _ in batch], [t for _, t in batch], **kwargs)

        return _in_batches(call, pairs, batch_size, concurrency)

    def translate_one(self, text: str, **kwargs: Any) -> Result:
        """:meth:`translate` of one sentence."""
        return self.translate([text], **kwargs)[0]

    def translate_many(
        self,
        texts: Iterable[str],
        *,
        batch_size: int = 32,
        concurrency: int = 4,
        constraints_for: Callable[[str], Sequence[str]] | None = None,
        skip_refused: bool = False,
        linger: float | None = None,
        keep_blank: bool = False,
        **kwargs: Any,
    ) -> Iterator[Result]:
        """Translate any number of sentences, ``batch_size`` a request, up to
        ``concurrency`` requests in flight; results come in input order, as soon as
        they are ready, and ``texts`` is read only as far as needed (a stream such as
        stdin works). ``constraints_for(text)``: the phrases each text's translation
        must hold (e.g. :meth:`nmt_client.glossary.Glossary.terms_for`).
        ``skip_refused``: a sentence the server refuses (too long, empty, no tokens...)
        gives a :class:`Result` without hypotheses whose ``error`` says why, and the rest
        of its request is sent again without it (else the refusal is raised, naming the
        sentence by its index in ``texts``). ``keep_blank``: a blank text gives a
        :class:`Result` without hypotheses, not sent (else the server refuses it).
        ``linger``: send a partial batch once
        ``texts`` has given nothing more for this many seconds (a pipe from a program
        that waits for each answer). ``kwargs``: those of :meth:`translate`."""

        def translate(batch: list[str]) -> list[Result]:
            if constraints_for is None:
                call = partial(self.translate, **kwargs)
            else:
                phrases = [list(constraints_for(t)) for t in batch]
                call = partial(self.translate, **{**kwargs, "constraints": phrases})
            if not kwargs.get("split_sentences"):
                return call(batch)
            return _halved(call, batch)

        def request(batch: list[str]) -> list[Result]:
            if not (skip_refused or keep_blank):
                return translate(batch)
            # blank texts are not sent: a Result without hypotheses each
            left = [i for i, text in enumerate(batch) if not keep_blank or text.strip()]
            out = [Result(source=text, hypotheses=()) for text in batch]
            while left:
                try:
                    results = translate([batch[i] for i in left])
                except InvalidRequest as exc:
                    named = sentence_index(exc.details)
                    if named is None or named[0] != "texts" or named[1] >= len(left):
                        raise  # the request as a whole (its options) is refused
                    if not skip_refused:  # named by its place in the batch, not in `left`
                        raise renumbered(exc, left[named[1]]) from None
                    i = left.pop(named[1])
                    out[i] = Result(source=batch[i], hypotheses=(), error=f"the text{named[2]}")
                    continue
                for i, result in zip(left, results, strict=True):
                    out[i] = result
                break
            return out

        sized = self._sized(batch_size, kwargs)
        return _in_batches(request, texts, sized, concurrency, linger)

    def _sized(self, batch_size: int, kwargs: dict[str, Any]) -> int:
        """``batch_size``, or fewer sentences if the server's limits take no more a
        request at this beam size (a beam of 16 fills 256 rows with 16 sentences)."""
        given = {f: kwargs[f] for f in _DECODE_FIELDS if kwargs.get(f) is not None}
        opts = (kwargs.get("options") or DecodeOptions()).with_(**given)
        beam = opts.beam_size or (1 if opts.strategy == "greedy" else 0)  # 0: the model's
        if not beam and (opts.sampling_topk or 0) > 1:
            beam = opts.n_best or 1  # as many samples as n_best asks, as the server draws
        if beam and batch_size * beam <= MIN_LIVE_ROWS:  # within any server's limits
            return batch_size
        try:
            info = self._info(kwargs.get("model"))
        except TranslatorError:
            return batch_size  # the requests themselves will say what is wrong
        if info is None or info.limits is None:
            return batch_size
        if not beam:  # as the server resolves it: the model's own beam, else 1 (beam: 5)
            model_beam = info.summary.get("decoding", {}).get("beam_size", 1)
            beam = model_beam if model_beam > 1 or opts.strategy != "beam" else DEFAULT_BEAM
        return min(batch_size, info.limits.sentences_per_request(beam))

    def stream(
        self,
        text: str,
        *,
        options: DecodeOptions | None = None,
        model: str | None = None,
        timeout: float | None = None,
        request_id: str | None = None,
        target_prefix: str = "",
        constraints: Sequence[str] = (),
        ordered_constraints: bool = False,
        **decode: Any,
    ) -> Iterator[StreamUpdate]:
        """Translate one sentence, yielding the target text as the server decodes it
        (greedy: every step; beam: the prefix all beams share); the last update is
        ``final`` and carries the whole :class:`Result`. Retried like
        :meth:`translate` only until the first update arrives. Closing the iterator
        early cancels the call. ``decode``: :class:`DecodeOptions` fields."""
        opts = (options or DecodeOptions()).with_(**decode)
        request = stream_request(
            text, opts, model=self._model(model), target_prefix=target_prefix,
            constraints=constraints, ordered_constraints=ordered_constraints,
        )  # fmt: skip

        def attempt(remaining: float, metadata):
            call = self._stub.TranslateStream(request, timeout=remaining, metadata=metadata)
            try:
                first = next(call, None)
            except BaseException:
                call.cancel()
                raise
            return call, first

        call, first = self._retrying(attempt, timeout, request_id)
        try:
            message = first
            while message is not None:
                result = None
                if message.final:
                    result = result_from_proto(
                        text,
                        message.translation,
                        scores=opts.return_scores,
                        token_scores=opts.return_token_scores,
                        alignment=opts.return_alignment,
                        model=message.model,
                        version=message.model_version,
                        timing=_Timing.from_proto(message.timing),
                        request_id=_request_id(call.trailing_metadata()),
                    )
                yield StreamUpdate(message.text, message.delta, message.final, result)
                message = next(call, None)
        except grpc.RpcError as exc:
            raise from_rpc_error(exc, target=self.target, tls=self.tls) from None
        finally:
            call.cancel()  # the consumer stopped early; a no-op once the call has ended

    def list_models(self, *, timeout: float | None = None) -> list[ModelInfo]:
        """The models the server has loaded (its default one has ``is_default``)."""

        def attempt(remaining: float, metadata) -> list[ModelInfo]:
            reply = self._stub.ListModels(
                pb.ListModelsRequest(), timeout=remaining, metadata=metadata
            )
            return [ModelInfo.from_proto(m) for m in reply.models]

        return self._retrying(attempt, timeout, None)

    def limits(self, model: str | None = None) -> RequestLimits | None:
        """What one request to ``model`` (``None``: this translator's, else the server's
        default) may ask, from ``ListModels`` (asked once, then remembered); ``None`` if
        the server does not say (an older server, or no such model)."""
        info = self._info(model)
        return info.limits if info is not None else None

    def _info(self, model: str | None) -> ModelInfo | None:
        """``model``'s ``ListModels`` entry (asked once, then remembered)."""
        name = self._model(model)
        if name not in self._infos:
            models = self.list_models()
            found = [m for m in models if (m.name == name if name else m.is_default)]
            self._infos[name] = found[0] if found else None
        return self._infos[name]

    def health(self, service: str = "", *, timeout: float | None = None) -> str:
        """The server's ``grpc.health.v1`` status for ``service`` (``""``: the whole
        server; ``"nmt.v1.Translator"``: the translator) as a name: ``"SERVING"``,
        ``"NOT_SERVING"``... Not retried: a health check reports what it finds."""
        request = health_pb2.HealthCheckRequest(service=service)
        try:
            reply = self._health.Check(
                request, timeout=self._timeout_of(timeout), metadata=self.metadata or None
            )
        except grpc.RpcError as exc:
            error = from_rpc_error(exc, target=self.target, tls=self.tls)
            if error.code == grpc.StatusCode.NOT_FOUND and not error.details:
                # grpc's health servicer says nothing of a service it does not know
                error = type(error)(
                    error.code,
                    f"the server reports no health for service {service!r}: ask for '' "
                    f"(the whole server) or {SERVICE_NAME!r}",
                    request_id=error.request_id,
                )
            raise error from None
        return health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)

    def wait_ready(self, timeout: float = 60.0, *, service: str = SERVICE_NAME) -> None:
        """Wait until health says SERVING (the model loaded and warmed up); raises the
        last :class:`TranslatorError`, or :class:`DeadlineExceeded`, after ``timeout``."""
        _seconds(timeout, "timeout", zero=True)
        deadline = time.monotonic() + timeout
        answered: str | None = None  # the last status the server answered
        while True:
            left = deadline - time.monotonic()
            error: TranslatorError | None = None
            try:
                status = answered = self.health(service, timeout=max(0.05, min(2.0, left)))
            except TranslatorError as exc:
                status, error = exc.code.name, exc
                # a last check cut short by the time left says less than the answers before
                if exc.code == grpc.StatusCode.DEADLINE_EXCEEDED and answered is not None:
                    status, error = answered, None
            if status == "SERVING":
                return
            if time.monotonic() + 0.1 >= deadline:
                if error is not None:
                    raise error
                raise DeadlineExceeded(
                    grpc.StatusCode.DEADLINE_EXCEEDED,
                    f"{self.target} still {status} after {timeout:g} s",
                )
            time.sleep(0.1)

    # -- internals -----------------------------------------------------------------------

    def _timeout_of(self, timeout: float | None) -> float:
        """A call's timeout: the translator's, or the call's own once checked."""
        return self.timeout if timeout is None else _seconds(timeout, "timeout")

    def _model(self, model: str | None) -> str | None:
        return model if model is not None else self.model

    def _retrying(
        self,
        attempt: Callable[[float, tuple[tuple[str, str], ...] | None], T],
        timeout: float | None,
        request_id: str | None,
    ) -> T:
        """``attempt(seconds left, metadata)`` until it succeeds, fails for good, the
        retries are spent or the deadline is near; gRPC errors become TranslatorErrors."""
        if self._closed.is_set():
            raise ValueError("this Translator is closed")
        deadline = time.monotonic() + self._timeout_of(timeout)
        metadata = self.metadata + (((REQUEST_ID_HEADER, request_id),) if request_id else ())
        tries = 0
        while True:
            tries += 1
            remaining = deadline - time.monotonic()
            try:
                return attempt(max(remaining, 0.001), metadata or None)
            except grpc.RpcError as exc:
                error = from_rpc_error(exc, target=self.target, tls=self.tls, attempts=tries)
            if tries > self.retries or not retryable(error.code, error.details):
                raise error
            cap = min(self.max_backoff, self.backoff * 2 ** (tries - 1))
            delay = cap / 2 + self._random.uniform(0, cap / 2)  # "equal jitter"
            if time.monotonic() + delay >= deadline:
                raise error  # no time for another attempt: the last answer stands
            time.sleep(delay)


# The server's refusal of texts whose sentences together exceed its limit a request.
_TOO_MANY_SENTENCES = re.compile(r"^the texts hold \d+ sentences; the limit is \d+")


def _halved(call: Callable[[list[str]], list[Result]], batch: list[str]) -> list[Result]:
    """``call(batch)``, the batch halved (and again) while the server finds its texts'
    sentences too many for one request (``split_sentences``: the client cannot count
    them, the server does); one text over the limit is refused on its own (named
    ``texts[0]``, which ``skip_refused`` skips)."""
    try:
        return call(batch)
    except InvalidRequest as exc:
        if len(batch) < 2 or not _TOO_MANY_SENTENCES.match(exc.details):
            raise
    half = len(batch) // 2
    first = _halved(call, batch[:half])
    try:
        return first + _halved(call, batch[half:])
    except TranslatorError as exc:
        raise shifted(exc, half) from None


def _seconds(value: float, name: str, *, zero: bool = False) -> float:
    """``value`` if it is a finite number of seconds above 0 (or 0 with ``zero``), else
    :class:`InvalidOptions` (NaN, -1 and inf made gRPC fail the call at once with
    DEADLINE_EXCEEDED, a wait for readiness with NaN never ended)."""
    # (a number of any kind, numpy's too; not True, which is an int)
    finite = isinstance(value, numbers.Real) and not isinstance(value, bool)
    finite = finite and math.isfinite(value)
    if not finite or value < 0 or (value == 0 and not zero):
        least = ">= 0" if zero else "> 0"
        raise InvalidOptions(f"{name} must be a finite number of seconds {least}, got {value!r}")
    return float(value)


_END = object()  # what a reader puts after the last item


class _Batches:
    """``items`` in batches of up to ``batch_size``, read as far as needed.

    Without ``linger``, read here, a batch at a time. With it, read by a thread of its
    own at most a batch ahead, and a batch not yet full goes once no item has come for
    ``linger`` seconds (a program that writes a line and waits for its translation gets
    it). ``take(wait)``: the next batch; ``[]`` when nothing has come and ``wait`` is
    false; ``None`` at the end. An error of ``items`` is raised once the items read
    before it were taken. :meth:`close` lets the reader go."""

    def __init__(self, items: Iterable[T], batch_size: int, linger: float | None) -> None:
        self.batch_size, self.linger = batch_size, linger
        self._source = iter(items)
        self._error: BaseException | None = None
        self._ended = False
        self._closed = threading.Event()
        self._queue: queue.Queue | None = None
        if linger is not None:
            self._queue = queue.Queue(maxsize=batch_size)
            threading.Thread(target=self._read, name="nmt-read", daemon=True).start()

    def _read(self) -> None:
        assert self._queue is not None
        try:
            for item in self._source:
                if not self._put(item):
                    return  # closed: the caller stopped reading
        except BaseException as exc:  # noqa: BLE001 - raised in the caller's thread
            self._error = exc
        self._put(_END)

    def _put(self, item: object) -> bool:
        assert self._queue is not None
        while not self._closed.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def close(self) -> None:
        self._closed.set()

    def take(self, wait: bool) -> list[T] | None:
        if self._ended:
            if self._error is not None:  # after the items read before it
                error, self._error = self._error, None
                raise error
            return None
        if self._queue is None:
            batch: list[T] = []
            try:
                for _, item in zip(range(self.batch_size), self._source, strict=False):
                    batch.append(item)
            except Exception as exc:  # noqa: BLE001 - raised once this batch is answered
                self._error, self._ended = exc, True
            if len(batch) < self.batch_size:
                self._ended = True
            return batch or self.take(wait)
        try:
            item = self._queue.get(block=wait)
        except queue.Empty:
            return []
        batch = []
        while item is not _END:
            batch.append(item)
            if len(batch) == self.batch_size:
                return batch
            try:  # the next one within `linger` of the last, else the batch goes
                item = self._queue.get(timeout=self.linger)
            except queue.Empty:
                return batch
        self._ended = True
        return batch or self.take(wait)


def _in_batches(
    call: Callable[[list[T]], list[Result]],
    items: Iterable[T],
    batch_size: int,
    concurrency: int,
    linger: float | None = None,
) -> Iterator[Result]:
    """``call`` on ``batch_size`` items at a time, ``concurrency`` calls in flight, the
    results in input order as soon as they are ready; ``items`` read only as far as
    needed (a stream such as stdin works). A refusal naming ``texts[i]`` of a request
    names the input's ``texts[j]`` (counted over all ``items``). ``linger``: send a
    partial batch once no item has come for this long (:class:`_Batches`). An error of
    ``items`` is raised after the results of the items before it."""
    if batch_size < 1 or concurrency < 1:
        raise ValueError("batch_size and concurrency must be >= 1")
    batches = _Batches(items, batch_size, linger)
    pending: deque[tuple[int, Future[list[Result]]]] = deque()
    sent = 0
    ended = False
    error: Exception | None = None  # the input's, raised once the answers before it are out
    with ThreadPoolExecutor(concurrency, thread_name_prefix="nmt-client") as pool:
        try:
            while True:
                while not ended and len(pending) < concurrency:
                    try:  # answers ready are handed out before waiting for more input
                        batch = batches.take(wait=not pending)
                    except Exception as exc:  # noqa: BLE001 - raised below, in its turn
                        error, batch = exc, None
                    if batch is None:
                        ended = True
                    if not batch:
                        break
                    pending.append((sent, pool.submit(call, batch)))
                    sent += len(batch)
                if not pending:
                    if error is not None:
                        raise error
                    if ended:
                        return
                    continue
                start, future = pending.popleft()
                try:
                    results = future.result()
                except TranslatorError as exc:
                    raise shifted(exc, start) from None
                yield from results
        finally:
            batches.close()
            for _, future in pending:
                future.cancel()


def _request_id(pairs) -> str | None:
    for key, value in pairs or ():
        if key == REQUEST_ID_HEADER:
            return value
    return None
