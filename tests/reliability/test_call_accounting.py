"""Issue 17 item 4: every call the server receives ends in exactly one
``nmt_requests_total`` increment and one latency observation, with the status the client
saw: a scripted mix of every outcome, client tally = counter = histogram count."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter

import grpc

from loadtest.hostile import HalfOpenCalls, invalid_utf8_request, raw_translate
from nmt_api.nmt.v1 import translator_pb2 as pb
from service.calls import RpcConfig
from tests.service.server_helpers import TIMEOUT, proto_options, slow_decoder, stub_for, wait_until

LONG = dict(beam=5, max_length=4000, max_length_ratio=100.0)


def _code(call) -> str:
    try:
        call()
    except grpc.RpcError as exc:
        return exc.code().name
    return "OK"


def _served(registry, metric: str) -> Counter:
    """``(method, code) -> value`` over every series of ``metric``, strategies summed."""
    out: Counter = Counter()
    for family in registry.collect():
        for sample in family.samples:
            if sample.name == metric:
                out[(sample.labels["method"], sample.labels["code"])] += sample.value
    return +out


def test_every_call_is_counted_once_with_its_real_code(
    server_factory, tiny_bundle, caplog, monkeypatch
):
    server = server_factory(
        server={"rpc": RpcConfig(max_inflight=2, receive_timeout=1.0, max_message_bytes=64 << 10)},
        max_target_length=4000,
    )
    # The long calls outlast their deadlines and cancels on any machine (unslowed, the
    # 0.5 s stream once ended OK on a fast one).
    slow_decoder(monkeypatch, server)
    channel, stub = stub_for(server.port)
    long_text = tiny_bundle.sentences[0]
    long = pb.TranslateRequest(texts=[long_text] * 2, options=proto_options(**LONG))
    long_stream = pb.TranslateStreamRequest(text=long_text, options=proto_options(**LONG))
    tally: Counter = Counter()

    def note(method: str, code: str) -> None:
        tally[(method, code)] += 1

    try:
        for text in tiny_bundle.sentences[1:4]:
            note("Translate", _code(lambda t=text: stub.Translate(pb.TranslateRequest(texts=[t]))))
        for text in tiny_bundle.sentences[4:6]:
            stream = pb.TranslateStreamRequest(text=text)
            note("TranslateStream", _code(lambda s=stream: list(stub.TranslateStream(s))))
        note("ListModels", _code(lambda: stub.ListModels(pb.ListModelsRequest())))
        bad = pb.TranslateRequest(texts=["Hi."], options=proto_options(beam=99))
        note("Translate", _code(lambda: stub.Translate(bad)))
        note("Translate", _code(lambda: raw_translate(channel, invalid_utf8_request())))
        note("Translate", _code(lambda: raw_translate(channel, b"\xff\xff\xff")))
        unknown = pb.TranslateRequest(texts=["Hi."], model="x" * 10_000)
        note("Translate", _code(lambda: stub.Translate(unknown)))
        huge = pb.TranslateRequest(texts=["word " * 20_000])  # over 64 KiB
        note("Translate", _code(lambda: stub.Translate(huge)))
        # Client deadlines passing on the server, unary and stream.
        note("Translate", _code(lambda: stub.Translate(long, timeout=0.3)))
        note("TranslateStream", _code(lambda: list(stub.TranslateStream(long_stream, timeout=0.5))))
        # The client cancels: a unary call, and a stream after its first message.
        future = stub.Translate.future(long, timeout=TIMEOUT)
        time.sleep(0.3)
        future.cancel()
        note("Translate", "CANCELLED")
        stream = stub.TranslateStream(long_stream, timeout=TIMEOUT)
        next(stream)
        stream.cancel()
        note("TranslateStream", "CANCELLED")
        # Two long calls in flight: the third is refused (max_inflight=2). First the
        # cancelled calls leave, or one of them could count as one of the two.
        assert wait_until(lambda: server.registry.get_sample_value("nmt_inflight_requests") == 0)
        held = [stub.Translate.future(long, timeout=TIMEOUT) for _ in range(2)]
        assert wait_until(lambda: server.registry.get_sample_value("nmt_inflight_requests") == 2)
        note("Translate", _code(lambda: stub.Translate(pb.TranslateRequest(texts=["Hi."]))))
        for f in held:
            f.cancel()
            note("Translate", "CANCELLED")
        # A call that never sends its message.
        attack = HalfOpenCalls(server.port, 1)
        try:
            exc = attack.futures[0].exception(timeout=TIMEOUT)
            note("Translate", exc.code().name)
        finally:
            attack.close()
        # A reply over the message limit.
        big = pb.TranslateRequest(
            texts=list(tiny_bundle.sentences[:30]),
            options=proto_options(beam=4, n_best=4, return_attention=True, max_length=40),
        )
        note("Translate", _code(lambda: stub.Translate(big, timeout=TIMEOUT)))
    finally:
        channel.close()

    expected = {
        ("Translate", "OK"): 3,
        ("TranslateStream", "OK"): 2,
        ("ListModels", "OK"): 1,
        ("Translate", "INVALID_ARGUMENT"): 5,
        ("Translate", "RESOURCE_EXHAUSTED"): 2,
        ("Translate", "DEADLINE_EXCEEDED"): 2,
        ("TranslateStream", "DEADLINE_EXCEEDED"): 1,
        ("Translate", "CANCELLED"): 3,
        ("TranslateStream", "CANCELLED"): 1,
    }
    assert dict(tally) == expected
    registry = server.registry
    counted = lambda: _served(registry, "nmt_requests_total")  # noqa: E731
    wait_until(lambda: counted() == tally, timeout=10)
    assert dict(counted()) == dict(tally)
    assert _served(registry, "nmt_request_duration_seconds_count") == tally
    assert registry.get_sample_value("nmt_inflight_requests") == 0
    assert threading.active_count() < 200
    # Every outcome is expected: nothing logged as an error, no traceback.
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert not errors, [r.getMessage() for r in errors]
