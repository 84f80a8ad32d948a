"""Structured logs: JSON lines, the request id of each call (client's x-request-id or a
new one) in its log lines and returned in its trailing metadata, the access log."""

from __future__ import annotations

import io
import json
import logging

import grpc
import pytest

from service.logs import JsonFormatter, LogConfig, bind_request_id, configure, request_id_from
from tests.service.server_helpers import TIMEOUT, proto_options, stub_for


def test_request_id_taken_from_the_client_when_usable():
    assert request_id_from([("x-request-id", "abc-123")]) == "abc-123"
    assert request_id_from([("other", "x"), ("x-request-id", "a.b/c:d")]) == "a.b/c:d"


@pytest.mark.parametrize("bad", ["", "x" * 129, "has space", "new\nline", "{json}"])
def test_unusable_request_ids_are_replaced(bad):
    new = request_id_from([("x-request-id", bad)])
    assert new != bad and len(new) == 32 and int(new, 16) >= 0


def test_missing_request_id_gets_a_fresh_one_per_call():
    assert request_id_from(None) != request_id_from(())


@pytest.mark.parametrize(
    "config, match",
    [
        (dict(format="xml"), "log format must be one of text, json"),
        (dict(level="LOUD"), "log level 'LOUD' is not one of"),
    ],
)
def test_log_config_refuses_unknown_values(config, match):
    with pytest.raises(ValueError, match=match):
        LogConfig(**config)


def test_json_lines_carry_the_bound_request_id_and_extra_fields():
    stream = io.StringIO()
    handler = configure(LogConfig(format="json"), stream)
    try:
        log = logging.getLogger("nmt.test")
        bind_request_id("rid-1")
        log.warning("hello %s", "world", extra={"code": "OK"})
        bind_request_id(None)
        try:
            raise KeyError("boom")
        except KeyError:
            log.exception("failed")
    finally:
        logging.getLogger().removeHandler(handler)
    first, second = (json.loads(line) for line in stream.getvalue().splitlines())
    assert first["message"] == "hello world" and first["level"] == "WARNING"
    assert first["request_id"] == "rid-1" and first["code"] == "OK"
    assert first["logger"] == "nmt.test" and first["time"].endswith("Z")
    assert "request_id" not in second and "KeyError: 'boom'" in second["exception"]


def test_json_formatter_keeps_non_ascii_text():
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "¿qué? %s", ("ñ",), None)
    assert json.loads(JsonFormatter().format(record))["message"] == "¿qué? ñ"


def _trailing_id(call) -> str | None:
    return dict(call.trailing_metadata() or ()).get("x-request-id")


@pytest.fixture(scope="module")
def logged_server(server_factory):
    return server_factory(server={"log": LogConfig(format="json", access_log=True)})


@pytest.fixture
def captured():
    stream = io.StringIO()
    handler = configure(LogConfig(format="json", access_log=True), stream)
    yield stream
    logging.getLogger().removeHandler(handler)


def _access_lines(stream: io.StringIO) -> list[dict]:
    lines = [json.loads(x) for x in stream.getvalue().splitlines()]
    return [x for x in lines if x.get("logger") == "service.servicer" and "code" in x]


def test_request_id_round_trip_and_access_log(logged_server, captured, tiny_bundle):
    from nmt_api.nmt.v1 import translator_pb2 as pb

    channel, stub = stub_for(logged_server.port)
    with channel:
        request = pb.TranslateRequest(
            texts=list(tiny_bundle.sentences[:2]), options=proto_options()
        )
        _, call = stub.Translate.with_call(
            request, timeout=TIMEOUT, metadata=(("x-request-id", "client-42"),)
        )
        assert _trailing_id(call) == "client-42"
        _, call = stub.Translate.with_call(request, timeout=TIMEOUT)
        generated = _trailing_id(call)
        assert generated and generated != "client-42"
        # An error status carries the id too (abort sends its own trailing metadata).
        bad = pb.TranslateRequest(texts=["x"], model="no-such-model")
        with pytest.raises(grpc.RpcError) as err:
            stub.Translate(bad, timeout=TIMEOUT, metadata=(("x-request-id", "bad-1"),))
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert dict(err.value.trailing_metadata())["x-request-id"] == "bad-1"
    lines = {x["request_id"]: x for x in _access_lines(captured)}
    assert lines["client-42"]["code"] == "OK" and lines["client-42"]["sentences"] == 2
    assert lines["client-42"]["method"] == "Translate" and lines["client-42"]["seconds"] > 0
    assert lines[generated]["code"] == "OK"
    assert lines["bad-1"]["code"] == "INVALID_ARGUMENT"


def test_stream_calls_return_their_request_id(logged_server, captured, tiny_bundle):
    from nmt_api.nmt.v1 import translator_pb2 as pb

    channel, stub = stub_for(logged_server.port)
    with channel:
        call = stub.TranslateStream(
            pb.TranslateStreamRequest(text=tiny_bundle.sentences[0], options=proto_options()),
            timeout=TIMEOUT,
            metadata=(("x-request-id", "stream-7"),),
        )
        assert list(call)[-1].final
        assert _trailing_id(call) == "stream-7"
    (line,) = [x for x in _access_lines(captured) if x["request_id"] == "stream-7"]
    assert line["method"] == "TranslateStream" and line["code"] == "OK"
