"""The HTTP/JSON API (``--http-port``, ``service/httpapi.py``) against a real server on
loopback, read by the standard library's HTTP client: the same answers as gRPC, the same
errors and counts, deadlines, hang-ups, limits, health, drain and TLS."""

from __future__ import annotations

import http.client
import json
import logging
import socket
import ssl
import threading
import time
import zlib
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
from google.protobuf import json_format

from nmt_api.nmt.v1 import translator_pb2 as pb
from service import httpconn
from service.calls import RpcConfig
from service.config import ServerConfig
from service.flags import parse_args
from service.httpapi import GET_ONLY, OPENAPI, ROUTES
from service.httpconn import COMPRESS_BYTES, accepted_coding
from service.httpgrpc import HTTP_STATUS, deadline_of
from service.server import ServerError
from service.sessions import RuntimeConfig
from tests.service.server_helpers import (
    LOOP_SENTENCE,
    TIMEOUT,
    mixed_requests,
    proto_options,
    rpc_error,
    slow_decoder,
    stub_for,
    wait_until,
)

MAX_BODY = 256 * 1024  # room for the attention test's reply and a body parsed off the loop


@pytest.fixture(scope="module")
def server(server_factory):
    # one decoder step a call, so slow_decoder slows greedy too
    runtime = RuntimeConfig(providers=("cpu",), intra_op_threads=1, greedy_steps=1)
    return server_factory(
        server={"http_port": 0, "rpc": RpcConfig(max_message_bytes=MAX_BODY), "runtime": runtime},
        max_target_length=4000,
    )


def call(port: int, method: str, path: str, body=None, headers=None, *, tls=None):
    """``(status, headers with lower-case names, body bytes)`` of one request (HTTPS with
    the ``tls`` context)."""
    if tls is None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
    else:
        conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=TIMEOUT, context=tls)
    data = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
    try:
        conn.request(method, path, body=data, headers=headers or {})
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def post(server, path: str, body, **headers):
    return call(server.http_port, "POST", path, body, headers)


def as_message(data: bytes, message_type):
    return json_format.Parse(data, message_type())


def without_timing(message):
    message.ClearField("timing")
    return message


def events(data: bytes) -> list[tuple[str, dict]]:
    """Server-sent events as ``(event name, JSON data)``."""
    out = []
    for block in data.decode().split("\n\n"):
        if not block.strip():
            continue
        fields = dict(line.split(": ", 1) for line in block.split("\n"))
        out.append((fields.get("event", "message"), json.loads(fields["data"])))
    return out


def requests_counted(server, method: str, code: str) -> float:
    labels = {"method": method, "code": code}
    return server.registry.get_sample_value("nmt_requests_total", labels) or 0.0


# -- the same answers as gRPC ------------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        proto_options(),
        proto_options(beam=4, n_best=3, return_scores=True),
        proto_options(beam=2, return_attention=True, return_token_scores=True),
        proto_options(return_diagnostics=True, return_scores=True, length_penalty=0.5),
    ],
    ids=["greedy", "beam4-nbest3-scores", "attention-token-scores", "diagnostics"],
)
def test_translate_answers_as_grpc_does(server, stub, tiny_bundle, options):
    request = pb.TranslateRequest(texts=tiny_bundle.sentences[:3], options=options)
    want = stub.Translate(request, timeout=TIMEOUT)
    body = json_format.MessageToDict(request, preserving_proto_field_name=True)
    status, headers, data = post(server, "/v1/translate", body)
    assert status == 200, data
    assert headers["content-type"].startswith("application/json")
    got = as_message(data, pb.TranslateResponse)
    assert without_timing(got) == without_timing(want)  # every float32 as it was
    assert json.loads(data)["translations"][0]["hypotheses"][0]["text"]  # proto names


def test_camel_case_fields_are_read_too(server, stub, tiny_bundle):
    text = tiny_bundle.sentences[1]
    want = stub.Translate(
        pb.TranslateRequest(texts=[text], options=pb.DecodeOptions(beam_size=3, n_best=2)),
        timeout=TIMEOUT,
    )
    body = {"texts": [text], "options": {"beamSize": 3, "nBest": 2}}
    status, _, data = post(server, "/v1/translate", body)
    assert status == 200, data
    assert without_timing(as_message(data, pb.TranslateResponse)) == without_timing(want)


def test_score_and_list_models_answer_as_grpc_does(server, stub, tiny_bundle):
    texts = list(tiny_bundle.sentences[:2])
    targets = [
        h.hypotheses[0].text
        for h in stub.Translate(pb.TranslateRequest(texts=texts), timeout=TIMEOUT).translations
    ]
    request = pb.ScoreRequest(texts=texts, targets=targets)
    want = stub.Score(request, timeout=TIMEOUT)
    status, _, data = post(server, "/v1/score", json_format.MessageToDict(request))
    assert status == 200, data
    assert without_timing(as_message(data, pb.ScoreResponse)) == without_timing(want)

    status, _, data = call(server.http_port, "GET", "/v1/models")
    assert status == 200, data
    assert as_message(data, pb.ListModelsResponse) == stub.ListModels(
        pb.ListModelsRequest(), timeout=TIMEOUT
    )


@pytest.mark.parametrize("beam", [1, 3])
def test_stream_sends_events_as_grpc_sends_messages(server, stub, tiny_bundle, beam):
    request = pb.TranslateStreamRequest(
        text=tiny_bundle.sentences[5], options=proto_options(beam=beam)
    )
    want = list(stub.TranslateStream(request, timeout=TIMEOUT))
    status, headers, data = post(server, "/v1/translate/stream", json_format.MessageToDict(request))
    assert status == 200, data
    assert headers["content-type"] == "text/event-stream"
    got = events(data)
    assert {name for name, _ in got} == {"message"}
    messages = [json_format.ParseDict(fields, pb.TranslateStreamResponse()) for _, fields in got]
    assert [without_timing(m) for m in messages] == [without_timing(m) for m in want]
    assert "".join(m.delta for m in messages) == messages[-1].text
    assert messages[-1].final and not any(m.final for m in messages[:-1])


