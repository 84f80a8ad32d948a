"""The engine in a process of its own (``nmt-serve --engine-process on``).

In one process the gRPC side (the ``grpc.aio`` event loop, protobuf, tokenisation and
detokenisation, reply building) and each engine's scheduler thread take turns at one
GIL: every decoder step's ONNX Runtime call releases it and has to win it back before
the step's host work can run. :class:`RemoteEngine` moves a model's scheduler, encoder
thread and ORT sessions (a :class:`service.engine.Engine`) into a child process started
with ``spawn`` (never ``fork``: the server has threads by then), so each side has a GIL
of its own. The proxy has the interface the servicer and the server use (``submit``,
``render``, ``bundle``, ``config``, ``health``, ``warmup``, ``start``, ``stop``), and
:meth:`RemoteEngine.submit` returns an ordinary :class:`service.jobs.Job` whose future
the child's answer resolves.

Processes and messages (a duplex :func:`multiprocessing.Pipe`, a Unix socket pair;
pickled tuples; the child's main thread reads, the parent's ``nmt-ipc-<model>`` thread
reads):

* parent -> child: ``submit`` (job id, token ids, options, absolute deadline on the
  shared ``CLOCK_MONOTONIC``, whether it streams), ``cancel``, ``start``, ``stop``,
  ``call`` (a function run on the child's engine: benchmarks and tests).
* child -> parent (queued, and sent by the child's ``nmt-ipc-sender`` thread, several at
  once as one ``batch``): ``done`` (n-best lists and the job's timing), ``error`` (the domain
  exception's class name and message), ``prefix`` (a streaming job's stable prefix,
  sent only when it changed), ``beat`` (every :data:`HEARTBEAT_SECONDS`: the child's
  ``Engine.health()`` and its engine metrics' samples), ``called``, ``stopped``.

The parent tokenises and validates (:meth:`EngineFront.validate`, the in-process
engine's very code), so only token ids cross; a
refusal by the child's engine (queue full, not accepting) comes back through the job's
future, and the servicer maps it to the same status as in-process.

Metrics: the child's engine writes its own :class:`service.metrics.Metrics` on a
private registry, and the heartbeat forwards their samples. In the parent
:func:`forward_engine_metrics` takes the engine-side metrics (:data:`ENGINE_METRICS`)
off the server's registry and registers a collector that exports each as the sum of
the parent's own samples (``rejected`` is also counted here) and every child's latest
ones. prometheus_client's multiprocess mode is not used: it is process-global (an
environment variable read at import) and would change every metric of the server. The
engine processes' own CPU time, memory and file descriptors are exported as
``nmt_engine_process_*{model}``; ``process_*`` remain the gRPC process's.

Crashes: the parent notices a dead child by end-of-file on the pipe, at once. Every
request in flight then fails with :class:`EngineFailure` (INTERNAL), new ones are
refused with :class:`NotReady` (UNAVAILABLE), and :meth:`RemoteEngine.health` reports
it, so the watchdog turns health NOT_SERVING and ``nmt-serve`` exits 1, as for a dead
scheduler thread. A child whose heartbeat stops for longer than the stall timeout is
reported too. The child ignores SIGINT and SIGTERM (the parent drains it) and exits
when the parent's end of the pipe closes, so it never outlives the server.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import multiprocessing
import queue
import signal
import socket
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from functools import partial
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from export import spec
from export.spec import BundleConfig
from models.options import DecodeOptions
from models.tokenizer import TokenizerError, load_tokenizer
from service import bundle as bundles
from service import logs
from service.bundle import Bundle, BundleError, load_bundle
from service.engine import Engine, one_line
from service.errors import (
    Cancelled,
    DeadlineExpired,
    EngineFailure,
    InvalidRequest,
    NotReady,
    Overloaded,
    ServiceError,
    TooLarge,
)
from service.front import EngineFront
from service.jobs import Job, PrefixCallback
from service.limits import EngineConfig
from service.logs import LogConfig
from service.metrics import Metrics, create_metrics
from service.runtime import RuntimeConfig

log = logging.getLogger(__name__)

HEARTBEAT_SECONDS = 0.5
# A child that sends no heartbeat for this many beats (or the stall timeout, if longer)
# is reported by health(): hung as a whole, not just its scheduler.
SILENT_BEATS = 20
START_SECONDS = 600.0
# Time the child gets past the drain timeout to stop, then it is terminated.
STOP_MARGIN_SECONDS = 5.0
CALL_SECONDS = 60.0
START_METHOD = "spawn"

# Metrics (attributes of service.metrics.Metrics) written by the engine: in the child.
ENGINE_METRICS = (
    "queue_wait",
    "encoder_latency",
    "decoder_step_latency",
    "rows_per_step",
    "target_tokens",
    "generated_tokens",
    "source_tokens",
    "rejected",
    "live_rows",
    "queue_depth",
)
_GAUGES = ("live_rows", "queue_depth")  # zeroed when the child dies: nothing waits there

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

Samples = dict[str, list[tuple[str, dict[str, str], float]]]


class EngineProcessError(RuntimeError):
    """The engine process could not be started; the message says why."""


class _RemoteModel:
    """``bundle.model`` on the parent's side: what ListModels and the logs read."""

    def __init__(self, provider: str) -> None:
        self.provider = provider


