"""Several gRPC front-end processes sharing one engine per model (``nmt-serve --frontends N``).

With the engine in a child process the gRPC process's own CPU (protobuf, tokenisation,
detokenisation, the event loop) becomes the bound: on an H100 one front end fed 18.5
rows per decoder step at 256 clients while its loop used a core. ``--reuse-port``
processes each bring an engine of their own (N batches, N queues, the kernel spreading
connections, not requests). Here, as vLLM runs several API servers before one engine
core, the main process starts each model's engine process with ``N`` links and ``N - 1``
front-end processes (``spawn``), each running a :class:`service.server.TranslationServer`
on the same port (``SO_REUSEPORT``) over :class:`service.remote.EngineLink` s to the same
engines: one batch and one queue per model, whatever process a call arrives at.

The main process supervises them over a control pipe each (pickled tuples):

* main -> front end: ``serve`` (start gRPC, warm up through the shared engine, SERVING),
  ``stop`` (drain within the grace, then exit 0).
* front end -> main: ``bound`` (its port) or ``failed`` (why it could not start, or why
  its watchdog gave up: its link to an engine died), ``serving``, ``beat`` (every
  heartbeat: its metrics' samples, summed into the main process's ``/metrics``), and
  ``stopped``.

A front end that exits, fails or goes silent makes the main process's health
NOT_SERVING and ``nmt-serve`` exit 1 (its engines stop; the other front ends see their
control pipe close and stop too), as a dead engine does. A front end ignores SIGINT and
SIGTERM: the main process drains it, as it drains its engines. Only the main process
serves ``/metrics``.
"""

from __future__ import annotations

import dataclasses
import logging
import multiprocessing
import signal
import sys
import threading
import time
from pathlib import Path

from prometheus_client import CollectorRegistry

from service import heap, logs
from service.children import (
    START_METHOD,
    START_SECONDS,
    STOP_MARGIN_SECONDS,
    exit_reason,
    first_message,
)
from service.config import ServerConfig
from service.enginechild import HEARTBEAT_SECONDS, Wire
from service.forwarding import FRONTEND_METRICS, ProcessSource, Samples, samples_of, zero_gauges
from service.remote import RemoteEngine

log = logging.getLogger(__name__)

SILENT_BEATS = 20
# Links a front end gets: {model: (bundle version dir, provider, the link's connection)}.
Links = dict[str, tuple[Path, str, object]]


class FrontendError(RuntimeError):
    """A front-end process could not start; the message says why."""


class Frontend:
    """The main process's handle on one front-end process."""

    def __init__(self, index: int, process, conn) -> None:
        self.index = index
        self.process = process
        self.wire = Wire(conn)
        self.samples: Samples = {}
        self.failure: str | None = None
        self.serving = threading.Event()
        self.stopped = threading.Event()
        self.last_beat = time.monotonic()
        self.stopping = False
        self._reader: threading.Thread | None = None

    def await_bound(self) -> None:
        """Wait for the front end to load its bundles and bind the port."""
        who = f"front end {self.index}"
        message = first_message(self.wire.conn, self.process, who, "starting", FrontendError)
        if message[0] == "failed":
            raise FrontendError(f"{who}: {message[1]}")
        self._reader = threading.Thread(
            target=self._read, name=f"nmt-frontend-{self.index}", daemon=True
        )
        self._reader.start()

    def _read(self) -> None:
        try:
            while True:
                message = self.wire.conn.recv()
                kind = message[0]
                if kind == "beat":
                    self.samples = message[1]
                    self.last_beat = time.monotonic()
                elif kind == "serving":
                    self.last_beat = time.monotonic()
                    self.serving.set()
                elif kind == "failed":
                    self.failure = message[1]
                elif kind == "stopped":
                    self.stopped.set()
        except (EOFError, OSError):
            pass
        zero_gauges(self.samples)
        self.stopped.set()

    def health(self) -> str | None:
        if self.stopping:
            return None  # told to stop: its exit is no failure
        if self.failure is not None:
            return f"front end {self.index}: {self.failure}"
        if self.process.exitcode is not None:
            return f"front end {self.index} exited ({exit_reason(self.process.exitcode)})"
        silent = time.monotonic() - self.last_beat
        if self.serving.is_set() and silent > SILENT_BEATS * HEARTBEAT_SECONDS:
            return f"front end {self.index} has not reported for {silent:.0f} s"
        return None

    def pid(self) -> int:
        return self.process.pid if self.process.exitcode is None else 0

    def end(self) -> None:
        """Close the control pipe (the front end stops at once) and reap the process."""
        self.wire.wake()
        self.process.join(STOP_MARGIN_SECONDS)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(STOP_MARGIN_SECONDS)
        if self._reader is not None:
            self._reader.join(STOP_MARGIN_SECONDS)
        self.wire.conn.close()


