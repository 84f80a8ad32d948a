"""The decoder's top-k in two levels: a load-time rewrite of its graph, exact.

ONNX Runtime's CPU ``TopK`` over the vocabulary is the most expensive node of a decoder
step at a few dozen rows: 185 of the 1,636 µs of kernel time ORT's profiler counts at
32 rows of the 4,000-piece ``en-es/8`` (k = 3; the five int8 matrix products took 278
together), while a ``ReduceMax`` over the same tensor costs a fraction of it. So the
``TopK`` that makes the contract's ``topk_log_probs``/``topk_ids`` (:mod:`export.spec`)
is replaced by::

    x (rows, V)  -> padded with -inf to C * WIDTH columns, viewed as (rows, C, WIDTH)
    chunk maxima (rows, C)                   ReduceMax
    the kc = min(k, C) best chunks           TopK over C, then sorted by chunk index
    their kc * WIDTH columns, in index order GatherElements (Flatten)
    the top k of those                       TopK over kc * WIDTH, ids mapped back

It gives the same values, ids and order as the one ``TopK`` (ties to the lower index):
a column among the top k ranks below fewer than k others, so fewer than k chunks have a
better best column than its chunk (a chunk's best column ranks it, ties to the lower
chunk, whose columns are lower), and its chunk is among the kc chosen; the candidates
keep the vocabulary's order, so ties among them break as before. With k >= C every
chunk is a candidate.

One limit: ``ReduceMax`` does not propagate NaN (a chunk whose first column is a number
can report a number), so the rewrite applies only where a row is all NaN or free of
NaN: ``topk`` of a float32 ``log_softmax(z)``, optionally plus a constant with neither
NaN nor +inf (the exporter's ``blocked`` columns: 0 or -inf), or an ensemble's sum of
such terms, each optionally times a positive number (:mod:`export.ensemble`). ONNX Runtime's float32
CPU ``LogSoftmax`` turns a row with a NaN or a +inf in ``z`` (or all -inf) into a NaN
row, and an all-NaN row picks the first k columns either way; its float64 kernel does
not, hence float32 only. A +inf in the constant would make NaN (-inf + inf) beside
numbers, hence refused. Anything else is refused by name (:class:`TopKError`) and the
decoder keeps its ``TopK``: also a graph with external data (the rewritten bytes could
not find it) or already using this module's names.

ONNX Runtime refuses a k above the vocabulary; the rewrite returns padding columns (-inf,
ids from V) for V < k <= C * WIDTH instead. The engine never asks for more than the
vocabulary. ``tests/service/test_topk.py`` checks the rewrite against ``TopK`` on ties,
infinities, NaN rows, zero rows and every k up to the vocabulary, and on the committed
bundles.
"""

from __future__ import annotations

import numpy as np

from export import spec
from service import onnx_graph_pb2 as pb
from service.graphedit import default_opset, initializer, make_node

WIDTH = 32  # columns per chunk: C = V / 32 chunk maxima, then min(k, C) * 32 candidates
_PREFIX = "chunked_topk_"


class TopKError(ValueError):
    """The decoder's top-k cannot be rewritten (the message says why); it stays one TopK."""


