"""``nmt-serve``'s configuration: frozen dataclasses, each default written once.

Every command-line flag and ``NMT_<FLAG>`` variable is derived from these fields in
:mod:`service.flags`.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path

from service.calls import GRPC_MAX_INT, RpcConfig
from service.limits import MAX_SECONDS, EngineConfig
from service.logs import LogConfig
from service.sessions import RuntimeConfig

ENGINE_PROCESS_MODES = ("auto", "on", "off")
MAX_FRONTENDS = 64
DEFAULT_REPOSITORY = Path(__file__).resolve().parent.parent / "model_repository"

# Every float field of the configuration is a duration, at most MAX_SECONDS (limits.py).
# Durations where 0 means "never": the hint a too-long value gets.
NEVER_AT_ZERO = ("max_connection_idle", "max_connection_age")


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
        for f in dataclasses.fields(self):
            if isinstance(getattr(self, f.name), float) and getattr(self, f.name) > MAX_SECONDS:
                never = " (0: never)" if f.name in NEVER_AT_ZERO else ""
                raise ValueError(
                    f"{f.name} must be at most {MAX_SECONDS} seconds{never}, "
                    f"got {getattr(self, f.name)}"
                )
        if not 1 <= self.max_streams_per_connection <= GRPC_MAX_INT:
            raise ValueError(
                f"max_streams_per_connection must be in 1..{GRPC_MAX_INT} (gRPC's largest)"
            )

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
    # The same methods as JSON over HTTP/1.1 (service/httpapi.py) on --host; -1: off.
    http_port: int = -1
    # Origins whose browser pages may call the HTTP API (CORS), e.g.
    # ("https://app.example.com",), or ("*",) for any; none: only same-origin pages.
    http_cors_origins: tuple[str, ...] = ()
    # HTTP connections open at once (0: no cap); past it a new one is answered 503 and
    # closed. Lowered at start to what the open-files limit leaves room for.
    http_max_connections: int = 1000
    # An HTTP answer whose bytes waiting to be sent do not shrink for this long (its
    # client stopped reading) closes its connection (0: never).
    http_send_timeout: float = 20.0
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
    # Each model's scheduler and ONNX Runtime sessions in a child process of their own
    # (service/remote.py), so that gRPC, protobuf and tokenisation here and the decoder
    # steps there do not take turns at one GIL. auto: on when the models run on CUDA (1.4-1.8x
    # the greedy throughput of one process on an H100 at 32-256 clients), off on the CPU
    # (the same throughput on 2 cores, for more CPU and memory: loadtest/results/).
    engine_process: str = "auto"
    # gRPC processes on --port (SO_REUSEPORT) sharing each model's engine process
    # (service/frontends.py): when protobuf, tokenisation and the event loop of one
    # process are the bound (a GPU), not the engine. Needs the engine process (auto: on).
    frontends: int = 1
    rpc: RpcConfig = field(default_factory=RpcConfig)
    transport: TransportConfig = field(default_factory=TransportConfig)
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    engine: EngineConfig = field(default_factory=EngineConfig)
    log: LogConfig = field(default_factory=LogConfig)

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535 or not all(
            -1 <= p <= 65535 for p in (self.metrics_port, self.http_port)
        ):
            raise ValueError(
                "ports must be in 0..65535 (metrics and HTTP: -1 turns the endpoint off)"
            )
        if self.http_port > 0 and self.http_port in (self.port, self.metrics_port):
            # with SO_REUSEPORT both would bind it, and each take some of the other's clients
            raise ValueError(
                f"--http-port {self.http_port} is also the gRPC or metrics port: choose another"
            )
        if self.http_max_connections < 0:
            raise ValueError("--http-max-connections must be >= 0 (0: no cap)")
        if not 0 <= self.http_send_timeout <= MAX_SECONDS:  # NaN fails too
            raise ValueError(
                f"--http-send-timeout must be in 0..{MAX_SECONDS} seconds (0: never), "
                f"got {self.http_send_timeout}"
            )
        # browsers send an origin lower-case
        object.__setattr__(
            self, "http_cors_origins", tuple(o.lower() for o in self.http_cors_origins)
        )
        for origin in self.http_cors_origins:
            if origin != "*" and not re.fullmatch(r"https?://[^/\s]+", origin):
                raise ValueError(
                    f"--http-cors-origins: {origin!r} is not an origin: scheme://host[:port] "
                    "with no path (https://app.example.com), or * for any"
                )
        if self.engine_process not in ENGINE_PROCESS_MODES:
            raise ValueError(f"engine_process must be one of {list(ENGINE_PROCESS_MODES)}")
        if not 1 <= self.frontends <= MAX_FRONTENDS:
            raise ValueError(f"--frontends must be in 1..{MAX_FRONTENDS}")
        if self.frontends > 1 and self.engine_process == "off":
            raise ValueError(
                "--frontends > 1 shares each model's engine process between the front ends: "
                "use --engine-process auto or on"
            )
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("--tls-cert and --tls-key must be given together")
        if self.tls_client_ca is not None and self.tls_cert is None:
            raise ValueError("--tls-client-ca needs --tls-cert and --tls-key")
        if not self.shutdown_grace >= 0:
            raise ValueError("shutdown grace must be >= 0 seconds")
        if not self.drain_announce >= 0:
            raise ValueError("drain announce must be >= 0 seconds")
        for name in ("shutdown_grace", "drain_announce"):
            if getattr(self, name) > MAX_SECONDS:
                raise ValueError(f"{name} must be at most {MAX_SECONDS} seconds")


# The nested sections of ServerConfig ("" is ServerConfig itself).
SECTIONS: dict[str, type] = {
    "": ServerConfig,
    "rpc": RpcConfig,
    "transport": TransportConfig,
    "runtime": RuntimeConfig,
    "engine": EngineConfig,
    "log": LogConfig,
}
