"""Helpers for the tests that talk to a real gRPC server (no fixtures here)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc
import numpy as np
import pytest

from models.options import DecodeOptions
from nmt_api.nmt.v1 import translator_pb2 as pb
from nmt_api.nmt.v1 import translator_pb2_grpc as pb_grpc
from nmt_client import DecodeOptions as ClientOptions

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 60.0  # every call carries a deadline (see the no-deadline bug test)
# sample.en line whose beam-5 hypotheses never end before the limit. Greedy ends it in
# about 10 steps (11 ms): a greedy test that needs a long decode sets min_length too.
LOOP_SENTENCE = 0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve_argv(repo: Path, port: int, *flags: str) -> list[str]:
    """``nmt-serve`` (as ``python -m service.server``) serving ``repo`` on 127.0.0.1:``port``
    on the CPU, one ORT thread, no metrics endpoint; then ``flags``."""
    argv = [sys.executable, "-m", "service.server", "--model-repository", str(repo)]
    argv += ["--host", "127.0.0.1", "--port", str(port), "--metrics-port", "-1"]
    return argv + ["--providers", "cpu", "--intra-op-threads", "1", *flags]


def spawn_serve(repo: Path, port: int, log, *flags: str, **popen) -> subprocess.Popen:
    """:func:`serve_argv` started from the project root, its output in the file ``log``;
    ``popen``: more :class:`subprocess.Popen` arguments."""
    return subprocess.Popen(
        serve_argv(repo, port, *flags),
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=log,
        stderr=subprocess.STDOUT,
        **popen,
    )


def stub_for(port: int) -> tuple[grpc.Channel, pb_grpc.TranslatorStub]:
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    return channel, pb_grpc.TranslatorStub(channel)


def proto_options(beam: int = 1, n_best: int = 1, **extra) -> pb.DecodeOptions:
    """Proto options for ``beam`` (1: greedy) that map to ``domain_options`` exactly,
    built by the client library (``extra``: its other ``DecodeOptions`` fields)."""
    return ClientOptions(beam_size=beam, n_best=n_best, **extra).to_proto()


def domain_options(options: pb.DecodeOptions) -> DecodeOptions:
    """The reference decoder's options for a proto request (documented server defaults)."""
    return DecodeOptions(
        beam_size=max(options.beam_size, 1),
        n_best=max(options.n_best, 1),
        length_penalty=options.length_penalty if options.HasField("length_penalty") else 1.0,
        max_length=options.max_length or 256,
        max_length_ratio=(
            options.max_length_ratio if options.HasField("max_length_ratio") else 2.0
        ),
        return_attention=options.return_attention,
    )


@dataclass(frozen=True)
class Hyp:
    text: str
    pieces: tuple[str, ...]
    score: float
    log_prob: float
    attention: np.ndarray | None = None