def host_bundle(path: Path, provider: str) -> Bundle:
    """The parts of a bundle the gRPC process needs (manifest, tokenizers, decoding
    defaults), without ONNX Runtime sessions; ``provider``: where the child's sessions run."""
    manifest = bundles.read_manifest(path, verify=False)  # the child verified the files
    try:
        config = BundleConfig.from_manifest(manifest)
        specials = (config.pad_id, config.unk_id, config.bos_id, config.eos_id)
        entries = manifest.get(spec.TOKENIZERS_KEY, spec.LEGACY_TOKENIZERS)
        src_tok = load_tokenizer(entries["source"], path, specials)
        tgt_tok = load_tokenizer(entries["target"], path, specials)
        decoding = bundles._decoding(manifest.get("decoding", {}))
    except (KeyError, ValueError, TokenizerError) as exc:
        raise BundleError(f"{path}: {exc}") from None
    return Bundle(path, manifest, config, _RemoteModel(provider), src_tok, tgt_tok, decoding)


class _Wire:
    """One end of the pipe: sends from any thread (one at a time), reads from one."""

    def __init__(self, conn) -> None:
        self.conn = conn
        self._lock = threading.Lock()

    def send(self, message: tuple) -> bool:
        """False when the other side is gone (the reader finds out and acts on it)."""
        try:
            with self._lock:
                self.conn.send(message)
        except (OSError, ValueError, EOFError):
            return False
        return True

    def wake(self) -> None:
        """End a ``recv`` blocked in another thread (it sees end-of-file)."""
        with contextlib.suppress(OSError, ValueError):
            fd = self.conn.fileno()
            with socket.socket(fileno=socket.dup(fd)) as sock:
                sock.shutdown(socket.SHUT_RDWR)


def _describe(exc: BaseException) -> tuple[str, str]:
    if isinstance(exc, ServiceError):
        return type(exc).__name__, str(exc)
    return "", type(exc).__name__


def _rebuild(kind: str, message: str) -> Exception:
    cls = _ERRORS.get(kind)
    if cls is None:
        # Not a domain error: what the servicer would have answered for it in-process.
        return EngineFailure(f"internal error ({message}); the server logged the details")
    exc = cls.__new__(cls)
    Exception.__init__(exc, message)  # Overloaded's __init__ would add its hint again
    return exc


def _exit_reason(exitcode: int | None) -> str:
    if exitcode is None:
        return "its pipe closed"
    if exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit code {exitcode}"


