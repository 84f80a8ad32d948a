"""The engine process's side of ``--engine-process`` (the server's side:
``service/remote.py``).

The child loads the bundle, runs one :class:`service.engine.Engine` (scheduler, encoder
thread, ONNX Runtime sessions) and serves it over one or more links, a duplex
:func:`multiprocessing.Pipe` each: link 0 to the process that started it (the owner:
``start``, ``stop``), one to each further gRPC front end (``--frontends``; they only
submit, cancel and call). Every job is known by its link and that link's job id, and its
messages go back on its link. The child exits when the owner's link closes; a front
end's link that closes has its jobs cancelled.

Every message to a server process goes through one outbox and one sender thread
(``nmt-ipc-sender``): the scheduler thread's callbacks (results, errors, stream
prefixes) only queue theirs, so pickling and the pipe writes run while the scheduler is
back in ONNX Runtime (which releases the GIL), and the messages that piled up meanwhile
for one link, a step's finished sentences, go as one ``batch`` message. One queue keeps
their order: a job's prefixes come before its result, every result before ``stopped``.
The exception: a job's answer when the engine has nothing else to do (no row reserved,
nothing queued) and nothing waits in the outbox is written at once by the thread that
resolved it, when small. There is nothing to overlap then, and waking the sender would
add a thread hand-over to one client's latency.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import signal
import socket
import threading
import time
from concurrent.futures import Future
from functools import partial
from multiprocessing.connection import wait
from multiprocessing.reduction import ForkingPickler
from pathlib import Path

from prometheus_client import CollectorRegistry

from service import heap, logs
from service.bundle import BundleError, load_bundle
from service.engine import Engine
from service.errors import ServiceError, one_line
from service.forwarding import ENGINE_METRICS, samples_of
from service.jobs import Job, PrefixCallback
from service.lanes import EngineLanes, make_engine
from service.limits import EngineConfig
from service.logs import LogConfig
from service.metrics import create_metrics
from service.sessions import RuntimeConfig

log = logging.getLogger(__name__)

HEARTBEAT_SECONDS = 0.5
OWNER = 0  # the link of the process that started the engine process
# A job's answer up to this size (pickled) may be written by the thread that resolved it
# (see the module's docstring); a larger one goes through the sender, so that the
# scheduler never waits for a server process to read a long reply off the pipe.
DIRECT_BYTES = 16 * 1024


class Wire:
    """One end of a pipe: sends from any thread (one at a time), reads from one."""

    def __init__(self, conn) -> None:
        self.conn = conn
        self._lock = threading.Lock()

    def send(self, message: tuple) -> bool:
        """False when the other side is gone (the reader finds out and acts on it); a
        message that does not pickle raises, before anything is written."""
        return self.send_bytes(ForkingPickler.dumps(message))

    def send_bytes(self, data) -> bool:
        """A message already pickled (``ForkingPickler.dumps``, as ``Connection.send``
        pickles it)."""
        try:
            with self._lock:
                self.conn.send_bytes(data)
        except (OSError, ValueError, EOFError):
            return False
        return True

    def wake(self) -> None:
        """End a ``recv`` blocked in another thread (it sees end-of-file)."""
        with contextlib.suppress(OSError, ValueError):
            fd = self.conn.fileno()
            with socket.socket(fileno=socket.dup(fd)) as sock:
                sock.shutdown(socket.SHUT_RDWR)


def describe(exc: BaseException) -> tuple[str, str]:
    """An exception as the pipe carries it: a domain error's class name and message."""
    if isinstance(exc, ServiceError):
        return type(exc).__name__, str(exc)
    return "", type(exc).__name__


