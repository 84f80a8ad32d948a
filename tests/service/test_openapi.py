"""The OpenAPI document of the HTTP/JSON API (``service/openapi.py``): committed as
generated, valid OpenAPI 3.1, covering every route and field, served by the server, and
true of what the real server answers."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import jsonschema
import pytest
from google.protobuf import json_format
from openapi_spec_validator import validate as validate_spec
from openapi_spec_validator.exceptions import OpenAPIError
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from nmt_api import TIMEOUT_HEADER
from nmt_api.nmt.v1 import translator_pb2 as pb
from service import openapi
from service.httpapi import (
    GET_ONLY,
    LIVE,
    OPENAPI,
    OPENAPI_FILE,
    READY,
    ROUTES,
    Route,
    allowed,
    verbs_of,
)
from service.sessions import RuntimeConfig
from tests.service.server_helpers import (
    LOOP_SENTENCE,
    TIMEOUT,
    proto_options,
    slow_decoder,
)
from tests.service.test_httpapi import call, events, post

DOC_URI = "urn:nmt-openapi"


@pytest.fixture(scope="module")
def doc() -> dict:
    return json.loads(OPENAPI_FILE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def server(server_factory):
    # one decoder step a call, so slow_decoder slows a stream down
    runtime = RuntimeConfig(providers=("cpu",), intra_op_threads=1, greedy_steps=1)
    return server_factory(server={"http_port": 0, "runtime": runtime}, max_target_length=4000)


def strict(node):
    """``node`` with every object schema closed (``additionalProperties: false``): the
    published document leaves them open for clients' sake; the tests want a misspelt or
    invented field in an answer to fail."""
    if isinstance(node, dict):
        out = {key: strict(value) for key, value in node.items()}
        if "properties" in node:
            out["additionalProperties"] = False
        return out
    if isinstance(node, list):
        return [strict(value) for value in node]
    return node


def validate(doc: dict, schema: dict, instance) -> None:
    """Validate ``instance`` against ``schema`` (whose ``$ref`` point into ``doc``), with
    every object schema closed."""
    registry = Registry().with_resource(
        DOC_URI, Resource.from_contents(strict(doc), default_specification=DRAFT202012)
    )
    rebased = json.loads(json.dumps(strict(schema)).replace('"#/', f'"{DOC_URI}#/'))
    jsonschema.Draft202012Validator(rebased, registry=registry).validate(instance)


def check(doc: dict, name: str, instance) -> None:
    """Validate ``instance`` against ``#/components/schemas/name`` of ``doc``."""
    validate(doc, {"$ref": f"#/components/schemas/{name}"}, instance)


def check_answer(doc: dict, verb: str, path: str, answer: tuple[int, dict, bytes]) -> None:
    """Validate a real answer against what ``doc`` says ``verb path`` answers with its
    status (else ``default``) and content type; a stream's events against the media
    type's event schema (an error event: the Error schema)."""
    status, headers, data = answer
    responses = doc["paths"][path][verb.lower()]["responses"]
    response = responses.get(str(status), responses.get("default"))
    assert response is not None, f"{verb} {path} does not document {status}"
    media_type = headers["content-type"].split(";")[0].strip()
    assert media_type in response.get("content", {}), (path, status, media_type)
    media = response["content"][media_type]
    if media_type == "text/event-stream":
        received = events(data)
        assert received
        for name, event in received:
            schema = media[openapi.SSE_DATA] if name == "message" else {"$ref": ERROR_REF}
            validate(doc, schema, event)
    else:
        validate(doc, media["schema"], json.loads(data))


ERROR_REF = f"#/components/schemas/{openapi.ERROR}"


# -- the file --------------------------------------------------------------------------


def test_the_committed_document_is_what_the_proto_generates():
    fresh = openapi.render(openapi.document())
    assert fresh == OPENAPI_FILE.read_text(encoding="utf-8"), (
        "service/static/openapi.json is stale: run python -m service.openapi"
    )
    assert openapi.main(["--check"]) == 0


def test_check_fails_on_a_stale_file(tmp_path, capsys):
    stale = tmp_path / "openapi.json"
    stale.write_text("{}\n")
    assert openapi.main(["--check", "--out", str(stale)]) == 1
    assert "stale" in capsys.readouterr().err
    assert openapi.main(["--check", "--out", str(tmp_path / "missing.json")]) == 1


def test_the_document_is_valid_openapi(doc):
    validate_spec(doc)
    assert doc["openapi"].startswith("3.1")


