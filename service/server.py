"""``nmt-serve``: the gRPC translation server, its health service and metrics endpoint.

gRPC runs on ``grpc.aio``, on an event loop of its own thread: a call waiting for its
request message, for the engine or for its client costs a coroutine, not a thread, so no
number of slow or half-open calls can starve health checks (see ``service/servicer.py``
for the limits that bound them). The engines' scheduler threads do the decoding; a
watchdog thread turns health NOT_SERVING and stops the server when one of them dies or
stalls, for the orchestrator to restart it. With ``--engine-process on`` each engine runs
in a child process of its own (``service/remote.py``); a child that dies is a dead engine.
With ``--frontends N`` the main process starts ``N - 1`` more gRPC processes on the same
port that share those engines (``service/frontends.py``); one that dies is a dead engine too.
"""

from __future__ import annotations

import asyncio
import errno
import faulthandler
import json
import logging
import os
import resource
import signal
import socket
import ssl
import sys
import threading
import time
from collections.abc import Coroutine, Sequence
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from prometheus_client import CollectorRegistry, ProcessCollector

from export import spec
from nmt_api.nmt.v1 import translator_pb2
from service import heap, logs
from service.bundle import BundleError, load_bundle
from service.children import STOP_MARGIN_SECONDS
from service.config import ServerConfig
from service.engine import ABANDON_SECONDS, Engine
from service.flags import misspelt_variables, parse_args
from service.forwarding import ENGINE_METRICS, FRONTEND_METRICS, ProcessSource, forward_metrics
from service.frontends import FrontendError, Frontends, Links
from service.lanes import EngineLanes, for_machine, make_engine
from service.limits import MAX_SECONDS
from service.listen import (
    ListenError,
    bind,
    connection_room,
    enable_reflection,
    raise_open_files_limit,
    server_credentials,
)
from service.metrics import create_metrics
from service.metricsport import start_metrics_server
from service.remote import EngineLink, EngineProcessError, RemoteEngine
from service.servicer import SERVICE_NAME, TranslatorServicer
from service.sessions import BundleRuntimeError, RuntimeConfig, usable_providers

log = logging.getLogger(__name__)

WATCHDOG_SECONDS = 1.0
SHUTDOWN_TASKS_SECONDS = 1.0
# How long before a shutdown's grace runs out the calls still waiting are answered (their
# replies must be written before gRPC cancels what is left at the grace)
DRAIN_ANSWER_SECONDS = 0.25
# How far past its grace a shutdown may run before it counts as stuck
# (:meth:`TranslationServer.stop_budget`): ``stop`` bounds each of its own waits after the
# grace (the loop thread's, the metrics server's: less than this), plus, one after the
# other, each child process's (CHILD_STOP_SECONDS).
SHUTDOWN_OVERRUN_SECONDS = 30.0
# What stopping one engine process or front end may add past the grace: its engine
# leaving ONNX Runtime (service.engine.ABANDON_SECONDS), the margin its stop waits, the
# join before SIGKILL and the one after, its reader thread's join.
CHILD_STOP_SECONDS = ABANDON_SECONDS + 4 * STOP_MARGIN_SECONDS


class ServerError(RuntimeError):
    """The server cannot start as configured; the message says how to fix it."""


# Precisions worth serving per device: dynamic int8 only pays off on CPU, fp16 only on GPU.
SUITED_PRECISIONS = {False: ("fp32", "int8"), True: ("fp32", "fp16")}