def test_answers_under_concurrent_load_match_grpc(server, stub, tiny_bundle):
    """Requests of mixed beams in flight at once: each answer is the one gRPC gives the
    same request (a translation does not depend on its batch mates)."""
    requests = mixed_requests(tiny_bundle.sentences, n=24)
    want = [without_timing(stub.Translate(r, timeout=TIMEOUT)) for r in requests]

    def one(request):
        status, _, data = post(server, "/v1/translate", json_format.MessageToDict(request))
        assert status == 200, data
        return without_timing(as_message(data, pb.TranslateResponse))

    with ThreadPoolExecutor(12) as pool:
        got = list(pool.map(one, requests))
    for g, w in zip(got, want, strict=True):
        assert [[h.text for h in t.hypotheses] for t in g.translations] == [
            [h.text for h in t.hypotheses] for t in w.translations
        ]
        for gt, wt in zip(g.translations, w.translations, strict=True):
            for gh, wh in zip(gt.hypotheses, wt.hypotheses, strict=True):
                assert gh.score == pytest.approx(wh.score, abs=1e-4)


# -- errors -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (b"", "not a JSON nmt.v1.TranslateRequest"),
        (b"not json", "not a JSON nmt.v1.TranslateRequest"),
        (b"[1, 2]", "not a JSON nmt.v1.TranslateRequest"),
        (b'{"txts": ["a"]}', 'no field named "txts"'),
        (b'{"texts": "a"}', "not a JSON nmt.v1.TranslateRequest"),
        (b'{"texts": ["a"], "options": {"beam_size": -1}}', "not a JSON"),
        (b'{"texts": ["a"], "options": {"length_penalty": "NaN"}}', "length_penalty"),
        (b'{"texts": ["a"], "options": {"temperature": "Infinity"}}', "temperature"),
        (b'{"texts": ["a"], "model": "nope"}', "unknown model 'nope'"),
        (b'{"texts": []}', "texts"),
        (b"\xff\xfe{}", "not a JSON"),
        ('{"texts": ["' + "x" * 3000 + '"], "bad": 1}', "no field named"),
    ],
    ids=[
        "empty",
        "not-json",
        "a-list",
        "unknown-field",
        "wrong-type",
        "negative-uint",
        "nan",
        "infinity",
        "unknown-model",
        "no-texts",
        "not-utf8",
        "long-echo",
    ],
)
def test_a_bad_request_is_400_with_grpcs_reason_and_counted(server, body, match):
    before = requests_counted(server, "Translate", "INVALID_ARGUMENT")
    data = body.encode() if isinstance(body, str) else body
    status, headers, reply = post(server, "/v1/translate", data)
    assert status == 400, reply
    error = json.loads(reply)
    assert error["code"] == 3 and error["status"] == "INVALID_ARGUMENT"
    assert match in error["message"]
    assert len(error["message"]) < 600  # a long body is not echoed back
    assert len(headers["x-request-id"]) == 32
    assert requests_counted(server, "Translate", "INVALID_ARGUMENT") == before + 1
    # and the server still translates
    assert post(server, "/v1/translate", {"texts": ["Hello."]})[0] == 200


def test_unknown_routes_and_methods_say_what_exists(server):
    status, _, data = call(server.http_port, "GET", "/v2/translate")
    assert status == 404
    message = json.loads(data)["message"]
    for verb, path in ROUTES:
        assert f"{verb} {path}" in message
    status, headers, data = call(server.http_port, "GET", "/v1/translate")
    assert status == 405 and headers["allow"] == "POST"
    assert json.loads(data)["status"] == "UNIMPLEMENTED"
    # the request id comes back on these too: the client's, else a new one
    for method, path in (("GET", "/v2/translate"), ("GET", "/v1/translate")):
        _, headers, _ = call(server.http_port, method, path, headers={"X-Request-Id": "r-42"})
        assert headers["x-request-id"] == "r-42"
        _, headers, _ = call(server.http_port, method, path)
        assert len(headers["x-request-id"]) == 32


@pytest.mark.parametrize("value", ["", "5", "1.5S", "123456789S", "5s", "-1S", "S"])
def test_a_malformed_timeout_is_400(server, value):
    status, _, data = post(server, "/v1/translate", {"texts": ["Hi."]}, **{"Grpc-Timeout": value})
    assert status == 400, data
    assert "Grpc-Timeout" in json.loads(data)["message"]


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("2S", 2.0), ("500m", 0.5), ("1M", 60.0), ("1H", 3600.0), ("250000u", 0.25), ("7n", 7e-9)],
)
def test_grpc_timeout_units(value, seconds):
    import asyncio

    async def offset():
        return deadline_of(value) - asyncio.get_running_loop().time()

    assert asyncio.run(offset()) == pytest.approx(seconds, abs=0.05)


def test_a_body_over_the_limit_is_refused_and_counted(server):
    before = requests_counted(server, "Translate", "RESOURCE_EXHAUSTED")
    big = json.dumps({"texts": ["x" * MAX_BODY]}).encode()
    status, _, data = post(server, "/v1/translate", big)
    assert status == 429 and "--max-message-bytes" in json.loads(data)["message"]
    # chunked, without a Content-Length: refused as it is read
    conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=TIMEOUT)
    conn.request("POST", "/v1/translate", body=iter([big[:1000], big[1000:]]), encode_chunked=True)
    response = conn.getresponse()
    assert response.status == 429, response.read()
    conn.close()
    assert requests_counted(server, "Translate", "RESOURCE_EXHAUSTED") == before + 2
    assert post(server, "/v1/translate", {"texts": ["Hello."]})[0] == 200


