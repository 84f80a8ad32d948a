"""Exceptions of the client library, and which failed calls may be sent again.

Every failed call raises a :class:`TranslatorError` (or a subclass) carrying the gRPC
status code and the server's message, so callers never handle ``grpc.RpcError``.
"""

from __future__ import annotations

import re

import grpc

from nmt_api import NOT_READY_HINT, REQUEST_ID_HEADER, RETRY_HINT

# gRPC's own message for a request or reply over its side's size limit.
_TOO_LARGE = re.compile(r"(Received|Sent) message larger than max")
# gRPC's own messages for a call that never left the client: no connection could be made.
_NOT_CONNECTED = ("failed to connect to all addresses", "errors resolving", "dns resolution failed")


class TranslatorError(Exception):
    """A call failed. ``code``: its ``grpc.StatusCode``; ``details``: the server's (or
    gRPC's) message; ``request_id``: the id the server gave the call (it is in the
    server's log lines), when it sent one; ``attempts``: how many times it was sent."""

    def __init__(
        self,
        code: grpc.StatusCode,
        details: str,
        *,
        request_id: str | None = None,
        attempts: int = 1,
    ) -> None:
        self.code = code
        # one line of printable characters, whatever the server sent: a hostile one's
        # terminal escapes must not reach the user's terminal
        self.details = printable(" ".join(details.split()))
        self.request_id = request_id
        self.attempts = attempts
        super().__init__(self.message)

    @property
    def message(self) -> str:
        """One line: ``CODE: details``."""
        return f"{self.code.name}: {self.details}"


def printable(text: str) -> str:
    """``text`` with every character a terminal would act on (escapes, controls) as
    ``?``: what a server sent, shown to a user."""
    return "".join(c if c.isprintable() else "?" for c in text)


# How a refusal names one sentence of a request: texts[i] (or a Score's targets[i]).
_SENTENCE_INDEX = re.compile(r"^(texts|targets)\[(\d+)\]")


def sentence_index(details: str) -> tuple[str, int, str] | None:
    """A refusal that names one sentence of its request (``texts[3] has 160 source
    tokens...``, the server's and the local bundle's wording): ``(field, index, the rest
    of the message)``; else ``None``."""
    named = _SENTENCE_INDEX.match(details)
    if named is None:
        return None
    return named.group(1), int(named.group(2)), details[named.end() :]


def shifted(exc: TranslatorError, offset: int) -> TranslatorError:
    """``exc`` with the sentence it names counted from ``offset``: a request holding items
    ``offset..`` of a longer input (:meth:`Translator.translate_many`) refused its
    ``texts[i]``, which is the input's ``texts[offset + i]``."""
    named = sentence_index(exc.details)
    if named is None or not offset:
        return exc
    return renumbered(exc, offset + named[1])


def renumbered(exc: TranslatorError, index: int) -> TranslatorError:
    """``exc`` naming its sentence ``texts[index]`` (a copy; ``exc`` if it names none)."""
    named = sentence_index(exc.details)
    if named is None:
        return exc
    field, _, rest = named
    # (copy.copy would rebuild it from its args, the message alone)
    out = type(exc).__new__(type(exc))
    out.__dict__.update(vars(exc))
    out.details = f"{field}[{index}]{rest}"
    out.args = (out.message,)
    return out


class InvalidRequest(TranslatorError):
    """INVALID_ARGUMENT: the server refused the request as sent (empty text, source too
    long, options out of range, unknown model); the message says how to fix it."""


class InvalidOptions(InvalidRequest, ValueError, TypeError):
    """A request the client refuses before sending it (an option out of range, a text
    that is not a string): INVALID_ARGUMENT as the server would answer, ``attempts`` 0.
    Also a ``ValueError``/``TypeError``, as Python's own checks of arguments are."""

    def __init__(self, details: str) -> None:
        super().__init__(grpc.StatusCode.INVALID_ARGUMENT, details, attempts=0)


class Overloaded(TranslatorError):
    """RESOURCE_EXHAUSTED because the server was busy, still so after every retry."""


class DeadlineExceeded(TranslatorError):
    """DEADLINE_EXCEEDED: the call's deadline (the translator's ``timeout``, retries
    included) passed first."""

    @property
    def message(self) -> str:
        # gRPC's own words when the deadline passed in the client; the server's say more
        if self.details.lower() != "deadline exceeded":
            return super().message
        return (
            f"{super().message}: the call took longer than its timeout; allow a longer one "
            "(--timeout, Translator(timeout=...)) or send fewer sentences a call"
        )


