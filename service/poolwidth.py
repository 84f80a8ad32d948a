"""Attention's sums over the source, made independent of the memory pool's width: a
load-time rewrite of a decoder graph for bundles exported before this project's exporter
wrote them so (:func:`models.attention.weighted_sum` and its elementwise scores).

A sentence decoded beside longer ones sits in a memory pool as wide as the longest (its
own attention weights 0 beyond its end). Two products of a decoder step sum over the
source with ONNX Runtime's CPU ``MatMul`` in an order that changes with that width:

* the context, ``MatMul(Unsqueeze(attention, 1), memory)``: one row (M = 1) by a matrix,
  ``(rows, 1, S) x (rows, S, D)``, summed over ``S`` differently for different ``S``;
* dot and general (Luong) scores, ``MatMul(keys, Unsqueeze(query, -1))``: a matrix of
  ``S`` rows by one column, ``(rows, S, K) x (rows, K, 1)``, each row's sum over ``K``
  ordered differently for different ``S``.

Alone and batched, a sentence's numbers then differ by some 1e-8: fp32 carries that to
its scores at the 1e-6 level (76 of 300 test sentences of the committed fp32 ``en-es/7``
moved, up to 2e-5 in a token's log-prob, beside a 60-word sentence); an int8 bundle's
per-row quantization turns it into another integer, and a sentence of ``en-es/8`` moved
its score by 0.0014 and 5 of its 16-best list (helper-80's audit, 2026-11-29). Measured
in isolation (200 random sums each, widths from the sentence's own length to 64): the
one-row product differed from its own-width result in 130, the one-column product in 58
of 100; two rows, and an elementwise product summed by ``ReduceSum``, never. So:

    MatMul(u = Unsqueeze(attention, 1), memory)   ->  Slice(MatMul(Concat(u, u, axis 1),
                                                        memory), [0:1] on axis 1)
    MatMul(keys, Unsqueeze(query, -1))             ->  ReduceSum(keys * Unsqueeze(query,
                                                        -2), axis -1, keepdims)

each keeping the product's output name (the rest of the graph is untouched); an
ensemble's members' attention (``m0/attention``) counts as the contract's. A graph with
neither pattern, with external data (the rewritten bytes could not find it) or of an
opset before 13 is served as it is; so is a one-column product by weights (a value
computed from constants alone), an unsqueeze on another axis (``2`` is the last only for
a query of rank 2, which the graph may not record), and keys or attention of another
rank than the patterns' where the graph records it.
"""

from __future__ import annotations

import numpy as np

from export import spec
from service import onnx_graph_pb2 as pb
from service.graphedit import default_opset, initializer, make_node

_PREFIX = "pool_width_"


def width_invariant(decoder: bytes) -> tuple[bytes, int]:
    """``decoder`` (a serialized ``decoder.onnx``) with its width-dependent sums over the
    source rewritten (see the module), and how many it rewrote (0: ``decoder`` as it
    was; what does not parse is left for ONNX Runtime to report)."""
    model = pb.ModelProto()
    try:
        model.ParseFromString(decoder)
    except Exception:  # protobuf's DecodeError
        return decoder, 0
    graph = model.graph
    if any(w.data_location == pb.TensorProto.EXTERNAL for w in graph.initializer):
        return decoder, 0
    if default_opset(model) < 13:  # Unsqueeze's, Slice's and ReduceSum's axes as inputs
        return decoder, 0
    constants = _constants(graph)
    unsqueezed = {  # Unsqueeze output -> (its input, its axes)
        n.output[0]: (n.input[0], _ints(constants.get(n.input[1]) if len(n.input) > 1 else None))
        for n in graph.node
        if n.op_type == "Unsqueeze"
    }
    fixed, ranks = _fixed(graph, constants), _ranks(graph)
    rewritten = at = 0
    while at < len(graph.node):
        node = graph.node[at]
        made = _rewrite(graph, node, unsqueezed, fixed, ranks, f"{_PREFIX}{rewritten}_")
        if made is None:
            at += 1
            continue
        del graph.node[at]
        for offset, new in enumerate(made):
            graph.node.insert(at + offset, new)
        at += len(made)
        rewritten += 1
    if not rewritten:
        return decoder, 0
    return model.SerializeToString(), rewritten