def test_answers_name_the_server_not_its_libraries_versions(server):
    status, headers, _ = call(server.http_port, "GET", "/v1/health/live")
    assert status == 200 and headers["server"] == "nmt-serve"
    status, headers, _ = post(server, "/v1/translate/stream", {"text": "Hi."})
    assert status == 200 and headers["server"] == "nmt-serve"


def test_request_ids_come_back(server):
    status, headers, _ = post(
        server, "/v1/translate", {"texts": ["Hi."]}, **{"X-Request-Id": "abc-1"}
    )
    assert status == 200 and headers["x-request-id"] == "abc-1"
    status, headers, _ = post(server, "/v1/translate", b"{", **{"X-Request-Id": "abc-2"})
    assert status == 400 and headers["x-request-id"] == "abc-2"
    status, headers, _ = post(server, "/v1/translate/stream", {"text": "Hi."})
    assert status == 200 and len(headers["x-request-id"]) == 32


def test_an_error_before_a_stream_starts_is_a_plain_error(server):
    status, headers, data = post(
        server, "/v1/translate/stream", {"text": "Hi.", "options": {"replace_unk": True}}
    )
    assert status == 400 and headers["content-type"].startswith("application/json")
    assert "replace_unk is for Translate" in json.loads(data)["message"]


# -- deadlines and hang-ups ---------------------------------------------------------------


def test_a_deadline_mid_decode_is_504_and_frees_the_rows(server, tiny_bundle, monkeypatch):
    slow_decoder(monkeypatch, server)
    before = requests_counted(server, "Translate", "DEADLINE_EXCEEDED")
    body = {
        "texts": [tiny_bundle.sentences[LOOP_SENTENCE]],
        "options": {"beam_size": 5, "max_length": 4000, "max_length_ratio": 100.0},
    }
    start = time.monotonic()
    status, _, data = post(server, "/v1/translate", body, **{"Grpc-Timeout": "300m"})
    assert status == 504 and json.loads(data)["status"] == "DEADLINE_EXCEEDED"
    assert time.monotonic() - start < 5
    assert requests_counted(server, "Translate", "DEADLINE_EXCEEDED") == before + 1
    assert wait_until(lambda: server.registry.get_sample_value("nmt_live_rows") == 0, timeout=5)


def test_a_deadline_mid_stream_ends_it_with_an_error_event(server, tiny_bundle, monkeypatch):
    slow_decoder(monkeypatch, server)
    body = {
        "text": tiny_bundle.sentences[LOOP_SENTENCE],
        "options": {"min_length": 3999, "max_length": 4000, "max_length_ratio": 100.0},
    }
    status, _, data = post(server, "/v1/translate/stream", body, **{"Grpc-Timeout": "400m"})
    assert status == 200
    got = events(data)
    assert len(got) > 1 and {name for name, _ in got[:-1]} == {"message"}
    assert got[-1] == (
        "error",
        {
            "code": 4,
            "status": "DEADLINE_EXCEEDED",
            "message": "the request's deadline (Grpc-Timeout) passed before the translation "
            "finished: allow a longer Grpc-Timeout, send fewer sentences or lower max_length",
        },
    )
    assert wait_until(lambda: server.registry.get_sample_value("nmt_live_rows") == 0, timeout=5)


@pytest.mark.parametrize("path", ["/v1/translate", "/v1/translate/stream"])
def test_a_client_that_hangs_up_is_counted_and_its_rows_freed(
    server, tiny_bundle, monkeypatch, path
):
    slow_decoder(monkeypatch, server)
    method = "TranslateStream" if path.endswith("stream") else "Translate"
    before = requests_counted(server, method, "CANCELLED")
    text = tiny_bundle.sentences[LOOP_SENTENCE]
    options = {"beam_size": 5, "max_length": 4000, "max_length_ratio": 100.0}
    body = json.dumps(
        {"text": text, "options": options} if method == "TranslateStream" else
        {"texts": [text], "options": options}
    ).encode()  # fmt: skip
    sock = socket.create_connection(("127.0.0.1", server.http_port), timeout=TIMEOUT)
    sock.sendall(
        f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body
    )
    reg = server.registry
    assert wait_until(lambda: reg.get_sample_value("nmt_live_rows") >= 5, timeout=5)
    sock.close()
    assert wait_until(lambda: reg.get_sample_value("nmt_live_rows") == 0, timeout=5)
    assert wait_until(lambda: requests_counted(server, method, "CANCELLED") == before + 1)


