"""Status codes of the real server: bad requests, overload, deadlines, not ready."""

from __future__ import annotations

import threading

import grpc
import pytest

from nmt_api.nmt.v1 import translator_pb2 as pb
from service.decoding import SentenceSearch
from tests.service.server_helpers import (
    LOOP_SENTENCE,
    TIMEOUT,
    proto_options,
    rpc_error,
    slow_decoder,
    stub_for,
    wait_until,
)

INVALID = grpc.StatusCode.INVALID_ARGUMENT


@pytest.fixture(scope="module")
def server(server_factory):
    return server_factory(
        max_live_rows=40,
        max_sentences_per_request=8,
        max_source_tokens=64,
        max_beam_size=6,
        max_n_best=4,
        max_target_length=4000,
    )


def _request(texts=("A short sentence.",), model="", **options):
    return pb.TranslateRequest(texts=list(texts), model=model, options=pb.DecodeOptions(**options))


BAD_REQUESTS = {
    "no-texts": (_request(texts=()), "no texts given"),
    "empty-text": (
        _request(texts=("ok", "")),
        "texts[1] is empty or whitespace only: send non-empty text",
    ),
    "whitespace-text": (_request(texts=(" \t\n ",)), "texts[0] is empty or whitespace only"),
    "too-many-sentences": (_request(texts=["Hello."] * 9), "9 sentences in one request"),
    "source-too-long": (_request(texts=("word " * 70,)), "source tokens; the limit is 64"),
    "beam-over-max": (
        _request(strategy=pb.STRATEGY_BEAM, beam_size=7),
        "beam_size 7 > max 6: use beam_size <= 6",
    ),
    "n-best-over-beam": (
        _request(strategy=pb.STRATEGY_BEAM, beam_size=2, n_best=3),
        "n_best must be between 1 and beam_size (2), got 3",
    ),
    "n-best-over-max": (
        _request(strategy=pb.STRATEGY_BEAM, beam_size=6, n_best=5),
        "n_best 5 > max 4: use n_best <= 4",
    ),
    "negative-length-penalty": (_request(length_penalty=-0.5), "length_penalty must be in [0, 5]"),
    "oversized-length-penalty": (_request(length_penalty=7.0), "length_penalty must be in [0, 5]"),
    "nan-length-penalty": (_request(length_penalty=float("nan")), "length_penalty"),
    "negative-length-ratio": (_request(max_length_ratio=-1.0), "max_length_ratio must be >= 0"),
    "max-length-over-limit": (
        _request(max_length=4001),
        "max_length 4001 > server limit 4000: use max_length <= 4000",
    ),
    "greedy-with-beam": (
        _request(strategy=pb.STRATEGY_GREEDY, beam_size=3),
        "strategy GREEDY with beam_size 3",
    ),
    "greedy-with-n-best": (
        _request(strategy=pb.STRATEGY_GREEDY, n_best=2),
        "n_best must be between 1 and beam_size (1)",
    ),
    "rows-over-budget": (
        _request(texts=["Hello."] * 8, strategy=pb.STRATEGY_BEAM, beam_size=6),
        "8 sentences x beam 6 needs more rows than the server's max_live_rows (40): send "
        "at most 6 sentences per request at this beam size",
    ),
    "unknown-strategy": (
        _request(strategy=7, beam_size=3),
        "unknown strategy 7: use STRATEGY_GREEDY (1), STRATEGY_BEAM (2) or leave it unset",
    ),
    "unknown-model": (_request(model="nope"), "unknown model 'nope'; loaded models: tiny"),
    # a 16 KB name is not echoed back (the client would see a metadata-size error instead)
    "long-unknown-model": (_request(model="m" * 16_000), "unknown model '" + "m" * 64 + "...'"),
    # refused by its length before it is tokenised: 64 tokens x 64 characters
    "text-over-character-limit": (
        _request(texts=("x" * 5000,)),
        "texts[0] has 5000 characters; the limit is 4096 (64 source tokens): split the text",
    ),
}


@pytest.mark.parametrize("name", sorted(BAD_REQUESTS))
def test_invalid_requests(stub, name):
    request, detail = BAD_REQUESTS[name]
    exc = rpc_error(lambda: stub.Translate(request, timeout=TIMEOUT))
    assert exc.code() == INVALID, (exc.code(), exc.details())
    assert detail in exc.details()


