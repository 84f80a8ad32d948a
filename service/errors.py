"""Domain exceptions of the serving core; only the servicer maps them to gRPC codes."""

from __future__ import annotations

# Ends every Overloaded message: clients (nmt_client) tell the server's own "busy" apart
# from gRPC's RESOURCE_EXHAUSTED for an oversized message, which no retry fixes.
from nmt_api import RETRY_HINT


class ServiceError(Exception):
    """Base class; ``str(exc)`` is the message the client sees."""


class InvalidRequest(ServiceError):
    """The request cannot be served as sent (maps to INVALID_ARGUMENT)."""


class Overloaded(ServiceError):
    """The queue is full; retry later (maps to RESOURCE_EXHAUSTED). ``reason`` says what
    is full; the message adds :data:`RETRY_HINT`."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"{reason}; {RETRY_HINT}")


class NotReady(ServiceError):
    """Not warmed up yet, or shutting down (maps to UNAVAILABLE)."""


# What a call still in flight when a shutdown's grace runs out is answered (UNAVAILABLE)
DRAINED = "the server is shutting down: retry, on another replica if there is one"


class DeadlineExpired(ServiceError):
    """The request's deadline passed before it finished (maps to DEADLINE_EXCEEDED)."""


class Cancelled(ServiceError):
    """The client went away; nobody reads the result (maps to CANCELLED)."""


class TooLarge(ServiceError):
    """No request message arrived, gRPC having refused one over the size limit (maps to
    RESOURCE_EXHAUSTED, with no retry hint: sending the same again fails the same way)."""


class EngineFailure(ServiceError):
    """An internal failure decoding or encoding a request, or of the engine itself. The
    message is for the client (maps to INTERNAL); the server logged the details, and
    ``__cause__`` holds the exception."""


def internal_failure(what: str, exc: BaseException | None) -> EngineFailure:
    """The client's message for an internal failure while ``what``; ``exc`` (the cause,
    logged by the caller) stays ``__cause__``."""
    name = type(exc).__name__ if exc is not None else "unknown"
    failure = EngineFailure(f"internal error ({name}) {what}; the server logged the details")
    failure.__cause__ = exc
    return failure


def one_line(exc: BaseException) -> str:
    """``exc`` in one line of at most 200 characters (for health and pipe messages)."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text else type(exc).__name__