def test_a_body_that_never_comes_ends_at_the_receive_timeout(server_factory):
    server = server_factory(server={"http_port": 0, "rpc": RpcConfig(receive_timeout=0.5)})
    before = requests_counted(server, "Translate", "DEADLINE_EXCEEDED")
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=TIMEOUT) as sock:
        sock.sendall(b"POST /v1/translate HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        reply = sock.recv(65536).decode()
    assert reply.startswith("HTTP/1.1 504"), reply
    assert "--receive-timeout" in reply
    assert requests_counted(server, "Translate", "DEADLINE_EXCEEDED") == before + 1


# -- health, readiness, drain, the port ----------------------------------------------------


def test_health_follows_readiness_and_drain(server_factory):
    server = server_factory(warm=False, server={"http_port": 0, "drain_announce": 1.5})
    port = server.http_port
    assert call(port, "GET", "/v1/health/live")[0] == 200
    status, headers, data = call(port, "GET", "/v1/health/ready")
    assert (status, json.loads(data)) == (503, {"status": "NOT_SERVING"})
    assert headers["retry-after"] == "1"  # as every 503
    assert "retry-after" not in call(port, "GET", "/v1/health/live")[1]
    status, _, data = call(port, "POST", "/v1/translate", {"texts": ["Hi."]})
    assert status == 503 and "warming up" in json.loads(data)["message"]
    server.warm_up()
    assert call(port, "GET", "/v1/health/ready")[:1] == (200,)
    stopping = threading.Thread(target=server.stop, args=(3.0,))
    stopping.start()
    try:
        # announced NOT_SERVING while new calls are still served
        assert wait_until(lambda: call(port, "GET", "/v1/health/ready")[0] == 503, timeout=1)
        assert call(port, "POST", "/v1/translate", {"texts": ["Hi."]})[0] == 200
    finally:
        stopping.join()
    with pytest.raises(ConnectionRefusedError):
        call(port, "GET", "/v1/health/live")


def test_drain_answers_what_outlasts_the_grace_503_in_time(server_factory, tiny_bundle):
    """A call still decoding when the grace ends is answered 503 UNAVAILABLE saying to
    retry elsewhere, and its job cancelled (its rows freed); a stream ends with an error
    event. gRPC calls get the same message (not gRPC's own "Cancelling all calls"),
    before the grace, not later."""
    from service.errors import DRAINED

    server = server_factory(server={"http_port": 0, "drain_announce": 0.0}, max_target_length=4000)
    port = server.http_port
    long = {"min_length": 3999, "max_length": 4000, "max_length_ratio": 100.0, "beam_size": 5}
    text = tiny_bundle.sentences[LOOP_SENTENCE]
    channel, grpc_stub = stub_for(server.port)
    grpc_long = pb.DecodeOptions(
        min_length=3999, max_length=4000, max_length_ratio=100.0, beam_size=5
    )
    with channel, ThreadPoolExecutor(4) as pool:
        unary = pool.submit(call, port, "POST", "/v1/translate", {"texts": [text], "options": long})
        stream = pool.submit(
            call, port, "POST", "/v1/translate/stream", {"text": text, "options": long}
        )
        by_grpc = pool.submit(
            rpc_error,
            lambda: grpc_stub.Translate(
                pb.TranslateRequest(texts=[text], options=grpc_long), timeout=TIMEOUT
            ),
        )
        grpc_stream = pool.submit(
            rpc_error,
            lambda: list(
                grpc_stub.TranslateStream(
                    pb.TranslateStreamRequest(text=text, options=grpc_long), timeout=TIMEOUT
                )
            ),
        )
        reg = server.registry
        assert wait_until(lambda: reg.get_sample_value("nmt_live_rows") >= 20, timeout=10)
        start = time.monotonic()
        server.stop(1.0)
        stopped = time.monotonic() - start
        status, _, data = unary.result(timeout=10)
        assert (status, json.loads(data)) == (
            503,
            {"code": 14, "status": "UNAVAILABLE", "message": DRAINED},
        )
        status, _, data = stream.result(timeout=10)
        assert status == 200 and events(data)[-1][1]["message"] == DRAINED
        # a gRPC stream whose write is held up by the shutdown (gRPC stops taking
        # writes) cannot be answered in our words: it ends with gRPC's cancellation
        err = by_grpc.result(timeout=10)
        assert (err.code(), err.details()) == (grpc.StatusCode.UNAVAILABLE, DRAINED)
        assert grpc_stream.result(timeout=10).code() == grpc.StatusCode.UNAVAILABLE
    assert stopped < 1.0 + 3.0, stopped  # the grace and the calls' ending
    assert requests_counted(server, "Translate", "UNAVAILABLE") == 2
    streams = [requests_counted(server, "TranslateStream", c) for c in ("UNAVAILABLE", "CANCELLED")]
    assert streams[0] >= 1 and sum(streams) == 2, streams  # the gRPC one: either
    assert reg.get_sample_value("nmt_live_rows") == 0


def test_drain_closes_idle_keep_alive_connections_at_once(server_factory, tiny_bundle, monkeypatch):
    server = server_factory(server={"http_port": 0, "drain_announce": 0.0}, max_target_length=4000)
    slow_decoder(monkeypatch, server)  # the busy call outlasts the grace
    port = server.http_port
    idle = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
    idle.request("GET", "/v1/health/live")
    idle.getresponse().read()  # answered; the connection stays open, idle
    long = {"min_length": 3999, "max_length": 4000, "max_length_ratio": 100.0, "beam_size": 5}
    with ThreadPoolExecutor(1) as pool:
        busy = pool.submit(
            call,
            port,
            "POST",
            "/v1/translate",
            {"texts": [tiny_bundle.sentences[LOOP_SENTENCE]], "options": long},
        )
        reg = server.registry
        assert wait_until(lambda: reg.get_sample_value("nmt_live_rows") >= 5, timeout=10)
        stopping = threading.Thread(target=server.stop, args=(5.0,))
        start = time.monotonic()
        stopping.start()
        try:
            # closed while the busy call still has its grace, not at the grace's end
            assert idle.sock.recv(1) == b""
            assert time.monotonic() - start < 2.5 and stopping.is_alive()
        finally:
            stopping.join()
            idle.close()
        assert busy.result(timeout=10)[0] == 503


def test_slow_headers_close_the_connection_and_big_ones_are_refused(server_factory, caplog):
    server = server_factory(server={"http_port": 0, "rpc": RpcConfig(receive_timeout=0.5)})
    port = server.http_port
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as sock:
        sock.sendall(b"POST /v1/translate HTTP/1.1\r\nHost: x\r\n")
        start = time.monotonic()
        for _ in range(20):  # a header a while, never the blank line
            try:
                sock.sendall(b"X-Drip: 1\r\n")
            except OSError:
                break
            if sock.recv(1024, socket.MSG_DONTWAIT) if _readable(sock) else None:
                break
            time.sleep(0.2)
        assert sock.recv(1024) == b""  # closed by the server
        assert time.monotonic() - start < 3.5
    # more header fields than a request may carry: refused, one log line, no traceback
    caplog.clear()
    for _ in range(5):
        headers = "".join(f"X-Field-{i}: {'v' * 100}\r\n" for i in range(100))
        with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as sock:
            sock.sendall(f"GET /v1/models HTTP/1.1\r\nHost: x\r\n{headers}\r\n".encode())
            assert sock.recv(1024).split(b" ")[1] == b"400"
    lines = [r for r in caplog.records if r.name.startswith("service.httpconn")]
    assert len(lines) <= 1 and not any(r.exc_info for r in lines)
    assert call(port, "GET", "/v1/health/live")[0] == 200


def test_a_real_error_is_logged_whole_and_malformed_requests_are_condensed(
    server_factory, caplog, monkeypatch
):
    from service import httpapi

    server = server_factory(server={"http_port": 0})

    async def broken(self, request):
        raise RuntimeError("a bug in a handler")

    monkeypatch.setattr(httpapi.HttpApi, "_route", broken)
    caplog.clear()
    assert call(server.http_port, "GET", "/v1/models")[0] == 500
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert any(r.exc_info and "a bug in a handler" in str(r.exc_info[1]) for r in errors)
    # malformed requests: one warning a minute, one line without a traceback (aiohttp's
    # message quotes the client's bytes and a caret on lines of their own)
    monkeypatch.setattr(httpconn.protocol_log.filters[0], "_next", 0.0)
    caplog.clear()
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", server.http_port), timeout=TIMEOUT) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\nBad Header\r\n\r\n")
            assert b" 400 Bad Request" in sock.recv(4096)
    (warning,) = [r for r in caplog.records if "malformed" in r.getMessage()]
    assert warning.levelno == logging.WARNING and not warning.exc_info
    assert "\n" not in warning.getMessage(), warning.getMessage()
    assert warning.getMessage().startswith("refused a malformed HTTP request (")
    assert "Invalid header token: b'Bad Header')" in warning.getMessage()


