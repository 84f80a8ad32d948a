"""``nmt-serve``: the gRPC translation server, its health service and metrics endpoint."""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from prometheus_client import CollectorRegistry, start_http_server

from export import spec
from service.bundle import BundleError, load_bundle
from service.engine import Engine, EngineConfig
from service.metrics import create_metrics
from service.proto.nmt.v1 import translator_pb2, translator_pb2_grpc
from service.runtime import (
    GRAPH_OPTIMIZATION_LEVELS,
    IO_BINDING_MODES,
    BundleRuntimeError,
    RuntimeConfig,
    usable_providers,
)
from service.servicer import TranslatorServicer

log = logging.getLogger(__name__)

DEFAULT_REPOSITORY = Path(__file__).resolve().parent.parent / "model_repository"
SERVICE_NAME = "nmt.v1.Translator"


class ServerError(RuntimeError):
    """The server cannot start as configured; the message says how to fix it."""


@dataclass(frozen=True)
class ServerConfig:
    model_repository: Path = DEFAULT_REPOSITORY
    default_model: str | None = None
    host: str = "0.0.0.0"
    port: int = 50051
    metrics_host: str = "0.0.0.0"
    metrics_port: int = 9464
    workers: int = 128
    reflection: bool = False
    tls_cert: Path | None = None
    tls_key: Path | None = None
    shutdown_grace: float = 10.0
    # Seconds of the grace spent announcing NOT_SERVING while still serving new calls, so
    # health-checking load balancers move traffic away before the port closes.
    drain_announce: float = 2.0
    # SO_REUSEPORT: several server processes on one port, the kernel spreading connections
    # over them. Off by default so that starting a second server on a port already in use
    # fails at start instead of silently taking half the traffic.
    reuse_port: bool = False
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    engine: EngineConfig = field(default_factory=EngineConfig)

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535 or not -1 <= self.metrics_port <= 65535:
            raise ValueError("ports must be in 0..65535 (metrics: -1 disables the endpoint)")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("--tls-cert and --tls-key must be given together")
        if self.workers < 10:
            raise ValueError("workers must be >= 10 (8 stay free for health checks)")
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
    """The gRPC server, engines, health and metrics of one process."""

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
        self.servicer = TranslatorServicer(
            self.engines, default, self.metrics, max_inflight=max(1, config.workers - 8)
        )
        self.health = health.HealthServicer()
        self._set_health(health_pb2.HealthCheckResponse.NOT_SERVING)
        self.grpc_server = grpc.server(
            ThreadPoolExecutor(max_workers=config.workers, thread_name_prefix="grpc"),
            maximum_concurrent_rpcs=config.workers + config.engine.max_queue,
            # grpc turns SO_REUSEPORT on by default on Linux.
            options=[("grpc.so_reuseport", 1 if config.reuse_port else 0)],
        )
        translator_pb2_grpc.add_TranslatorServicer_to_server(self.servicer, self.grpc_server)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.grpc_server)
        if config.reflection:
            from grpc_reflection.v1alpha import reflection

            names = (
                translator_pb2.DESCRIPTOR.services_by_name["Translator"].full_name,
                health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
                reflection.SERVICE_NAME,
            )
            reflection.enable_server_reflection(names, self.grpc_server)
        address = f"{config.host}:{config.port}"
        creds = None
        if config.tls_cert is not None:
            creds = grpc.ssl_server_credentials([_read_tls(config.tls_key, config.tls_cert)])
        # Older grpcio returns 0 for a port it cannot bind, newer raises RuntimeError.
        try:
            if creds is not None:
                self.port = self.grpc_server.add_secure_port(address, creds)
            else:
                self.port = self.grpc_server.add_insecure_port(address)
        except RuntimeError:
            self.port = 0
        if self.port == 0:
            raise ServerError(f"could not bind gRPC to {address} (port in use?)")
        self.metrics_port: int | None = None
        self._metrics_httpd = None
        self._stopped = threading.Event()

    def _set_health(self, status) -> None:
        for service in ("", SERVICE_NAME):
            self.health.set(service, status)

    def start(self) -> None:
        """Start serving health (NOT_SERVING), metrics and the engines."""
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
        self.grpc_server.start()
        log.info("gRPC on port %d, metrics on port %s", self.port, self.metrics_port)

    def warm_up(self) -> None:
        """A real translation per model, then SERVING."""
        for name, engine in self.engines.items():
            engine.warmup()
            log.info("model %s warmed up on %s", name, engine.bundle.model.provider)
        self.servicer.ready = True
        self._set_health(health_pb2.HealthCheckResponse.SERVING)

    def stop(self, grace: float | None = None) -> None:
        """Shut down within ``grace`` seconds: announce NOT_SERVING while still serving
        (``drain_announce``, capped by the grace), then refuse new calls and let the ones
        in flight finish in what is left of the grace."""
        if self._stopped.is_set():
            return
        grace = self.config.shutdown_grace if grace is None else grace
        deadline = time.monotonic() + grace
        self.health.enter_graceful_shutdown()
        # Health checks answer NOT_SERVING now, and new calls are still served: a load
        # balancer that polls health moves away, one that does not (nginx OSS) sees no
        # errors. Once the port closes, nginx's grpc_next_upstream retries elsewhere;
        # an UNAVAILABLE status from an open port it would pass to the client instead.
        time.sleep(min(self.config.drain_announce, grace))
        self.servicer.ready = False
        self.grpc_server.stop(max(0.0, deadline - time.monotonic())).wait()
        for engine in self.engines.values():
            engine.stop(timeout=max(0.0, deadline - time.monotonic()))
        if self._metrics_httpd is not None:
            self._metrics_httpd.shutdown()
            self._metrics_httpd.server_close()
        self._stopped.set()

    def wait(self) -> None:
        self._stopped.wait()


