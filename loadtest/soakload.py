"""The soak's load: closed-loop clients, each on a connection of its own, that draw
their calls from a weighted mix (:data:`MIX`: greedy ``Translate``, beam 5 n-best 3,
``TranslateStream`` greedy and beam, some with ``return_attention``, ``ListModels``, a
small share of bad requests, calls the client cancels mid-call and calls with a short
deadline); overload bursts of more clients that send good calls back to back
(:data:`OVERLOAD_MIX`, :class:`OverloadBursts`); and half-open ``Translate`` calls kept
open and renewed as the server ends them (:class:`HalfOpenKeeper`). Every call ends in the
:class:`Tally` with the code the client saw, sent once and never retried. During a burst
the ordinary clients send no short-deadline or cancelled calls: a refusal the swamped
server sends can reach the client after its 50 ms deadline or its cancel, and the server
(RESOURCE_EXHAUSTED) and the client (DEADLINE_EXCEEDED, CANCELLED) would both be right."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence

import grpc

from loadtest.soakprobe import hostile
from nmt_api.nmt.v1 import translator_pb2 as pb
from nmt_api.nmt.v1 import translator_pb2_grpc as pb_grpc
from nmt_client import DecodeOptions, Translator, TranslatorError, stream_request, translate_request

log = logging.getLogger("loadtest.soak")

CALL_TIMEOUT = 30.0  # deadline of an ordinary call
SHORT_DEADLINE = 0.05  # the "short deadline" calls: far less than a long request takes
CANCEL_AFTER = 0.03  # a cancelled unary call is cancelled this long after it started
UNKNOWN_MODEL = "no-such-model"
OVER_LIMIT_BEAM = 1000

# What an ordinary client sends: (kind, weight in %). See LoadClient.call.
MIX = (
    ("greedy", 37),  # Translate, one sentence
    ("greedy_batch_attention", 8),  # Translate, 2-4 sentences, attention and scores
    ("beam5_nbest3", 18),  # Translate, beam 5, 3-best with scores
    ("beam5_attention", 4),  # the same with attention
    ("beam5_constraints", 3),  # Translate, beam 5, with a phrase the translation must hold
    ("beam5_diverse", 3),  # Translate, beam 5, 3-best, diverse siblings (diversity_rate 1)
    ("stream_greedy", 12),  # TranslateStream
    ("stream_beam5", 4),
    ("list_models", 1),
    ("bad_utf8_body", 2),  # INVALID_ARGUMENT
    ("unknown_model", 2),  # INVALID_ARGUMENT
    ("beam_over_limit", 2),  # INVALID_ARGUMENT
    ("cancel_unary", 2),  # long Translate, cancelled after CANCEL_AFTER
    ("cancel_stream", 2),  # TranslateStream of a paragraph, cancelled after 1 message
    ("short_deadline", 3),  # long Translate with a SHORT_DEADLINE deadline
)
# Kinds not sent during an overload burst (see the module doc), nor BURST_LEAD s before.
BURST_LEAD = 1.0
NOT_IN_BURSTS = ("short_deadline", "cancel_unary", "cancel_stream")
# Words of the paragraph a cancelled stream translates (about 90 source tokens on the
# committed model, under its 128-token limit).
PARAGRAPH_WORDS = 60
# What a constrained request asks every translation to hold (a word of the demo
# model's target language; tokenised as the target side is by whichever model serves)
PHRASE = "casa"
# What an overload client sends: good requests only.
OVERLOAD_MIX = (("greedy", 60), ("beam5_nbest3", 25), ("stream_greedy", 15))


class Tally:
    """Thread-safe client tally: ``(method, code)``, ``(kind, code)``, latencies of the
    calls that ended OK per kind, sentences translated."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: Counter[tuple[str, str]] = Counter()
        self.kinds: Counter[tuple[str, str]] = Counter()
        self.latencies: dict[str, list[float]] = {}
        self.sentences = 0

    def add(self, kind: str, method: str, code: str, seconds: float, sentences: int) -> None:
        with self.lock:
            self.calls[(method, code)] += 1
            self.kinds[(kind, code)] += 1
            if code == "OK":
                self.latencies.setdefault(kind, []).append(seconds)
                self.sentences += sentences

    def by_call(self) -> dict[str, int]:
        with self.lock:
            return {f"{m} {c}": n for (m, c), n in sorted(self.calls.items())}

    def total(self) -> int:
        with self.lock:
            return sum(self.calls.values())


def _code(exc: grpc.RpcError | TranslatorError) -> str:
    code = exc.code if isinstance(exc, TranslatorError) else exc.code()
    return code.name if code is not None else "UNKNOWN"