@pytest.mark.parametrize("name", ["whitespace-text", "beam-over-max", "unknown-model"])
def test_invalid_stream_requests(stub, name):
    request, detail = BAD_REQUESTS[name]
    stream_request = pb.TranslateStreamRequest(
        text=request.texts[0], model=request.model, options=request.options
    )
    exc = rpc_error(lambda: list(stub.TranslateStream(stream_request, timeout=TIMEOUT)))
    assert exc.code() == INVALID
    if name == "whitespace-text":  # a stream's one field is text
        detail = "text is empty or whitespace only: send non-empty text"
    assert detail in exc.details()
    assert "texts[" not in exc.details()


def test_server_keeps_serving_after_errors(stub):
    response = stub.Translate(_request(), timeout=TIMEOUT)
    assert len(response.translations) == 1


# -- deadlines --------------------------------------------------------------------------------


def _long_request(tiny_bundle, sentences=8):
    return pb.TranslateRequest(
        texts=[tiny_bundle.sentences[LOOP_SENTENCE]] * sentences,
        options=proto_options(beam=5, max_length_ratio=100.0, max_length=4000),
    )


def test_tiny_deadline(server, stub, tiny_bundle):
    exc = rpc_error(lambda: stub.Translate(_long_request(tiny_bundle), timeout=0.001))
    assert exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    reg = server.registry
    assert wait_until(lambda: reg.get_sample_value("nmt_live_rows") == 0, timeout=5)


def test_deadline_mid_decode_frees_the_rows(server, stub, tiny_bundle):
    reg = server.registry
    future = stub.Translate.future(_long_request(tiny_bundle), timeout=1.0)
    assert wait_until(lambda: reg.get_sample_value("nmt_live_rows") >= 40, timeout=5)
    with pytest.raises(grpc.RpcError) as info:
        future.result()
    assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert wait_until(lambda: reg.get_sample_value("nmt_live_rows") == 0, timeout=5)
    # The whole row budget is usable again (leaked rows would stall these forever):
    # 6 sentences x beam 6 = 36 rows plus 4 greedy sentences = all 40.
    full = pb.TranslateRequest(
        texts=["Hello there."] * 6, options=proto_options(beam=6, max_length=4)
    )
    more = pb.TranslateRequest(texts=["Hello there."] * 4, options=proto_options(max_length=4))
    f1 = stub.Translate.future(full, timeout=10)
    f2 = stub.Translate.future(more, timeout=10)
    assert len(f1.result().translations) == 6
    assert len(f2.result().translations) == 4
    assert wait_until(lambda: reg.get_sample_value("nmt_live_rows") == 0, timeout=5)
    assert reg.get_sample_value("nmt_queue_depth") == 0


def test_deadline_of_partly_admitted_request(server, stub, tiny_bundle, monkeypatch):
    """A request only partly admitted (rows taken by another) expires: its admitted sentences
    leave the decoder, its queued one leaves the queue, the other request is unaffected."""
    reg = server.registry
    slow_decoder(monkeypatch, server)  # ``other`` still decodes after ``partial`` expired
    other = stub.Translate.future(_long_request(tiny_bundle, sentences=1), timeout=TIMEOUT)
    assert wait_until(lambda: reg.get_sample_value("nmt_live_rows") >= 5, timeout=5)
    partial = stub.Translate.future(_long_request(tiny_bundle, sentences=8), timeout=0.4)
    # 5 + 7 x 5 rows = the budget of 40: the 8th sentence waits in the queue.
    assert wait_until(lambda: reg.get_sample_value("nmt_live_rows") == 40, timeout=5)
    assert reg.get_sample_value("nmt_queue_depth") == 1
    with pytest.raises(grpc.RpcError) as info:
        partial.result()
    assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert wait_until(lambda: reg.get_sample_value("nmt_live_rows") == 5, timeout=5)
    assert wait_until(lambda: reg.get_sample_value("nmt_queue_depth") == 0, timeout=5)
    assert not other.done()
    other.cancel()
    assert wait_until(lambda: reg.get_sample_value("nmt_live_rows") == 0, timeout=5)
    full = pb.TranslateRequest(
        texts=["Hello there."] * 8, options=proto_options(beam=5, max_length=4)
    )
    assert len(stub.Translate(full, timeout=10).translations) == 8


