"""The HTTP/JSON API (``service/httpapi.py``) as an OpenAPI 3.1 document, generated from
``protos/nmt/v1/translator.proto`` and the route table, as grpc-gateway's
protoc-gen-openapiv2 does: a schema per message and enum in proto3's JSON mapping (the
form ``json_format`` writes), the ``.proto``'s comments as descriptions.

    python -m service.openapi            # rewrite service/static/openapi.json
    python -m service.openapi --check    # exit 1 if the committed file is stale

The server serves the committed file at ``GET /v1/openapi.json``; generating it needs
grpcio-tools (a dev dependency), which serving never imports.

The schemas describe what the server writes. It reads more (lowerCamelCase field names,
enums by number, 64-bit integers as JSON numbers, ``null`` for a field left unset): the
descriptions say so, and the schemas leave ``additionalProperties`` open, so that a field
added to the ``.proto`` later does not break a client generated from an older document.
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

from nmt_api import REQUEST_ID_HEADER, TIMEOUT_HEADER
from service.httpapi import LIVE, NOT_SERVING, OPENAPI, READY, ROUTES, SERVING, Route
from service.httpgrpc import HTTP_STATUS, TIMEOUT_VALUE

ROOT = Path(__file__).resolve().parents[1]
PROTO = Path("nmt/v1/translator.proto")  # under protos/
OUT = Path(__file__).resolve().parent / "static" / "openapi.json"
PACKAGE = "nmt.v1"

F = descriptor_pb2.FieldDescriptorProto
_INT64 = {"type": "string", "format": "int64", "pattern": "^-?[0-9]+$"}
_UINT64 = {"type": "string", "format": "uint64", "pattern": "^[0-9]+$"}
# 32-bit unsigned: OpenAPI's formats have no uint32, and int32 would cap it at 2^31 - 1.
_UINT32 = {"type": "integer", "format": "int64", "minimum": 0, "maximum": 2**32 - 1}
# proto3's JSON mapping of each scalar type, as json_format writes it. 64-bit integers are
# strings (grpc-gateway's schema too); a float that is not finite is a string ("NaN",
# "Infinity", "-Infinity"): said in words (the document's description), for a union type
# would give every float field of a generated client a class of its own.
SCALARS: dict[int, dict[str, Any]] = {
    F.TYPE_DOUBLE: {"type": "number", "format": "double"},
    F.TYPE_FLOAT: {"type": "number", "format": "float"},
    F.TYPE_INT32: {"type": "integer", "format": "int32"},
    F.TYPE_SINT32: {"type": "integer", "format": "int32"},
    F.TYPE_SFIXED32: {"type": "integer", "format": "int32"},
    F.TYPE_UINT32: _UINT32,
    F.TYPE_FIXED32: _UINT32,
    F.TYPE_INT64: _INT64,
    F.TYPE_SINT64: _INT64,
    F.TYPE_SFIXED64: _INT64,
    F.TYPE_UINT64: _UINT64,
    F.TYPE_FIXED64: _UINT64,
    F.TYPE_BOOL: {"type": "boolean"},
    F.TYPE_STRING: {"type": "string"},
    F.TYPE_BYTES: {"type": "string", "contentEncoding": "base64"},
}
# source_code_info paths: descriptor.proto's field numbers
MESSAGE = descriptor_pb2.FileDescriptorProto.MESSAGE_TYPE_FIELD_NUMBER
FIELD = descriptor_pb2.DescriptorProto.FIELD_FIELD_NUMBER
ENUM = descriptor_pb2.FileDescriptorProto.ENUM_TYPE_FIELD_NUMBER
ENUM_VALUE = descriptor_pb2.EnumDescriptorProto.VALUE_FIELD_NUMBER
SERVICE = descriptor_pb2.FileDescriptorProto.SERVICE_FIELD_NUMBER
METHOD = descriptor_pb2.ServiceDescriptorProto.METHOD_FIELD_NUMBER

ERROR = "Error"
HEALTH = "HealthStatus"
JSON = "application/json"
# The stream route's media type names its events' schema here (OpenAPI 3.1 has no way to
# type the items of a text/event-stream; 3.2's itemSchema does).
SSE_DATA = "x-sse-data"

Comments = dict[tuple[int, ...], str]


class OpenApiError(RuntimeError):
    """The document cannot be generated: the .proto or a route has a form this mapping
    lacks, or a route does not match its method in the .proto."""


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


def comments_of(proto: descriptor_pb2.FileDescriptorProto) -> Comments:
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


def schemas(proto: descriptor_pb2.FileDescriptorProto, comments: Comments) -> dict[str, Any]:
    """A JSON Schema per message and enum of ``proto`` (named ``nmt.v1.Name``), the error
    object and the health answer."""
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
            {"type": "object", "properties": properties}, comments.get((MESSAGE, i))
        )
    out[ERROR] = {
        "type": "object",
        "description": "A call that did not succeed: its gRPC status, whose code sets the "
        "HTTP status, and what to do about it.",
        "properties": {
            "code": {"type": "integer", "description": "the gRPC status code (google.rpc.Code)"},
            "status": {"type": "string", "enum": [code.name for code in grpc.StatusCode]},
            "message": {"type": "string"},
        },
        "required": ["code", "status", "message"],
    }
    out[HEALTH] = {
        "type": "object",
        "properties": {"status": {"type": "string", "enum": [SERVING, NOT_SERVING]}},
        "required": ["status"],
    }
    return out


def _content(schema: dict[str, Any], media: str = JSON) -> dict[str, Any]:
    return {media: {"schema": schema}}


def _error_responses() -> dict[str, Any]:
    mapping = ", ".join(f"{code.name} {status}" for code, status in HTTP_STATUS.items())
    return {
        "default": {
            "description": f"An error, with the HTTP status of its gRPC code ({mapping}); "
            "a route that does not take the method answers 405 (UNIMPLEMENTED) with Allow. A "
            "request the server cannot read as HTTP (e.g. headers over 8190 bytes) gets "
            "the HTTP server's own 400 as text/plain.",
            "headers": {
                "Retry-After": {
                    "description": "seconds after which the same call may succeed: on a 503 "
                    "(warming up, draining) and on a 429 for overload, not on one for a body "
                    "over the size limit",
                    "schema": {"type": "integer"},
                }
            },
            "content": {**_content(_ref(ERROR)), **_content({"type": "string"}, "text/plain")},
        }
    }


def _method_index(route: Route, service: descriptor_pb2.ServiceDescriptorProto) -> int:
    """The index in ``service`` of the ``.proto`` method a route runs; a route that does
    not match it (messages, streaming) is an :class:`OpenApiError`."""
    found = [(i, m) for i, m in enumerate(service.method) if m.name == route.method]
    if not found:
        raise OpenApiError(f"route method {route.method} is not in service {service.name}")
    ((index, method),) = found
    wanted = (
        f".{route.request.DESCRIPTOR.full_name}",
        f".{route.response.DESCRIPTOR.full_name}",
        route.stream,
    )
    if (method.input_type, method.output_type, method.server_streaming) != wanted:
        raise OpenApiError(
            f"route for {route.method} takes {wanted}, the .proto's method "
            f"({method.input_type}, {method.output_type}, {method.server_streaming})"
        )
    return index


def _operation(
    route: Route, service: descriptor_pb2.ServiceDescriptorProto, comments: Comments
) -> dict[str, Any]:
    index = _method_index(route, service)
    about = comments.get((SERVICE, 0, METHOD, index), route.method)
    operation: dict[str, Any] = {
        "operationId": route.method,
        "summary": about.split(". ")[0].rstrip("."),
        "description": f"{about} (gRPC: {PACKAGE}.{service.name}/{route.method})",
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
    if route.request.DESCRIPTOR.fields:
        request = _ref(route.request.DESCRIPTOR.full_name)
        operation["requestBody"] = {"required": True, "content": _content(request)}
    reply = _ref(route.response.DESCRIPTOR.full_name)
    if route.stream:
        ok = {
            "description": f"Server-sent events: each event's data is a JSON "
            f"{route.response.DESCRIPTOR.full_name} (the media type's {SSE_DATA}), the last "
            f"with final true; a failure after the first event is an event named error "
            f"whose data is an {ERROR}",
            "content": {"text/event-stream": {"schema": {}, SSE_DATA: reply}},
        }
    else:
        ok = {"description": "OK", "content": _content(reply)}
    operation["responses"] = {"200": ok, **_error_responses()}
    return operation


def _fixed_paths() -> dict[str, dict[str, Any]]:
    """The routes that run no gRPC method: health, this document, the demo page."""
    health = _content(_ref(HEALTH))
    return {
        LIVE: {
            "get": {
                "operationId": "Live",
                "summary": f"Liveness: 200 {SERVING} while the process serves HTTP",
                "responses": {"200": {"description": "serving", "content": health}},
            }
        },
        READY: {
            "get": {
                "operationId": "Ready",
                "summary": f"Readiness, as gRPC health says: 200 {SERVING} once warmed up, "
                f"503 {NOT_SERVING} while starting or draining",
                "responses": {
                    "200": {"description": "serving", "content": health},
                    "503": {
                        "description": "not serving",
                        "headers": {
                            "Retry-After": {
                                "description": "seconds after which to ask again",
                                "schema": {"type": "integer"},
                            }
                        },
                        "content": health,
                    },
                },
            }
        },
        OPENAPI: {
            "get": {
                "operationId": "OpenApi",
                "summary": "This document",
                "responses": {"200": {"description": "OpenAPI 3.1", "content": _content({})}},
            }
        },
        "/": {
            "get": {
                "operationId": "DemoPage",
                "summary": "A demo page: translate, with n-best lists, scores and attention maps",
                "responses": {"200": {"description": "HTML", "content": {"text/html": {}}}},
            }
        },
    }


def document(proto: descriptor_pb2.FileDescriptorProto | None = None) -> dict[str, Any]:
    """The OpenAPI 3.1 document of the routes in ``service/httpapi.py``."""
    proto = proto or compile_proto()
    if proto.package != PACKAGE or len(proto.service) != 1:
        raise OpenApiError(f"{PROTO}: expected package {PACKAGE} with one service")
    comments = comments_of(proto)
    (service,) = proto.service
    paths: dict[str, dict[str, Any]] = {}
    for (verb, path), route in ROUTES.items():
        paths.setdefault(path, {})[verb.lower()] = _operation(route, service, comments)
    paths.update(_fixed_paths())
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "NMT translation service, HTTP/JSON",
            "version": "v1",
            "description": (
                f"The gRPC service {PACKAGE}.{service.name} over HTTP/1.1 (nmt-serve "
                "--http-port): bodies are its messages in proto3's JSON mapping. Answers "
                "name fields by their proto names and leave out fields at their default; "
                "64-bit integers are strings, and a float that is not finite is the string "
                '"NaN", "Infinity" or "-Infinity". Requests may also use lowerCamelCase '
                "names, enum numbers, JSON numbers for 64-bit integers and null for a field "
                "left unset. Generated from translator.proto by python -m service.openapi."
            ),
        },
        "paths": paths,
        "components": {"schemas": schemas(proto, comments)},
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