GREEDY = DecodeOptions(beam_size=1, return_scores=False)
BEAM_NBEST3 = DecodeOptions(beam_size=5, n_best=3, return_scores=False)
# 16 long sentences, beam 5, 3-best: 100 ms and more even on an idle server (8 took
# 50-60 ms there: a cancel 50 ms in could arrive after the reply).
LONG = DecodeOptions(beam_size=5, n_best=3, max_length_ratio=3.0, return_scores=False)


class LoadClient(threading.Thread):
    """One closed-loop client on a connection of its own, drawing each call from
    ``mix`` until ``stop`` is set; every call ends in the tally with the code it saw."""

    def __init__(
        self,
        name: str,
        port: int,
        mix: Sequence[tuple[str, int]],
        sentences: Sequence[str],
        long_sentences: Sequence[str],
        tally: Tally,
        stop: threading.Event,
        seed: int,
        burst: threading.Event | None = None,
    ) -> None:
        super().__init__(name=name, daemon=True)
        self.burst = burst  # set while an overload burst runs
        self.port = port
        self.kinds = [k for k, _ in mix]
        self.weights = [w for _, w in mix]
        self.sentences = sentences
        self.long_sentences = long_sentences
        self.tally = tally
        self.stop = stop
        self.rng = random.Random(seed)

    def run(self) -> None:
        channel = hostile().own_channel(self.port)
        self.channel = channel
        self.stub = pb_grpc.TranslatorStub(channel)  # for the calls it cancels
        # every call is sent once and counted with the code it ended in: no retries
        self.translator = Translator(
            f"127.0.0.1:{self.port}", channel=channel, retries=0, timeout=CALL_TIMEOUT
        )
        try:
            while not self.stop.is_set():
                kind = self.rng.choices(self.kinds, self.weights)[0]
                while kind in NOT_IN_BURSTS and self.burst is not None and self.burst.is_set():
                    kind = self.rng.choices(self.kinds, self.weights)[0]
                self.call(kind)
        finally:
            channel.close()

    def _texts(self, n: int, long: bool = False) -> list[str]:
        pool = self.long_sentences if long else self.sentences
        return [self.rng.choice(pool) for _ in range(n)]

    def _paragraph(self) -> str:
        words: list[str] = []
        while len(words) < PARAGRAPH_WORDS:
            words += self.rng.choice(self.long_sentences).split()
        return " ".join(words[:PARAGRAPH_WORDS])

    def _long_request(self) -> pb.TranslateRequest:
        """The raw message (its call is cancelled): 16 long sentences, :data:`LONG`."""
        return translate_request(self._texts(16, long=True), LONG)

    def call(self, kind: str) -> None:
        start = time.monotonic()
        method, sentences = "Translate", 1
        stub, translator = self.stub, self.translator
        try:
            if kind == "greedy":
                translator.translate(self._texts(1), options=GREEDY)
            elif kind == "greedy_batch_attention":
                sentences = self.rng.randint(2, 4)
                translator.translate(
                    self._texts(sentences),
                    options=GREEDY,
                    return_attention=True,
                    return_scores=True,
                )
            elif kind in ("beam5_nbest3", "beam5_attention"):
                translator.translate(
                    self._texts(1),
                    options=BEAM_NBEST3,
                    return_scores=True,
                    return_attention=kind == "beam5_attention",
                )
            elif kind == "beam5_constraints":
                translator.translate(self._texts(1), options=BEAM_NBEST3, constraints=[[PHRASE]])
            elif kind == "beam5_diverse":
                translator.translate(self._texts(1), options=BEAM_NBEST3, diversity_rate=1.0)
            elif kind in ("stream_greedy", "stream_beam5"):
                method = "TranslateStream"
                options = GREEDY if kind == "stream_greedy" else BEAM_NBEST3
                for _ in translator.stream(self._texts(1)[0], options=options):
                    pass
            elif kind == "list_models":
                method, sentences = "ListModels", 0
                translator.list_models()
            elif kind == "bad_utf8_body":
                h = hostile()
                h.raw_translate(self.channel, h.invalid_utf8_request(), timeout=CALL_TIMEOUT)
            elif kind == "unknown_model":
                translator.translate(self._texts(1), model=UNKNOWN_MODEL, return_scores=False)
            elif kind == "beam_over_limit":
                translator.translate(self._texts(1), beam_size=OVER_LIMIT_BEAM, return_scores=False)
            elif kind == "cancel_unary":
                sentences = 16
                future = stub.Translate.future(self._long_request(), timeout=CALL_TIMEOUT)
                if not future.done():
                    time.sleep(CANCEL_AFTER)  # not stop.wait: the server must see the call
                if future.cancel():
                    self.tally.add(kind, method, "CANCELLED", 0.0, 0)
                    return
                future.result()  # it ended first: its own outcome
            elif kind == "cancel_stream":
                method = "TranslateStream"
                # A paragraph, greedy: its first message comes after one step and
                # dozens of steps remain (22 ms and more on an idle server, against 5 ms
                # for the longest single sentence), so the cancel lands while the server
                # still decodes unless this thread waits that long for the GIL.
                request = stream_request(self._paragraph(), GREEDY)
                call = stub.TranslateStream(request, timeout=CALL_TIMEOUT)
                first = next(call, None)
                if first is not None and not first.final and call.cancel():
                    self.tally.add(kind, method, "CANCELLED", 0.0, 0)
                    return
                for _ in call:  # a one-message translation: it ends on its own
                    pass
            elif kind == "short_deadline":
                sentences = 16
                translator.translate(
                    self._texts(16, long=True), options=LONG, timeout=SHORT_DEADLINE
                )
            else:
                raise ValueError(f"unknown request kind {kind!r}")
            code = "OK"
        except (grpc.RpcError, TranslatorError) as exc:
            code = _code(exc)
        self.tally.add(kind, method, code, time.monotonic() - start, sentences)


