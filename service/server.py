"""``nmt-serve``: the gRPC translation server, its health service and metrics endpoint.

gRPC runs on ``grpc.aio``, on an event loop of its own thread: a call waiting for its
request message, for the engine or for its client costs a coroutine, not a thread, so no
number of slow or half-open calls can starve health checks (see ``service/servicer.py``
for the limits that bound them). The engines' scheduler threads do the decoding; a
watchdog thread turns health NOT_SERVING and stops the server when one of them dies or
stalls, for the orchestrator to restart it.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from prometheus_client import CollectorRegistry, ProcessCollector, start_http_server

from export import spec
from service.bundle import BundleError, load_bundle
from service.engine import Engine, EngineConfig
from service.listen import ListenError, bind, enable_reflection, server_credentials
from service.metrics import create_metrics
from service.proto.nmt.v1 import translator_pb2
from service.runtime import (
    GRAPH_OPTIMIZATION_LEVELS,
    IO_BINDING_MODES,
    BundleRuntimeError,
    RuntimeConfig,
    usable_providers,
)
from service.servicer import SERVICE_NAME, RpcConfig, TranslatorServicer

log = logging.getLogger(__name__)

DEFAULT_REPOSITORY = Path(__file__).resolve().parent.parent / "model_repository"
WATCHDOG_SECONDS = 1.0
SHUTDOWN_TASKS_SECONDS = 1.0


class ServerError(RuntimeError):
    """The server cannot start as configured; the message says how to fix it."""


@dataclass(frozen=True)
class TransportConfig:
    """HTTP/2 connection settings: find dead peers, bound what one connection may hold."""

    # Ping a connection idle this long; close it if no answer within keepalive_timeout.
    keepalive_time: float = 60.0
    keepalive_timeout: float = 20.0
    # Close a connection without calls for this long (0: never).
    max_connection_idle: float = 300.0
    # Close every connection after this long, letting calls finish within the grace (0:
    # never); with --reuse-port it spreads long-lived clients over the processes again.
    max_connection_age: float = 0.0
    max_connection_age_grace: float = 30.0
    # Concurrent calls one connection may open; HTTP/2 refuses more (REFUSED_STREAM, the
    # client sees UNAVAILABLE before any call starts). Half-open calls cost a coroutine
    # for --receive-timeout, so this only bounds what one connection can hold at once.
    max_streams_per_connection: int = 1024

    def __post_init__(self) -> None:
        for name in ("keepalive_time", "keepalive_timeout"):
            if not getattr(self, name) > 0:  # NaN fails too
                raise ValueError(f"{name} must be > 0 seconds, got {getattr(self, name)}")
        for name in ("max_connection_idle", "max_connection_age", "max_connection_age_grace"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be >= 0 seconds, got {getattr(self, name)}")
        if self.max_streams_per_connection < 1:
            raise ValueError("max_streams_per_connection must be >= 1")

    def options(self) -> list[tuple[str, int]]:
        """As gRPC channel arguments."""

        def ms(seconds: float) -> int:
            return int(seconds * 1000)

        out = [
            ("grpc.keepalive_time_ms", ms(self.keepalive_time)),
            ("grpc.keepalive_timeout_ms", ms(self.keepalive_timeout)),
            ("grpc.max_concurrent_streams", self.max_streams_per_connection),
        ]
        if self.max_connection_idle:
            out.append(("grpc.max_connection_idle_ms", ms(self.max_connection_idle)))
        if self.max_connection_age:
            out.append(("grpc.max_connection_age_ms", ms(self.max_connection_age)))
            out.append(("grpc.max_connection_age_grace_ms", ms(self.max_connection_age_grace)))
        return out


@dataclass(frozen=True)
class ServerConfig:
    model_repository: Path = DEFAULT_REPOSITORY
    default_model: str | None = None
    host: str = "0.0.0.0"
    port: int = 50051
    metrics_host: str = "0.0.0.0"
    metrics_port: int = 9464
    reflection: bool = False
    tls_cert: Path | None = None
    tls_key: Path | None = None
    # With a CA: mutual TLS, every client must present a certificate it signed.
    tls_client_ca: Path | None = None
    shutdown_grace: float = 10.0
    # Seconds of the grace spent announcing NOT_SERVING while still serving new calls, so
    # health-checking load balancers move traffic away before the port closes.
    drain_announce: float = 2.0
    # SO_REUSEPORT: several server processes on one port, the kernel spreading connections
    # over them. Off by default so that starting a second server on a port already in use
    # fails at start instead of silently taking half the traffic.
    reuse_port: bool = False
    rpc: RpcConfig = field(default_factory=RpcConfig)
    transport: TransportConfig = field(default_factory=TransportConfig)
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    engine: EngineConfig = field(default_factory=EngineConfig)

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535 or not -1 <= self.metrics_port <= 65535:
            raise ValueError("ports must be in 0..65535 (metrics: -1 disables the endpoint)")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("--tls-cert and --tls-key must be given together")
        if self.tls_client_ca is not None and self.tls_cert is None:
            raise ValueError("--tls-client-ca needs --tls-cert and --tls-key")
        if self.shutdown_grace < 0:
            raise ValueError("shutdown grace must be >= 0 seconds")
        if self.drain_announce < 0:
            raise ValueError("drain announce must be >= 0 seconds")


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
        raise ServerError(f"model repository not found: {repository}")
    found: dict[str, Path] = {}
    for model_dir in sorted(p for p in repository.iterdir() if p.is_dir()):
        numeric = sorted(
            (
                v
                for v in model_dir.iterdir()
                if v.is_dir() and v.name.isdigit() and (v / spec.MANIFEST_FILE).is_file()
            ),
            key=lambda v: int(v.name),
        )
        suited = [v for v in numeric if _precision(v) in SUITED_PRECISIONS[gpu] + ("unknown",)]
        if suited or numeric:
            found[model_dir.name] = (suited or numeric)[-1]
    if not found:
        raise ServerError(
            f"no model bundles in {repository} (expected <name>/<version>/manifest.json); "
            "create one with nmt-export"
        )
    return found


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
    are called from ordinary threads; gRPC itself runs on the event loop of ``grpc-loop``."""

    def __init__(self, config: ServerConfig, registry: CollectorRegistry) -> None:
        self.config = config
        self.registry = registry
        self.metrics = create_metrics(registry)
        try:
            gpu = usable_providers(config.runtime)[0] == "CUDAExecutionProvider"
        except BundleRuntimeError as exc:
            raise ServerError(str(exc)) from None
        bundles = find_bundles(config.model_repository, gpu=gpu)
        default = config.default_model or next(iter(bundles))
        if default not in bundles:
            raise ServerError(f"default model {default!r} not in {sorted(bundles)}")
        self.engines: dict[str, Engine] = {}
        for name, path in bundles.items():
            bundle = _load(path, config.runtime)
            on_gpu = bundle.model.provider == "CUDAExecutionProvider"
            if on_gpu != gpu:
                # The session fell back to another device than the provider list promised
                # (e.g. CUDA listed but unusable): serve the version suited to where it runs.
                better = find_bundles(config.model_repository, gpu=on_gpu)[name]
                if better != path:
                    log.warning(
                        "%s runs on %s: loading %s instead", path, bundle.model.provider, better
                    )
                    path, bundle = better, _load(better, config.runtime)
            log.info(
                "model %s: version %s (%s) on %s",
                name,
                path.name,
                bundle.manifest.get("precision", "fp32"),
                bundle.model.provider,
            )
            self.engines[name] = Engine(bundle, config.engine, self.metrics)
            # Labelled by the name clients use (the repository directory), as in ListModels.
            version = str(bundle.manifest.get("version", ""))
            self.metrics.model.labels(name, version, bundle.model.provider).set(1)
        self.servicer = TranslatorServicer(self.engines, default, self.metrics, config.rpc)
        self.metrics_port: int | None = None
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
        except BaseException:
            self._close_loop()
            raise

    def _on_loop(self, coro: Coroutine, timeout: float | None = None):
        """Run ``coro`` on the gRPC event loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    async def _build(self) -> int:
        config = self.config
        self.health = health.aio.HealthServicer()
        await self._set_health(health_pb2.HealthCheckResponse.NOT_SERVING)
        self.grpc_server = grpc.aio.server(
            options=[
                # grpc turns SO_REUSEPORT on by default on Linux.
                ("grpc.so_reuseport", 1 if config.reuse_port else 0),
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
        try:
            creds = None
            if config.tls_cert is not None:
                creds = server_credentials(config.tls_cert, config.tls_key, config.tls_client_ca)
            return bind(self.grpc_server, config.host, config.port, creds)
        except ListenError as exc:
            raise ServerError(str(exc)) from None

    async def _set_health(self, status) -> None:
        for service in ("", SERVICE_NAME):
            await self.health.set(service, status)

    def start(self) -> None:
        """Start serving health (NOT_SERVING), metrics, the engines and the watchdog."""
        if self.config.metrics_port >= 0:
            host, port = self.config.metrics_host, self.config.metrics_port
            try:
                self._metrics_httpd, _ = start_http_server(port, addr=host, registry=self.registry)
            except OSError as exc:
                raise ServerError(
                    f"could not serve metrics on {host}:{port} ({exc.strerror}): "
                    "choose another --metrics-port, or -1 to turn the endpoint off"
                ) from None
            self.metrics_port = self._metrics_httpd.server_port
        for engine in self.engines.values():
            engine.start()
        self._on_loop(self.grpc_server.start())
        threading.Thread(target=self._watch, name="nmt-watchdog", daemon=True).start()
        log.info("gRPC on port %d, metrics on port %s", self.port, self.metrics_port)

    def _watch(self) -> None:
        """Every second: is every engine alive and making progress? If not: health
        NOT_SERVING, new calls refused, :attr:`failed` set (``nmt-serve`` exits 1)."""
        while not self._stopped.wait(WATCHDOG_SECONDS):
            for name, engine in self.engines.items():
                reason = engine.health()
                if reason is None:
                    continue
                if self._stopped.is_set() or not self._loop.is_running():
                    return  # stopping on purpose: the engines' threads end with it
                self.failure = f"model {name}: {reason}"
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
        self._on_loop(self.health.enter_graceful_shutdown())
        # Health checks answer NOT_SERVING now, and new calls are still served: a load
        # balancer that polls health moves away, one that does not (nginx OSS) sees no
        # errors. Once the port closes, nginx's grpc_next_upstream retries elsewhere;
        # an UNAVAILABLE status from an open port it would pass to the client instead.
        time.sleep(min(self.config.drain_announce, grace))
        self.servicer.ready = False
        self._on_loop(self._shutdown(max(0.0, deadline - time.monotonic())))
        for engine in self.engines.values():
            engine.stop(timeout=max(0.0, deadline - time.monotonic()))
        if self._metrics_httpd is not None:
            self._metrics_httpd.shutdown()
            self._metrics_httpd.server_close()
        self._stopped.set()
        self._close_loop()

    async def _shutdown(self, grace: float) -> None:
        """Close the port, then let the handlers gRPC cancelled when the grace ran out run
        their own ending (each call counted, its job cancelled) before the loop closes."""
        await self.grpc_server.stop(grace)
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


def create_server(
    config: ServerConfig, *, registry: CollectorRegistry | None = None
) -> tuple[TranslationServer, int]:
    """Build the server (models loaded, port bound, nothing started): ``(server, port)``.
    Without a ``registry``, a new one that also carries the process's own metrics
    (``process_resident_memory_bytes``, CPU seconds, open files)."""
    if registry is None:
        registry = CollectorRegistry()
        ProcessCollector(registry=registry)
    server = TranslationServer(config, registry)
    return server, server.port


# -- command line -------------------------------------------------------------------


def _variable(name: str) -> str:
    """The environment variable of a flag: ``max_live_rows`` -> ``NMT_MAX_LIVE_ROWS``."""
    return "NMT_" + name.replace("-", "_").upper()


def _env(name: str, default):
    return os.environ.get(_variable(name), default)


TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off", "")


def _env_flag(name: str) -> bool:
    """An on/off flag's NMT_ variable; anything but a known word is an error, so that a
    misspelt NMT_REQUIRE_GPU cannot silently leave the check off."""
    raw = _env(name, "0")
    word = raw.strip().lower()
    if word in TRUE_WORDS or word in FALSE_WORDS:
        return word in TRUE_WORDS
    raise ValueError(
        f"{_variable(name)}={raw!r}: use one of {', '.join(TRUE_WORDS)} "
        f"or {', '.join(w for w in FALSE_WORDS if w)}"
    )


def _env_number(name: str, default: int | float) -> int | float:
    """A numeric flag's NMT_ variable, of the default's type (int or float)."""
    raw = _env(name, None)
    if raw is None:
        return default
    kind = type(default)
    try:
        return kind(raw)
    except ValueError:
        noun = "an integer" if kind is int else "a number"
        raise ValueError(f"{_variable(name)}={raw!r} is not {noun}") from None


def _check_choices(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """argparse checks ``choices`` only for values given on the command line; a default
    taken from an NMT_ variable must be checked too."""
    for action in p._actions:
        if action.choices is None:
            continue
        value = getattr(args, action.dest)
        if value not in action.choices:
            flag = action.option_strings[-1]
            raise ValueError(
                f"{_variable(flag.lstrip('-'))}={value!r}: {flag} must be one of "
                f"{', '.join(action.choices)}"
            )


# Flags derived from a config dataclass: ``--field-name``, its type and default taken
# from the field, so a default is written once. field -> help.
RPC_FLAGS = {
    "max_inflight": "translation calls decoding or queued at once; more are refused "
    "(RESOURCE_EXHAUSTED, retry with backoff); health checks never count",
    "default_timeout": "deadline, in seconds, of a translation call that sets none",
    "receive_timeout": "seconds a call may take, from its headers, to send its request message",
    "max_message_bytes": "largest request accepted and reply sent; gRPC clients receive 4 MiB "
    "by default, so raise it on both sides together",
}
TRANSPORT_FLAGS = {
    "keepalive_time": "seconds of silence on a connection before the server pings it",
    "keepalive_timeout": "seconds to wait for the ping's answer before closing the connection",
    "max_connection_idle": "close a connection without calls after this many seconds (0: never)",
    "max_connection_age": "close every connection after this many seconds, calls allowed to "
    "finish in --max-connection-age-grace (0: never)",
    "max_connection_age_grace": "seconds calls may run on after --max-connection-age",
    "max_streams_per_connection": "concurrent calls one connection may have open",
}
ENGINE_FLAGS = {
    "stall_timeout": "seconds an engine may go without a scheduler iteration while it has "
    "work before the watchdog reports NOT_SERVING and nmt-serve exits 1",
}


def _add_config_flags(p: argparse.ArgumentParser, cls: type, flags: dict[str, str]) -> None:
    defaults = {f.name: f.default for f in dataclasses.fields(cls)}
    for name, text in flags.items():
        default = defaults[name]
        p.add_argument(
            "--" + name.replace("_", "-"),
            type=type(default),
            default=_env_number(name, default),
            help=f"{text} (default {default})",
        )


def _config_from(args: argparse.Namespace, cls: type, flags: dict[str, str]):
    return cls(**{name: getattr(args, name) for name in flags})


def parse_args(argv: Sequence[str] | None) -> ServerConfig:
    p = argparse.ArgumentParser(
        prog="nmt-serve",
        description="Serve translation models over gRPC. Every flag has an NMT_<FLAG> "
        "environment variable (e.g. NMT_PORT, NMT_MAX_LIVE_ROWS).",
    )
    p.add_argument(
        "--model-repository", type=Path, default=Path(_env("model_repository", DEFAULT_REPOSITORY))
    )
    p.add_argument("--default-model", default=_env("default_model", None))
    p.add_argument("--host", default=_env("host", "0.0.0.0"))
    p.add_argument("--port", type=int, default=_env_number("port", 50051))
    p.add_argument(
        "--metrics-host",
        default=_env("metrics_host", "0.0.0.0"),
        help="address of the /metrics endpoint (127.0.0.1 keeps it local)",
    )
    p.add_argument(
        "--metrics-port",
        type=int,
        default=_env_number("metrics_port", 9464),
        help="Prometheus /metrics port; -1 disables it",
    )
    p.add_argument(
        "--providers",
        default=_env("providers", "cuda,cpu"),
        help="execution providers in preference order (cuda,cpu)",
    )
    p.add_argument(
        "--require-gpu",
        action="store_true",
        default=_env_flag("require_gpu"),
    )
    p.add_argument(
        "--io-binding",
        choices=IO_BINDING_MODES,
        default=_env("io_binding", "auto"),
        help="decoder steps through ORT IO binding, states kept on the device (auto: on CUDA)",
    )
    p.add_argument(
        "--encoder-thread",
        choices=("on", "off"),
        default=_env("encoder_thread", "on"),
        help="encode admitted sentences on a thread of their own while the decoder steps "
        "(off: between decoder steps, on the scheduler thread)",
    )
    p.add_argument(
        "--graph-optimization",
        choices=GRAPH_OPTIMIZATION_LEVELS,
        default=_env("graph_optimization", "all"),
        help="ONNX Runtime graph optimization level of every session",
    )
    p.add_argument("--intra-op-threads", type=int, default=_env_number("intra_op_threads", 0))
    p.add_argument("--inter-op-threads", type=int, default=_env_number("inter_op_threads", 1))
    p.add_argument("--max-live-rows", type=int, default=_env_number("max_live_rows", 256))
    p.add_argument("--max-queue", type=int, default=_env_number("max_queue", 128))
    p.add_argument("--max-sentences", type=int, default=_env_number("max_sentences", 64))
    p.add_argument("--max-source-tokens", type=int, default=_env_number("max_source_tokens", 128))
    p.add_argument("--max-beam-size", type=int, default=_env_number("max_beam_size", 16))
    p.add_argument("--max-n-best", type=int, default=_env_number("max_n_best", 16))
    p.add_argument("--tls-cert", type=Path, default=_env("tls_cert", None))
    p.add_argument("--tls-key", type=Path, default=_env("tls_key", None))
    p.add_argument(
        "--tls-client-ca",
        type=Path,
        default=_env("tls_client_ca", None),
        help="CA certificate (PEM): mutual TLS, every client must present a certificate it signed",
    )
    _add_config_flags(p, RpcConfig, RPC_FLAGS)
    _add_config_flags(p, TransportConfig, TRANSPORT_FLAGS)
    _add_config_flags(p, EngineConfig, ENGINE_FLAGS)
    p.add_argument("--reflection", action="store_true", default=_env_flag("reflection"))
    p.add_argument("--shutdown-grace", type=float, default=_env_number("shutdown_grace", 10.0))
    p.add_argument(
        "--drain-announce",
        type=float,
        default=_env_number("drain_announce", 2.0),
        help="seconds of the shutdown grace spent answering health checks NOT_SERVING while "
        "still serving, before new calls are refused",
    )
    p.add_argument(
        "--reuse-port",
        action="store_true",
        default=_env_flag("reuse_port"),
        help="let several nmt-serve processes share --port (SO_REUSEPORT; the kernel spreads "
        "connections over them); without it a port in use is an error at start",
    )
    p.add_argument("--log-level", default=_env("log_level", "INFO"))
    args = p.parse_args(argv)
    _check_choices(p, args)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    return ServerConfig(
        model_repository=args.model_repository,
        default_model=args.default_model,
        host=args.host,
        port=args.port,
        metrics_host=args.metrics_host,
        metrics_port=args.metrics_port,
        reflection=args.reflection,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        tls_client_ca=args.tls_client_ca,
        shutdown_grace=args.shutdown_grace,
        drain_announce=args.drain_announce,
        reuse_port=args.reuse_port,
        rpc=_config_from(args, RpcConfig, RPC_FLAGS),
        transport=_config_from(args, TransportConfig, TRANSPORT_FLAGS),
        runtime=RuntimeConfig(
            providers=tuple(x.strip() for x in args.providers.split(",") if x.strip()),
            intra_op_threads=args.intra_op_threads,
            inter_op_threads=args.inter_op_threads,
            optimization=args.graph_optimization,
            require_gpu=args.require_gpu,
            io_binding=args.io_binding,
        ),
        engine=EngineConfig(
            max_live_rows=args.max_live_rows,
            max_queue=args.max_queue,
            max_sentences_per_request=args.max_sentences,
            max_source_tokens=args.max_source_tokens,
            max_beam_size=args.max_beam_size,
            max_n_best=args.max_n_best,
            background_encoder=args.encoder_thread == "on",
            stall_timeout=args.stall_timeout,
        ),
    )


def main(argv: Sequence[str] | None = None) -> int:
    try:
        config = parse_args(argv)
        server, port = create_server(config)
    except (ValueError, ServerError) as exc:
        print(f"nmt-serve: error: {exc}", file=sys.stderr)
        return 2
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    # The watchdog's verdict wakes the main thread too.
    threading.Thread(
        target=lambda: server.failed.wait() and stop.set(), name="nmt-failed", daemon=True
    ).start()
    try:
        server.start()
    except ServerError as exc:
        print(f"nmt-serve: error: {exc}", file=sys.stderr)
        server.stop(0)
        return 2
    try:
        server.warm_up()
    except Exception as exc:  # noqa: BLE001 - a failed warm-up must not serve
        log.error("warm-up failed: %s", exc)
        server.stop(0)
        return 1
    log.info("serving on port %d (SERVING)", port)
    stop.wait()
    if server.failed.is_set():
        log.error("exiting for a restart: %s", server.failure)
        server.stop(0)
        return 1
    log.info(
        "shutting down: NOT_SERVING, still serving for %.1f s, then draining; %.1f s in all",
        min(config.drain_announce, config.shutdown_grace),
        config.shutdown_grace,
    )
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
