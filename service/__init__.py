"""The serving package: gRPC and HTTP front ends over ONNX Runtime sessions (no torch)."""

import nmt_api  # noqa: F401 - first, before grpc: it sets gRPC's log verbosity
