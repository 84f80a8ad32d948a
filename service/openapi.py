"""The HTTP/JSON API (``service/httpapi.py``) as an OpenAPI 3.1 document, generated from
``protos/nmt/v1/translator.proto`` and the route table, as grpc-gateway's
protoc-gen-openapiv2 does: a schema per message and enum in proto3's JSON mapping (the
form ``json_format`` reads and writes), the ``.proto``'s comments as descriptions.

    python -m service.openapi            # rewrite service/static/openapi.json
    python -m service.openapi --check    # exit 1 if the committed file is stale

The server serves the committed file at ``GET /v1/openapi.json``; generating it needs
grpcio-tools (a dev dependency), which serving never imports.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import descriptor_pb2

from nmt_api import TIMEOUT_HEADER
from service.httpapi import LIVE, OPENAPI, READY, ROUTES, Route
from service.httpgrpc import TIMEOUT_VALUE
from service.logs import REQUEST_ID_HEADER

ROOT = Path(__file__).resolve().parents[1]
PROTO = Path("nmt/v1/translator.proto")  # under protos/
OUT = Path(__file__).resolve().parent / "static" / "openapi.json"
PACKAGE = "nmt.v1"

F = descriptor_pb2.FieldDescriptorProto
# proto3's JSON mapping of each scalar type. 64-bit integers are written as strings (read
# as either). A float that is not finite is written as a string, "NaN", "Infinity" or
# "-Infinity": said in words, as grpc-gateway does, for a schema of plain numbers gives
# generated clients plain float fields (a union type gave each field a class of its own).
NOT_FINITE = 'not finite: the string "NaN", "Infinity" or "-Infinity"'
SCALARS: dict[int, dict[str, Any]] = {
    F.TYPE_DOUBLE: {"type": "number", "format": "double"},
    F.TYPE_FLOAT: {"type": "number", "format": "float"},
    F.TYPE_INT32: {"type": "integer", "format": "int32"},
    F.TYPE_SINT32: {"type": "integer", "format": "int32"},
    F.TYPE_SFIXED32: {"type": "integer", "format": "int32"},
    F.TYPE_UINT32: {"type": "integer", "format": "int64", "minimum": 0, "maximum": 2**32 - 1},
    F.TYPE_FIXED32: {"type": "integer", "format": "int64", "minimum": 0, "maximum": 2**32 - 1},
    F.TYPE_INT64: {"type": ["string", "integer"], "format": "int64", "pattern": "^-?[0-9]+$"},
    F.TYPE_SINT64: {"type": ["string", "integer"], "format": "int64", "pattern": "^-?[0-9]+$"},
    F.TYPE_SFIXED64: {"type": ["string", "integer"], "format": "int64", "pattern": "^-?[0-9]+$"},
    F.TYPE_UINT64: {"type": ["string", "integer"], "format": "uint64", "pattern": "^[0-9]+$"},
    F.TYPE_FIXED64: {"type": ["string", "integer"], "format": "uint64", "pattern": "^[0-9]+$"},
    F.TYPE_BOOL: {"type": "boolean"},
    F.TYPE_STRING: {"type": "string"},
    F.TYPE_BYTES: {"type": "string", "contentEncoding": "base64"},
}
# source_code_info paths (descriptor.proto's field numbers)
MESSAGE, FIELD, ENUM, ENUM_VALUE, SERVICE, METHOD = 4, 2, 5, 2, 6, 2

ERROR = "Error"
HEALTH = "HealthStatus"
JSON = "application/json"


class OpenApiError(RuntimeError):
    """The document cannot be generated (the .proto has a form this mapping lacks)."""


def compile_proto(proto_root: Path = ROOT / "protos") -> descriptor_pb2.FileDescriptorProto:
    """``translator.proto`` compiled by grpcio-tools' protoc, comments kept."""
    from grpc_tools import protoc  # a dev dependency: only generating needs it

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "set.pb"
        argv = [
            "protoc",
            f"-I{proto_root}",
            "--include_source_info",
            f"--descriptor_set_out={out}",
            str(PROTO),
        ]
        if protoc.main(argv) != 0:
            raise OpenApiError(f"protoc could not compile {proto_root / PROTO}")
        files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file
    return files[0]


