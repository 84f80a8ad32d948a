"""Clients that misbehave, for the reliability tests and the attack and soak harnesses:
calls that never send their request message, raw bodies that are not valid messages,
health latency sampling, closed-loop overload."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

TRANSLATE = "/nmt.v1.Translator/Translate"


def own_channel(port: int) -> grpc.Channel:
    """A channel on a connection of its own (grpc shares connections between channels to
    the same target by default: an attacker's connection must not be the victim's)."""
    return grpc.insecure_channel(
        f"127.0.0.1:{port}", options=[("grpc.use_local_subchannel_pool", 1)]
    )


class HalfOpenCalls:
    """``count`` Translate calls that send their headers and never their message."""

    def __init__(self, port: int, count: int) -> None:
        self.channel = own_channel(port)
        self.release = threading.Event()
        call = self.channel.stream_unary(TRANSLATE)
        self.futures = [call.future(self._never()) for _ in range(count)]

    def _never(self) -> Iterator[bytes]:
        self.release.wait()
        yield from ()

    def close(self) -> None:
        self.release.set()
        self.channel.close()


def raw_translate(channel: grpc.Channel, body: bytes, timeout: float = 10.0) -> bytes:
    """A Translate call whose body is ``body`` as is."""
    return channel.unary_unary(TRANSLATE)(body, timeout=timeout)


def invalid_utf8_request() -> bytes:
    """A TranslateRequest whose ``texts[0]`` (field 1, length-delimited) is not UTF-8."""
    text = b"caf\xe9 \xff\xfe"
    return bytes([0x0A, len(text)]) + text


def health_latencies(port: int, stop: threading.Event, every: float = 0.02) -> list:
    """Health checks on a connection of their own until ``stop``: a latency in seconds
    per check, or the status code of a failed one."""
    out: list = []
    channel = own_channel(port)
    stub = health_pb2_grpc.HealthStub(channel)
    try:
        while not stop.is_set():
            start = time.monotonic()
            try:
                reply = stub.Check(health_pb2.HealthCheckRequest(), timeout=2.0)
                out.append(time.monotonic() - start if reply.status == 1 else "NOT_SERVING")
            except grpc.RpcError as exc:
                out.append(exc.code().name)
            stop.wait(every)
    finally:
        channel.close()
    return out


def closed_loop(clients: int, seconds: float, call: Callable[[], object]) -> Counter[str]:
    """``clients`` threads calling ``call`` back to back for ``seconds``: status names."""
    tally: Counter[str] = Counter()
    lock = threading.Lock()
    end = time.monotonic() + seconds

    def run() -> None:
        while time.monotonic() < end:
            try:
                call()
                code = "OK"
            except grpc.RpcError as exc:
                code = exc.code().name
            with lock:
                tally[code] += 1

    threads = [threading.Thread(target=run) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return tally


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