class EngineChild:
    """The child's side: its engine, the jobs it holds for each link, its heartbeat."""

    def __init__(self, wires: list[Wire], engine: Engine | EngineLanes) -> None:
        self.wires = wires
        self.engine = engine
        self.jobs: dict[tuple[int, int], Job] = {}
        self._open = set(range(len(wires)))
        self._beats = threading.Event()  # set: stop beating
        self._outbox: queue.SimpleQueue[tuple[int, tuple] | None] = queue.SimpleQueue()
        # Messages queued and not yet written; a direct write needs none (their order).
        self._pending = 0
        self._pending_lock = threading.Lock()

    def serve(self) -> None:
        sender = threading.Thread(target=self._sender, name="nmt-ipc-sender", daemon=True)
        sender.start()
        threading.Thread(target=self._beat, name="nmt-heartbeat", daemon=True).start()
        links = {wire.conn: i for i, wire in enumerate(self.wires)}
        try:
            while OWNER in self._open:
                ready = wait(list(links)) if len(links) > 1 else list(links)
                for conn in ready:
                    link = links[conn]
                    try:
                        message = conn.recv()
                    except (EOFError, OSError):
                        del links[conn]
                        self._close(link)
                        continue
                    self._dispatch(link, message)
        finally:
            self._beats.set()
            self._outbox.put(None)
            sender.join(5.0)

    def _close(self, link: int) -> None:
        """A link closed: the owner's ends the process, a front end's cancels its jobs."""
        self._open.discard(link)
        if link == OWNER:
            return  # the parent closed its end (stopping) or is gone
        log.info("front end %d closed its link to the engine", link)
        for key in [k for k in self.jobs if k[0] == link]:
            job = self.jobs.pop(key, None)
            if job is not None:
                job.cancel()

    def _beat(self) -> None:
        while not self._beats.wait(HEARTBEAT_SECONDS):
            self._send_beat()

    def _send_beat(self) -> None:
        try:
            message = (
                "beat",
                self.engine.health(),
                samples_of(self.engine.metrics, ENGINE_METRICS),
            )
        except Exception:  # noqa: BLE001 - the parent notices the silence
            log.exception("failure collecting the engine's health and metrics")
            return
        for link in list(self._open):
            # Only the owner's copy counts the engine's metrics: a front end's would be
            # summed into the same /metrics a second time.
            self._send(message if link == OWNER else message[:2] + ({},), link)

    def _send(self, message: tuple, link: int = OWNER) -> None:
        """Queue ``message`` for ``link`` (any thread; never blocks)."""
        with self._pending_lock:
            self._pending += 1
        self._outbox.put((link, message))

    def _answer(self, message: tuple, link: int) -> None:
        """A job's answer: written now when the engine is idle, nothing is queued before
        it and it is small (see the module's docstring), else queued."""
        if self.engine.idle and not self._pending:
            try:
                data = ForkingPickler.dumps(message)
            except Exception:  # noqa: BLE001 - the sender reports it (see _write)
                data = None
            if data is not None and len(data) <= DIRECT_BYTES:
                with self._pending_lock:
                    if not self._pending:  # still nothing before it
                        if not self.wires[link].send_bytes(data):
                            log.debug("link %d is gone; dropped a %r message", link, message[0])
                        return
        self._send(message, link)

    def _sender(self) -> None:
        while True:
            item = self._outbox.get()
            if item is None:
                return
            batch = [item]
            while True:  # what queued up while the last writes ran
                try:
                    item = self._outbox.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    self._write_all(batch)
                    return
                batch.append(item)
            self._write_all(batch)
            with self._pending_lock:
                self._pending -= len(batch)

    def _write_all(self, batch: list[tuple[int, tuple]]) -> None:
        per_link: dict[int, list[tuple]] = {}
        for link, message in batch:
            per_link.setdefault(link, []).append(message)
        for link, messages in per_link.items():
            self._write(link, messages)

    def _write(self, link: int, batch: list[tuple]) -> None:
        """Send ``batch`` as one message; one that does not pickle (a result with an
        object pickle refuses) is sent apart, a result as its job's error."""
        wire = self.wires[link]
        try:
            sent = wire.send(batch[0] if len(batch) == 1 else ("batch", tuple(batch)))
        except Exception as exc:  # noqa: BLE001 - nothing was written: pickling failed
            if len(batch) > 1:
                for message in batch:
                    self._write(link, [message])
                return
            kind, *rest = batch[0]
            log.exception("failure sending a %r message to the server process", kind)
            if kind == "done":  # the job fails instead of never finishing
                self._write(link, [("error", rest[0], *describe(exc))])
            elif kind == "called":
                self._write(link, [("called", rest[0], False, RuntimeError(one_line(exc)))])
            return
        if not sent:
            log.debug("link %d is gone; dropped %d message(s)", link, len(batch))

    def _dispatch(self, link: int, message: tuple) -> None:
        kind = message[0]
        if kind == "submit":
            self._submit(link, *message[1:])
        elif kind == "cancel":
            job = self.jobs.get((link, message[1]))
            if job is not None:
                job.cancel()
        elif kind in ("start", "stop") and link != OWNER:
            log.error("front end %d sent %r: only the owner starts and stops", link, kind)
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
                self._send(("called", cid, True, fn(self.engine, *args)), link)
            except Exception as exc:  # noqa: BLE001 - raised in the parent
                reply = ("called", cid, False, RuntimeError(f"{type(exc).__name__}: {exc}"))
                self._send(reply, link)
        else:
            log.error("unknown message from the server process: %r", kind)

    def _submit(
        self,
        link: int,
        jid,
        sources,
        options,
        deadline,
        stream: bool,
        prefixes,
        constraints,
        draw_keys,
    ) -> None:
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        on_prefix = self._prefix_sender(link, jid) if stream else None
        try:
            # Validated (tokenised) by the server process: straight to the queue.
            job = self.engine.enqueue(
                sources, options, timeout, on_prefix, prefixes, constraints, draw_keys
            )
        except Exception as exc:  # noqa: BLE001 - queue full, not accepting: the job's error
            self._send(("error", jid, *describe(exc)), link)
            return
        self.jobs[(link, jid)] = job
        job.future.add_done_callback(partial(self._done, link, jid, job))

    def _prefix_sender(self, link: int, jid: int) -> PrefixCallback:
        last: list[tuple[int, ...] | None] = [None]

        def on_prefix(tokens: tuple[int, ...], final: bool) -> None:
            # Runs on the scheduler thread every step: send changes only.
            tokens = tuple(tokens)
            if final or tokens != last[0]:
                last[0] = tokens
                self._send(("prefix", jid, tokens, final), link)

        return on_prefix

    def _done(self, link: int, jid: int, job: Job, future: Future) -> None:
        # On the scheduler thread (it resolves the future): queue, do not pickle here.
        self.jobs.pop((link, jid), None)
        exc = future.exception()
        if exc is None:
            t = job.timing
            timing = (t.admitted, t.encode_seconds, t.finished)
            self._answer(("done", jid, future.result(), timing), link)
        else:
            self._answer(("error", jid, *describe(exc)), link)

    def _stop(self, timeout: float | None) -> None:
        try:
            self.engine.stop(timeout)
        finally:
            self._send_beat()  # the last metrics
            self._send(("stopped",))


def child_main(
    conns: list, path: Path, runtime: RuntimeConfig, config: EngineConfig, log_config: LogConfig
) -> None:
    """The engine process: load the bundle, then serve its links until the owner's closes."""
    # The server drains this process itself; a signal sent to the whole group (Ctrl-C,
    # systemd's control-group kill) must not end it before the requests in flight.
    # the main process drains on these and stops this one (SIGHUP too: a closed
    # terminal sends it to the whole group, and it killed the children mid-call)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    threading.current_thread().name = "nmt-ipc-reader"
    logs.configure(log_config)
    wires = [Wire(conn) for conn in conns]
    try:
        bundle = load_bundle(path, runtime)
    except BundleError as exc:
        wires[OWNER].send(("failed", str(exc)))
        return
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which stops
        log.exception("the engine process could not load %s", path)
        wires[OWNER].send(("failed", f"{path}: {type(exc).__name__}: {exc}"))
        return
    engine = make_engine(bundle, config, create_metrics(CollectorRegistry()))
    heap.freeze("engine process")
    pauses = heap.GcPauses(engine.metrics.gc_pause, heap.process_name())
    wires[OWNER].send(("ready", bundle.model.provider))
    EngineChild(wires, engine).serve()
    pauses.close()