def start_clients(
    count: int,
    prefix: str,
    port: int,
    mix: Sequence[tuple[str, int]],
    sentences: Sequence[str],
    long_sentences: Sequence[str],
    tally: Tally,
    stop: threading.Event,
    seed: int,
    burst: threading.Event | None = None,
) -> list[LoadClient]:
    clients = [
        LoadClient(
            f"{prefix}-{i}",
            port,
            mix,
            sentences,
            long_sentences,
            tally,
            stop,
            seed * 100003 + i,
            burst,
        )
        for i in range(count)
    ]
    for c in clients:
        c.start()
    return clients


class OverloadBursts(threading.Thread):
    """``clients`` extra clients for ``burst`` s every ``period`` s, from ``first`` s
    after ``t0`` until ``end`` (monotonic); ``active`` is set while they run."""

    def __init__(
        self,
        clients: int,
        t0: float,
        first: float,
        period: float,
        burst: float,
        end: float,
        stop: threading.Event,
        spawn: Callable[[int, threading.Event], list[LoadClient]],
        active: threading.Event,
    ) -> None:
        super().__init__(name="soak-overload", daemon=True)
        self.clients, self.t0, self.first = clients, t0, first
        self.period, self.burst, self.end = period, burst, end
        self.stop, self.spawn = stop, spawn
        self.bursts: list[tuple[float, float]] = []  # (start, end) seconds after t0
        self.lagging: list[LoadClient] = []
        self.active = active

    def run(self) -> None:
        k = 0
        while True:
            start = self.t0 + self.first + k * self.period
            if start >= self.end or self.stop.wait(max(0.0, start - time.monotonic())):
                return
            until = min(start + self.burst, self.end)
            burst_stop = threading.Event()
            log.info(
                "overload burst %d: %d more clients for %.0f s", k + 1, self.clients, until - start
            )
            self.active.set()
            # Let the ordinary clients' calls in flight end before the first refusal.
            self.stop.wait(BURST_LEAD)
            threads = self.spawn(k, burst_stop)
            self.stop.wait(max(0.0, until - time.monotonic()))
            burst_stop.set()
            for t in threads:
                t.join(CALL_TIMEOUT + 5)
            self.active.clear()
            self.lagging += [t for t in threads if t.is_alive()]
            self.bursts.append((start - self.t0, time.monotonic() - self.t0))
            k += 1


class HalfOpenKeeper(threading.Thread):
    """``count`` half-open calls (:class:`hostile.HalfOpenCalls`) at all times, renewed
    as the server ends them; each ended call goes in the tally with its code."""

    def __init__(self, port: int, count: int, tally: Tally, stop: threading.Event) -> None:
        super().__init__(name="soak-half-open", daemon=True)
        self.port, self.count, self.tally, self.stop = port, count, tally, stop
        self.unsettled = 0

    def _settle(self, batch, timeout: float) -> None:
        end = time.monotonic() + timeout
        for future in batch.futures:
            try:
                exc = future.exception(timeout=max(0.0, end - time.monotonic()))
            except grpc.FutureTimeoutError:
                self.unsettled += 1
                continue
            except grpc.FutureCancelledError:
                exc = None
                code = "CANCELLED"
            else:
                code = "OK" if exc is None else _code(exc)
            self.tally.add("half_open", "Translate", code, 0.0, 0)
        batch.close()

    def run(self) -> None:
        h = hostile()
        while not self.stop.is_set():
            batch = h.HalfOpenCalls(self.port, self.count)
            # The server ends them after --receive-timeout; wait, then renew.
            while not all(f.done() for f in batch.futures):
                if self.stop.wait(0.2):
                    break
            # On stop: the calls still open end on the server's own timeout.
            self._settle(batch, timeout=120.0)