def chunked(decoder: bytes, vocab_size: int, width: int = WIDTH) -> bytes:
    """``decoder`` (a serialized ``decoder.onnx``) with its top-k in two levels over
    chunks of ``width`` of its ``vocab_size`` columns (see the module). Raises
    :class:`TopKError` for a top-k this cannot rewrite exactly."""
    if vocab_size <= width:
        raise TopKError(f"a vocabulary of {vocab_size} is not wider than one chunk ({width})")
    model = pb.ModelProto()
    try:
        model.ParseFromString(decoder)
    except Exception:  # protobuf's DecodeError; ONNX Runtime then says what is wrong
        raise TopKError("the decoder is not a readable ONNX model") from None
    graph = model.graph
    external = [w.name for w in graph.initializer if w.data_location == pb.TensorProto.EXTERNAL]
    if external:
        raise TopKError(f"the decoder keeps weights in external data ({external[0]}, ...)")
    taken = [
        n
        for n in (
            *(o for node in graph.node for o in (*node.output, node.name)),
            *(w.name for w in graph.initializer),
            *(i.name for i in graph.input),
        )
        if n.startswith(_PREFIX)
    ]
    if taken:
        raise TopKError(f"the decoder already has a name starting {_PREFIX!r} ({taken[0]})")
    opset = default_opset(model)
    if opset < 13:
        raise TopKError(f"the decoder's opset is {opset}; the rewrite needs 13 or later")
    at, topk = the_topk(graph)
    x, k = topk.input
    _check_input(graph, x, vocab_size)
    chunks = -(-vocab_size // width)
    nodes: list[pb.NodeProto] = []

    def const(name: str, value: np.ndarray) -> str:
        return initializer(graph, f"{_PREFIX}const_{name}", value)

    def node(op: str, inputs: list[str], outputs: list[str] | str, **attrs) -> str:
        outputs = [outputs] if isinstance(outputs, str) else outputs
        nodes.append(make_node(op, inputs, outputs, **attrs))
        return outputs[0]

    p = _PREFIX
    if chunks * width > vocab_size:  # the padding ranks last: -inf at the highest ids
        pads = const("pads", np.array([0, 0, 0, chunks * width - vocab_size], dtype=np.int64))
        x = node(
            "Pad", [x, pads, const("neg_inf", np.array(-np.inf, dtype=np.float32))], p + "padded"
        )
    view = node("Reshape", [x, const("view", np.array([0, chunks, width]))], p + "view")
    if opset >= 18:
        maxima = node("ReduceMax", [view, const("axis2", np.array([2]))], p + "maxima", keepdims=0)
    else:
        maxima = node("ReduceMax", [view], p + "maxima", axes=[2], keepdims=0)
    kc = node("Min", [k, const("chunks", np.array([chunks]))], p + "kc")
    node("TopK", [maxima, kc], [p + "best_maxima", p + "best_chunks"], axis=-1)
    ordered = node(
        "TopK", [p + "best_chunks", kc], [p + "in_order", p + "unused"], axis=-1, largest=0
    )
    first = node("Mul", [ordered, const("width", np.array(width))], p + "first")
    first = node("Unsqueeze", [first, const("unsqueeze_axis", np.array([2]))], p + "first_3d")
    columns = node(
        "Add", [first, const("offsets", np.arange(width).reshape(1, 1, width))], p + "cols"
    )
    # Flatten, not Reshape to [0, -1], which zero rows would refuse
    columns = node("Flatten", [columns], p + "columns", axis=1)
    candidates = node("GatherElements", [x, columns], p + "candidates", axis=1)
    values, where = topk.output
    node("TopK", [candidates, k], [values, p + "where"], axis=-1)
    node("GatherElements", [columns, p + "where"], where, axis=1)
    del graph.node[at]
    for offset, made in enumerate(nodes):
        graph.node.insert(at + offset, made)
    return model.SerializeToString()


def _attrs(node: pb.NodeProto) -> dict[str, int]:
    return {a.name: a.i for a in node.attribute if a.type == pb.AttributeProto.INT}


def the_topk(graph: pb.GraphProto) -> tuple[int, pb.NodeProto]:
    """The index and node of the TopK that writes the contract's top-k outputs."""
    wanted = [spec.TOPK_LOG_PROBS, spec.TOPK_IDS]
    found = [(i, n) for i, n in enumerate(graph.node) if list(n.output) == wanted]
    if (
        len(found) != 1
        or found[0][1].op_type != "TopK"
        or found[0][1].domain not in ("", "ai.onnx")
    ):
        raise TopKError(f"no TopK node writes {' and '.join(wanted)} directly")
    at, topk = found[0]
    attrs = _attrs(topk)
    if attrs.get("largest", 1) != 1 or attrs.get("sorted", 1) != 1:
        raise TopKError("the TopK is not largest-first and sorted")
    if attrs.get("axis", -1) not in (-1, 1):
        raise TopKError(f"the TopK runs along axis {attrs['axis']}, not the vocabulary's")
    return at, topk


def _check_input(graph: pb.GraphProto, x: str, vocab_size: int) -> None:
    """Refuse a TopK input ``x`` other than a float32 ``log_softmax(z)`` over the last axis,
    optionally plus one row of constants with neither NaN nor +inf (see the module), or
    an ensemble's log-linear combination of such inputs (:mod:`export.ensemble`: ``Sum``
    of them, each optionally times a positive finite scalar), whose rows keep the
    property: all NaN, or free of NaN and of +inf."""
    made = {o: n for n in graph.node for o in n.output}
    weights = {w.name: w for w in graph.initializer}

    def constant(name: str) -> np.ndarray | None:
        weight = weights.get(name)
        if weight is None:
            return None
        if weight.data_type != pb.TensorProto.FLOAT or not weight.raw_data:
            raise TopKError(f"the constant {weight.name} before the TopK is not raw float32")
        return np.frombuffer(weight.raw_data, dtype=np.float32)

    def check(value: str, depth: int = 0, summed: bool = False) -> None:
        """``summed``: under an ensemble's Sum or Mul. There, and below the first Add, an
        added constant must also be <= 0 (a row of 0/-inf): two large ones could
        overflow one column to +inf, and +inf beside -inf makes one NaN column."""
        producer = made.get(value)
        op = producer.op_type if producer is not None else None
        if depth > 8 or op is None:
            raise TopKError("the TopK's input is not log_softmax over the vocabulary")
        if op == "LogSoftmax" and _attrs(producer).get("axis", -1) in (-1, 1):
            return
        if op == "Sum":
            for term in producer.input:
                check(term, depth + 1, summed=True)
            return
        if op not in ("Add", "Mul") or len(producer.input) != 2:
            raise TopKError("the TopK's input is not log_softmax over the vocabulary")
        constants = [i for i in producer.input if i in weights]
        others = [i for i in producer.input if i not in weights]
        if len(constants) != 1 or len(others) != 1:
            raise TopKError(f"the TopK's input {op.lower()}s something other than one constant")
        values = constant(constants[0])
        weight = weights[constants[0]]
        if op == "Mul":  # an ensemble member's weight
            if values.size != 1 or not (np.isfinite(values).all() and (values > 0).all()):
                raise TopKError(
                    f"the weight {weight.name} before the TopK is not one positive number"
                )
        else:
            if not (values < np.inf).all():  # NaN, or +inf, which makes NaN of a -inf log-prob
                raise TopKError(
                    f"the constant {weight.name} added before the TopK holds NaN or +inf"
                )
            if (summed or depth) and not (values <= 0).all():
                raise TopKError(f"the constant {weight.name} added in an ensemble is not <= 0")
            if len(weight.dims) > 2 or (len(weight.dims) == 2 and weight.dims[0] != 1):
                raise TopKError(f"the constant {weight.name} added before the TopK is not one row")
            if values.size not in (1, vocab_size):
                raise TopKError(
                    f"the constant {weight.name} added before the TopK has {values.size} "
                    f"columns, the vocabulary {vocab_size}"
                )
        check(others[0], depth + 1, summed or op == "Mul")

    check(x)
    out = {o.name: o.type.tensor_type for o in graph.output}.get(spec.TOPK_LOG_PROBS)
    if out is None or out.elem_type != pb.TensorProto.FLOAT:
        raise TopKError(f"{spec.TOPK_LOG_PROBS} is not float32")
    if out.HasField("shape") and len(out.shape.dim) != 2:
        raise TopKError(f"{spec.TOPK_LOG_PROBS} is not (rows, k)")
