"""Container health check: exit 0 only when the local server answers SERVING.

Asks the standard ``grpc.health.v1.Health/Check`` of ``nmt.v1.Translator`` on
``127.0.0.1:$NMT_PORT`` (default 50051). The server reports NOT_SERVING until its models
are loaded and a warm-up translation succeeded, and again while it drains on SIGTERM, so
Docker (and the nginx upstream in the ``scale`` profile) only sees ready replicas.

``python deploy/healthcheck.py [--port P] [--timeout S]``; exit codes: 0 SERVING,
1 anything else (not serving, unreachable, timeout). The image installs it as
``/usr/local/bin/nmt-healthcheck``. Plain-text gRPC only: with ``--tls-cert`` override the
HEALTHCHECK with a TLS-aware probe.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

SERVICE = "nmt.v1.Translator"
log = logging.getLogger("nmt-healthcheck")


def check(target: str, timeout: float, service: str = SERVICE) -> bool:
    """True when ``target`` reports ``service`` as SERVING within ``timeout`` seconds."""
    with grpc.insecure_channel(target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout)
        except grpc.RpcError as exc:
            log.warning("%s: %s", target, exc.code().name)
            return False
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
    if reply.status != health_pb2.HealthCheckResponse.SERVING:
        log.warning("%s: %s", target, status)
        return False
    return True


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="nmt-healthcheck", description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    # (a string default goes through type=int: a bad NMT_PORT is argparse's one-line error;
    # an empty one is unset, as nmt-serve reads it: compose's ${NMT_PORT:-})
    p.add_argument("--port", type=int, default=os.environ.get("NMT_PORT") or "50051")
    p.add_argument("--timeout", type=float, default=3.0)
    p.add_argument("--service", default=SERVICE)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    return 0 if check(f"{args.host}:{args.port}", args.timeout, args.service) else 1


if __name__ == "__main__":
    sys.exit(main())