def _readable(sock: socket.socket) -> bool:
    import select

    return bool(select.select([sock], [], [], 0)[0])


def test_a_broken_body_is_400_not_internal(server, caplog):
    before = requests_counted(server, "Translate", "INVALID_ARGUMENT")
    internal = requests_counted(server, "Translate", "INTERNAL")
    caplog.clear()
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", server.http_port), timeout=TIMEOUT) as sock:
            sock.sendall(
                b"POST /v1/translate HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\n"
                b"Content-Length: 10\r\n\r\nnot gzip!!"
            )
            reply = sock.recv(4096).decode()
        assert reply.startswith("HTTP/1.1 400"), reply
        assert "could not be read" in reply
    assert requests_counted(server, "Translate", "INVALID_ARGUMENT") == before + 3
    assert requests_counted(server, "Translate", "INTERNAL") == internal
    assert not any(r.exc_info for r in caplog.records), [r.getMessage() for r in caplog.records]


def answers(server) -> dict[tuple[str, str], float]:
    """``nmt_http_responses_total`` by ``(route, status)``."""
    (family,) = [m for m in server.registry.collect() if m.name == "nmt_http_responses"]
    return {
        (s.labels["route"], s.labels["status"]): s.value
        for s in family.samples
        if s.name.endswith("_total")
    }


def raw_answer(server, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=TIMEOUT) as sock:
        sock.sendall(data)
        return sock.recv(4096)


def test_every_answer_is_counted_by_route_and_status(server):
    port = server.http_port
    calls = [
        (lambda: post(server, "/v1/translate", {"texts": ["Hi."]}), ("/v1/translate", "200")),
        (lambda: post(server, "/v1/translate", b"{"), ("/v1/translate", "400")),
        (lambda: call(port, "GET", "/v1/translate"), ("/v1/translate", "405")),
        (lambda: call(port, "GET", "/v1/health/ready"), ("/v1/health/ready", "200")),
        (lambda: call(port, "GET", "/scan/1"), ("other", "404")),
        (lambda: call(port, "DELETE", "/scan/2?x=1"), ("other", "404")),
        (lambda: raw_answer(server, b"NOT HTTP AT ALL\r\n\r\n"), ("malformed", "400")),
        (lambda: raw_answer(server, b"GET / HTTP/1.1\r\nBad Header\r\n\r\n"), ("malformed", "400")),
    ]
    for send, label in calls:
        before = answers(server)
        send()
        after = answers(server)
        changed = {k: v - before.get(k, 0.0) for k, v in after.items() if v != before.get(k)}
        assert changed == {label: 1.0}, (label, changed)
    # the paths a scanner tries make no series of their own
    assert {route for route, _ in answers(server)} <= {
        "other",
        "malformed",
        "over_capacity",
        *(path for _, path in ROUTES),
        *GET_ONLY,
    }


@pytest.mark.parametrize("coding", ["gzip", "deflate"])
def test_large_answers_are_compressed_for_clients_that_accept_it(server, tiny_bundle, coding):
    body = {
        "texts": tiny_bundle.sentences[:6],
        "options": {"beam_size": 3, "n_best": 3, "return_attention": True},
    }
    plain = post(server, "/v1/translate", body)
    packed = post(server, "/v1/translate", body, **{"Accept-Encoding": coding})
    assert plain[0] == packed[0] == 200
    assert "content-encoding" not in plain[1] and len(plain[2]) >= COMPRESS_BYTES
    assert packed[1]["content-encoding"] == coding
    assert "Accept-Encoding" in packed[1]["vary"]
    raw = zlib.decompress(packed[2], wbits=31 if coding == "gzip" else 15)
    assert len(packed[2]) < len(raw) / 2
    got, want = json.loads(raw), json.loads(plain[2])
    assert got["translations"] == want["translations"]
    # a small answer, and a stream, go as they are
    small = post(server, "/v1/translate", {"texts": ["Hi."]}, **{"Accept-Encoding": coding})
    assert small[0] == 200 and "content-encoding" not in small[1]
    stream = post(server, "/v1/translate/stream", {"text": "Hi."}, **{"Accept-Encoding": coding})
    assert stream[0] == 200 and "content-encoding" not in stream[1]
    assert events(stream[2])[-1][1]["final"] is True