def refs(node) -> list[str]:
    """Every ``$ref`` in ``node``, depth first."""
    if isinstance(node, dict):
        own = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return own + [ref for value in node.values() for ref in refs(value)]
    if isinstance(node, list):
        return [ref for value in node for ref in refs(value)]
    return []


def dangling(doc: dict) -> list[str]:
    """The ``$ref`` targets ``doc`` lacks (OpenAPI 3.1 validators do not resolve them)."""
    prefix = "#/components/schemas/"
    schemas = doc.get("components", {}).get("schemas", {})
    return [r for r in refs(doc) if not r.startswith(prefix) or r[len(prefix) :] not in schemas]


def test_every_reference_resolves(doc):
    assert refs(doc)
    assert dangling(doc) == []
    broken = json.loads(json.dumps(doc))
    body = broken["paths"]["/v1/translate"]["post"]["requestBody"]["content"]
    body["application/json"]["schema"]["$ref"] = "#/components/schemas/nmt.v1.Nothing"
    assert dangling(broken) == ["#/components/schemas/nmt.v1.Nothing"]


@pytest.mark.parametrize("broken", [{}, {"openapi": "3.1.0"}, "bad-type"])
def test_the_spec_check_fails_on_broken_documents(doc, broken):
    if broken == "bad-type":
        broken = json.loads(json.dumps(doc))
        broken["components"]["schemas"]["nmt.v1.Timing"]["type"] = "tuple"
    with pytest.raises((OpenAPIError, jsonschema.ValidationError)):
        validate_spec(broken)


def test_every_route_and_verb_is_described(doc):
    described = {(verb.upper(), path) for path, ops in doc["paths"].items() for verb in ops}
    served = set(ROUTES) | {("GET", path) for path in GET_ONLY}
    assert described == served
    for path, ops in doc["paths"].items():
        assert sorted(verb.upper() for verb in ops) == sorted(verbs_of(path))
    ids = [op["operationId"] for ops in doc["paths"].values() for op in ops.values()]
    assert len(ids) == len(set(ids))
    for (verb, path), route in ROUTES.items():
        assert doc["paths"][path][verb.lower()]["operationId"] == route.method


def test_every_message_field_and_enum_value_has_a_schema(doc):
    schemas = doc["components"]["schemas"]
    for message in pb.DESCRIPTOR.message_types_by_name.values():
        schema = schemas[message.full_name]
        assert sorted(schema["properties"]) == sorted(f.name for f in message.fields)
    for enum in pb.DESCRIPTOR.enum_types_by_name.values():
        assert schemas[enum.full_name]["enum"] == [v.name for v in enum.values]
    # the .proto's comments became descriptions
    options = schemas["nmt.v1.DecodeOptions"]["properties"]
    assert "n-grams may repeat" in options["ignore_when_blocking"]["description"]
    assert "GNMT" in schemas["nmt.v1.LengthPenaltyForm"]["description"]


# -- the server's answers --------------------------------------------------------------


def test_the_server_serves_the_document(server):
    status, headers, data = call(server.http_port, "GET", OPENAPI)
    assert status == 200
    assert headers["content-type"].startswith("application/json")
    assert data == OPENAPI_FILE.read_bytes()


@pytest.mark.parametrize(
    "options",
    [
        proto_options(),
        proto_options(beam=3, n_best=2, return_scores=True, return_token_scores=True),
        proto_options(beam=2, return_attention=True, return_diagnostics=True),
    ],
    ids=["greedy", "beam-nbest-scores", "attention-diagnostics"],
)
def test_translate_requests_and_answers_fit_the_document(server, doc, tiny_bundle, options):
    request = pb.TranslateRequest(texts=tiny_bundle.sentences[:2], options=options)
    body = json_format.MessageToDict(request, preserving_proto_field_name=True)
    operation = doc["paths"]["/v1/translate"]["post"]
    validate(doc, operation["requestBody"]["content"]["application/json"]["schema"], body)
    answer = post(server, "/v1/translate", body)
    assert answer[0] == 200, answer[2]
    assert json.loads(answer[2])["translations"]
    check_answer(doc, "POST", "/v1/translate", answer)


def test_score_stream_models_and_health_fit_the_document(server, doc, tiny_bundle):
    text = tiny_bundle.sentences[0]
    score = {"texts": [text], "targets": [""], "options": {"return_attention": True}}
    check(doc, "nmt.v1.ScoreRequest", score)
    answer = post(server, "/v1/score", score)
    assert answer[0] == 200, answer[2]
    check_answer(doc, "POST", "/v1/score", answer)

    stream = {"text": text, "options": {"return_scores": True}}
    check(doc, "nmt.v1.TranslateStreamRequest", stream)
    answer = post(server, "/v1/translate/stream", stream)
    assert answer[0] == 200
    received = events(answer[2])
    assert [name for name, _ in received] == ["message"] * len(received)
    assert received[-1][1].get("final") is True
    check_answer(doc, "POST", "/v1/translate/stream", answer)

    answer = call(server.http_port, "GET", "/v1/models")
    assert answer[0] == 200 and json.loads(answer[2])["models"]
    check_answer(doc, "GET", "/v1/models", answer)
    for path in (LIVE, READY):
        answer = call(server.http_port, "GET", path)
        assert answer[0] == 200
        check_answer(doc, "GET", path, answer)