def test_cancelled_stream_frees_the_rows(server, stub, tiny_bundle, monkeypatch):
    reg = server.registry
    slow_decoder(monkeypatch, server)
    stream = stub.TranslateStream(
        pb.TranslateStreamRequest(
            text=tiny_bundle.sentences[LOOP_SENTENCE],
            # long enough that it cannot end before the cancel (see the test below)
            options=proto_options(beam=5, max_length=4000, max_length_ratio=100.0),
        ),
        timeout=TIMEOUT,
    )
    labels = {"method": "TranslateStream", "code": "CANCELLED"}
    before = reg.get_sample_value("nmt_requests_total", labels) or 0.0
    assert wait_until(lambda: reg.get_sample_value("nmt_live_rows") >= 5, timeout=5)
    stream.cancel()
    assert wait_until(lambda: reg.get_sample_value("nmt_live_rows") == 0, timeout=5)
    # counted once, whether the handler was waiting or at a yield when it was closed
    assert wait_until(lambda: reg.get_sample_value("nmt_requests_total", labels) == before + 1)


def test_a_stream_cancelled_while_streaming_is_counted(server, stub, tiny_bundle):
    """Closed by gRPC at a yield (GeneratorExit), which ``except Exception`` misses."""
    reg = server.registry
    labels = {"method": "TranslateStream", "code": "CANCELLED"}
    before = reg.get_sample_value("nmt_requests_total", labels) or 0.0
    stream = stub.TranslateStream(
        pb.TranslateStreamRequest(
            text=tiny_bundle.sentences[LOOP_SENTENCE],
            # 4,000 steps. Greedy ends this sentence after about 10 steps, so without
            # min_length a CI run saw the stream end OK before the cancel arrived.
            options=proto_options(min_length=3999, max_length=4000, max_length_ratio=100.0),
        ),
        timeout=TIMEOUT,
    )
    next(stream)  # greedy streams every step: the handler is yielding
    stream.cancel()
    ok = wait_until(lambda: reg.get_sample_value("nmt_requests_total", labels) == before + 1)
    counted = {
        s.labels["code"]: s.value
        for f in reg.collect()
        for s in f.samples
        if s.name == "nmt_requests_total" and s.labels["method"] == "TranslateStream"
    }
    assert ok, counted


def test_list_models_is_timed(server, stub):
    reg = server.registry
    labels = {"method": "ListModels", "strategy": "unknown", "code": "OK"}
    before = reg.get_sample_value("nmt_request_duration_seconds_count", labels) or 0.0
    stub.ListModels(pb.ListModelsRequest(), timeout=TIMEOUT)
    assert reg.get_sample_value("nmt_request_duration_seconds_count", labels) == before + 1


def test_request_without_deadline(stub):
    response = stub.Translate(_request())
    assert len(response.translations) == 1


def test_stream_without_deadline(stub):
    # Streams only wait on an already finished job, so they escape the unary bug above.
    messages = list(stub.TranslateStream(pb.TranslateStreamRequest(text="Hello.")))
    assert messages[-1].final


# -- overload and readiness ------------------------------------------------------------------