@pytest.mark.parametrize(
    "header, coding",
    [
        ("gzip, deflate, br", "gzip"),
        ("deflate", "deflate"),
        ("gzip;q=0, identity", None),
        ("gzip;q=0.5, deflate;q=0.8", "deflate"),
        ("GZIP", "gzip"),
        ("x-gzip", "gzip"),
        ("*", "gzip"),
        ("*;q=0", None),
        ("br, zstd", None),
        ("", None),
        ("gzip;q=bad", None),
    ],
)
def test_the_coding_follows_accept_encoding_and_its_weights(server, header, coding):
    assert (None if (c := accepted_coding(header)) is None else c.value) == coding
    status, headers, _ = call(server.http_port, "GET", OPENAPI, headers={"Accept-Encoding": header})
    assert status == 200
    assert headers.get("content-encoding") == coding
    assert "Accept-Encoding" in headers["vary"]


def test_a_large_body_parses_and_expect_100_continue_is_answered(server):
    body = json.dumps({"texts": ["Hello."], "options": {"beam_size": 2}}) + " " * 70_000
    status, _, data = post(server, "/v1/translate", body.encode())
    assert status == 200, data  # parsed off the event loop (over 64 KB)
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=TIMEOUT) as sock:
        small = b'{"texts": ["Hello."]}'
        sock.sendall(
            b"POST /v1/translate HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
            b"Content-Length: %d\r\n\r\n" % len(small)
        )
        assert sock.recv(1024).startswith(b"HTTP/1.1 100 Continue")
        sock.sendall(small)
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")


def test_old_connections_are_told_to_close(server_factory):
    from service.config import TransportConfig

    server = server_factory(
        server={"http_port": 0, "transport": TransportConfig(max_connection_age=0.3)}
    )
    conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=TIMEOUT)
    conn.request("GET", "/v1/health/live")
    first = conn.getresponse()
    first.read()
    assert first.getheader("Connection") != "close"
    time.sleep(0.5)
    conn.request("GET", "/v1/health/live")
    second = conn.getresponse()
    second.read()
    assert second.status == 200 and second.getheader("Connection") == "close"
    conn.close()


def test_health_and_page_take_only_get_and_head(server):
    for path in ("/v1/health/ready", "/v1/health/live", "/", "/v1/openapi.json"):
        status, headers, data = call(server.http_port, "POST", path, b"{}")
        assert status == 405 and headers["allow"] == "GET, HEAD", (path, data)


MODELS = "/v1/models"


@pytest.mark.parametrize("path", ["/v1/health/ready", "/v1/health/live", "/", OPENAPI, MODELS])
def test_head_is_get_without_the_body(server, path):
    get_status, get_headers, get_data = call(server.http_port, "GET", path)
    status, headers, data = call(server.http_port, "HEAD", path)
    assert (status, data) == (get_status, b"") and get_data
    assert headers["content-type"] == get_headers["content-type"]
    status, headers, _ = call(server.http_port, "HEAD", "/v1/translate")
    assert status == 405 and headers["allow"] == "POST"


def test_retry_after_goes_with_what_a_retry_can_mend(server_factory, server):
    cold = server_factory(warm=False, server={"http_port": 0})
    status, headers, _ = post(cold, "/v1/translate", {"texts": ["Hi."]})
    assert status == 503 and headers["retry-after"] == "1"  # warming up
    busy = server.servicer._inflight
    server.servicer._inflight = 1 << 30  # every translation refused: overloaded
    try:
        status, headers, data = post(server, "/v1/translate", {"texts": ["Hi."]})
    finally:
        server.servicer._inflight = busy
    assert status == 429 and headers["retry-after"] == "1", data
    # a body over the limit gets no hint: sending it again fails the same way
    status, headers, data = post(server, "/v1/translate", b"{" + b" " * (MAX_BODY + 10) + b"}")
    assert status == 429 and "retry-after" not in headers, data
    status, headers, _ = post(server, "/v1/translate", {"texts": []})
    assert status == 400 and "retry-after" not in headers


def test_the_http_port_cannot_be_another_port():
    with pytest.raises(ValueError, match="--http-port 50051 is also the gRPC or metrics port"):
        ServerConfig(http_port=50051)
    with pytest.raises(ValueError, match="also the gRPC or metrics port"):
        ServerConfig(http_port=9464)
    assert ServerConfig(port=0, http_port=0).http_port == 0


def test_a_wildcard_host_serves_both_families(server_factory):
    from service.listen import _has_ipv6_loopback

    server = server_factory(server={"http_port": 0, "host": "0.0.0.0"})
    assert call(server.http_port, "GET", "/v1/health/live")[0] == 200
    if _has_ipv6_loopback():  # as the gRPC port does on a wildcard
        conn = http.client.HTTPConnection("::1", server.http_port, timeout=TIMEOUT)
        conn.request("GET", "/v1/health/live")
        assert conn.getresponse().status == 200
        conn.close()


