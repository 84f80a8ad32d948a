"""Review findings on the grpc.aio servicer: a slow stream reader still gets its
deadline, a stop with calls in flight counts and cancels them, a huge reply is refused
before it is built."""

from __future__ import annotations

import logging
import threading
import time

import grpc
import numpy as np
import pytest

from models.options import Hypothesis
from nmt_api.nmt.v1 import translator_pb2 as pb
from service.calls import RpcConfig
from service.errors import InvalidRequest
from tests.service.server_helpers import (
    LOOP_SENTENCE,
    TIMEOUT,
    proto_options,
    slow_decoder,
    stub_for,
    wait_until,
)

LONG = dict(max_length=4000, max_length_ratio=100.0)


def _counted(registry, method: str) -> dict[str, float]:
    return {
        s.labels["code"]: s.value
        for family in registry.collect()
        for s in family.samples
        if s.name == "nmt_requests_total" and s.labels["method"] == method and s.value
    }


def test_a_stream_whose_reader_stalls_still_ends_at_the_default_deadline(
    server_factory, tiny_bundle, monkeypatch
):
    server = server_factory(server={"rpc": RpcConfig(default_timeout=1.5)}, max_target_length=4000)
    slow_decoder(monkeypatch, server)  # the decode outlasts the deadline on any machine
    channel, stub = stub_for(server.port)
    request = pb.TranslateStreamRequest(
        text=tiny_bundle.sentences[LOOP_SENTENCE], options=proto_options(beam=5, **LONG)
    )
    stream = stub.TranslateStream(request)  # no client deadline
    next(stream)
    time.sleep(2.5)  # not reading: the server blocks on flow control, then its deadline
    outcome: list = []

    def read() -> None:
        try:
            for _ in stream:
                pass
            outcome.append("OK")
        except grpc.RpcError as exc:
            outcome.append(exc.code())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(TIMEOUT)
    channel.close()
    assert outcome == [grpc.StatusCode.DEADLINE_EXCEEDED], "the stream never ended"
    late = {"DEADLINE_EXCEEDED": 1}
    assert wait_until(lambda: _counted(server.registry, "TranslateStream") == late)
    assert wait_until(lambda: server.registry.get_sample_value("nmt_inflight_requests") == 0)


def test_stop_with_calls_in_flight_counts_and_cancels_them(server_factory, tiny_bundle, caplog):
    server = server_factory(max_target_length=4000, server={"drain_announce": 0.0})
    channel, stub = stub_for(server.port)
    text = tiny_bundle.sentences[LOOP_SENTENCE]
    unary = [
        stub.Translate.future(
            pb.TranslateRequest(texts=[text] * 2, options=proto_options(beam=5, **LONG)),
            timeout=TIMEOUT,
        )
        for _ in range(3)
    ]
    streams = [
        stub.TranslateStream(
            pb.TranslateStreamRequest(text=text, options=proto_options(beam=5, **LONG)),
            timeout=TIMEOUT,
        )
        for _ in range(3)
    ]
    for stream in streams:
        next(stream)
    assert wait_until(lambda: server.registry.get_sample_value("nmt_inflight_requests") == 6)
    with caplog.at_level(logging.WARNING):
        server.stop(0.5)
    channel.close()
    registry = server.registry
    assert sum(_counted(registry, "Translate").values()) == 3
    assert sum(_counted(registry, "TranslateStream").values()) == 3
    assert registry.get_sample_value("nmt_inflight_requests") == 0
    engine = server.engines["tiny"]
    assert not engine._thread.is_alive(), "a job kept the scheduler decoding after stop()"
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, errors
    assert all(f.done() for f in unary)


def test_a_reply_whose_attention_alone_is_over_the_limit_is_never_built(server_factory):
    server = server_factory(server={"rpc": RpcConfig(max_message_bytes=1 << 20)})
    attention = np.zeros((300, 128), dtype=np.float32)  # 153,600 bytes a hypothesis
    nbest = [[Hypothesis(tokens=(5,) * 299, score=0.0, log_prob=0.0, attention=attention)] * 4] * 2

    def make():
        raise AssertionError("built a reply that was going to be refused")

    with pytest.raises(InvalidRequest, match=r"the reply would be 1228800 bytes, over the 1048576"):
        server.servicer.replies.build(make, nbest, True)
