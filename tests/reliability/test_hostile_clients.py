"""Issue 17, from outside: half-open calls, overload and bad bytes never lock anyone out
or flood the log; every call is answered with a precise status."""

from __future__ import annotations

import logging
import threading

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from loadtest.hostile import (
    HalfOpenCalls,
    closed_loop,
    health_latencies,
    invalid_utf8_request,
    own_channel,
    percentile,
    raw_translate,
)
from nmt_api.nmt.v1 import translator_pb2 as pb
from service.calls import RpcConfig
from tests.service.server_helpers import (
    TIMEOUT,
    proto_options,
    rpc_error,
    slow_decoder,
    stub_for,
    wait_until,
)

# More than the 128 handler threads the server had before it moved to grpc.aio.
HALF_OPEN = 150


def _requests(server, method: str, code: str) -> float:
    labels = {"method": method, "code": code}
    return server.registry.get_sample_value("nmt_requests_total", labels) or 0.0


def test_half_open_calls_lock_nobody_out(server_factory):
    server = server_factory(server={"rpc": RpcConfig(receive_timeout=3.0)})
    attack = HalfOpenCalls(server.port, HALF_OPEN)
    channel, stub = stub_for(server.port)
    stop = threading.Event()
    try:
        # While all the calls wait for their message: health and translations answered.
        threading.Timer(2.0, stop.set).start()
        latencies = health_latencies(server.port, stop)
        assert latencies and all(isinstance(x, float) for x in latencies), latencies
        print(f"health p99 under {HALF_OPEN} half-open calls: {percentile(latencies, 0.99):.4f} s")
        reply = stub.Translate(pb.TranslateRequest(texts=["Hello."]), timeout=5)
        assert len(reply.translations) == 1
        # Then each half-open call ends, named as what it is.
        for future in attack.futures:
            exc = future.exception(timeout=TIMEOUT)
            assert exc is not None and exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            assert "no request message within 3 s" in exc.details()
        assert _requests(server, "Translate", "DEADLINE_EXCEEDED") == HALF_OPEN
    finally:
        stop.set()
        attack.close()
        channel.close()


def test_health_is_never_refused_under_overload(server_factory, tiny_bundle):
    """Three times more closed-loop clients than translations allowed in flight: the
    surplus is refused by the servicer (counted, with a retry hint), health never."""
    server = server_factory(server={"rpc": RpcConfig(max_inflight=4)})
    channel, stub = stub_for(server.port)
    request = pb.TranslateRequest(
        texts=list(tiny_bundle.sentences[1:5]), options=proto_options(beam=3, max_length=40)
    )
    refusals: list[str] = []

    def call() -> None:
        try:
            stub.Translate(request, timeout=TIMEOUT)
        except grpc.RpcError as exc:
            refusals.append(exc.details())
            raise

    stop = threading.Event()
    checks: list = []
    watcher = threading.Thread(target=lambda: checks.extend(health_latencies(server.port, stop)))
    watcher.start()
    try:
        tally = closed_loop(12, 3.0, call)
    finally:
        stop.set()
        watcher.join()
        channel.close()
    assert set(tally) <= {"OK", "RESOURCE_EXHAUSTED"} and tally["OK"] > 0, tally
    assert tally["RESOURCE_EXHAUSTED"] > 0, "not overloaded: raise the client count"
    assert all("retry with backoff" in d for d in refusals)
    rejected = server.registry.get_sample_value(
        "nmt_rejected_requests_total", {"reason": "too_many_inflight"}
    )
    assert rejected == tally["RESOURCE_EXHAUSTED"]
    assert checks and all(isinstance(x, float) for x in checks), checks
    print(f"health p99 under 3x overload: {percentile(checks, 0.99):.4f} s; {dict(tally)}")


