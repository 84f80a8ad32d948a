"""Python client of ``nmt-serve`` (the ``nmt.v1.Translator`` gRPC service).

    from nmt_client import Translator

    with Translator("127.0.0.1:50051") as translator:
        for result in translator.translate(["The cat sat on the mat."], beam_size=5):
            print(result.text, result.best.score)

Results are frozen dataclasses (:class:`Result`, :class:`Hypothesis`,
:class:`Attention`...); failures raise :class:`TranslatorError` subclasses. Needs grpcio
and protobuf only: no numpy, ONNX Runtime or SentencePiece, and nothing of the server.
"""

from __future__ import annotations

import os as _os
import sys as _sys

# gRPC's C core writes some failures (a TLS handshake with a plaintext server) to stderr
# at INFO, before the CLI's one-line error says the same. Read when grpc is imported,
# so set here, for the client's own commands only, unless the user chose a verbosity.
if _os.path.basename(_sys.argv[0] if _sys.argv else "") in (
    "nmt-translate",
    "nmt-eval",
    "nmt-score",
):
    _os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

from nmt_client.errors import (
    DeadlineExceeded,
    InvalidOptions,
    InvalidRequest,
    Overloaded,
    ServerUnavailable,
    TranslatorError,
)
from nmt_client.options import DecodeOptions, score_request, stream_request, translate_request
from nmt_client.results import (
    Attention,
    Diagnostics,
    Hypothesis,
    ModelInfo,
    RequestLimits,
    Result,
    StreamUpdate,
    Timing,
)
from nmt_client.translator import DEFAULT_TARGET, Translator

__all__ = [
    "DEFAULT_TARGET",
    "Attention",
    "DeadlineExceeded",
    "DecodeOptions",
    "Diagnostics",
    "Hypothesis",
    "InvalidOptions",
    "InvalidRequest",
    "ModelInfo",
    "Overloaded",
    "RequestLimits",
    "Result",
    "ServerUnavailable",
    "StreamUpdate",
    "Timing",
    "Translator",
    "TranslatorError",
    "score_request",
    "stream_request",
    "translate_request",
]