@pytest.mark.parametrize("origins", [("https://App.Example.com",), ("*",)])
def test_cors_lets_the_named_origins_call(server_factory, origins):
    server = server_factory(server={"http_port": 0, "http_cors_origins": origins})
    port, page = server.http_port, "https://app.example.com"
    allowed = "*" if origins == ("*",) else page
    status, headers, _ = call(
        port,
        "OPTIONS",
        "/v1/translate",
        headers={"Origin": page, "Access-Control-Request-Method": "POST"},
    )
    assert status == 204
    assert headers["access-control-allow-origin"] == allowed
    assert headers["access-control-allow-methods"] == "POST"
    assert "Grpc-Timeout" in headers["access-control-allow-headers"]
    status, headers, _ = call(port, "POST", "/v1/translate", {"texts": ["Hi."]}, {"Origin": page})
    assert status == 200 and headers["access-control-allow-origin"] == allowed
    # a page may read the id and, on a 429 or 503, when to retry
    assert headers["access-control-expose-headers"] == "x-request-id, Retry-After"
    status, headers, _ = call(
        port, "POST", "/v1/translate/stream", {"text": "Hi."}, {"Origin": page}
    )
    assert status == 200 and headers["access-control-allow-origin"] == allowed
    status, headers, _ = call(port, "POST", "/v1/translate", b"{", {"Origin": page})
    assert status == 400 and headers["access-control-allow-origin"] == allowed
    other = {"Origin": "https://elsewhere.example.org"}
    status, headers, _ = call(port, "OPTIONS", "/v1/translate", headers=other)
    if origins == ("*",):
        assert status == 204
    else:
        assert status == 403 and "access-control-allow-origin" not in headers
        status, headers, _ = call(port, "POST", "/v1/translate", {"texts": ["Hi."]}, other)
        assert status == 403 and "access-control-allow-origin" not in headers
        # a cache between must know the answer depends on Origin, whatever it was
        assert headers["vary"] == "Origin"
        assert call(port, "GET", "/v1/health/live")[1]["vary"] == "Origin"


def test_without_cors_no_page_elsewhere_may_call(server):
    page = {"Origin": "https://app.example.com"}
    status, headers, _ = call(server.http_port, "OPTIONS", "/v1/translate", headers=page)
    assert status == 405 and "access-control-allow-origin" not in headers
    # a page elsewhere may not spend the server either: browsers send a text/plain POST
    # without asking first (helper-87)
    status, headers, data = call(
        server.http_port, "POST", "/v1/translate", {"texts": ["Hi."]}, page
    )
    assert status == 403 and "access-control-allow-origin" not in headers
    assert "'https://app.example.com' may not call this API" in json.loads(data)["message"]
    # the server's own page (its origin is the request's host) and clients that are no page
    own = {"Origin": f"http://127.0.0.1:{server.http_port}"}
    assert call(server.http_port, "POST", "/v1/translate", {"texts": ["Hi."]}, own)[0] == 200
    assert call(server.http_port, "POST", "/v1/translate", {"texts": ["Hi."]})[0] == 200
    # behind a proxy that passes the host the browser asked for (deploy/nginx/nginx.conf)
    proxied = {
        "Origin": "http://translate.example.com",
        "X-Forwarded-Host": "translate.example.com",
    }
    assert call(server.http_port, "POST", "/v1/translate", {"texts": ["Hi."]}, proxied)[0] == 200


@pytest.mark.parametrize("origin", ["app.example.com", "https://a.example.com/path", ""])
def test_a_cors_origin_must_be_an_origin(origin):
    with pytest.raises(ValueError, match="is not an origin"):
        ServerConfig(http_cors_origins=(origin,))
    assert parse_args(["--http-cors-origins", "https://a.b,http://c:8080"]).http_cors_origins == (
        "https://a.b",
        "http://c:8080",
    )


def test_off_by_default(server_factory):
    assert ServerConfig().http_port == -1
    assert server_factory().http_port is None


def test_a_port_in_use_stops_the_start(server_factory):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ServerError, match=f"could not serve HTTP on 127.0.0.1:{port} "):
            server_factory(start=False, server={"http_port": port})


def test_flag_variable_and_range():
    assert parse_args(["--http-port", "8000"]).http_port == 8000
    assert parse_args([], environ={"NMT_HTTP_PORT": "8001"}).http_port == 8001
    for bad in (-2, 65536):
        with pytest.raises(ValueError, match="-1 turns the endpoint off"):
            ServerConfig(http_port=bad)


def test_every_grpc_code_has_an_http_status():
    import grpc

    assert set(HTTP_STATUS) == set(grpc.StatusCode)
    assert HTTP_STATUS[grpc.StatusCode.OK] == 200
    assert all(400 <= s < 600 for c, s in HTTP_STATUS.items() if c != grpc.StatusCode.OK)


def test_tls_serves_https_with_the_grpc_certificate(server_factory, pki):
    server = server_factory(
        server={
            "http_port": 0,
            "tls_cert": pki / "server.crt",
            "tls_key": pki / "server.key",
            "tls_client_ca": pki / "ca.crt",
        }
    )
    trusted = ssl.create_default_context(cafile=pki / "server.crt")
    trusted.check_hostname = False
    # mutual TLS: no client certificate, no answer (TLS 1.3 refuses it after the handshake)
    with pytest.raises((ssl.SSLError, ConnectionError)):
        call(server.http_port, "GET", "/v1/health/ready", tls=trusted)
    trusted.load_cert_chain(pki / "client.crt", pki / "client.key")
    status, _, data = call(
        server.http_port, "POST", "/v1/translate", {"texts": ["Hi."]}, tls=trusted
    )
    assert status == 200, data
    assert json.loads(data)["translations"][0]["hypotheses"][0]["text"]
    with pytest.raises((ConnectionError, http.client.HTTPException)):  # not plain HTTP
        call(server.http_port, "GET", "/v1/health/ready")