class RemoteEngine(EngineFront):
    """A model's engine in a child process, behind the interface of
    :class:`service.engine.Engine` that the servicer and the server use.

    The constructor starts the child and waits until it has loaded the bundle (its
    errors raise :class:`BundleError` here); :meth:`start` starts its engine.
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
    ) -> None:
        self.config = config
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
        # The child's engine metrics, as of its last heartbeat.
        self.samples: Samples = {}
        context = multiprocessing.get_context(START_METHOD)
        parent_conn, child_conn = context.Pipe(duplex=True)
        self.process = context.Process(
            target=_child_main,
            args=(child_conn, Path(path), runtime, config, log_config or LogConfig()),
            name=f"nmt-engine-{self.name}",
            daemon=True,
        )
        self.process.start()
        child_conn.close()  # else the parent never sees end-of-file when the child dies
        self._wire = _Wire(parent_conn)
        try:
            provider = self._await_ready(parent_conn)
            self.bundle = host_bundle(Path(path), provider)
        except BaseException:
            self.close()
            raise
        verified = self.bundle.max_source_tokens
        self.max_source_tokens = min(config.max_source_tokens, verified or config.max_source_tokens)
        self._reader = threading.Thread(target=self._read, name=f"nmt-ipc-{self.name}", daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int | None:
        return self.process.pid

    def _await_ready(self, conn) -> str:
        deadline = time.monotonic() + START_SECONDS
        while not conn.poll(0.1):
            if not self.process.is_alive():
                raise EngineProcessError(
                    f"the engine process of {self.name} ended while loading the model "
                    f"({_exit_reason(self.process.exitcode)}); see its log lines above"
                )
            if time.monotonic() > deadline:
                raise EngineProcessError(
                    f"the engine process of {self.name} did not load the model in "
                    f"{START_SECONDS:g} s"
                )
        try:
            message = conn.recv()
        except (EOFError, OSError):
            self.process.join(5)
            raise EngineProcessError(
                f"the engine process of {self.name} ended while loading the model "
                f"({_exit_reason(self.process.exitcode)})"
            ) from None
        if message[0] == "failed":
            raise BundleError(message[1])
        assert message[0] == "ready", message
        return message[1]

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        self._last_beat = time.monotonic()
        self._wire.send(("start",))
        self._started = True

    @property
    def accepting(self) -> bool:
        return self._started and not self._stopping and self._dead is None

    def stop(self, timeout: float | None = None) -> None:
        """Let the child finish what it has (its engine's ``stop``), then end it; jobs
        still unresolved then fail with :class:`NotReady`."""
        if self._stopping:
            return
        self._stopping = True
        if self._dead is None and self._wire.send(("stop", timeout)):
            wait = None if timeout is None else timeout + STOP_MARGIN_SECONDS
            if not self._stopped.wait(wait):
                log.warning("the engine process of %s did not stop in time", self.name)
        self.close()

    def close(self) -> None:
        """End the child now (after :meth:`stop`, or when starting failed)."""
        if self._closed:
            return
        self._closed = True
        self._stopping = True
        self._wire.wake()  # the child sees end-of-file and exits; so does our reader
        self.process.join(STOP_MARGIN_SECONDS)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(STOP_MARGIN_SECONDS)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(STOP_MARGIN_SECONDS)
        reader = getattr(self, "_reader", None)
        if reader is not None and reader is not threading.current_thread():
            reader.join(STOP_MARGIN_SECONDS)
        self._fail_all(NotReady("the server is shutting down"))
        with contextlib.suppress(OSError):
            self._wire.conn.close()

    def health(self) -> str | None:
        """Like :meth:`Engine.health`: ``None`` while the engine works, else why not (a
        dead or silent child, or what the child's own engine reports)."""
        if not self._started or self._stopping:
            return None
        if self._dead is not None:
            return self._dead
        if self.process.exitcode is not None:
            return f"the engine process exited ({_exit_reason(self.process.exitcode)})"
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
        self._wire.send(("submit", jid, sources, options, deadline, stream, job.prefixes))
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
        if reason is None:
            self.process.join(1.0)
            reason = f"the engine process exited ({_exit_reason(self.process.exitcode)})"
        else:
            self.process.kill()  # nobody listens to it any more
        self._died(reason)

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
        for name in _GAUGES:
            self.samples[name] = [(n, labels, 0.0) for n, labels, _ in self.samples.get(name, ())]
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


# -- the child process ----------------------------------------------------------------


def _samples(metrics: Metrics) -> Samples:
    return {
        name: [
            (s.name, s.labels, s.value)
            for family in getattr(metrics, name).collect()
            for s in family.samples
        ]
        for name in ENGINE_METRICS
    }


class _Child:
    """The child's side: its engine, the jobs it holds for the parent, its heartbeat.

    Every message to the parent goes through one outbox and one sender thread
    (``nmt-ipc-sender``): the scheduler thread's callbacks (results, errors, stream
    prefixes) only queue theirs, so pickling and the pipe write run while the scheduler
    is back in ONNX Runtime (which releases the GIL), and the messages that pile up
    meanwhile, a step's finished sentences, go as one ``batch`` message. One queue keeps
    their order: a job's prefixes come before its result, every result before ``stopped``.
    """

    def __init__(self, wire: _Wire, engine: Engine) -> None:
        self.wire = wire
        self.engine = engine
        self.jobs: dict[int, Job] = {}
        self._beats = threading.Event()  # set: stop beating
        self._outbox: queue.SimpleQueue[tuple | None] = queue.SimpleQueue()

    def serve(self) -> None:
        sender = threading.Thread(target=self._sender, name="nmt-ipc-sender", daemon=True)
        sender.start()
        threading.Thread(target=self._beat, name="nmt-heartbeat", daemon=True).start()
        conn = self.wire.conn
        try:
            while True:
                self._dispatch(conn.recv())
        except (EOFError, OSError):
            pass  # the parent closed its end (stopping) or is gone
        finally:
            self._beats.set()
            self._outbox.put(None)
            sender.join(5.0)

    def _beat(self) -> None:
        while not self._beats.wait(HEARTBEAT_SECONDS):
            self._send_beat()

    def _send_beat(self) -> None:
        try:
            message = ("beat", self.engine.health(), _samples(self.engine.metrics))
        except Exception:  # noqa: BLE001 - the parent notices the silence
            log.exception("failure collecting the engine's health and metrics")
            return
        self._send(message)

    def _send(self, message: tuple) -> None:
        """Queue ``message`` for the parent (any thread; never blocks)."""
        self._outbox.put(message)

    def _sender(self) -> None:
        while True:
            message = self._outbox.get()
            if message is None:
                return
            batch = [message]
            while True:  # what queued up while the last write ran
                try:
                    message = self._outbox.get_nowait()
                except queue.Empty:
                    break
                if message is None:
                    self._write(batch)
                    return
                batch.append(message)
            self._write(batch)

    def _write(self, batch: list[tuple]) -> None:
        """Send ``batch`` as one message; one that does not pickle (a result with an
        object pickle refuses) is sent apart, a result as its job's error."""
        try:
            sent = self.wire.send(batch[0] if len(batch) == 1 else ("batch", tuple(batch)))
        except Exception as exc:  # noqa: BLE001 - nothing was written: pickling failed
            if len(batch) > 1:
                for message in batch:
                    self._write([message])
                return
            kind, *rest = batch[0]
            log.exception("failure sending a %r message to the server process", kind)
            if kind == "done":  # the job fails instead of never finishing
                self._write([("error", rest[0], *_describe(exc))])
            elif kind == "called":
                self._write([("called", rest[0], False, RuntimeError(one_line(exc)))])
            return
        if not sent:
            log.debug("the server process is gone; dropped %d message(s)", len(batch))

    def _dispatch(self, message: tuple) -> None:
        kind = message[0]
        if kind == "submit":
            self._submit(*message[1:])
        elif kind == "cancel":
            job = self.jobs.get(message[1])
            if job is not None:
                job.cancel()
        elif kind == "start":
            self.engine.start()
            self._send_beat()
        elif kind == "stop":
            threading.Thread(
                target=self._stop, args=(message[1],), name="nmt-stop", daemon=True
            ).start()
        elif kind == "call":
            _, cid, fn, args = message
            try:
                self._send(("called", cid, True, fn(self.engine, *args)))
            except Exception as exc:  # noqa: BLE001 - raised in the parent
                self._send(("called", cid, False, RuntimeError(f"{type(exc).__name__}: {exc}")))
        else:
            log.error("unknown message from the server process: %r", kind)

    def _submit(self, jid, sources, options, deadline, stream: bool, prefixes) -> None:
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        on_prefix = self._prefix_sender(jid) if stream else None
        try:
            # Validated (tokenised) by the parent: straight to the queue.
            job = self.engine.enqueue(sources, options, timeout, on_prefix, prefixes)
        except Exception as exc:  # noqa: BLE001 - queue full, not accepting: the job's error
            self._send(("error", jid, *_describe(exc)))
            return
        self.jobs[jid] = job
        job.future.add_done_callback(partial(self._done, jid, job))

    def _prefix_sender(self, jid: int) -> PrefixCallback:
        last: list[tuple[int, ...] | None] = [None]

        def on_prefix(tokens: tuple[int, ...], final: bool) -> None:
            # Runs on the scheduler thread every step: send changes only.
            tokens = tuple(tokens)
            if final or tokens != last[0]:
                last[0] = tokens
                self._send(("prefix", jid, tokens, final))

        return on_prefix

    def _done(self, jid: int, job: Job, future: Future) -> None:
        # On the scheduler thread (it resolves the future): queue, do not pickle here.
        self.jobs.pop(jid, None)
        exc = future.exception()
        if exc is None:
            t = job.timing
            self._send(("done", jid, future.result(), (t.admitted, t.encode_seconds, t.finished)))
        else:
            self._send(("error", jid, *_describe(exc)))

    def _stop(self, timeout: float | None) -> None:
        try:
            self.engine.stop(timeout)
        finally:
            self._send_beat()  # the last metrics
            self._send(("stopped",))


def _child_main(conn, path: Path, runtime: RuntimeConfig, config: EngineConfig, log_config):
    """The engine process: load the bundle, then serve the parent until its end closes."""
    # The server drains this process itself; a signal sent to the whole group (Ctrl-C,
    # systemd's control-group kill) must not end it before the requests in flight.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    threading.current_thread().name = "nmt-ipc-reader"
    logs.configure(log_config)
    wire = _Wire(conn)
    try:
        bundle = load_bundle(path, runtime)
    except BundleError as exc:
        wire.send(("failed", str(exc)))
        return
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which stops
        log.exception("the engine process could not load %s", path)
        wire.send(("failed", f"{path}: {type(exc).__name__}: {exc}"))
        return
    engine = Engine(bundle, config, create_metrics(CollectorRegistry()))
    wire.send(("ready", bundle.model.provider))
    _Child(wire, engine).serve()


# -- metrics ----------------------------------------------------------------------------


class _ForwardedMetrics(Collector):
    """The engine-side metrics as the sum of the parent's own samples and each child's
    latest ones (``_created`` samples: the earliest); and each engine process's own
    ``process_*`` metrics as ``nmt_engine_process_*{model}``."""

    def __init__(self, metrics: Metrics, engines: Sequence[RemoteEngine]) -> None:
        self.metrics = metrics
        self.engines = list(engines)
        self._processes = [
            (engine.name, ProcessCollector(namespace="", pid=partial(_pid, engine), registry=None))
            for engine in self.engines
        ]

    def describe(self):
        for name in ENGINE_METRICS:
            yield from getattr(self.metrics, name).describe()

    def collect(self):
        yield from self._engine_metrics()
        families: dict[str, Metric] = {}
        for model, collector in self._processes:
            for family in collector.collect():  # nothing once the process is gone
                name = f"nmt_engine_{family.name}"
                out = families.setdefault(
                    name, Metric(name, f"{family.documentation} (engine process)", family.type)
                )
                for sample in family.samples:
                    labels = sample.labels | {"model": model}
                    out.add_sample(f"nmt_engine_{sample.name}", labels, sample.value)
        yield from families.values()

    def _engine_metrics(self):
        for name in ENGINE_METRICS:
            for family in getattr(self.metrics, name).collect():
                merged: dict[tuple, float] = {}
                parts = [[(s.name, s.labels, s.value) for s in family.samples]]
                parts += [engine.samples.get(name, ()) for engine in self.engines]
                for part in parts:
                    for sample, labels, value in part:
                        key = (sample, tuple(sorted(labels.items())))
                        if key not in merged:
                            merged[key] = value
                        elif sample.endswith("_created"):
                            merged[key] = min(merged[key], value)
                        else:
                            merged[key] += value
                out = Metric(family.name, family.documentation, family.type, family.unit)
                for (sample, labels), value in merged.items():
                    out.add_sample(sample, dict(labels), value)
                yield out


def _pid(engine: RemoteEngine) -> int:
    """The engine process's pid while it runs, else 0 (no /proc entry: no samples)."""
    if engine._dead is not None or engine.process.exitcode is not None:
        return 0
    return engine.pid or 0


def forward_engine_metrics(
    registry: CollectorRegistry, metrics: Metrics, engines: Sequence[RemoteEngine]
) -> None:
    """Export the engine metrics of ``engines`` (children) through ``registry``, in
    place of the parent's own (which still count what the parent refuses itself)."""
    for name in ENGINE_METRICS:
        registry.unregister(getattr(metrics, name))
    registry.register(_ForwardedMetrics(metrics, engines))


def on_engine(engine: Any, fn: Callable[..., Any]) -> Any:
    """``fn(engine)`` in the process the engine runs in: its child through
    :meth:`RemoteEngine.call` (``fn`` must then be a module-level function), or directly
    for an engine in this process (benchmarks reading its counters or instrumenting it)."""
    return engine.call(fn) if isinstance(engine, RemoteEngine) else fn(engine)
