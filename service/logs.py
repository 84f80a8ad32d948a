"""Logging of ``nmt-serve``: text or one JSON object a line, each record carrying the
request id of the call it was written for.

The servicer binds a call's id (the client's ``x-request-id`` metadata when it sent a
usable one, else a fresh one) with :func:`bind_request_id` in the call's own asyncio
task, so every record that task writes carries it; work done for the call on other
threads (the engine's) passes it as ``extra={"request_id": ...}``.
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import time
import uuid
from dataclasses import dataclass

from nmt_api import REQUEST_ID_HEADER

LOG_FORMATS = ("text", "json")
# Ids are copied into every log line and echoed to the client: a bounded, printable set.
_USABLE_ID = re.compile(r"[A-Za-z0-9._:/+=@-]{1,128}")

_request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "nmt_request_id", default=None
)


@dataclass(frozen=True)
class LogConfig:
    level: str = "INFO"
    format: str = "text"
    # One line per finished call (method, status, seconds, sentences, request id).
    access_log: bool = False

    def __post_init__(self) -> None:
        if self.format not in LOG_FORMATS:
            raise ValueError(f"log format must be one of {', '.join(LOG_FORMATS)}")
        if not isinstance(logging.getLevelName(self.level.upper()), int):
            raise ValueError(
                f"log level {self.level!r} is not one of DEBUG, INFO, WARNING, ERROR, CRITICAL"
            )


def request_id_from(metadata) -> str:
    """The client's ``x-request-id`` when it is usable (≤ 128 printable characters of a
    safe set), else a new random id. ``metadata``: gRPC invocation metadata pairs."""
    for key, value in metadata or ():
        if key == REQUEST_ID_HEADER and isinstance(value, str) and _USABLE_ID.fullmatch(value):
            return value
    return uuid.uuid4().hex


def bind_request_id(request_id: str) -> None:
    """Records written from now on in this context (asyncio task) carry ``request_id``."""
    _request_id.set(request_id)


class _RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = _request_id.get()
        return True


class JsonFormatter(logging.Formatter):
    """``{"time", "level", "logger", "message", "request_id"?, "exception"?, ...}`` a line;
    ``extra=`` fields of the record are included as keys of their own."""

    _STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
        "message",
        "asctime",
        "request_id",
    }

    def format(self, record: logging.LogRecord) -> str:
        out = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if getattr(record, "request_id", None):
            out["request_id"] = record.request_id
        for key, value in vars(record).items():
            if key not in self._STANDARD and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False, default=str)


class _TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        rid = getattr(record, "request_id", None)
        return f"{line} [request_id={rid}]" if rid else line


def configure(config: LogConfig, stream=None) -> logging.Handler | None:
    """Route the root logger to ``stream`` in ``config``'s format and return the handler
    (replacing one installed here before). Without a ``stream``: stderr, and like
    :func:`logging.basicConfig`, nothing but the level when the root logger already has
    handlers of someone else's (an application embedding the server owns its logging)."""
    root = logging.getLogger()
    if stream is None and any(not getattr(h, "_nmt", False) for h in root.handlers):
        root.setLevel(config.level.upper())
        return None
    for old in [h for h in root.handlers if getattr(h, "_nmt", False)]:
        root.removeHandler(old)
    handler = logging.StreamHandler(stream)
    handler._nmt = True  # type: ignore[attr-defined]
    handler.addFilter(_RequestIdFilter())
    if config.format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(_TextFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(config.level.upper())
    return handler


class RateLimitedLog:
    """Logs the first event to ``logger`` and then at most one line per ``period`` with a
    count, so a client sending garbage cannot flood the log."""

    def __init__(self, logger: logging.Logger, period: float) -> None:
        self.logger = logger
        self.period = period
        self._next = 0.0
        self._suppressed = 0

    def warning(self, message: str, *args) -> None:
        now = time.monotonic()
        if now < self._next:
            self._suppressed += 1
            return
        more = f" (and {self._suppressed} more since the last report)" if self._suppressed else ""
        self.logger.warning(message + more, *args)
        self._next, self._suppressed = now + self.period, 0