def test_readiness_503_fits_the_document(server_factory, doc):
    cold = server_factory(warm=False, server={"http_port": 0})
    answer = call(cold.http_port, "GET", READY)
    assert answer[0] == 503
    check_answer(doc, "GET", READY, answer)
    answer = post(cold, "/v1/translate", {"texts": ["Hi."]})
    assert answer[0] == 503
    check_answer(doc, "POST", "/v1/translate", answer)


@pytest.mark.parametrize(
    "verb, path, body, headers, status",
    [
        ("POST", "/v1/translate", {"texts": ["a"], "nope": 1}, {}, 400),
        ("POST", "/v1/translate", {"texts": ["a"], "model": "no-such-model"}, {}, 400),
        ("POST", "/v1/translate", {"texts": ["a"]}, {TIMEOUT_HEADER: "2s"}, 400),
        ("POST", "/v1/translate", {"texts": ["a " * 100] * 3}, {TIMEOUT_HEADER: "1n"}, 504),
    ],
    ids=["unknown-field", "unknown-model", "bad-timeout", "504"],
)
def test_errors_fit_the_document(server, doc, verb, path, body, headers, status):
    answer = call(server.http_port, verb, path, body, headers)
    assert answer[0] == status, answer[2]
    check_answer(doc, verb, path, answer)


@pytest.mark.parametrize(
    "verb, path, status",
    [("GET", "/v1/translate", 405), ("POST", "/v1/models", 405), ("GET", "/v1/nothing", 404)],
)
def test_a_verb_or_path_not_served_answers_the_error_object(server, doc, verb, path, status):
    got, headers, data = call(server.http_port, verb, path, {} if verb == "POST" else None)
    assert got == status
    check(doc, openapi.ERROR, json.loads(data))
    if status == 405:  # documented beside every route's errors
        (served,) = [op for op in doc["paths"][path].values()]
        assert "405 (UNIMPLEMENTED)" in served["responses"]["default"]["description"]
        assert headers["allow"] == ", ".join(allowed(path))


def test_a_stream_s_error_event_fits_the_document(server, doc, tiny_bundle, monkeypatch):
    slow_decoder(monkeypatch, server)  # a deadline that passes mid-stream
    body = {
        "text": tiny_bundle.sentences[LOOP_SENTENCE],
        "options": {"min_length": 3999, "max_length": 4000, "max_length_ratio": 100.0},
    }
    answer = post(server, "/v1/translate/stream", body, **{TIMEOUT_HEADER: "400m"})
    assert answer[0] == 200
    assert [name for name, _ in events(answer[2])][-2:] == ["message", "error"]
    check_answer(doc, "POST", "/v1/translate/stream", answer)


def timeout_schema(doc: dict) -> dict:
    parameters = doc["paths"]["/v1/translate"]["post"]["parameters"]
    (schema,) = [p["schema"] for p in parameters if p["name"] == TIMEOUT_HEADER]
    return schema


@pytest.mark.parametrize("value", ["2S", "500m", "1H", "3M", "99999999u", "99999999n"])
def test_the_timeout_pattern_takes_what_the_server_takes(server, doc, value):
    jsonschema.validate(value, timeout_schema(doc))
    status, _, data = post(server, "/v1/translate", {"texts": ["Hi."]}, **{TIMEOUT_HEADER: value})
    assert status == 200, data


@pytest.mark.parametrize("value", ["2s", "123456789S", "S", "2 S", "1.5S", "-1S"])
def test_the_timeout_pattern_refuses_what_the_server_refuses(server, doc, value):
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(value, timeout_schema(doc))
    status, _, data = post(server, "/v1/translate", {"texts": ["Hi."]}, **{TIMEOUT_HEADER: value})
    assert status == 400, data