@contextmanager
def one_torch_thread() -> Iterator[None]:
    """Tiny models on a shared CPU: torch's spinning OpenMP workers cost ~20x wall time."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def reference(checkpoint, texts: Sequence[str], options: DecodeOptions) -> list[list[Hyp]]:
    """n-best lists of the PyTorch reference decoder (``models.translate.translate_ids``)."""
    from models.translate import translate_ids

    src, tgt = checkpoint.src_tokenizer, checkpoint.tgt_tokenizer
    with one_torch_thread():
        nbest = translate_ids(checkpoint.model, [src.encode(t) for t in texts], options=options)
    return [
        [
            Hyp(
                tgt.decode(h.tokens),
                tuple(tgt.pieces(h.tokens)),
                h.score,
                h.log_prob,
                None if h.attention is None else np.asarray(h.attention),
            )
            for h in hyps
        ]
        for hyps in nbest
    ]


def served(response: pb.TranslateResponse) -> list[list[Hyp]]:
    out = []
    for translation in response.translations:
        hyps = []
        for h in translation.hypotheses:
            attention = None
            if h.attention.rows:
                attention = np.asarray(h.attention.values, dtype=np.float32).reshape(
                    h.attention.rows, h.attention.cols
                )
            hyps.append(Hyp(h.text, tuple(h.tokens), h.score, h.log_prob, attention))
        out.append(hyps)
    return out


def assert_same_nbest(got: list[list[Hyp]], want: list[list[Hyp]], *, atol: float = 1e-4) -> None:
    """Same hypotheses (text and pieces, in order) and scores within ``atol``."""
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert [(h.text, h.pieces) for h in g] == [(h.text, h.pieces) for h in w], f"sentence {i}"
        for hg, hw in zip(g, w, strict=True):
            assert abs(hg.score - hw.score) <= atol, (i, hg.score, hw.score)
            assert abs(hg.log_prob - hw.log_prob) <= atol, (i, hg.log_prob, hw.log_prob)


def mixed_requests(sentences: Sequence[str], n: int = 24) -> list[pb.TranslateRequest]:
    """``n`` requests of 1-3 sentences each, beams 1-4, n-best 1-2: the kinds of rows a
    step mixes when they overlap."""
    return [
        pb.TranslateRequest(
            texts=list(sentences[i : i + 1 + i % 3]),
            options=proto_options(beam=1 + i % 4, n_best=1 + i % 2),
        )
        for i in range(n)
    ]


def answers_under_load(port: int, requests: Sequence[pb.TranslateRequest], workers: int = 12):
    """Every request's n-best lists as ``(text, tokens, score)``, ``workers`` requests in
    flight at once."""
    from concurrent.futures import ThreadPoolExecutor

    channel, stub = stub_for(port)
    with channel, ThreadPoolExecutor(workers) as pool:
        replies = pool.map(lambda r: stub.Translate(r, timeout=TIMEOUT), requests)
        return [
            [[(h.text, list(h.tokens), h.score) for h in t.hypotheses] for t in r.translations]
            for r in replies
        ]


def assert_same_answers(got: list, want: list, *, atol: float = 1e-4) -> None:
    """:func:`answers_under_load` results: the same texts and tokens, scores within
    ``atol``."""
    for g_request, w_request in zip(got, want, strict=True):
        assert [[h[:2] for h in n] for n in g_request] == [[h[:2] for h in n] for n in w_request]
        for g, w in zip(g_request, w_request, strict=True):
            assert [h[2] for h in g] == pytest.approx([h[2] for h in w], abs=atol)


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0, every: float = 0.005) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(every)
    return predicate()


def settled(read: Callable[[], object], beats: int = 4, timeout: float = 10.0):
    """``read()`` once it has returned the same value for ``beats`` heartbeats.

    Metrics of other processes arrive with their heartbeats: a reading taken as soon as
    one condition holds can mix a stale report with a fresh one."""
    # Imported here, not at the top: the client's tests use these helpers too.
    from service.enginechild import HEARTBEAT_SECONDS

    last, since = read(), time.monotonic()
    end = since + timeout
    while time.monotonic() < end:
        time.sleep(HEARTBEAT_SECONDS / 4)
        now = read()
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= beats * HEARTBEAT_SECONDS:
            return now
    raise AssertionError(f"the readings did not settle in {timeout} s (last {last})")


def rpc_error(call: Callable[[], object]) -> grpc.RpcError:
    """The error ``call`` raises (fails the test when it succeeds)."""
    try:
        call()
    except grpc.RpcError as exc:
        return exc
    raise AssertionError("the call succeeded but an error was expected")


def blocked_encoder(monkeypatch, model) -> tuple[threading.Event, threading.Event]:
    """Make the next ``model.encode`` call wait for ``release``; ``entered`` is set once
    it is waiting. Later calls run as usual."""
    entered, release, real = threading.Event(), threading.Event(), model.encode
    first = [True]

    def encode(*args, **kwargs):
        if first[0]:
            first[0] = False
            entered.set()
            assert release.wait(TIMEOUT), "the test never released the encoder"
        return real(*args, **kwargs)

    monkeypatch.setattr(model, "encode", encode)
    return entered, release


def slow_decoder(monkeypatch, server, model: str = "tiny", seconds: float = 0.005) -> None:
    """Every decoder step of ``server``'s ``model`` takes ``seconds`` longer: a long decode
    (:data:`LOOP_SENTENCE` at beam 5, 4000 steps) then outlasts a deadline or a cancel on
    any machine (unslowed, one such sentence took 0.37 s on a 2-core EPYC VM, inside the
    0.5 s deadlines two tests had counted on)."""
    bundle_model = server.engines[model].bundle.model
    real = bundle_model.step

    def slow_step(*args, **kwargs):
        time.sleep(seconds)
        return real(*args, **kwargs)

    monkeypatch.setattr(bundle_model, "step", slow_step)
