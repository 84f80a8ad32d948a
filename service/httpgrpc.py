"""An HTTP request as the gRPC servicer sees it (``service/httpapi.py``): the stand-in for
the ``grpc.aio.ServicerContext`` its handlers use, ``Grpc-Timeout`` deadlines, gRPC status
codes as HTTP statuses, and messages to and from proto3's JSON mapping."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable

import grpc
import numpy as np
from google.protobuf import json_format
from google.protobuf.message import Message

from nmt_api import TIMEOUT_HEADER
from service.errors import InvalidRequest
from service.logs import REQUEST_ID_HEADER

# google.rpc.Code -> HTTP status, as google/rpc/code.proto documents each code (and
# grpc-gateway maps them); CANCELLED is nginx's 499 "client closed request".
HTTP_STATUS = {
    grpc.StatusCode.OK: 200,
    grpc.StatusCode.CANCELLED: 499,
    grpc.StatusCode.UNKNOWN: 500,
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.FAILED_PRECONDITION: 400,
    grpc.StatusCode.ABORTED: 409,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.UNIMPLEMENTED: 501,
    grpc.StatusCode.INTERNAL: 500,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DATA_LOSS: 500,
}
# TIMEOUT_HEADER's value: at most 8 digits and a unit (hours .. nanoseconds).
TIMEOUT_VALUE = re.compile(r"([0-9]{1,8})([HMSmun])")
_UNIT_SECONDS = {"H": 3600.0, "M": 60.0, "S": 1.0, "m": 1e-3, "u": 1e-6, "n": 1e-9}
# A parse error quotes the body; no more of it than this goes back (or into a log).
MAX_ERROR_CHARS = 300
_BAD_ENUM = re.compile(r"Invalid enum value \S+ for enum type ([\w.]+)")
# Arrays and objects nested deeper than this are refused before parsing (see _depth)
MAX_JSON_DEPTH = 32
# Most list items (texts, phrases, tokens: all lists together) a body may hold. protobuf's
# JSON mapping converts each in Python, ~1.3 us: a 4 MB body of a million strings took
# 1.3 s of the event loop's CPU before its 1,000,000 texts were refused (helper-84).
MAX_JSON_ITEMS = 20_000
_QUOTE, _BACKSLASH = ord('"'), ord("\\")
_OPENERS = np.frombuffer(b"[{", dtype=np.uint8)
_CLOSERS = np.frombuffer(b"]}", dtype=np.uint8)


class Aborted(Exception):
    """The servicer ended the call with a status (``context.abort``)."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


class HttpContext:
    """What the servicer asks of a ``grpc.aio.ServicerContext``, for one HTTP request.

    ``deadline``: the loop's clock at the request's deadline (``None``: none);
    ``write``: how a stream sends a message's bytes."""

    def __init__(
        self,
        asked_id: str | None,
        deadline: float | None,
        write: Callable[[bytes], Awaitable[None]] | None = None,
    ) -> None:
        self._asked_id = asked_id
        self._deadline = deadline
        self._write = write
        self.request_id = ""

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return ((REQUEST_ID_HEADER, self._asked_id),) if self._asked_id else ()

    def set_trailing_metadata(self, metadata) -> None:
        self.request_id = dict(metadata).get(REQUEST_ID_HEADER, self.request_id)

    def time_remaining(self) -> float | None:
        if self._deadline is None:
            return None
        return self._deadline - asyncio.get_running_loop().time()

    async def write(self, data: bytes) -> None:
        assert self._write is not None, "only a stream writes"
        await self._write(data)

    async def abort(self, code: grpc.StatusCode, message: str, trailing_metadata=()) -> None:
        raise Aborted(code, message)


def deadline_of(header: str | None) -> float | None:
    """The loop-clock deadline a ``Grpc-Timeout`` value sets (``None``: none); a malformed
    one raises :class:`InvalidRequest`."""
    if header is None:
        return None
    match = TIMEOUT_VALUE.fullmatch(header.strip())
    if match is None:
        raise InvalidRequest(
            f"{TIMEOUT_HEADER} {header[:40]!r} is not a gRPC timeout: 1-8 digits and a unit, "
            "H, M, S, m (ms), u (us) or n (ns), e.g. 2S or 500m"
        )
    seconds = int(match[1]) * _UNIT_SECONDS[match[2]]
    return asyncio.get_running_loop().time() + seconds


def to_json(message: Message) -> bytes:
    """``message`` in proto3's JSON mapping, by proto field names, UTF-8."""
    fields = json_format.MessageToDict(message, preserving_proto_field_name=True)
    return json.dumps(fields, ensure_ascii=False, separators=(",", ":")).encode()


def error_body(code: grpc.StatusCode, message: str) -> bytes:
    return json.dumps(
        {"code": code.value[0], "status": code.name, "message": message}, ensure_ascii=False
    ).encode()