def find_bundles(repository: Path, *, gpu: bool = False) -> dict[str, Path]:
    """``{name: version dir}`` for every ``<name>/<version>/manifest.json``.

    Per model the newest version whose precision suits the device (``gpu``) wins; when no
    version suits it, the newest version of any precision. A version whose manifest cannot
    be read counts as suited, so that loading it fails loudly instead of an older version
    being served in its place without a word.
    """
    if not repository.is_dir():
        what = "is a file, not a directory" if repository.exists() else "not found"
        raise ServerError(f"model repository {what}: {repository}")
    found: dict[str, Path] = {}
    for model_dir in sorted(p for p in repository.iterdir() if p.is_dir()):
        versions = [v for v in model_dir.iterdir() if v.is_dir() and v.name.isdigit()]
        # a manifest there in any form (a directory, a dangling link) counts: loading it
        # fails loudly, where skipping it served an older version unsaid (helper-89)
        numeric = sorted(
            (v for v in versions if os.path.lexists(v / spec.MANIFEST_FILE)),
            key=lambda v: int(v.name),
        )
        for v in sorted(set(versions) - set(numeric), key=lambda v: int(v.name)):
            log.warning(
                "model %s: version directory %s has no %s (still being copied?): skipped",
                model_dir.name, v.name, spec.MANIFEST_FILE,
            )  # fmt: skip
        suited = [v for v in numeric if _precision(v) in SUITED_PRECISIONS[gpu] + ("unknown",)]
        if suited or numeric:
            found[model_dir.name] = (suited or numeric)[-1]
    if not found:
        raise ServerError(f"no model bundles in {repository}: {_layout_hint(repository)}")
    return found


def _layout_hint(repository: Path) -> str:
    """How to fix a repository where no bundle was found: the likely mistake by name."""
    expected = "expected <name>/<version>/manifest.json, <version> a whole number"
    if (repository / spec.MANIFEST_FILE).is_file():
        return (
            f"{repository} is itself a bundle; {expected}: put it at REPOSITORY/NAME/1 and "
            "pass --model-repository REPOSITORY"
        )
    for model_dir in sorted(p for p in repository.iterdir() if p.is_dir()):
        if (model_dir / spec.MANIFEST_FILE).is_file():
            return (
                f"{model_dir} is a bundle one level too high; {expected}: move it to {model_dir}/1"
            )
        for version in sorted(v for v in model_dir.iterdir() if v.is_dir()):
            if (version / spec.MANIFEST_FILE).is_file():
                return f"version {version.name!r} of {model_dir.name} is not a number; {expected}"
    return f"{expected}; create one with nmt-export or nmt-convert"