class Frontends:
    """The front-end processes past the main one: started bound (not serving), then
    :meth:`serve`, watched by :meth:`health`, drained by :meth:`stop` and :meth:`join`."""

    def __init__(
        self,
        config: ServerConfig,
        port: int,
        engines: dict[str, RemoteEngine],
        *,
        http_port: int | None = None,
    ) -> None:
        # Each front end: the same flags on the port the main process bound, no metrics
        # endpoint of its own (the main one sums its samples), engines reached by link.
        child_config = dataclasses.replace(
            config,
            port=port,
            http_port=-1 if http_port is None else http_port,
            reuse_port=True,
            metrics_port=-1,
            frontends=1,
        )
        context = multiprocessing.get_context(START_METHOD)
        self.members: list[Frontend] = []
        try:
            for index in range(1, config.frontends):
                links = {
                    name: (e.bundle.path, e.bundle.model.provider, e.spare_links[index - 1])
                    for name, e in engines.items()
                }
                mine, theirs = context.Pipe(duplex=True)
                process = context.Process(
                    target=frontend_main,
                    args=(child_config, links, theirs, index),
                    name=f"nmt-frontend-{index}",
                    daemon=True,
                )
                process.start()
                theirs.close()  # its links: closed by the server once every one started
                self.members.append(Frontend(index, process, mine))
            for member in self.members:
                member.await_bound()
        except BaseException:
            self.close()
            raise

    def serve(self) -> None:
        """Every front end starts gRPC, warms up and answers SERVING."""
        for member in self.members:
            member.wire.send(("serve",))
        deadline = time.monotonic() + START_SECONDS
        for member in self.members:
            while not member.serving.wait(0.1):
                reason = member.health()
                if reason is not None or member.stopped.is_set():
                    raise FrontendError(reason or f"front end {member.index} ended")
                if time.monotonic() > deadline:
                    raise FrontendError(f"front end {member.index} did not start serving")
            log.info("front end %d serving (pid %d)", member.index, member.process.pid)

    def health(self) -> str | None:
        for member in self.members:
            reason = member.health()
            if reason is not None:
                return reason
        return None

    def stop(self, grace: float) -> None:
        """Each front end drains within ``grace`` seconds (returns at once)."""
        for member in self.members:
            member.stopping = True
            member.wire.send(("stop", grace))

    def join(self, timeout: float) -> None:
        """Wait for the drained front ends (then end any that is left)."""
        deadline = time.monotonic() + timeout + STOP_MARGIN_SECONDS
        for member in self.members:
            if not member.stopped.wait(max(0.0, deadline - time.monotonic())):
                log.warning("front end %d did not stop in time", member.index)
        self.close()

    def close(self) -> None:
        for member in self.members:
            member.end()

    def process_sources(self) -> list[ProcessSource]:
        return [
            ProcessSource("nmt_frontend_", "frontend", str(m.index), m.pid) for m in self.members
        ]


def frontend_main(config: ServerConfig, links: Links, conn, index: int) -> None:
    """A front-end process: a :class:`TranslationServer` over links to the engines,
    driven by the main process through ``conn``; exits 1 when its watchdog gave up."""
    sys.exit(_frontend(config, links, conn, index))


def _frontend(config: ServerConfig, links: Links, conn, index: int) -> int:
    from service.server import ServerError, TranslationServer  # the server imports us

    # the main process drains on these and stops this one (SIGHUP too: a closed
    # terminal sends it to the whole group, and it killed the children mid-call)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    logs.configure(config.log)
    wire = Wire(conn)
    try:
        server = TranslationServer(config, CollectorRegistry(), links=links)
    except ServerError as exc:
        wire.send(("failed", str(exc)))
        return 2
    wire.send(("bound", server.port))
    if not _await(conn, "serve"):
        server.stop(0)
        return 0
    try:
        server.start()
        server.warm_up()
    except Exception as exc:  # noqa: BLE001 - reported to the main process, which exits
        log.exception("front end %d could not start serving", index)
        wire.send(("failed", f"could not start serving: {exc}"))
        server.stop(0)
        return 1
    heap.freeze(f"front end {index}")
    wire.send(("serving",))
    done = threading.Event()

    def beat() -> None:
        while not done.wait(HEARTBEAT_SECONDS):
            if server.failed.is_set():
                wire.send(("failed", server.failure))
                return
            wire.send(("beat", samples_of(server.metrics, FRONTEND_METRICS)))

    threading.Thread(target=beat, name="nmt-frontend-beat", daemon=True).start()
    grace = _until_stop(conn, server)
    done.set()
    if server.failed.is_set():
        log.error("front end %d exiting: %s", index, server.failure)
        wire.send(("failed", server.failure))
        server.stop(0)
        return 1
    server.stop(grace)
    wire.send(("beat", samples_of(server.metrics, FRONTEND_METRICS)))  # the last counts
    wire.send(("stopped",))
    return 0


def _await(conn, kind: str) -> bool:
    """Wait for ``kind`` from the main process; False when it says ``stop`` first or its
    end closed."""
    try:
        while True:
            got = conn.recv()[0]
            if got in (kind, "stop"):
                return got == kind
    except (EOFError, OSError):
        return False


def _until_stop(conn, server) -> float:
    """Serve until the main process says ``stop`` (its grace), closes the pipe (0: it is
    gone, stop now) or the watchdog gives up (0)."""
    while not server.failed.is_set():
        try:
            if not conn.poll(0.2):
                continue
            message = conn.recv()
        except (EOFError, OSError):
            return 0.0
        if message[0] == "stop":
            return float(message[1])
    return 0.0
