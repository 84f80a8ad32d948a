"""gRPC calls of the docker tests, made from the host with the project's own stubs, and
calls of the HTTP/JSON API with the standard library's client.

The one place the docker tests import the generated stubs."""

from __future__ import annotations

import http.client
import json
import threading
import time
from dataclasses import dataclass, field

import grpc

from nmt_api import REQUEST_ID_HEADER
from nmt_api.nmt.v1 import translator_pb2 as pb
from nmt_api.nmt.v1 import translator_pb2_grpc as pb_grpc

TIMEOUT = 30.0
SENTENCES = (
    "The cat sat on the mat.",
    "A small dog barked at the man.",
    "He walked to the old house.",
    "The dog is sleeping in the garden.",
)


def translate(port: int, text: str = SENTENCES[0], beam: int = 1) -> list[str]:
    """The n-best texts of one Translate call to 127.0.0.1:``port``."""
    options = pb.DecodeOptions(
        strategy=pb.STRATEGY_BEAM if beam > 1 else pb.STRATEGY_GREEDY,
        beam_size=beam,
        n_best=min(beam, 2),
    )
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        reply = pb_grpc.TranslatorStub(channel).Translate(
            pb.TranslateRequest(texts=[text], options=options), timeout=TIMEOUT
        )
    (translation,) = reply.translations
    return [h.text for h in translation.hypotheses]


def http_translate(port: int, text: str = SENTENCES[0]) -> tuple[str, str]:
    """``(best text, ready status)`` from the HTTP API on 127.0.0.1:``port``: a POST of
    /v1/translate and a GET of /v1/health/ready, on one keep-alive connection."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
    try:
        conn.request("POST", "/v1/translate", body=json.dumps({"texts": [text]}))
        response = conn.getresponse()
        reply = json.loads(response.read())
        assert response.status == 200, reply
        conn.request("GET", "/v1/health/ready")
        ready = json.loads(conn.getresponse().read())["status"]
    finally:
        conn.close()
    (translation,) = reply["translations"]
    return translation["hypotheses"][0]["text"], ready


def list_models(port: int) -> list[tuple[str, str]]:
    """``(name, execution provider)`` of every model the server at ``port`` has loaded."""
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        reply = pb_grpc.TranslatorStub(channel).ListModels(pb.ListModelsRequest(), timeout=TIMEOUT)
    return [(m.name, m.execution_provider) for m in reply.models]


@dataclass
class Call:
    started: float  # time.monotonic()
    seconds: float
    code: str  # "OK" or the gRPC status name
    details: str
    request_id: str  # sent as x-request-id: the load balancer logs it


@dataclass
class Stream:
    """Unary Translate calls in a closed loop from ``clients`` threads, each on its own
    channel, until stop(): every call recorded."""

    port: int
    clients: int = 4
    calls: list[Call] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)

    def _loop(self, index: int) -> None:
        with grpc.insecure_channel(f"127.0.0.1:{self.port}") as channel:
            stub = pb_grpc.TranslatorStub(channel)
            n = 0
            while not self._stop.is_set():
                request = pb.TranslateRequest(texts=[SENTENCES[(index + n) % len(SENTENCES)]])
                request_id = f"stream-{index}-{n}"
                start = time.monotonic()
                try:
                    stub.Translate(
                        request, timeout=TIMEOUT, metadata=((REQUEST_ID_HEADER, request_id),)
                    )
                    code, details = "OK", ""
                except grpc.RpcError as exc:
                    code, details = exc.code().name, exc.details() or ""
                self.calls.append(Call(start, time.monotonic() - start, code, details, request_id))
                n += 1

    def start(self) -> Stream:
        for i in range(self.clients):
            thread = threading.Thread(target=self._loop, args=(i,), name=f"stream-{i}")
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> list[Call]:
        self._stop.set()
        for thread in self._threads:
            thread.join(TIMEOUT + 5)
        return list(self.calls)