def _rewrite(graph, node, unsqueezed, fixed, ranks, p: str) -> list[pb.NodeProto] | None:
    """The nodes that replace ``node``, or None when it is neither pattern. ``fixed``:
    values computed from constants alone (weights, however dequantized or cast);
    ``ranks``: the ranks the graph records for its values (none recorded: not checked)."""
    if node.op_type != "MatMul":
        return None
    a, b = node.input
    (out,) = node.output
    source, axes = unsqueezed.get(a, (None, None))
    if _is_attention(source) and axes in ([1], [-2]) and ranks.get(source, 2) == 2:
        # the context: (rows, S) attention, unsqueezed to one row a sentence
        zero = initializer(graph, p + "zero", np.array([0], dtype=np.int64))
        one = initializer(graph, p + "one", np.array([1], dtype=np.int64))
        return [
            make_node("Concat", [a, a], [p + "twice"], axis=1),
            make_node("MatMul", [p + "twice", b], [p + "products"]),
            make_node("Slice", [p + "products", zero, one, one], [out]),
        ]
    query, axes = unsqueezed.get(b, (None, None))
    # the scores: a matrix of rows by a column made of a vector. Only an unsqueeze on the
    # last axis (-1) is the column whatever the query's rank, and only keys of rank 2 or
    # more keep MatMul's shape (a vector's prepended axis is dropped again); products by
    # weights are no scores over the source (and would make a weight-sized product a row)
    if query is not None and axes == [-1] and ranks.get(a, 3) >= 2 and a not in fixed:
        row = initializer(graph, p + "row_axis", np.array([-2], dtype=np.int64))
        last = initializer(graph, p + "last_axis", np.array([-1], dtype=np.int64))
        return [
            make_node("Unsqueeze", [query, row], [p + "query_row"]),
            make_node("Mul", [a, p + "query_row"], [p + "products"]),
            make_node("ReduceSum", [p + "products", last], [out], keepdims=1),
        ]
    return None


def _is_attention(name: str | None) -> bool:
    """The contract's ``attention`` output, or an ensemble member's (``m0/attention``,
    :mod:`export.ensemble_graphs`)."""
    return name is not None and (name == spec.ATTENTION or name.endswith("/" + spec.ATTENTION))


def _fixed(graph: pb.GraphProto, constants: dict[str, pb.TensorProto]) -> set[str]:
    """Every value computed from constants alone: initializers, ``Constant`` outputs and
    the outputs of nodes all of whose inputs are such (a weight dequantized, cast,
    transposed)."""
    fixed = set(constants)
    for node in graph.node:  # topological order: a node's inputs are settled before it
        if node.input and all(i in fixed for i in node.input if i):
            fixed.update(node.output)
    return fixed


def _ranks(graph: pb.GraphProto) -> dict[str, int]:
    """The ranks of the values whose type the graph records (inputs, outputs, value_info:
    what torch's exporter infers)."""
    out = {}
    for info in (*graph.input, *graph.output, *graph.value_info):
        tensor = info.type.tensor_type
        if tensor.HasField("shape"):
            out[info.name] = len(tensor.shape.dim)
    return out


def _constants(graph: pb.GraphProto) -> dict[str, pb.TensorProto]:
    """Initializers and ``Constant`` nodes' tensors, by name."""
    out = {w.name: w for w in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant":
            for attr in node.attribute:
                if attr.name == "value":
                    out[node.output[0]] = attr.t
    return out


def _ints(tensor: pb.TensorProto | None) -> list[int] | None:
    """An int64 tensor's values, or None for any other (or none)."""
    if tensor is None or tensor.data_type != pb.TensorProto.INT64:
        return None
    if tensor.raw_data:
        return np.frombuffer(tensor.raw_data, dtype=np.int64).tolist()
    return list(tensor.int64_data)
