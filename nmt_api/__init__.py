"""The ``nmt.v1`` wire API: generated stubs (``nmt_api.nmt.v1.translator_pb2`` and
``translator_pb2_grpc``, see ``nmt_api/README.md``) and the conventions of the protocol
that the ``.proto`` cannot express. Imported by the server and by the client library;
imports neither."""

from __future__ import annotations

import os as _os
import sys as _sys

from nmt_api.nmt.v1 import translator_pb2 as _pb

# gRPC's C core writes every failed TLS handshake to stderr at INFO: on nmt-serve a line
# per plaintext probe of its TLS port (200 probes, 200 lines), on a client command a
# second line before its own one-line error. Read once, when grpc is first imported:
# set here (the server and the client import this package before grpc) for this
# project's commands, unless the user chose a verbosity (GRPC_VERBOSITY=INFO shows them).
QUIET_GRPC_COMMANDS = ("nmt-serve", "nmt-translate", "nmt-eval", "nmt-score")
if _os.path.basename(_sys.argv[0] if _sys.argv else "") in QUIET_GRPC_COMMANDS:
    _os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

# The gRPC service name of ``nmt.v1.Translator`` (also its health-check service name).
SERVICE_NAME = "nmt.v1.Translator"
# Ends the message of every RESOURCE_EXHAUSTED that the server sends because it is busy
# (queue full, too many translations in flight). gRPC's own RESOURCE_EXHAUSTED for a
# message over the size limit does not carry it: sending that again fails the same way.
RETRY_HINT = "retry with backoff"
# Ends the message of the UNAVAILABLE the server sends while it warms up or drains: the
# same call succeeds shortly (on this replica or, behind a balancer, another).
NOT_READY_HINT = "retry shortly"
# Metadata key of a call's request id: sent by a client that wants to name its call,
# returned by the server in the trailing metadata of every call (errors included).
REQUEST_ID_HEADER = "x-request-id"
# The HTTP/JSON API's header for a call's deadline, as grpc-gateway reads it: 1-8 digits
# and a unit, H, M, S, m (ms), u (us) or n (ns), e.g. 2S or 500m.
TIMEOUT_HEADER = "Grpc-Timeout"
# The beam of a request for beam search that leaves beam_size 0 (the proto's "5 for beam").
DEFAULT_BEAM = 5
# The longest n-gram DecodeOptions.block_ngram_repeat may name.
MAX_BLOCK_NGRAM = 32
# LengthPenaltyForm's values by the names the client library, the server's decoding
# options and the manifests give them (LENGTH_PENALTY_GNMT: "gnmt"); unspecified has none.
LENGTH_PENALTY_FORMS: dict[str, int] = {
    value.name.removeprefix("LENGTH_PENALTY_").lower(): value.number
    for value in _pb.LengthPenaltyForm.DESCRIPTOR.values
    if value.number != _pb.LENGTH_PENALTY_FORM_UNSPECIFIED
}

__all__ = [
    "DEFAULT_BEAM",
    "LENGTH_PENALTY_FORMS",
    "MAX_BLOCK_NGRAM",
    "NOT_READY_HINT",
    "REQUEST_ID_HEADER",
    "RETRY_HINT",
    "SERVICE_NAME",
    "TIMEOUT_HEADER",
]