def test_a_body_nested_too_deep_is_refused_before_parsing(server):
    """100,000 levels took the parser to the recursion limit, where a garbage-collector
    pass's callback printed a traceback into the log (helper-80's audit); brackets inside
    strings do not count."""
    deep = b'{"texts": ["Hi."], "options": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    status, _, data = post(server, "/v1/translate", deep)
    error = json.loads(data)
    assert (status, error["status"]) == (400, "INVALID_ARGUMENT")
    assert "nests arrays and objects deeper than 32 levels" in error["message"]
    fine = {"texts": ["a [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[ {{{{{{{{{{ b"]}
    status, _, data = post(server, "/v1/translate", fine)
    assert status == 200 and json.loads(data)["translations"][0]["hypotheses"]


def test_a_body_of_too_many_list_items_is_refused_before_the_protobuf_mapping(server, monkeypatch):
    """A million one-letter texts (4 MB) cost 1.3 s of the event loop in protobuf's JSON
    mapping before the sentence limit refused them (helper-84): counted after json.loads,
    refused before the mapping, which is never called."""
    from google.protobuf import json_format

    from service import httpgrpc

    calls = []
    real = json_format.ParseDict
    monkeypatch.setattr(json_format, "ParseDict", lambda *a, **k: calls.append(1) or real(*a, **k))
    big = json.dumps({"texts": ["a"] * 30_000}).encode()  # (the fixture takes 256 KB)
    status, _, data = post(server, "/v1/translate", big)
    error = json.loads(data)
    assert (status, error["status"]) == (400, "INVALID_ARGUMENT") and not calls
    assert (
        f"list items or more; a request may hold at most {httpgrpc.MAX_JSON_ITEMS:,}"
        in (error["message"])
    )
    nested = {"texts": ["Hi."], "constraints": [{"phrases": ["x"] * 15_000}] * 2}
    status, _, data = post(server, "/v1/translate", nested)  # counted across lists
    assert status == 400 and "list items" in json.loads(data)["message"] and not calls
    # duplicate names are refused as protobuf's own parser refused them
    status, _, data = post(server, "/v1/translate", b'{"texts": ["a"], "texts": ["b"]}')
    assert status == 400 and "duplicate key texts" in json.loads(data)["message"]
    # and so is one field under both its names (the later one won unsaid: helper-88)
    both = b'{"texts": ["a"], "options": {"beam_size": 4, "n_best": 4, "nBest": 1}}'
    status, _, data = post(server, "/v1/translate", both)
    assert status == 400 and "n_best and nBest name one field" in json.loads(data)["message"]
    status, _, data = post(server, "/v1/translate", b'{"texts": [')
    assert status == 400 and "Failed to load JSON" in json.loads(data)["message"]
    # objects are counted before json.loads, whose per-object check costs (helper-87)
    status, _, data = post(server, "/v1/translate", b'{"texts": [' + b"{}," * 25_000 + b"{}]}")
    assert status == 400 and "objects; the API's requests need a few" in json.loads(data)["message"]
    assert not calls
    for bare in (b"null", b"5", b"true", b'"text"', b"[1]"):  # a 500 with a traceback before
        status, _, data = post(server, "/v1/translate", bare)
        assert status == 400 and "not an object {...}" in json.loads(data)["message"], bare
    status, _, _ = post(server, "/v1/translate", {"texts": ["Hi."]})
    assert status == 200 and calls


def test_a_wrong_enum_name_lists_the_names(server):
    """The README's table said GREEDY or BEAM; the JSON mapping takes STRATEGY_BEAM (or
    2), and "BEAM" was refused without saying so (helper-79's audit)."""
    body = {"texts": ["Hi."], "options": {"strategy": "BEAM"}}
    status, _, data = post(server, "/v1/translate", body)
    message = json.loads(data)["message"]
    assert status == 400 and "Invalid enum value BEAM for enum type nmt.v1.Strategy" in message
    assert message.endswith(
        "; use one of STRATEGY_UNSPECIFIED, STRATEGY_GREEDY, STRATEGY_BEAM (or its number)"
    )
    body["options"]["strategy"] = "STRATEGY_BEAM"
    assert post(server, "/v1/translate", body)[0] == 200


def test_the_depth_count_skips_strings_escapes_included():
    """Brackets inside strings do not count, however their quotes are escaped; the count
    agrees with a plain scanner on random JSON (it used a regex that went quadratic on
    an unterminated string of escaped quotes: helper-82)."""
    import random

    from service.httpgrpc import _depth

    def scanned(body: bytes) -> int:
        depth = most = 0
        inside = escaped = False
        for c in body.decode():
            if inside:
                escaped, inside = (False, True) if escaped else (c == "\\", c != '"')
            elif c == '"':
                inside = True
            elif c in "[{":
                depth += 1
                most = max(most, depth)
            elif c in "]}":
                depth -= 1
        return most

    rng = random.Random(1)

    def value(depth: int):
        r = rng.random()
        if depth > 45 or r < 0.3:
            return "".join(rng.choice('[]{}"\\ab') for _ in range(rng.randint(0, 12)))
        if r < 0.65:
            return [value(depth + 1) for _ in range(rng.randint(1, 3))]
        return {str(rng.random()): value(depth + 1) for _ in range(rng.randint(1, 2))}

    checked = 0
    for _ in range(300):
        body = json.dumps(value(0)).encode()
        if body.count(b"[") + body.count(b"{") > 32:
            assert _depth(body) == scanned(body), body
            checked += 1
    assert checked > 50
    escaped = b'{"texts": ["' + b'[\\"' * 50 + b'"]}'  # 50 brackets, all in one string
    assert _depth(escaped) == 2  # the object and its array
    assert _depth(b"[" * 40 + b'"' + b'\\"' * 50_000) == 40  # never closed: still counted
