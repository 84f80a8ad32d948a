"""Forced tokens' own log-probs: the decoder's whole row of candidates as one more output.

The bundle contract's decoder step returns only its top-k log-probs and EOS's
(:mod:`export.spec`), which is all a search needs. Forced decoding needs more: a target
prefix (``target_prefix``) and the ``Score`` RPC feed tokens the model did not choose,
and the log-prob of such a token is outside the top-k as often as not. So the decoder as
served gets, at load time, one more output, :data:`STEP_LOG_PROBS` ``(rows, V)``: the
very tensor its ``TopK`` ranks (``log_softmax`` of the logits plus the exporter's
``blocked`` row, or an ensemble's combination: :mod:`export.ensemble`), so a forced
token's log-prob is the number the search would have ranked it by. EOS is ``blocked``
there (it has an output of its own, ``eos_log_probs``); a forced EOS takes that.

The output costs nothing on the steps that do not fetch it: it is the tensor the
``TopK`` reads, renamed and declared an output (no node is added), which ONNX Runtime
computes anyway and copies out only when a call names it.
:class:`service.runtime.OnnxModel` names it only on steps where some row is forced.
A decoder whose top-k this cannot find (no ``TopK`` writing the contract's outputs) is
served as it is and cannot force tokens (:class:`ForcedError` says why, and requests
that would force one are refused with it).
"""

from __future__ import annotations

from pathlib import Path

from service import onnx_graph_pb2 as pb
from service.topk import TopKError, the_topk

STEP_LOG_PROBS = "forced_step_log_probs"


class ForcedError(ValueError):
    """The decoder cannot report a forced token's log-prob (the message says why)."""


def exposed(decoder: bytes) -> bytes:
    """``decoder`` (a serialized ``decoder.onnx``) with the input of its contract
    ``TopK`` also written to the graph output :data:`STEP_LOG_PROBS` ``(rows, V)``
    (float32, or the top-k values' type). Raises :class:`ForcedError` when it has no
    such ``TopK``."""
    model = _parse(decoder)
    graph = model.graph
    topk = _checked(graph)
    # the tensor itself becomes the output (renamed), not a copy of it: a step that does
    # not fetch it costs nothing more
    x = topk.input[0]
    for node in graph.node:
        for values in (node.input, node.output):
            for i, name in enumerate(values):
                if name == x:
                    values[i] = STEP_LOG_PROBS
    for info in graph.value_info:
        if info.name == x:
            info.name = STEP_LOG_PROBS
    out = graph.output.add()
    out.name = STEP_LOG_PROBS
    tensor = out.type.tensor_type
    # the TopK's values have its input's type (float32; float16 in an fp16 bundle)
    values = {o.name: o for o in graph.output}.get(topk.output[0])
    tensor.elem_type = values.type.tensor_type.elem_type if values else pb.TensorProto.FLOAT
    tensor.shape.dim.add().dim_param = "rows"
    tensor.shape.dim.add().dim_param = "vocab"
    return model.SerializeToString()


def unsupported(decoder: Path) -> str | None:
    """Why the decoder file ``decoder`` cannot report forced tokens' log-probs, or None
    (what a process without its ONNX Runtime sessions, a front end, needs to know: the
    checks of :func:`exposed`, without rewriting anything)."""
    try:
        _checked(_parse(decoder.read_bytes()).graph)
    except ForcedError as exc:
        return str(exc)
    return None


def _parse(decoder: bytes) -> pb.ModelProto:
    model = pb.ModelProto()
    try:
        model.ParseFromString(decoder)
    except Exception:  # protobuf's DecodeError; ONNX Runtime then says what is wrong
        raise ForcedError("the decoder is not a readable ONNX model") from None
    return model


def _checked(graph: pb.GraphProto) -> pb.NodeProto:
    """The contract TopK of ``graph``, whose input :func:`exposed` can make an output;
    raises :class:`ForcedError` saying why not."""
    external = [w.name for w in graph.initializer if w.data_location == pb.TensorProto.EXTERNAL]
    if external:  # the rewritten bytes could not find them
        raise ForcedError(f"the decoder keeps weights in external data ({external[0]}, ...)")
    names = {o for node in graph.node for o in node.output} | {o.name for o in graph.output}
    if STEP_LOG_PROBS in names:
        raise ForcedError(f"the decoder already has a value named {STEP_LOG_PROBS}")
    try:
        _, topk = the_topk(graph)
    except TopKError as exc:
        raise ForcedError(str(exc)) from None
    x = topk.input[0]
    if x in {v.name for v in (*graph.input, *graph.output, *graph.initializer)}:
        raise ForcedError(f"the TopK ranks {x}, a graph input, output or constant")
    if any(_reads(a.g, x) for node in graph.node for a in node.attribute if a.HasField("g")):
        raise ForcedError(f"a subgraph reads the TopK's input {x}")
    return topk


def _reads(graph: pb.GraphProto, name: str) -> bool:
    """Whether ``graph`` (a Loop or If body) or a graph inside it reads ``name``."""
    for node in graph.node:
        if name in node.input:
            return True
        if any(_reads(a.g, name) for a in node.attribute if a.HasField("g")):
            return True
    return False