@pytest.mark.parametrize(
    "name, instance",
    [
        ("nmt.v1.TranslateResponse", {"translations": "not a list"}),
        ("nmt.v1.TranslateResponse", {"translation": []}),  # misspelt field
        ("nmt.v1.Hypothesis", {"score": "high"}),
        # a float that is not finite is a string in the mapping, said in words only (a
        # plain number schema keeps generated clients' floats plain): the schema refuses it
        ("nmt.v1.Hypothesis", {"score": "NaN"}),
        ("nmt.v1.Translation", {"source_tokens": -1}),
        ("nmt.v1.DecodeOptions", {"strategy": "STRATEGY_SIDEWAYS"}),
        ("nmt.v1.DecodeOptions", {"seed": "12a"}),
        ("nmt.v1.DecodeOptions", {"seed": 7}),  # the server writes 64-bit integers as strings
        ("Error", {"code": 3, "status": "INVALID_ARGUMENT"}),  # no message
        ("HealthStatus", {}),
    ],
)
def test_the_schemas_refuse_what_the_mapping_does_not_write(doc, name, instance):
    with pytest.raises(jsonschema.ValidationError):
        check(doc, name, instance)


def test_the_published_schemas_stay_open_to_fields_added_later(doc):
    # a client generated from this document keeps working when the .proto grows
    schemas = doc["components"]["schemas"]
    assert not [name for name, s in schemas.items() if s.get("additionalProperties") is False]
    jsonschema.Draft202012Validator(schemas["nmt.v1.Timing"]).validate({"later_ms": 1.0})


def test_the_schemas_take_the_mapping_s_forms(doc):
    # 64-bit integers as strings, enums by name
    largest = str(2**64 - 1)
    check(doc, "nmt.v1.DecodeOptions", {"seed": largest, "strategy": "STRATEGY_BEAM"})
    check(doc, "nmt.v1.ModelInfo", {"parameters": "1234"})


# -- a route that does not match the .proto ---------------------------------------------


@pytest.mark.parametrize(
    "route, match",
    [
        (Route("Detect", pb.TranslateRequest, pb.TranslateResponse), "not in service"),
        (Route("Translate", pb.ScoreRequest, pb.TranslateResponse), "the .proto's method"),
        (Route("Translate", pb.TranslateRequest, pb.TranslateResponse, stream=True), "method"),
    ],
    ids=["unknown-method", "wrong-request", "wrong-streaming"],
)
def test_a_route_that_does_not_match_its_method_is_refused(monkeypatch, route, match):
    monkeypatch.setitem(openapi.ROUTES, ("POST", "/v1/odd"), route)
    with pytest.raises(openapi.OpenApiError, match=match):
        openapi.document()


# -- a client generated from it by another tool ----------------------------------------


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """The ``nmtc`` package openapi-python-client generates from the committed document."""
    where = tmp_path_factory.mktemp("generated")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "openapi_python_client",
            "generate",
            "--path",
            str(OPENAPI_FILE),
            "--meta",
            "none",
            "--output-path",
            str(where / "nmtc"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    sys.path.insert(0, str(where))
    try:
        yield importlib.import_module("nmtc")
    finally:
        sys.path.remove(str(where))
        for name in [n for n in sys.modules if n == "nmtc" or n.startswith("nmtc.")]:
            del sys.modules[name]


def test_a_generated_client_translates_as_grpc_does(server, stub, generated, tiny_bundle):
    translate, list_models = (
        importlib.import_module(f"nmtc.api.default.{name}") for name in ("translate", "list_models")
    )
    models = importlib.import_module("nmtc.models")
    client = generated.Client(base_url=f"http://127.0.0.1:{server.http_port}", timeout=30.0)
    texts = tiny_bundle.sentences[:2]
    options = models.NmtV1DecodeOptions(
        strategy=models.NmtV1Strategy.STRATEGY_BEAM, beam_size=3, n_best=2, return_scores=True
    )
    reply = translate.sync(
        client=client, body=models.NmtV1TranslateRequest(texts=texts, options=options)
    )
    want = stub.Translate(
        pb.TranslateRequest(texts=texts, options=proto_options(3, 2, return_scores=True)),
        timeout=TIMEOUT,
    )
    got = [[(h.text, h.score) for h in t.hypotheses] for t in reply.translations]
    assert got == [
        [(h.text, pytest.approx(h.score)) for h in t.hypotheses] for t in want.translations
    ]

    listed = list_models.sync(client=client)
    models_listed = stub.ListModels(pb.ListModelsRequest(), timeout=TIMEOUT).models
    assert [m.name for m in listed.models] == [m.name for m in models_listed]

    refused = translate.sync_detailed(
        client=client, body=models.NmtV1TranslateRequest(texts=["a"], model="no-such-model")
    )
    assert refused.status_code == 400
    assert refused.parsed.status.value == "INVALID_ARGUMENT"
    assert "no-such-model" in refused.parsed.message