def _precision(version_dir: Path) -> str:
    try:
        manifest = json.loads((version_dir / spec.MANIFEST_FILE).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return "unknown"  # load_bundle reports the broken manifest if this version is chosen
    if not isinstance(manifest, dict):
        return "unknown"
    return str(manifest.get("precision", "fp32"))


def _load(path: Path, runtime: RuntimeConfig):
    try:
        return load_bundle(path, runtime)
    except BundleError as exc:
        raise ServerError(str(exc)) from None


class TranslationServer:
    """The gRPC server, engines, health, watchdog and metrics of one process. Its methods
    are called from ordinary threads; gRPC itself runs on the event loop of ``grpc-loop``.

    ``links``: a further front end's links to the main process's engine processes
    (``--frontends``, :func:`service.frontends.frontend_main`) instead of engines of its own.
    """

    def __init__(
        self, config: ServerConfig, registry: CollectorRegistry, *, links: Links | None = None
    ) -> None:
        self.config = config
        self.registry = registry
        self.metrics = create_metrics(registry)
        self.frontends: Frontends | None = None
        self.engines: dict[str, Engine | EngineLanes | EngineLink] = {}
        if links is not None:
            self.engine_process = True
            for name, (path, provider, conn) in links.items():
                self.engines[name] = EngineLink(
                    conn, path, provider, config.engine, self.metrics, name=name
                )
            default = config.default_model or next(iter(links))
        else:
            default = self._start_engines(config)
        for name, engine in self.engines.items():
            # Labelled by the name clients use (the repository directory), as in ListModels.
            bundle = engine.bundle
            version = str(bundle.manifest.get("version", ""))
            self.metrics.model.labels(name, version, bundle.model.provider).set(1)
        self.servicer = TranslatorServicer(
            self.engines, default, self.metrics, config.rpc, access_log=config.log.access_log
        )
        self.metrics_port: int | None = None
        # --http-port: the JSON routes (service/httpapi.py), imported only when asked for
        self.http = None
        self.http_port: int | None = None
        self._serving = False  # what gRPC health says, for the HTTP health route
        self._gc_pauses: heap.GcPauses | None = None
        self._metrics_httpd = None
        self._stopped = threading.Event()
        # Set when the watchdog finds an engine dead or stalled; ``failure`` says why.
        self.failed = threading.Event()
        self.failure: str | None = None
        self._loop = asyncio.new_event_loop()
        self._loop_thread = threading.Thread(
            target=self._loop.run_forever, name="grpc-loop", daemon=True
        )
        self._loop_thread.start()
        try:
            self.port = self._on_loop(self._build())
            if config.frontends > 1 and links is None:
                remote = {n: e for n, e in self.engines.items() if isinstance(e, RemoteEngine)}
                self.frontends = Frontends(config, self.port, remote, http_port=self.http_port)
        except FrontendError as exc:
            self._close_loop()
            self._close_engines(self.engines.values())
            raise ServerError(str(exc)) from None
        except BaseException:
            self._close_loop()
            self._close_engines(self.engines.values())
            raise
        finally:
            for engine in self.engines.values():
                for conn in getattr(engine, "spare_links", ()):
                    # the front ends have their copies (or there are none); with ours
                    # closed, the engine sees end-of-file when a front end dies
                    conn.close()
        if self.engine_process and links is None:
            self._forward_metrics()

    def _forward_metrics(self) -> None:
        """``/metrics`` sums what the engine processes and the front ends count."""
        engines = [e for e in self.engines.values() if isinstance(e, RemoteEngine)]
        processes = [ProcessSource("nmt_engine_", "model", e.name, e.process_id) for e in engines]
        sources: list = list(engines)
        names = ENGINE_METRICS
        if self.frontends is not None:
            sources += self.frontends.members
            processes += self.frontends.process_sources()
            names = FRONTEND_METRICS
        forward_metrics(self.registry, self.metrics, names, sources, processes)

    def _start_engines(self, config: ServerConfig) -> str:
        """Load every model of the repository (in this process or in engine processes);
        returns the default model's name."""
        try:
            gpu = usable_providers(config.runtime)[0] == "CUDAExecutionProvider"
        except BundleRuntimeError as exc:
            raise ServerError(str(exc)) from None
        # auto: a child process per model on CUDA, where the GIL bounds one process, and
        # whenever several front ends share the engines
        self.engine_process = config.engine_process == "on" or (
            config.engine_process == "auto" and (gpu or config.frontends > 1)
        )
        # decode lanes (0: auto) resolved here: their count sets the sessions' threads
        self._engine_config, self._runtime = for_machine(config.engine, config.runtime, gpu)
        bundles = find_bundles(config.model_repository, gpu=gpu)
        default = config.default_model or next(iter(bundles))
        if default not in bundles:
            raise ServerError(f"default model {default!r} not in {sorted(bundles)}")
        for name, path in bundles.items():
            engine = self._engine(name, path)
            bundle = engine.bundle
            on_gpu = bundle.model.provider == "CUDAExecutionProvider"
            if on_gpu != gpu:
                # The session fell back to another device than the provider list promised
                # (e.g. CUDA listed but unusable): serve the version suited to where it runs.
                better = find_bundles(config.model_repository, gpu=on_gpu)[name]
                if better != path:
                    log.warning(
                        "%s runs on %s: loading %s instead", path, bundle.model.provider, better
                    )
                    self._close_engines([engine])
                    engine = self._engine(name, better)
                    path, bundle = better, engine.bundle
            log.info(
                "model %s: version %s (%s) on %s",
                name,
                path.name,
                bundle.manifest.get("precision", "fp32"),
                bundle.model.provider,
            )
            self.engines[name] = engine
        return default

    def _engine(self, name: str, path: Path) -> Engine | EngineLanes | EngineLink:
        """``path``'s engine: in this process, or (``--engine-process``) in a child
        process that loads the bundle (the children of the models before stop when a
        later one fails to load)."""
        config = self.config
        if not self.engine_process:
            return make_engine(_load(path, self._runtime), self._engine_config, self.metrics)
        try:
            return RemoteEngine(
                path,
                self._runtime,
                self._engine_config,
                self.metrics,
                name=name,
                log_config=config.log,
                links=config.frontends,
            )
        except (BundleError, EngineProcessError) as exc:
            self._close_engines(self.engines.values())
            raise ServerError(str(exc)) from None

    @staticmethod
    def _close_engines(engines) -> None:
        for engine in engines:
            if isinstance(engine, EngineLink):
                engine.close()

    def _on_loop(self, coro: Coroutine, timeout: float | None = None):
        """Run ``coro`` on the gRPC event loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    async def _build(self) -> int:
        config = self.config
        # Front ends (--frontends) bind the port this process binds: all need SO_REUSEPORT.
        reuse_port = config.reuse_port or config.frontends > 1
        self.health = health.aio.HealthServicer()
        await self._set_health(health_pb2.HealthCheckResponse.NOT_SERVING)
        self.grpc_server = grpc.aio.server(
            options=[
                # grpc turns SO_REUSEPORT on by default on Linux.
                ("grpc.so_reuseport", 1 if reuse_port else 0),
                ("grpc.max_receive_message_length", config.rpc.max_message_bytes),
                *config.transport.options(),
            ],
        )
        self.grpc_server.add_generic_rpc_handlers([self.servicer.handler()])
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.grpc_server)
        if config.reflection:
            enable_reflection(
                self.grpc_server,
                (
                    translator_pb2.DESCRIPTOR.services_by_name["Translator"].full_name,
                    health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
                ),
            )
        creds = _grpc_credentials(config)
        try:
            port = bind(self.grpc_server, config.host, config.port, creds, reuse_port=reuse_port)
        except ListenError as exc:
            raise ServerError(str(exc)) from None
        if config.http_port >= 0:
            # Served from now on: until warm_up its translation routes answer UNAVAILABLE
            # (503) and its readiness 503, as gRPC does once started.
            await self._start_http(reuse_port)
        return port

    async def _start_http(self, reuse_port: bool) -> None:
        from service.httpapi import HttpApi, HttpApiError

        config = self.config
        context = _http_tls_context(config)
        idle = config.transport.max_connection_idle or MAX_SECONDS
        open_files = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        connections = connection_room(config.http_max_connections, open_files)
        if connections != config.http_max_connections:
            log.warning(
                "HTTP connections capped at %d, not %s: the open-files limit is %d "
                "(raise ulimit -n to allow more)",
                connections,
                config.http_max_connections or "unlimited",
                open_files,
            )
        self.http = HttpApi(
            self.servicer.methods(),
            lambda: self._serving,
            config.rpc,
            idle_seconds=idle,
            max_age_seconds=config.transport.max_connection_age,
            max_connections=connections,
            send_seconds=config.http_send_timeout,
            cors_origins=config.http_cors_origins,
            answers=self.servicer.metrics.http_answers,
        )
        try:
            self.http_port = await self.http.start(
                config.host, config.http_port, ssl_context=context, reuse_port=reuse_port
            )
        except HttpApiError as exc:
            raise ServerError(str(exc)) from None

    async def _set_health(self, status) -> None:
        self._serving = status == health_pb2.HealthCheckResponse.SERVING
        for service in ("", SERVICE_NAME):
            await self.health.set(service, status)

    def start(self) -> None:
        """Start serving health (NOT_SERVING), metrics, the engines and the watchdog."""
        self._gc_pauses = heap.GcPauses(self.metrics.gc_pause, heap.process_name())
        if self.config.metrics_port >= 0:
            host, port = self.config.metrics_host, self.config.metrics_port
            try:
                self._metrics_httpd, _ = start_metrics_server(port, host, self.registry)
            except OSError as exc:  # a port in use, or a host that is not this machine's
                wrong_host = isinstance(exc, socket.gaierror) or exc.errno == errno.EADDRNOTAVAIL
                what = "--metrics-host" if wrong_host else "--metrics-port"
                raise ServerError(
                    f"could not serve metrics on {host}:{port} ({exc.strerror or exc}): "
                    f"choose another {what}, or --metrics-port -1 to turn the endpoint off"
                ) from None
            self.metrics_port = self._metrics_httpd.server_port
        for engine in self.engines.values():
            engine.start()
        self._on_loop(self.grpc_server.start())
        threading.Thread(target=self._watch, name="nmt-watchdog", daemon=True).start()
        log.info(
            "gRPC on port %d, metrics %s, HTTP %s",
            self.port,
            "off" if self.metrics_port is None else f"on port {self.metrics_port}",
            "off" if self.http_port is None else f"on port {self.http_port}",
        )

    def _watch(self) -> None:
        """Every second: is every engine alive and making progress? If not: health
        NOT_SERVING, new calls refused, :attr:`failed` set (``nmt-serve`` exits 1)."""
        while not self._stopped.wait(WATCHDOG_SECONDS):
            reasons = [(f"model {name}: ", e.health()) for name, e in self.engines.items()]
            if self.frontends is not None:
                reasons.append(("", self.frontends.health()))
            for what, reason in reasons:
                if reason is None:
                    continue
                if self._stopped.is_set() or not self._loop.is_running():
                    return  # stopping on purpose: the engines' threads end with it
                self.failure = what + reason
                log.error("watchdog: %s; health NOT_SERVING", self.failure)
                self.servicer.ready = False
                self.failed.set()
                try:
                    not_serving = health_pb2.HealthCheckResponse.NOT_SERVING
                    self._on_loop(self._set_health(not_serving), timeout=5)
                except (RuntimeError, TimeoutError):  # the loop closed under us: stopping
                    pass
                return

    def warm_up(self) -> None:
        """A real translation per model, then SERVING."""
        for name, engine in self.engines.items():
            engine.warmup()
            log.info("model %s warmed up on %s", name, engine.bundle.model.provider)
        if self.frontends is not None:
            try:
                self.frontends.serve()
            except FrontendError as exc:
                raise ServerError(str(exc)) from None
            more = len(self.frontends.members)
            log.info("%d more front ends serving on port %d", more, self.port)
        self.servicer.ready = True
        self._on_loop(self._set_health(health_pb2.HealthCheckResponse.SERVING))

    def stop(self, grace: float | None = None) -> None:
        """Shut down within ``grace`` seconds: announce NOT_SERVING while still serving
        (``drain_announce``, capped by the grace), then refuse new calls and let the ones
        in flight finish in what is left of the grace."""
        if self._stopped.is_set():
            return
        grace = self.config.shutdown_grace if grace is None else grace
        deadline = time.monotonic() + grace
        if self.frontends is not None:
            self.frontends.stop(grace)  # they drain as this process does, side by side
        self._on_loop(self.health.enter_graceful_shutdown())
        self._serving = False
        # Health checks answer NOT_SERVING now, and new calls are still served: a load
        # balancer that polls health moves away, one that does not (nginx OSS) sees no
        # errors. Once the port closes, nginx's grpc_next_upstream retries elsewhere;
        # an UNAVAILABLE status from an open port it would pass to the client instead.
        time.sleep(min(self.config.drain_announce, grace))
        # Calls keep being served until the port closes: refusing them first (UNAVAILABLE
        # from an open port) failed calls a proxy had already sent here, which it cannot
        # retry (seen in 4 of 13 `docker stop` rounds behind nginx).
        self._on_loop(self._shutdown(max(0.0, deadline - time.monotonic())))
        self.servicer.ready = False
        if self.frontends is not None:
            self.frontends.join(max(0.0, deadline - time.monotonic()))
        for engine in self.engines.values():
            engine.stop(timeout=max(0.0, deadline - time.monotonic()))
        if self._metrics_httpd is not None:
            self._metrics_httpd.shutdown()
            self._metrics_httpd.server_close()
        if self._gc_pauses is not None:
            self._gc_pauses.close()
        self._stopped.set()
        self._close_loop()

    def stop_budget(self, grace: float) -> float:
        """The longest ``stop(grace)`` may take before it counts as stuck."""
        children = sum(isinstance(e, RemoteEngine) for e in self.engines.values())
        if self.frontends is not None:
            children += len(self.frontends.members)
        return grace + SHUTDOWN_OVERRUN_SECONDS + children * CHILD_STOP_SECONDS

    async def _shutdown(self, grace: float) -> None:
        """Close the port, then let the handlers gRPC cancelled when the grace ran out run
        their own ending (each call counted, its job cancelled) before the loop closes.
        Shortly before the grace runs out the calls still waiting are answered UNAVAILABLE
        with the servicer's own message (:meth:`TranslatorServicer.fail_in_flight`), which
        gRPC's cancellation would not give them."""
        loop = asyncio.get_running_loop()
        last_call = loop.call_later(
            max(0.0, grace - DRAIN_ANSWER_SECONDS), self.servicer.fail_in_flight
        )
        stopping = [self.grpc_server.stop(grace)]
        if self.http is not None:
            stopping.append(self.http.stop(grace))
        # side by side; one port failing to close must not leave the other open or the
        # rest of the shutdown undone
        outcomes = await asyncio.gather(*stopping, return_exceptions=True)
        last_call.cancel()  # everything ended before it: nothing to answer
        for outcome in outcomes:
            if isinstance(outcome, Exception):
                log.error("closing a port failed", exc_info=outcome)
        current = asyncio.current_task()
        pending = [t for t in asyncio.all_tasks() if t is not current]
        if pending:
            await asyncio.wait(pending, timeout=SHUTDOWN_TASKS_SECONDS)
        await asyncio.get_running_loop().shutdown_asyncgens()

    def _close_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._loop_thread.join(5)
        if not self._loop.is_running():
            self._loop.close()

    def wait(self) -> None:
        self._stopped.wait()


def exit_if_stuck(seconds: float) -> None:
    """Arm a timer that, ``seconds`` from now, writes every thread's stack to stderr and
    exits 1: a shutdown that hangs says where, and still ends (faulthandler's timer runs
    without the GIL, so a thread that holds it cannot stop it)."""
    faulthandler.dump_traceback_later(seconds, exit=True)


def _grpc_credentials(config: ServerConfig) -> grpc.ServerCredentials | None:
    """The gRPC port's TLS credentials (None: plain text); :class:`ServerError` naming
    the flag and file at fault."""
    if config.tls_cert is None:
        return None
    try:
        return server_credentials(config.tls_cert, config.tls_key, config.tls_client_ca)
    except ListenError as exc:
        raise ServerError(str(exc)) from None


def _http_tls_context(config: ServerConfig) -> ssl.SSLContext | None:
    """The HTTP port's TLS context, from the same files (None: plain text)."""
    if config.tls_cert is None:
        return None
    from service.httpapi import ssl_context

    try:
        return ssl_context(config.tls_cert, config.tls_key, config.tls_client_ca)
    except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
        raise ServerError(f"TLS for the HTTP port: {exc}") from None


def _check_tls(config: ServerConfig) -> None:
    """The TLS files read as the ports will read them, before any model loads: a wrong
    path was reported only after every model had loaded (helper-89)."""
    _grpc_credentials(config)
    if config.http_port >= 0:
        _http_tls_context(config)


def create_server(
    config: ServerConfig, *, registry: CollectorRegistry | None = None
) -> tuple[TranslationServer, int]:
    """Build the server (models loaded, port bound, nothing started): ``(server, port)``.
    Without a ``registry``, a new one that also carries the process's own metrics
    (``process_resident_memory_bytes``, CPU seconds, open files)."""
    config.runtime.check_threads()
    _check_tls(config)
    if registry is None:
        registry = CollectorRegistry()
        ProcessCollector(registry=registry)
    server = TranslationServer(config, registry)
    return server, server.port


def _create_off_main_thread(config: ServerConfig) -> tuple[TranslationServer, int]:
    """:func:`create_server` on a thread of its own, the main thread waiting for it: a
    load stuck inside ONNX Runtime's C code (100,000 intra-op threads were asked for once)
    kept the main thread from ever running a signal handler, so not even a second
    SIGTERM ended the process (helper-89)."""
    done = threading.Event()
    outcome: list = []

    def load() -> None:
        try:
            outcome.append(create_server(config))
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            outcome.append(exc)
        finally:
            done.set()

    threading.Thread(target=load, name="nmt-load", daemon=True).start()
    while not done.wait(0.2):  # (each wait returns to the interpreter: handlers run)
        pass
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]