def test_queue_full_is_resource_exhausted(server_factory, tiny_bundle):
    server = server_factory(max_queue=1, max_live_rows=5, max_beam_size=5)
    channel, stub = stub_for(server.port)
    request = pb.TranslateRequest(
        texts=[tiny_bundle.sentences[LOOP_SENTENCE]],
        options=proto_options(beam=5, max_length=120),
    )
    barrier = threading.Barrier(12)
    codes: list = []
    messages: list[str] = []
    lock = threading.Lock()

    def client():
        barrier.wait()
        try:
            stub.Translate(request, timeout=TIMEOUT)
            code, details = grpc.StatusCode.OK, ""
        except grpc.RpcError as exc:
            code, details = exc.code(), exc.details()
        with lock:
            codes.append(code)
            if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
                messages.append(details)

    threads = [threading.Thread(target=client) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
    channel.close()
    exhausted = codes.count(grpc.StatusCode.RESOURCE_EXHAUSTED)
    assert len(codes) == 12
    assert exhausted >= 1
    assert all("request queue is full (1 waiting)" in m for m in messages), messages
    assert codes.count(grpc.StatusCode.OK) == 12 - exhausted >= 2
    reg = server.registry
    assert (
        reg.get_sample_value("nmt_rejected_requests_total", {"reason": "queue_full"}) == exhausted
    )
    assert (
        reg.get_sample_value(
            "nmt_requests_total", {"method": "Translate", "code": "RESOURCE_EXHAUSTED"}
        )
        == exhausted
    )


def test_unavailable_before_warm_up(server_factory):
    server = server_factory(warm=False)
    channel, stub = stub_for(server.port)
    try:
        exc = rpc_error(lambda: stub.Translate(_request(), timeout=TIMEOUT))
        assert exc.code() == grpc.StatusCode.UNAVAILABLE
        assert "warming up" in exc.details()
        exc = rpc_error(
            lambda: list(
                stub.TranslateStream(pb.TranslateStreamRequest(text="Hello."), timeout=TIMEOUT)
            )
        )
        assert exc.code() == grpc.StatusCode.UNAVAILABLE
        server.warm_up()
        assert len(stub.Translate(_request(), timeout=TIMEOUT).translations) == 1
    finally:
        channel.close()


# -- decoder failures ------------------------------------------------------------------------


def _fail_once(monkeypatch, obj, name: str) -> list[int]:
    """Make ``obj.name`` raise once, then behave again; returns the call counter."""
    real, calls = getattr(obj, name), []

    def flaky(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError(f"injected {name} failure")
        return real(*args, **kwargs)

    monkeypatch.setattr(obj, name, flaky)
    return calls


def test_decoder_step_failure_is_internal_and_server_recovers(server_factory, monkeypatch):
    server = server_factory()
    calls = _fail_once(monkeypatch, server.engines["tiny"].bundle.model, "step")
    channel, stub = stub_for(server.port)
    try:
        exc = rpc_error(lambda: stub.Translate(_request(), timeout=10))
        assert exc.code() == grpc.StatusCode.INTERNAL
        assert "internal error (RuntimeError)" in exc.details()
        assert "injected" not in exc.details()  # no internals leak to the client
        assert len(stub.Translate(_request(), timeout=10).translations) == 1
        assert len(calls) > 1
        assert wait_until(lambda: server.registry.get_sample_value("nmt_live_rows") == 0, timeout=5)
    finally:
        channel.close()


def test_encoder_failure_is_internal(server_factory, monkeypatch):
    server = server_factory()
    _fail_once(monkeypatch, server.engines["tiny"].bundle.model, "encode")
    channel, stub = stub_for(server.port)
    try:
        exc = rpc_error(lambda: stub.Translate(_request(), timeout=3))
        assert exc.code() == grpc.StatusCode.INTERNAL, exc.code()
    finally:
        channel.close()


def test_server_recovers_after_encoder_failure(server_factory, monkeypatch):
    server = server_factory()
    _fail_once(monkeypatch, server.engines["tiny"].bundle.model, "encode")
    channel, stub = stub_for(server.port)
    try:
        rpc_error(lambda: stub.Translate(_request(), timeout=3))
        assert len(stub.Translate(_request(), timeout=10).translations) == 1
        assert wait_until(lambda: server.registry.get_sample_value("nmt_live_rows") == 0, timeout=5)
    finally:
        channel.close()


def _unary(stub):
    return stub.Translate(_request(), timeout=10)


def _stream(stub):
    return list(
        stub.TranslateStream(pb.TranslateStreamRequest(text="A short sentence."), timeout=10)
    )


# What fails, and the call that meets the failure while a long request is decoding.
FAILURES = {
    # an encoder batch: its own requests fail, rows already decoding carry on
    "encoder": (lambda server: (server.engines["tiny"].bundle.model, "encode"), _unary),
    # a sentence that has left the loop, while its result is built: it must fail its
    # own request (not hang it, not fail the others) and give back its rows
    "finishing": (lambda server: (SentenceSearch, "results"), _unary),
    # handing a decoded prefix to a stream: only that stream fails
    "streaming": (lambda server: (SentenceSearch, "stable_prefix"), _stream),
}


@pytest.mark.parametrize("failure", list(FAILURES))
def test_failure_leaves_requests_in_flight_alone(server_factory, tiny_bundle, monkeypatch, failure):
    target, call = FAILURES[failure]
    server = server_factory(max_live_rows=40, max_beam_size=6, max_target_length=4000)
    channel, stub = stub_for(server.port)
    try:
        long = _long_request(tiny_bundle, sentences=4)  # 20 of 40 rows: room for more
        alone = stub.Translate(long, timeout=60)
        reg = server.registry
        future = stub.Translate.future(long, timeout=60)
        assert wait_until(lambda: reg.get_sample_value("nmt_live_rows") > 0, timeout=5)
        _fail_once(monkeypatch, *target(server))
        exc = rpc_error(lambda: call(stub))
        assert exc.code() == grpc.StatusCode.INTERNAL
        assert not future.done()  # the failure did not end the request in flight
        assert future.result().translations == alone.translations
        assert wait_until(lambda: reg.get_sample_value("nmt_live_rows") == 0, timeout=5)
        assert server.engines["tiny"]._rows_reserved == 0
        assert len(_unary(stub).translations) == 1
    finally:
        channel.close()
