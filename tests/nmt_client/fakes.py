"""A fake ``nmt.v1.Translator`` on loopback whose answers a test scripts, and which counts
the calls it received: for what a real server does too rarely or too fast to test
(overload twice then OK, a slow reply, an UNAVAILABLE in the middle of a call)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field

import grpc

from nmt_api import RETRY_HINT
from nmt_api.nmt.v1 import translator_pb2 as pb
from nmt_api.nmt.v1 import translator_pb2_grpc as pb_grpc

BUSY = f"request queue is full (1 waiting); {RETRY_HINT}"


@dataclass
class Script:
    """What the fake answers: ``failures`` (code, message) in turn, then OK after
    ``delay`` seconds; ``calls`` counts every call received, ``received`` keeps them."""

    failures: list[tuple[grpc.StatusCode, str]] = field(default_factory=list)
    delay: float = 0.0
    calls: int = 0
    received: list[pb.TranslateRequest] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class FakeTranslator(pb_grpc.TranslatorServicer):
    def __init__(self, script: Script) -> None:
        self.script = script

    def Translate(self, request, context):  # noqa: N802
        with self.script.lock:
            self.script.calls += 1
            self.script.received.append(request)
            failure = self.script.failures.pop(0) if self.script.failures else None
        if failure is not None:
            context.abort(*failure)
        time.sleep(self.script.delay)
        reply = pb.TranslateResponse(model="fake", model_version="1")
        for text in request.texts:
            t = reply.translations.add(source_tokens=len(text.split()))
            t.hypotheses.add(text=text.upper(), tokens=text.split(), score=-0.5, log_prob=-1.0)
        return reply


@contextmanager
def fake_server(script: Script) -> Iterator[str]:
    """A started fake on a free 127.0.0.1 port: yields ``"127.0.0.1:PORT"``."""
    server = grpc.server(ThreadPoolExecutor(max_workers=4))
    pb_grpc.add_TranslatorServicer_to_server(FakeTranslator(script), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop(0)