class ServerUnavailable(TranslatorError):
    """UNAVAILABLE: no connection to ``target`` could be made (``connected`` false: the
    message then says why and what to check), or the server was warming up or shutting
    down. ``tls``: whether the client spoke TLS."""

    def __init__(
        self, code: grpc.StatusCode, details: str, *, target: str = "", tls: bool = False, **kw
    ) -> None:
        self.target, self.tls = target, tls
        self.connected = not not_connected(details)
        super().__init__(code, details, **kw)

    @property
    def message(self) -> str:
        if self.connected:
            return super().message
        reason, hint = connect_failure(self.details, self.target, tls=self.tls)
        return f"UNAVAILABLE: cannot connect to {self.target} ({reason}); {hint}"


def connect_failure(details: str, target: str, *, tls: bool) -> tuple[str, str]:
    """``(reason, hint)`` for gRPC's message of a connection that failed."""
    last = details.split("last error: ", 1)[-1]
    last = re.sub(r"^[A-Z_]+: (ipv[46]:\S+?: |unix:\S+?: )?", "", last)  # code, address
    lowered = last.lower()
    if "certificate_verify_failed" in lowered:
        return "TLS: the server's certificate is not signed by the CA given", (
            "pass the CA that signed it (--tls-ca / root_certificates)"
        )
    if "hostname verification" in lowered:
        return "TLS: the server's certificate is not for this name", (
            "connect by a name the certificate lists, or set --tls-server-name / server_name"
        )
    if "handshake" in lowered or "ssl" in lowered:
        return f"TLS handshake failed: {last[:120]}", f"does the server at {target} speak TLS?"
    if "socket closed" in lowered:
        hint = (
            "the server closed the connection during the TLS handshake: does it require a "
            "client certificate (--tls-cert/--tls-key) its CA signed?"
            if tls
            else f"is nmt-serve running on {target}, and does it need TLS (--tls-ca)?"
        )
        return "the connection was closed", hint
    reason = last.rsplit(": ", 1)[-1].strip(" []") or "no connection"
    return reason, f"is nmt-serve running on {target}?"


_BY_CODE: dict[grpc.StatusCode, type[TranslatorError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidRequest,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.UNAVAILABLE: ServerUnavailable,
}


def not_connected(details: str) -> bool:
    """gRPC's message of a call that failed before any connection was made."""
    lowered = details.lower()
    return any(marker in lowered for marker in _NOT_CONNECTED)


def overloaded(code: grpc.StatusCode, details: str) -> bool:
    """The server's own "busy, retry with backoff" (queue full, too many in flight), not
    gRPC's RESOURCE_EXHAUSTED for a message over its size limit, which never succeeds."""
    return code == grpc.StatusCode.RESOURCE_EXHAUSTED and RETRY_HINT in details


def retryable(code: grpc.StatusCode, details: str) -> bool:
    """Whether a call that failed like this may be sent again: the server was busy, or
    the call was never served (no connection, or a server not ready yet). Nothing else:
    a call cut off on its way is not resent."""
    if overloaded(code, details):
        return True
    return code == grpc.StatusCode.UNAVAILABLE and (
        not_connected(details) or NOT_READY_HINT in details
    )


def from_rpc_error(
    exc: grpc.RpcError,
    *,
    target: str,
    tls: bool = False,
    attempts: int = 1,
    request_id: str | None = None,
) -> TranslatorError:
    """The :class:`TranslatorError` for a failed gRPC call."""
    code = exc.code() if callable(getattr(exc, "code", None)) else None
    code = code or grpc.StatusCode.UNKNOWN
    details = (exc.details() if callable(getattr(exc, "details", None)) else None) or ""
    if request_id is None:
        request_id = _request_id(exc)
    return make_error(
        code, details, target=target, tls=tls, attempts=attempts, request_id=request_id
    )


def make_error(
    code: grpc.StatusCode,
    details: str,
    *,
    target: str,
    tls: bool = False,
    attempts: int = 1,
    request_id: str | None = None,
) -> TranslatorError:
    kw = {"attempts": attempts, "request_id": request_id}
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED and _TOO_LARGE.search(details):
        # gRPC's own words for a message over a size limit name neither side's setting
        details += (
            ": send fewer or shorter texts a request, or raise the limit on both sides "
            "(nmt-serve --max-message-bytes, Translator(max_message_bytes=...))"
        )
    if overloaded(code, details):
        return Overloaded(code, details, **kw)
    cls = _BY_CODE.get(code, TranslatorError)
    if cls is ServerUnavailable:
        return ServerUnavailable(code, details, target=target, tls=tls, **kw)
    return cls(code, details, **kw)


def _request_id(exc: grpc.RpcError) -> str | None:
    trailing = getattr(exc, "trailing_metadata", None)
    try:
        pairs = trailing() if callable(trailing) else None
    except Exception:  # noqa: BLE001 - an error without metadata (a test double...)
        return None
    for key, value in pairs or ():
        if key == REQUEST_ID_HEADER:
            return value if isinstance(value, str) else value.decode(errors="replace")
    return None
