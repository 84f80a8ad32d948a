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

from nmt_api.nmt.v1 import translator_pb2 as pb
from service import openapi
from service.httpapi import GET_ONLY, OPENAPI, OPENAPI_FILE, ROUTES, verbs_of
from service.sessions import RuntimeConfig
from tests.service.server_helpers import TIMEOUT, proto_options, stub_for
from tests.service.test_httpapi import call, events, post

DOC_URI = "urn:nmt-openapi"


@pytest.fixture(scope="module")
def doc() -> dict:
    return json.loads(OPENAPI_FILE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def server(server_factory):
    runtime = RuntimeConfig(providers=("cpu",), intra_op_threads=1)
    return server_factory(server={"http_port": 0, "runtime": runtime})


def check(doc: dict, name: str, instance) -> None:
    """Validate ``instance`` against ``#/components/schemas/name`` of ``doc``."""
    registry = Registry().with_resource(
        DOC_URI, Resource.from_contents(doc, default_specification=DRAFT202012)
    )
    validator = jsonschema.Draft202012Validator(
        {"$ref": f"{DOC_URI}#/components/schemas/{name}"}, registry=registry
    )
    validator.validate(instance)


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
def test_translate_requests_and_answers_fit_their_schemas(server, doc, tiny_bundle, options):
    request = pb.TranslateRequest(texts=tiny_bundle.sentences[:2], options=options)
    body = json_format.MessageToDict(request, preserving_proto_field_name=True)
    check(doc, "nmt.v1.TranslateRequest", body)
    status, _, data = post(server, "/v1/translate", body)
    assert status == 200, data
    answer = json.loads(data)
    assert answer["translations"]
    check(doc, "nmt.v1.TranslateResponse", answer)


def test_score_stream_models_and_health_fit_their_schemas(server, doc, tiny_bundle):
    text = tiny_bundle.sentences[0]
    score = {"texts": [text], "targets": [""], "options": {"return_attention": True}}
    check(doc, "nmt.v1.ScoreRequest", score)
    status, _, data = post(server, "/v1/score", score)
    assert status == 200, data
    check(doc, "nmt.v1.ScoreResponse", json.loads(data))

    stream = {"text": text, "options": {"return_scores": True}}
    check(doc, "nmt.v1.TranslateStreamRequest", stream)
    status, headers, data = post(server, "/v1/translate/stream", stream)
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    received = events(data)
    assert received and received[-1][1].get("final") is True
    for name, event in received:
        assert name == "message"
        check(doc, "nmt.v1.TranslateStreamResponse", event)

    status, _, data = call(server.http_port, "GET", "/v1/models")
    assert status == 200
    models = json.loads(data)
    assert models["models"]
    check(doc, "nmt.v1.ListModelsResponse", models)

    for path in ("/v1/health/live", "/v1/health/ready"):
        status, _, data = call(server.http_port, "GET", path)
        assert status == 200
        check(doc, "HealthStatus", json.loads(data))


@pytest.mark.parametrize(
    "path, body, status",
    [
        ("/v1/translate", {"texts": ["a"], "nope": 1}, 400),
        ("/v1/translate", {"texts": ["a"], "model": "no-such-model"}, 400),
        ("/v1/nothing", {}, 404),
    ],
)
def test_errors_fit_the_error_schema(server, doc, path, body, status):
    got, _, data = post(server, path, body)
    assert got == status, data
    check(doc, "Error", json.loads(data))


@pytest.mark.parametrize(
    "name, instance",
    [
        ("nmt.v1.TranslateResponse", {"translations": "not a list"}),
        ("nmt.v1.TranslateResponse", {"translation": []}),  # misspelt field
        ("nmt.v1.Hypothesis", {"score": "high"}),
        ("nmt.v1.Translation", {"source_tokens": -1}),
        ("nmt.v1.DecodeOptions", {"strategy": "STRATEGY_SIDEWAYS"}),
        ("nmt.v1.DecodeOptions", {"seed": "12a"}),
        ("Error", {"code": 3, "status": "INVALID_ARGUMENT"}),  # no message
        ("HealthStatus", {}),
    ],
)
def test_the_schemas_refuse_what_the_mapping_does_not_write(doc, name, instance):
    with pytest.raises(jsonschema.ValidationError):
        check(doc, name, instance)


def test_the_schemas_take_the_mapping_s_special_forms(doc):
    # 64-bit integers as strings or numbers, enums by name
    largest = str(2**64 - 1)
    check(doc, "nmt.v1.DecodeOptions", {"seed": largest, "strategy": "STRATEGY_BEAM"})
    check(doc, "nmt.v1.DecodeOptions", {"seed": 7})
    check(doc, "nmt.v1.ModelInfo", {"parameters": "1234"})


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


def test_a_generated_client_translates_as_grpc_does(server, generated, tiny_bundle):
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
    channel, stub = stub_for(server.port)
    with channel:
        want = stub.Translate(
            pb.TranslateRequest(texts=texts, options=proto_options(3, 2, return_scores=True)),
            timeout=TIMEOUT,
        )
    got = [[(h.text, h.score) for h in t.hypotheses] for t in reply.translations]
    assert got == [
        [(h.text, pytest.approx(h.score)) for h in t.hypotheses] for t in want.translations
    ]

    listed = list_models.sync(client=client)
    assert [m.name for m in listed.models] == [m.name for m in stub_models(server)]

    refused = translate.sync_detailed(
        client=client, body=models.NmtV1TranslateRequest(texts=["a"], model="no-such-model")
    )
    assert refused.status_code == 400
    assert refused.parsed.status.value == "INVALID_ARGUMENT"
    assert "no-such-model" in refused.parsed.message


def stub_models(server):
    channel, stub = stub_for(server.port)
    with channel:
        return stub.ListModels(pb.ListModelsRequest(), timeout=TIMEOUT).models
