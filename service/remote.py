"""The engine in a process of its own (``nmt-serve --engine-process``): the server's side.

In one process the gRPC side (the ``grpc.aio`` event loop, protobuf, tokenisation and
detokenisation, reply building) and each engine's scheduler thread take turns at one
GIL: every decoder step's ONNX Runtime call releases it and has to win it back before
the step's host work can run. :class:`RemoteEngine` moves a model's scheduler, encoder
thread and ORT sessions (a :class:`service.engine.Engine`) into a child process started
with ``spawn`` (never ``fork``: the server has threads by then; the child's side is
``service/enginechild.py``), so each side has a GIL of its own. The proxy has the
interface the servicer and the server use (``submit``, ``render``, ``bundle``,
``config``, ``health``, ``warmup``, ``start``, ``stop``), and :meth:`EngineLink.submit`
returns an ordinary :class:`service.jobs.Job` whose future the child's answer resolves.

Processes and messages (a duplex :func:`multiprocessing.Pipe` per link, a Unix socket
pair; pickled tuples; the child's main thread reads every link, each link's
``nmt-ipc-<model>`` thread reads its end):

* server -> child: ``submit`` (job id, token ids, options, absolute deadline on the
  shared ``CLOCK_MONOTONIC``, whether it streams), ``cancel``, ``call`` (a function run
  on the child's engine: benchmarks and tests); the owner also ``start`` and ``stop``.
* child -> server (queued, and sent by the child's ``nmt-ipc-sender`` thread, several at
  once as one ``batch``): ``done`` (n-best lists and the job's timing), ``error`` (the
  domain exception's class name and message), ``prefix`` (a streaming job's stable
  prefix, sent only when it changed), ``beat`` (every heartbeat: the child's
  ``Engine.health()``, and to the owner its engine metrics' samples), ``called``,
  ``stopped``.

:class:`RemoteEngine` starts the child and owns link 0; with ``--frontends N`` it opens
``N - 1`` more (:attr:`RemoteEngine.spare_links`), and each further front-end process
reaches the same engine through an :class:`EngineLink` of its own, so all front ends
feed one batch and one queue (``service/frontends.py``).

The server process tokenises and validates (:meth:`EngineFront.validate`, the in-process
engine's very code), so only token ids cross; a refusal by the child's engine (queue
full, not accepting) comes back through the job's future, and the servicer maps it to
the same status as in-process. Metrics: ``service/forwarding.py``.

Crashes: a link notices a dead child by end-of-file on its pipe, at once. Every request
in flight then fails with :class:`EngineFailure` (INTERNAL), new ones are refused with
:class:`NotReady` (UNAVAILABLE), and :meth:`EngineLink.health` reports it, so the
watchdog turns health NOT_SERVING and ``nmt-serve`` exits 1, as for a dead scheduler
thread. A child whose heartbeat stops for longer than the stall timeout is reported
too. The child ignores SIGINT and SIGTERM (the owner drains it) and exits when the
owner's end of link 0 closes, so it never outlives the server.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import multiprocessing
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from functools import partial
from pathlib import Path
from typing import Any

from models.options import DecodeOptions
from service.bundle import BundleError, load_host_bundle
from service.children import START_METHOD, STOP_MARGIN_SECONDS, exit_reason, first_message
from service.constraints import Constraints
from service.engine import ABANDON_SECONDS
from service.enginechild import HEARTBEAT_SECONDS, Wire, child_main
from service.errors import (
    Cancelled,
    DeadlineExpired,
    EngineFailure,
    InvalidRequest,
    NotReady,
    Overloaded,
    TooLarge,
    one_line,
)
from service.forwarding import Samples, zero_gauges
from service.front import EngineFront
from service.jobs import Job, PrefixCallback
from service.limits import EngineConfig
from service.logs import LogConfig
from service.metrics import Metrics
from service.sessions import RuntimeConfig

log = logging.getLogger(__name__)

# A child that sends no heartbeat for this many beats (or the stall timeout, if longer)
# is reported by health(): hung as a whole, not just its scheduler.
SILENT_BEATS = 20
CALL_SECONDS = 60.0

# Domain exceptions rebuilt by class name (the message is the client's, unchanged).
_ERRORS = {
    cls.__name__: cls
    for cls in (
        InvalidRequest,
        Overloaded,
        NotReady,
        DeadlineExpired,
        Cancelled,
        TooLarge,
        EngineFailure,
    )
}


class EngineProcessError(RuntimeError):
    """The engine process could not be started; the message says why."""


def _rebuild(kind: str, message: str) -> Exception:
    cls = _ERRORS.get(kind)
    if cls is None:
        # Not a domain error: what the servicer would have answered for it in-process.
        return EngineFailure(f"internal error ({message}); the server logged the details")
    exc = cls.__new__(cls)
    Exception.__init__(exc, message)  # Overloaded's __init__ would add its hint again
    return exc


class EngineLink(EngineFront):
    """One link to a model's engine process, behind the interface of
    :class:`service.engine.Engine` that the servicer and the server use.

    A front end's link (``--frontends``) only submits, cancels and calls; the engine
    process is started, stopped and watched by its owner, a :class:`RemoteEngine`.
    ``provider``: where the child's sessions run (what ListModels reports).
    """

    def __init__(
        self,
        conn,
        path: Path,
        provider: str,
        config: EngineConfig,
        metrics: Metrics,
        *,
        name: str = "",
    ) -> None:
        # the device's defaults, as the child's engine resolves them (its requests are
        # checked here against the same limits)
        self.config = config.for_device(provider == "CUDAExecutionProvider")
        self.metrics = metrics
        self.name = name or Path(path).parent.name
        self._lock = threading.Lock()
        self._jobs: dict[int, Job] = {}
        self._calls: dict[int, Future] = {}
        self._ids = itertools.count(1)
        self._dead: str | None = None
        self._started = False
        self._stopping = False
        self._closed = False
        self._stopped = threading.Event()
        self._child_health: str | None = None
        self._last_beat = time.monotonic()
        # The child's engine metrics, as of its last heartbeat (the owner's link only).
        self.samples: Samples = {}
        self._wire = Wire(conn)
        self.bundle = load_host_bundle(Path(path), provider)
        verified = self.bundle.max_source_tokens
        self.max_source_tokens = min(config.max_source_tokens, verified or config.max_source_tokens)
        self._reader = threading.Thread(target=self._read, name=f"nmt-ipc-{self.name}", daemon=True)
        self._reader.start()

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        self._last_beat = time.monotonic()
        self._started = True

    @property
    def accepting(self) -> bool:
        return self._started and not self._stopping and self._dead is None

    def stop(self, timeout: float | None = None) -> None:
        """Wait (up to ``timeout`` seconds) for this link's jobs, then close it: the
        child cancels what is left (the owner drains the engine itself)."""
        if self._stopping:
            return
        self._stopping = True
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._jobs and self._dead is None:
            if deadline is not None and time.monotonic() >= deadline:
                break
            time.sleep(0.01)
        self.close()

    def close(self) -> None:
        """Close the link now; jobs still unresolved fail with :class:`NotReady`."""
        if self._closed:
            return
        self._closed = True
        self._stopping = True
        self._wire.wake()  # the reader sees end-of-file, and so does the child's side
        self._end()
        reader = getattr(self, "_reader", None)
        if reader is not None and reader is not threading.current_thread():
            reader.join(STOP_MARGIN_SECONDS)
        self._fail_all(NotReady("the server is shutting down"))
        with contextlib.suppress(OSError):
            self._wire.conn.close()

    def _end(self) -> None:
        """What closing does besides the link: the owner ends the child here."""

    def health(self) -> str | None:
        """Like :meth:`Engine.health`: ``None`` while the engine works, else why not (a
        dead or silent child, or what the child's own engine reports)."""
        if not self._started or self._stopping:
            return None
        if self._dead is not None:
            return self._dead
        silent = time.monotonic() - self._last_beat
        if silent > max(self.config.stall_timeout, SILENT_BEATS * HEARTBEAT_SECONDS):
            return (
                f"the engine process has not reported for {silent:.0f} s "
                f"(stall_timeout {self.config.stall_timeout:g} s)"
            )
        return self._child_health

    # -- requests ----------------------------------------------------------------------

    def enqueue(
        self,
        sources: list[list[int]],
        options: DecodeOptions,
        timeout: float | None = None,
        on_prefix: PrefixCallback | None = None,
        prefixes: Sequence[tuple[int, ...]] = (),
        constraints: Sequence[Constraints | None] = (),
        draw_keys: Sequence[tuple[int, ...]] = (),
    ) -> Job:
        """The validated (tokenised) request's token ids go to the child."""
        deadline = None if timeout is None else time.monotonic() + timeout
        jid = next(self._ids)
        job = Job(
            sources,
            options,
            deadline,
            on_prefix,
            on_cancel=partial(self._cancel, jid),
            prefixes=list(prefixes),
            constraints=list(constraints),
            draw_keys=list(draw_keys),
        )
        with self._lock:
            if self._dead is not None or self._closed:
                self.metrics.rejected.labels("unavailable").inc()
                if self._dead is not None:
                    raise NotReady(f"the translation engine failed: {self._dead}")
                raise NotReady("the server is not accepting requests (starting or shutting down)")
            self._jobs[jid] = job
        # A send that fails means the child is gone: the reader fails the job.
        stream = on_prefix is not None
        self._wire.send(
            (
                "submit",
                jid,
                sources,
                options,
                deadline,
                stream,
                job.prefixes,
                job.constraints,
                job.draw_keys,
            )  # fmt: skip
        )
        return job

    def _cancel(self, jid: int) -> None:
        self._wire.send(("cancel", jid))

    def call(self, fn: Callable[..., Any], *args: Any, timeout: float = CALL_SECONDS) -> Any:
        """``fn(engine, *args)`` in the child (on its reader thread; ``fn`` must be an
        importable module-level function): its result, or its exception raised here."""
        cid = next(self._ids)
        future: Future = Future()
        with self._lock:
            if self._dead is not None:
                raise NotReady(f"the translation engine failed: {self._dead}")
            self._calls[cid] = future
        self._wire.send(("call", cid, fn, args))
        return future.result(timeout)

    # -- the reader thread ---------------------------------------------------------------

    def _read(self) -> None:
        conn = self._wire.conn
        reason = None
        try:
            while True:
                self._dispatch(conn.recv())
        except (EOFError, OSError):
            pass
        except BaseException as exc:  # noqa: BLE001 - a bug here: the engine is unusable
            log.exception("failure reading from the engine process of %s", self.name)
            reason = f"the engine process's messages could not be read ({one_line(exc)})"
        if self._stopping:
            self._stopped.set()
            return
        self._died(self._lost(reason))

    def _lost(self, reason: str | None) -> str:
        """Why the link ended (``reason``: a failure reading it, else end-of-file)."""
        return reason or "the engine process closed its link (exited)"

    def _dispatch(self, message: tuple) -> None:
        kind = message[0]
        if kind == "batch":  # what the child's sender found queued at once, in order
            for part in message[1]:
                self._dispatch(part)
        elif kind == "prefix":
            _, jid, tokens, final = message
            job = self._jobs.get(jid)
            if job is not None and job.on_prefix is not None and not job.future.done():
                try:
                    job.on_prefix(tokens, final)
                except Exception as exc:  # noqa: BLE001 - a stream's failure is its own
                    log.exception("failure streaming a prefix; failing its request")
                    self._resolve(jid, exc=exc)
                    self._cancel(jid)
        elif kind == "done":
            _, jid, nbest, (admitted, encode_seconds, finished) = message
            job = self._jobs.get(jid)
            if job is not None:
                job.timing.admitted = admitted
                job.timing.encode_seconds = encode_seconds
                job.timing.finished = finished
                job.results = nbest
            self._resolve(jid, result=nbest)
        elif kind == "error":
            _, jid, name, text = message
            self._resolve(jid, exc=_rebuild(name, text))
        elif kind == "beat":
            _, self._child_health, self.samples = message
            self._last_beat = time.monotonic()
        elif kind == "called":
            _, cid, ok, value = message
            with self._lock:
                future = self._calls.pop(cid, None)
            if future is not None:
                future.set_result(value) if ok else future.set_exception(value)
        elif kind == "stopped":
            self._stopped.set()
        else:
            log.error("unknown message from the engine process: %r", kind)

    def _resolve(self, jid: int, *, result: Any = None, exc: BaseException | None = None) -> None:
        with self._lock:
            job = self._jobs.pop(jid, None)
        if job is None or job.future.done():
            return
        if exc is None:
            job.future.set_result(result)
        else:
            job.future.set_exception(exc)

    def _died(self, reason: str) -> None:
        log.critical(
            "model %s: %s; failing every request in flight, the engine is dead",
            self.name,
            reason,
        )
        with self._lock:
            self._dead = reason
        zero_gauges(self.samples)
        self._fail_all(EngineFailure(f"internal error in the translation engine: {reason}"))

    def _fail_all(self, exc: Exception) -> None:
        with self._lock:
            jobs, self._jobs = list(self._jobs.values()), {}
            calls, self._calls = list(self._calls.values()), {}
        for job in jobs:
            if not job.future.done():
                job.future.set_exception(exc)
        for future in calls:
            if not future.done():
                future.set_exception(NotReady(str(exc)))


class RemoteEngine(EngineLink):
    """A model's engine in a child process this one starts, stops and watches (link 0).

    The constructor starts the child and waits until it has loaded the bundle (its
    errors raise :class:`BundleError` here); :meth:`start` starts its engine. ``links``:
    how many links the child serves; the ones past the first are :attr:`spare_links`,
    for front-end processes (:class:`EngineLink`), closed here once they have them.
    """

    def __init__(
        self,
        path: Path,
        runtime: RuntimeConfig,
        config: EngineConfig,
        metrics: Metrics,
        *,
        name: str = "",
        log_config: LogConfig | None = None,
        links: int = 1,
    ) -> None:
        name = name or Path(path).parent.name
        context = multiprocessing.get_context(START_METHOD)
        pipes = [context.Pipe(duplex=True) for _ in range(links)]
        self.process = context.Process(
            target=child_main,
            args=(
                [child for _, child in pipes],
                Path(path),
                runtime,
                config,
                log_config or LogConfig(),
            ),
            name=f"nmt-engine-{name}",
            daemon=True,
        )
        self.process.start()
        for _, child in pipes:
            child.close()  # else this end never sees end-of-file when the child dies
        self.spare_links = [parent for parent, _ in pipes[1:]]
        owner = pipes[0][0]
        try:
            provider = self._await_ready(owner, name)
            super().__init__(owner, path, provider, config, metrics, name=name)
        except BaseException:
            for conn in (owner, *self.spare_links):
                conn.close()
            self._kill()
            raise

    @property
    def pid(self) -> int | None:
        return self.process.pid

    def _await_ready(self, conn, name: str) -> str:
        who = f"the engine process of {name}"
        message = first_message(conn, self.process, who, "loading the model", EngineProcessError)
        if message[0] == "failed":
            raise BundleError(message[1])
        assert message[0] == "ready", message
        return message[1]

    def start(self) -> None:
        super().start()
        self._wire.send(("start",))

    def stop(self, timeout: float | None = None) -> None:
        """Let the child finish what it has (its engine's ``stop``), then end it; jobs
        still unresolved then fail with :class:`NotReady`."""
        if self._stopping:
            return
        self._stopping = True
        if self._dead is None and self._wire.send(("stop", timeout)):
            # the child's engine may take ABANDON_SECONDS past the timeout to leave ORT
            wait = None if timeout is None else timeout + ABANDON_SECONDS + STOP_MARGIN_SECONDS
            if not self._stopped.wait(wait):
                log.warning("the engine process of %s did not stop in time", self.name)
        self.close()

    def _end(self) -> None:
        # The child sees end-of-file on link 0 and exits; one that does not is ended.
        for conn in self.spare_links:
            conn.close()
        self._kill()

    def _kill(self) -> None:
        self.process.join(STOP_MARGIN_SECONDS)
        if self.process.is_alive():  # SIGKILL: the child ignores SIGTERM (the group's)
            self.process.kill()
            self.process.join(STOP_MARGIN_SECONDS)

    def health(self) -> str | None:
        exited = self.process.exitcode is not None
        if exited and self._started and not self._stopping and self._dead is None:
            return f"the engine process exited ({exit_reason(self.process.exitcode)})"
        return super().health()

    def _lost(self, reason: str | None) -> str:
        if reason is not None:
            self.process.kill()  # nobody listens to it any more
            return reason
        self.process.join(1.0)
        return f"the engine process exited ({exit_reason(self.process.exitcode)})"

    def process_id(self) -> int:
        """The engine process's pid while it runs, else 0 (no /proc entry: no samples)."""
        if self._dead is not None or self.process.exitcode is not None:
            return 0
        return self.pid or 0


def on_engine(engine: Any, fn: Callable[..., Any]) -> Any:
    """``fn(engine)`` in the process the engine runs in: its child through
    :meth:`EngineLink.call` (``fn`` must then be a module-level function), or directly
    for an engine in this process (benchmarks reading its counters or instrumenting it)."""
    return engine.call(fn) if isinstance(engine, EngineLink) else fn(engine)
