"""A call as the gRPC edge sees it: what a call may ask of the server (:class:`RpcConfig`),
the record it is counted by (:class:`Call`), the time left before its deadline, and how
its handler on the event loop waits for the engine's answer (:func:`job_result`)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from concurrent.futures import Future
from dataclasses import dataclass
from functools import partial

import grpc

from models.options import DecodeOptions, Hypothesis
from service.errors import DeadlineExpired
from service.front import DEADLINE_MESSAGE
from service.jobs import Job
from service.limits import MAX_SECONDS
from service.logs import REQUEST_ID_HEADER, bind_request_id, request_id_from

# grpc reports "no deadline" as None or a remaining time of ~9e18 s; beyond a day is none.
NO_DEADLINE_SECONDS = 86400.0
# The largest value gRPC's channel arguments take (a C int).
GRPC_MAX_INT = 2**31 - 1


@dataclass(frozen=True)
class RpcConfig:
    """What a call may ask of the server before the engine sees it."""

    # Translation calls decoding or queued at once; more are refused at once
    # (RESOURCE_EXHAUSTED, "retry with backoff"). Health and ListModels never count.
    max_inflight: int = 120
    # The deadline of a translation call that sets none: nothing waits without limit.
    default_timeout: float = 60.0
    # Seconds from a call's headers to its request message; then DEADLINE_EXCEEDED.
    receive_timeout: float = 10.0
    # Largest request accepted and reply sent. gRPC clients receive at most 4 MiB by
    # default: a bigger reply would be counted OK here and fail there, so it is refused
    # up front (INVALID_ARGUMENT naming the limit) unless the limit is raised on both sides.
    max_message_bytes: int = 4 * 1024 * 1024

    def __post_init__(self) -> None:
        if self.max_inflight < 1:
            raise ValueError(f"max_inflight must be >= 1, got {self.max_inflight}")
        for name in ("default_timeout", "receive_timeout"):
            if not 0 < getattr(self, name) <= MAX_SECONDS:  # NaN fails too
                raise ValueError(
                    f"{name} must be > 0 and <= {MAX_SECONDS} seconds, got {getattr(self, name)}"
                )
        if not 1024 <= self.max_message_bytes <= GRPC_MAX_INT:
            # gRPC takes it as a C int: past that its channel arguments raised
            # OverflowError at start-up, a traceback (helper-89)
            raise ValueError(
                f"max_message_bytes must be in 1024..{GRPC_MAX_INT} (gRPC's largest), "
                f"got {self.max_message_bytes}"
            )


@dataclass
class Call:
    """One RPC as the metrics see it; counted once, by the servicer's ``_count``."""

    method: str
    start: float
    request_id: str = ""
    options: DecodeOptions | None = None
    sentences: int = 0
    counted: bool = False

    @classmethod
    def begin(cls, method: str, context: grpc.aio.ServicerContext) -> Call:
        """The call's record; its request id bound to the handler's task (every log line
        it writes carries it) and returned to the client in the trailing metadata."""
        request_id = request_id_from(context.invocation_metadata())
        bind_request_id(request_id)
        context.set_trailing_metadata(((REQUEST_ID_HEADER, request_id),))
        return cls(method, time.monotonic(), request_id)


def remaining_seconds(context: grpc.aio.ServicerContext) -> float | None:
    """Seconds until the client's deadline, or ``None`` when it set none."""
    remaining = context.time_remaining()
    if remaining is None or remaining > NO_DEADLINE_SECONDS:
        return None
    return max(0.0, remaining)


def call_soon(loop: asyncio.AbstractEventLoop, callback, *args) -> None:
    """``callback(*args)`` on ``loop`` from another thread; nothing once the loop has
    closed (the server stopped: nobody is listening any more)."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(callback, *args)


def _settle(waiter: asyncio.Future, done: Future) -> None:
    """On the loop: ``waiter`` takes the outcome of the engine's future ``done``, unless
    its call gave up waiting (cancelled, or timed out: the job is the caller's to cancel)."""
    if waiter.done():
        return
    if done.cancelled():
        waiter.cancel()
    elif (exc := done.exception()) is not None:
        waiter.set_exception(exc)
    else:
        waiter.set_result(done.result())


async def job_result(
    job: Job, timeout: float, waiting: dict[asyncio.Future, Job] | None = None
) -> list[list[Hypothesis]]:
    """The job's n-best lists; its error raised; :class:`DeadlineExpired` after
    ``timeout``. ``waiting``: where its waiter is kept, with its job, while it waits (the
    servicer's, which fails them when a shutdown's grace runs out). The engine's future is only
    read (only ``job.cancel()`` stops a job):
    its outcome comes to the loop in one callback, not through ``wrap_future``,
    ``shield`` and ``wait_for``, whose futures and task cost the loop several passes
    between a finished sentence and its reply."""
    loop = asyncio.get_running_loop()
    waiter = loop.create_future()
    job.future.add_done_callback(partial(call_soon, loop, _settle, waiter))
    if waiting is not None:
        waiting[waiter] = job
    try:
        async with asyncio.timeout(timeout):
            return await waiter
    except TimeoutError:
        raise DeadlineExpired(DEADLINE_MESSAGE) from None
    finally:
        if waiting is not None:
            waiting.pop(waiter, None)