@pytest.mark.parametrize(
    "body",
    [invalid_utf8_request(), b"\xff\xff\xff\xff", b"\x0a\x7f"],
    ids=["invalid-utf8", "garbage", "truncated"],
)
def test_bad_bytes_are_invalid_argument_and_logged_once(server_factory, body, caplog):
    server = server_factory()
    channel = own_channel(server.port)
    try:
        with caplog.at_level(logging.WARNING):
            for _ in range(20):
                exc = rpc_error(lambda: raw_translate(channel, body))
                assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT
                assert "not a valid nmt.v1.TranslateRequest" in exc.details()
                assert "UTF-8" in exc.details()
        # The server still translates, and logged one line, no traceback, for 20 calls.
        reply = raw_translate(channel, pb.TranslateRequest(texts=["Hi."]).SerializeToString())
        assert len(pb.TranslateResponse.FromString(reply).translations) == 1
    finally:
        channel.close()
    # warnings and worse: a test that configured logging before may leave INFO on, and
    # the server's start-up lines are no complaint about the bad bytes
    lines = [
        r for r in caplog.records if r.name.startswith("service") and r.levelno >= logging.WARNING
    ]
    assert len(lines) <= 1 and not any(r.exc_info for r in caplog.records), lines
    assert _requests(server, "Translate", "INVALID_ARGUMENT") == 20


def test_request_without_deadline_gets_the_default_one(server_factory, tiny_bundle, monkeypatch):
    server = server_factory(server={"rpc": RpcConfig(default_timeout=0.5)}, max_target_length=4000)
    slow_decoder(monkeypatch, server)  # the decode outlasts the deadline on any machine
    channel, stub = stub_for(server.port)
    request = pb.TranslateRequest(
        texts=[tiny_bundle.sentences[0]] * 4,
        options=proto_options(beam=5, max_length=4000, max_length_ratio=100.0),
    )
    try:
        exc = rpc_error(lambda: stub.Translate(request))  # no client deadline
        assert exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        stream = stub.TranslateStream(
            pb.TranslateStreamRequest(text=request.texts[0], options=request.options)
        )
        exc = rpc_error(lambda: list(stream))
        assert exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    finally:
        channel.close()
    assert wait_until(lambda: server.registry.get_sample_value("nmt_live_rows") == 0, timeout=5)


def test_reply_over_the_limit_is_refused_up_front(server_factory, tiny_bundle):
    server = server_factory(server={"rpc": RpcConfig(max_message_bytes=16 * 1024)})
    channel, stub = stub_for(server.port)
    big = pb.TranslateRequest(
        texts=list(tiny_bundle.sentences[:20]),
        options=proto_options(beam=4, n_best=4, return_attention=True, max_length=40),
    )
    try:
        exc = rpc_error(lambda: stub.Translate(big, timeout=TIMEOUT))
        assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "over the 16384-byte limit (--max-message-bytes" in exc.details()
        small = pb.TranslateRequest(texts=["Hi."])
        assert len(stub.Translate(small, timeout=TIMEOUT).translations) == 1
        # gRPC refuses a request over the limit itself (the client has its status at
        # once); the servicer, whose read of the message then fails, still counts it, a
        # moment later: a loaded server's event loop may count it after the client has
        # its answer (CI once read the counter too early).
        huge = pb.TranslateRequest(texts=["word " * 8000])
        exc = rpc_error(lambda: stub.Translate(huge, timeout=TIMEOUT))
        assert exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    finally:
        channel.close()
    assert wait_until(lambda: _requests(server, "Translate", "RESOURCE_EXHAUSTED") == 1, timeout=5)
    assert _requests(server, "Translate", "CANCELLED") == 0


def test_health_check_answers_on_its_own_when_translate_is_flooded(server_factory):
    """Health's own stub on the *same* connection as the flood: still answered."""
    server = server_factory(server={"rpc": RpcConfig(receive_timeout=2.0)})
    attack = HalfOpenCalls(server.port, 100)
    try:
        stub = health_pb2_grpc.HealthStub(attack.channel)
        reply = stub.Check(health_pb2.HealthCheckRequest(), timeout=2.0)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
    finally:
        attack.close()