def _comments(proto: descriptor_pb2.FileDescriptorProto) -> dict[tuple[int, ...], str]:
    """Each commented element's path -> its leading and trailing comments as one text."""
    out = {}
    for location in proto.source_code_info.location:
        parts = [location.leading_comments, location.trailing_comments]
        text = " ".join(" ".join(p.split()) for p in parts if p.strip())
        if text:
            out[tuple(location.path)] = text
    return out


def _described(schema: dict[str, Any], text: str | None) -> dict[str, Any]:
    return {**schema, "description": text} if text else schema


def _ref(type_name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{type_name.removeprefix('.')}"}


def _field_schema(field: descriptor_pb2.FieldDescriptorProto) -> dict[str, Any]:
    if field.type in (F.TYPE_MESSAGE, F.TYPE_ENUM):
        if not field.type_name.startswith(f".{PACKAGE}."):
            raise OpenApiError(f"field {field.name}: type {field.type_name} is not in {PACKAGE}")
        schema: dict[str, Any] = _ref(field.type_name)
    elif field.type in SCALARS:
        schema = dict(SCALARS[field.type])
    else:
        raise OpenApiError(f"field {field.name}: type {field.type} has no JSON mapping here")
    if field.label == F.LABEL_REPEATED:
        schema = {"type": "array", "items": schema}
    return schema


def schemas(proto: descriptor_pb2.FileDescriptorProto) -> dict[str, dict[str, Any]]:
    """A JSON Schema per message and enum of ``proto``, named ``nmt.v1.Name``."""
    comments = _comments(proto)
    out: dict[str, dict[str, Any]] = {}
    for i, enum in enumerate(proto.enum_type):
        values = [
            f"{value.name}: {comments[(ENUM, i, ENUM_VALUE, j)]}"
            if (ENUM, i, ENUM_VALUE, j) in comments
            else value.name
            for j, value in enumerate(enum.value)
        ]
        about = comments.get((ENUM, i), f"One of {enum.name}'s values")
        out[f"{PACKAGE}.{enum.name}"] = {
            "type": "string",
            "enum": [value.name for value in enum.value],
            "description": f"{about} (by name; its number is read too). " + "; ".join(values),
        }
    for i, message in enumerate(proto.message_type):
        if message.nested_type or message.enum_type:
            raise OpenApiError(f"message {message.name}: nested types have no schema here")
        properties = {
            field.name: _described(_field_schema(field), comments.get((MESSAGE, i, FIELD, j)))
            for j, field in enumerate(message.field)
        }
        out[f"{PACKAGE}.{message.name}"] = _described(
            {"type": "object", "properties": properties, "additionalProperties": False},
            comments.get((MESSAGE, i)),
        )
    out[ERROR] = {
        "type": "object",
        "description": "A call that did not succeed: its gRPC status, whose code sets the "
        "HTTP status (google.rpc.Code's mapping), and what to do about it.",
        "properties": {
            "code": {"type": "integer", "description": "the gRPC status code (google.rpc.Code)"},
            "status": {"type": "string", "enum": [code.name for code in grpc.StatusCode]},
            "message": {"type": "string"},
        },
        "required": ["code", "status", "message"],
        "additionalProperties": False,
    }
    out[HEALTH] = {
        "type": "object",
        "properties": {"status": {"type": "string", "enum": ["SERVING", "NOT_SERVING"]}},
        "required": ["status"],
        "additionalProperties": False,
    }
    return out


def _content(schema: dict[str, Any], media: str = JSON) -> dict[str, Any]:
    return {media: {"schema": schema}}


def _error_responses() -> dict[str, Any]:
    return {
        "default": {
            "description": "An error: the HTTP status of its gRPC code (400 INVALID_ARGUMENT, "
            "429 RESOURCE_EXHAUSTED, 503 UNAVAILABLE, 504 DEADLINE_EXCEEDED...)",
            "content": _content(_ref(ERROR)),
        }
    }


def _operation(route: Route, comments: dict[tuple[int, ...], str], methods: list[str]) -> dict:
    index = methods.index(route.method)
    about = comments.get((SERVICE, 0, METHOD, index), route.method)
    operation: dict[str, Any] = {
        "operationId": route.method,
        "summary": about.split(". ")[0].rstrip("."),
        "description": f"{about} (gRPC: {PACKAGE}.Translator/{route.method})",
        "parameters": [
            {
                "name": TIMEOUT_HEADER,
                "in": "header",
                "description": "the call's deadline as gRPC writes it: 1-8 digits and a unit "
                "(H, M, S, m, u, n), e.g. 2S or 500m",
                "schema": {"type": "string", "pattern": f"^{TIMEOUT_VALUE.pattern}$"},
            },
            {
                "name": REQUEST_ID_HEADER,
                "in": "header",
                "description": "the request's id in the server's access log, answered in the "
                "same header (absent or unusable: the server makes one up)",
                "schema": {"type": "string"},
            },
        ],
    }
    request = route.request.DESCRIPTOR.full_name
    if route.request.DESCRIPTOR.fields:
        operation["requestBody"] = {"required": True, "content": _content(_ref(request))}
    reply = _ref(route.response.DESCRIPTOR.full_name)
    if route.stream:
        ok = {
            "description": "Server-sent events: each event's data is a JSON "
            f"{route.response.DESCRIPTOR.full_name} (schema {reply['$ref']}), the last "
            f"with final true; a failure after the first event is an event named error "
            f"whose data is an {ERROR}",
            "content": _content({"type": "string"}, "text/event-stream"),
        }
    else:
        ok = {"description": "OK", "content": _content(reply)}
    operation["responses"] = {"200": ok, **_error_responses()}
    return operation


def document(proto: descriptor_pb2.FileDescriptorProto | None = None) -> dict[str, Any]:
    """The OpenAPI 3.1 document of the routes in ``service/httpapi.py``."""
    proto = proto or compile_proto()
    if proto.package != PACKAGE or len(proto.service) != 1:
        raise OpenApiError(f"{PROTO}: expected package {PACKAGE} with one service")
    comments = _comments(proto)
    methods = [method.name for method in proto.service[0].method]
    paths: dict[str, dict[str, Any]] = {}
    for (verb, path), route in ROUTES.items():
        operation = _operation(route, comments, methods)
        paths.setdefault(path, {})[verb.lower()] = operation
    health = {
        "200": {"description": "serving", "content": _content(_ref(HEALTH))},
        "503": {"description": "not serving", "content": _content(_ref(HEALTH))},
    }
    paths[LIVE] = {
        "get": {
            "operationId": "Live",
            "summary": "Liveness: 200 while the process serves HTTP",
            "responses": {"200": health["200"]},
        }
    }
    paths[READY] = {
        "get": {
            "operationId": "Ready",
            "summary": "Readiness, as gRPC health says: 200 SERVING once warmed up, 503 "
            "NOT_SERVING while starting or draining",
            "responses": health,
        }
    }
    paths[OPENAPI] = {
        "get": {
            "operationId": "OpenApi",
            "summary": "This document",
            "responses": {"200": {"description": "OpenAPI 3.1", "content": _content({})}},
        }
    }
    paths["/"] = {
        "get": {
            "operationId": "DemoPage",
            "summary": "A demo page: translate, with n-best lists, scores and attention maps",
            "responses": {"200": {"description": "HTML", "content": {"text/html": {}}}},
        }
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "NMT translation service, HTTP/JSON",
            "version": "v1",
            "description": (
                f"{comments.get((SERVICE, 0), '')} The gRPC service {PACKAGE}.Translator "
                "over HTTP/1.1 (nmt-serve --http-port): bodies are its messages in proto3's "
                "JSON mapping, fields by their proto names (lowerCamelCase is read too), "
                "fields at their default left out of answers, 64-bit integers as strings, "
                f"a float {NOT_FINITE}. "
                "Generated from translator.proto by python -m service.openapi."
            ).strip(),
        },
        "paths": paths,
        "components": {"schemas": schemas(proto)},
    }


def render(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=1, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m service.openapi", description=__doc__)
    p.add_argument("--check", action="store_true", help="exit 1 if the committed file is stale")
    p.add_argument("--out", type=Path, default=OUT, help=f"where to write (default {OUT})")
    args = p.parse_args(argv)
    text = render(document())
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
        if current != text:
            print(f"{args.out} is stale: run python -m service.openapi", file=sys.stderr)
            return 1
        return 0
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