def _fatal(error: Exception, config: ServerConfig | None) -> None:
    """Why nmt-serve cannot start: one plain line on stderr, or, with ``--log-format
    json``, one JSON log record (a JSON log pipeline missed the most important line of
    a failed start, a port in use: helper-89)."""
    if config is not None and config.log.format == "json":
        log.critical("nmt-serve: error: %s", error)
    else:
        print(f"nmt-serve: error: {error}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    # SIGTERM while the models load (seconds) must not kill the process unlogged: it is
    # noted and acted on once the load returns; a second one ends the process at once.
    # SIGHUP (a closed terminal; no reload here) drains as SIGTERM does.
    stop, loading = threading.Event(), [True]

    def on_signal(number: int, _frame) -> None:
        if stop.is_set() and loading[0]:  # a second one: a hung load must not hold on
            os._exit(128 + number)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    config = None
    try:
        config = parse_args(argv)
        logs.configure(config.log)
        for line in misspelt_variables():
            log.warning("%s", line)
        log.debug("open-files limit: %d", raise_open_files_limit())
        server, port = _create_off_main_thread(config)
    except (ValueError, ServerError) as exc:
        _fatal(exc, config)
        return 2
    loading[0] = False
    if stop.is_set():
        log.info("stopped before serving (a signal while loading)")
        server.stop(0)
        return 0
    # The watchdog's verdict wakes the main thread too.
    threading.Thread(
        target=lambda: server.failed.wait() and stop.set(), name="nmt-failed", daemon=True
    ).start()
    try:
        server.start()
    except ServerError as exc:
        _fatal(exc, config)
        server.stop(0)
        return 2
    try:
        server.warm_up()
    except Exception as exc:  # noqa: BLE001 - a failed warm-up must not serve
        log.error("warm-up failed: %s", exc)
        server.stop(0)
        return 1
    heap.freeze("nmt-serve")  # lives as long as the process: the collector skips it
    log.info("serving on port %d (SERVING)", port)
    stop.wait()
    if server.failed.is_set():
        log.error("exiting for a restart: %s", server.failure)
        exit_if_stuck(server.stop_budget(0))
        server.stop(0)
        return 1
    log.info(
        "shutting down: NOT_SERVING, still serving for %.1f s, then draining: calls get "
        "%.1f s in all, closing what is left then takes a few seconds more",
        min(config.drain_announce, config.shutdown_grace),
        config.shutdown_grace,
    )
    exit_if_stuck(server.stop_budget(config.shutdown_grace))
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