def _read_tls(key: Path, cert: Path) -> tuple[bytes, bytes]:
    """``(key, certificate)`` PEM bytes, checked enough to blame the right file: gRPC
    itself reports a bad certificate only as a port it could not bind."""
    pems = []
    for flag, path, marker, noun in (
        ("--tls-key", key, b"PRIVATE KEY-----", "private key"),
        ("--tls-cert", cert, b"-----BEGIN CERTIFICATE-----", "certificate"),
    ):
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ServerError(f"{flag} {path}: {exc.strerror}") from None
        if marker not in data:
            raise ServerError(f"{flag} {path} is not a PEM {noun}")
        pems.append(data)
    return pems[0], pems[1]


def create_server(
    config: ServerConfig, *, registry: CollectorRegistry | None = None
) -> tuple[TranslationServer, int]:
    """Build the server (models loaded, port bound, nothing started): ``(server, port)``."""
    server = TranslationServer(config, registry or CollectorRegistry())
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
    p.add_argument("--workers", type=int, default=_env_number("workers", 128))
    p.add_argument("--max-live-rows", type=int, default=_env_number("max_live_rows", 256))
    p.add_argument("--max-queue", type=int, default=_env_number("max_queue", 128))
    p.add_argument("--max-sentences", type=int, default=_env_number("max_sentences", 64))
    p.add_argument("--max-source-tokens", type=int, default=_env_number("max_source_tokens", 128))
    p.add_argument("--max-beam-size", type=int, default=_env_number("max_beam_size", 16))
    p.add_argument("--max-n-best", type=int, default=_env_number("max_n_best", 16))
    p.add_argument("--tls-cert", type=Path, default=_env("tls_cert", None))
    p.add_argument("--tls-key", type=Path, default=_env("tls_key", None))
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
        workers=args.workers,
        reflection=args.reflection,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        shutdown_grace=args.shutdown_grace,
        drain_announce=args.drain_announce,
        reuse_port=args.reuse_port,
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
    log.info(
        "shutting down: NOT_SERVING, still serving for %.1f s, then draining; %.1f s in all",
        min(config.drain_announce, config.shutdown_grace),
        config.shutdown_grace,
    )
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
