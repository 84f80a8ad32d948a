"""Issue 17 item 3, from outside: a server whose scheduler dies or stalls stops answering
SERVING (so the orchestrator's health check restarts it) instead of being a zombie."""

from __future__ import annotations

import threading

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from nmt_api.nmt.v1 import translator_pb2 as pb
from tests.service.server_helpers import TIMEOUT, rpc_error, stub_for, wait_until

NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def _status(channel: grpc.Channel) -> int:
    stub = health_pb2_grpc.HealthStub(channel)
    return stub.Check(health_pb2.HealthCheckRequest(), timeout=5).status


def test_dead_scheduler_turns_health_not_serving(server_factory, monkeypatch):
    server = server_factory()
    engine = server.engines["tiny"]
    channel, stub = stub_for(server.port)
    try:
        assert _status(channel) == health_pb2.HealthCheckResponse.SERVING

        def admit_now():
            raise RuntimeError("injected scheduler bug")

        monkeypatch.setattr(engine, "_admit_now", admit_now)  # escapes the scheduler loop
        exc = rpc_error(lambda: stub.Translate(pb.TranslateRequest(texts=["Hi."]), timeout=TIMEOUT))
        assert exc.code() == grpc.StatusCode.INTERNAL  # failed, not hung
        assert server.failed.wait(5), "the watchdog did not notice"
        assert "scheduler thread failed" in server.failure
        assert _status(channel) == NOT_SERVING
        exc = rpc_error(lambda: stub.Translate(pb.TranslateRequest(texts=["Hi."]), timeout=5))
        assert exc.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        channel.close()


def test_stalled_scheduler_turns_health_not_serving(server_factory, monkeypatch):
    server = server_factory(stall_timeout=1.0)
    model = server.engines["tiny"].bundle.model
    release = threading.Event()
    real = model.step

    def stuck(*args, **kwargs):
        release.wait(TIMEOUT)
        return real(*args, **kwargs)

    monkeypatch.setattr(model, "step", stuck)
    channel, stub = stub_for(server.port)
    try:
        future = stub.Translate.future(pb.TranslateRequest(texts=["Hi."]), timeout=TIMEOUT)
        assert server.failed.wait(10), "the watchdog did not notice the stall"
        assert "no progress" in server.failure
        assert wait_until(lambda: _status(channel) == NOT_SERVING)
    finally:
        release.set()
        future.cancel()
        channel.close()
