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

import nmt_api  # noqa: F401 - first, before grpc: it sets gRPC's log verbosity
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