def parse(body: bytes, request_type: type[Message]) -> bytes:
    """``body`` (JSON) as the bytes of a ``request_type`` message, or InvalidRequest."""
    if body.count(b"{") > MAX_JSON_ITEMS:  # objects cost the duplicate-name check each
        raise InvalidRequest(
            f"the body holds over {MAX_JSON_ITEMS:,} objects; the API's requests need a few"
        )
    if _depth(body) > MAX_JSON_DEPTH:
        raise InvalidRequest(
            f"the body nests arrays and objects deeper than {MAX_JSON_DEPTH} levels; "
            "the API's messages need at most 4"
        )
    try:
        # json.loads (C) first, then protobuf's mapping, as json_format.Parse does, so
        # that a body of far too many items is refused before the costly part
        try:
            value = json.loads(body.decode("utf-8"), object_pairs_hook=_unique_keys)
        except ValueError as exc:  # JSONDecodeError; UnicodeDecodeError is one too
            raise json_format.ParseError(f"Failed to load JSON: {exc}.") from None
        if not isinstance(value, dict):  # (protobuf's mapping raised TypeError: a 500)
            raise json_format.ParseError(
                f"the body is a JSON {type(value).__name__}, not an object {{...}}"
            )
        if (items := _list_items(value)) > MAX_JSON_ITEMS:
            raise InvalidRequest(
                f"the body holds {items:,} list items or more; a request may hold at most "
                f"{MAX_JSON_ITEMS:,} (send fewer texts a request)"
            )
        message = json_format.ParseDict(value, request_type())
    except (json_format.ParseError, RecursionError) as exc:
        reason = str(exc)
        if len(reason) > MAX_ERROR_CHARS:
            reason = reason[:MAX_ERROR_CHARS] + "..."
        reason += _enum_names(reason, request_type)
        name = request_type.DESCRIPTOR.full_name
        raise InvalidRequest(
            f"the body is not a JSON {name} (proto3 JSON mapping): {reason}"
        ) from None
    return message.SerializeToString()


def _unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """An object's members; a name given twice is refused (as json_format.Parse does),
    and so is a field under both its names, ``n_best`` and ``nBest`` (the mapping takes
    either, and the later one won unsaid: helper-88)."""
    out: dict[str, object] = {}
    spelled: dict[str, str] = {}  # the field's name without "_", lower case -> as given
    for key, value in pairs:
        if key in out:
            raise json_format.ParseError(f"Failed to load JSON: duplicate key {key}.")
        same = spelled.setdefault(key.replace("_", "").lower(), key)
        if same != key:
            raise json_format.ParseError(
                f"Failed to load JSON: {same} and {key} name one field: give it once."
            )
        out[key] = value
    return out


def _list_items(value: object) -> int:
    """The items of every list in ``value`` together, counted up to just past
    :data:`MAX_JSON_ITEMS` (the strings of a list are counted, never walked)."""
    count, stack = 0, [value]
    while stack and count <= MAX_JSON_ITEMS:
        item = stack.pop()
        if isinstance(item, list):
            count += len(item)
        children = item.values() if isinstance(item, dict) else item
        stack.extend(x for x in children if isinstance(x, (list, dict)))
    return count


def _depth(body: bytes) -> int:
    """How deep ``body``'s arrays and objects nest, brackets inside strings not counted,
    in one vectorised pass (linear: a regex that skips strings went quadratic on an
    unterminated one full of escaped quotes, 12 s for 60 KB). Counted only when the body
    holds more than :data:`MAX_JSON_DEPTH` brackets at all. A body nested 100,000 deep
    took the parser to the recursion limit, where a garbage-collector pass's callback
    (service/heap.py) could not even be called and printed a traceback instead
    (helper-80's audit)."""
    if body.count(b"[") + body.count(b"{") <= MAX_JSON_DEPTH:
        return 0
    chars = np.frombuffer(body, dtype=np.uint8)
    backslash = chars == _BACKSLASH
    # a quote is escaped when the run of backslashes just before it is odd
    index = np.arange(len(chars))
    last_other = np.maximum.accumulate(np.where(backslash, -1, index))
    run_before = np.zeros(len(chars), dtype=np.int64)
    run_before[1:] = np.where(backslash[:-1], index[:-1] - last_other[:-1], 0)
    quotes = (chars == _QUOTE) & (run_before % 2 == 0)
    inside = (np.cumsum(quotes) - quotes) % 2 == 1  # quotes before it: odd = in a string
    steps = np.isin(chars, _OPENERS).astype(np.int64) - np.isin(chars, _CLOSERS)
    return int(np.cumsum(np.where(inside, 0, steps)).max(initial=0))


def _enum_names(reason: str, request_type: type[Message]) -> str:
    """For protobuf's "Invalid enum value X for enum type T": the names T takes (the JSON
    mapping spells enums by their full names, ``STRATEGY_BEAM``, or by number)."""
    found = _BAD_ENUM.search(reason)
    if found is None:
        return ""
    try:
        enum = request_type.DESCRIPTOR.file.pool.FindEnumTypeByName(found.group(1))
    except KeyError:
        return ""
    return f"; use one of {', '.join(v.name for v in enum.values)} (or its number)"
