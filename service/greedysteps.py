"""Several greedy decoder steps in one ONNX Runtime call (multi-step scheduling).

A step of the decode loop is one ``decoder.onnx`` call plus host Python around it: the
inputs, the candidates, the EOS rule, the choice, the bookkeeping. On a CPU that host
part is a quarter of a greedy step's wall time, and ORT's own fixed cost per ``run()``
comes on top; on a GPU the host part is the bound. When every sentence of a step is a
plain greedy row (:class:`service.greedyrows.GreedyRows`) nothing but the chosen token
goes from one step to the next, so ``steps`` steps can run in one call: vLLM's
``--num-scheduler-steps``, here as one graph.

:func:`compose` builds that graph from any bundle's one-step decoder (the contract of
:mod:`export.spec`), at load time, so every bundle gets it whatever wrote it: ``steps``
copies of the decoder's nodes sharing its weights, each followed by the greedy choice of
:class:`service.strategies.Greedy`, whose token feeds the next copy::

    the decoder's inputs except top_k (Greedy.K, a constant here), plus
    eos_mask  (rows, steps, K + 1) bool   candidates each step may not choose: the EOS
                                         rule of :func:`models.scoring.restrict`, from
                                         :func:`eos_masks` on the host (the rule itself
                                         stays in :func:`models.scoring.eos_codes`)
    own_rows  (rows,) int64              0..rows-1: the parent rows of every copy after
                                         the first (an input, so that the graph has no
                                         shape-dependent node and CUDA graphs capture it)

    -> tokens     (rows, steps)          int64  each step's choice
    -> log_probs  (rows, steps)          float  its log-prob
    -> attention  (rows, steps, src_len) float
    -> <state>_out (rows, ...)           the state after the last step

Each step's choice is :func:`service.decoding.candidates` then
:func:`service.ranking.greedy_pick` in graph form: top-k with pad and bos blocked, EOS
last, the masked candidates set to -inf, the first best (a NaN first, as numpy's argmax
takes it: a broken model's rows choose the same as on the host). The copies are the same nodes
as the one-step graph, so a row's tokens, log-probs and states are bit for bit the ones
of ``steps`` single calls (``tests/service/test_greedysteps.py``, every model variant).
A row that ends (EOS) before the last step goes on computing garbage the host ignores.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from export import spec
from models.scoring import FORCED_EOS_FLOOR, Eos, eos_codes
from service import onnx_graph_pb2 as pb
from service.decoding import SpecialIds
from service.graphedit import default_opset, initializer, make_node
from service.strategies import Greedy

EOS_MASK = "eos_mask"
CANDIDATES = Greedy.K + 1  # a step's candidates: the top-k, then EOS (eos_mask's last axis)
OWN_ROWS = "own_rows"
TOKENS = "tokens"
LOG_PROBS = "log_probs"
# inputs every copy reads as they are (top_k becomes a constant of the composed graph)
_SHARED = (spec.ROW_SENTENCE, spec.MEMORY, spec.KEYS, spec.SRC_MASK)
_PREFIX = "greedy_steps_"  # names of the nodes and values this module adds


class ComposeError(ValueError):
    """The one-step decoder cannot be composed into several steps (named why)."""


def outputs(state_names: Sequence[str]) -> list[str]:
    """The composed graph's outputs, in order: the host reads the first three."""
    return [TOKENS, LOG_PROBS, spec.ATTENTION, *(s + spec.STATE_OUT_SUFFIX for s in state_names)]


def eos_masks(
    steps: np.ndarray, limits: np.ndarray, min_lengths: np.ndarray, count: int
) -> np.ndarray:
    """The ``eos_mask`` input for rows at position ``steps`` ``(rows,)`` under their
    ``limits`` and ``min_lengths`` over the next ``count`` steps: ``(rows, count, K + 1)``
    bool, true where :func:`models.scoring.restrict` would put -inf (EOS last)."""
    codes = eos_codes(steps[:, None] + np.arange(count), limits[:, None], min_lengths[:, None])
    mask = np.zeros((len(steps), count, CANDIDATES), dtype=bool)
    mask[:, :, -1] = codes == Eos.BLOCKED
    mask[:, :, :-1] = (codes == Eos.FORCED)[:, :, None]
    return mask


def compose(
    decoder: bytes,
    steps: int,
    state_names: Sequence[str],
    special: SpecialIds,
    vocab_size: int,
) -> bytes:
    """The ``steps``-step greedy graph (serialized) of the one-step ``decoder``
    (serialized ``decoder.onnx``; see the module).

    Raises :class:`ComposeError` for a decoder this cannot copy: one with subgraphs
    (If, Loop, Scan), without the contract's inputs and outputs, with outputs that are
    not float32, or below opset 13. (ONNX Runtime checks the graph as it loads it.)"""
    if steps < 2:
        raise ComposeError(f"steps must be at least 2, got {steps}")
    one = pb.ModelProto()
    one.ParseFromString(decoder)
    graph = one.graph
    _validate(one, state_names)
    weights = {w.name for w in graph.initializer}
    model = pb.ModelProto()
    model.CopyFrom(one)
    composed = model.graph
    del composed.node[:], composed.input[:], composed.output[:], composed.value_info[:]
    composed.name = f"{graph.name or 'decoder'}_greedy_{steps}_steps"

    def const(name: str, value: np.ndarray) -> str:
        return initializer(composed, _PREFIX + name, value)

    def node(op: str, inputs: list[str], output: str, **attrs: int) -> str:
        composed.node.append(make_node(op, inputs, [output], **attrs))
        return output

    neg_inf = const("neg_inf", np.array(-np.inf, dtype=np.float32))
    floor = const("forced_eos_floor", np.array(FORCED_EOS_FLOOR, dtype=np.float32))
    first = const("first_column", np.array([0]))
    pos_inf = const("pos_inf", np.array(np.inf, dtype=np.float32))
    top_k = const("top_k", np.array([Greedy.K], dtype=np.int64))
    eos_column = const("eos_column", np.array([[special.eos]], dtype=np.int64))
    blocked = np.zeros(vocab_size, dtype=bool)  # what candidates() blocks in the top-k
    blocked[[special.pad, special.bos]] = True
    blocked_ids = const("blocked_ids", blocked)
    axis1 = const("axis1", np.array([1]))
    zero = const("zero", np.array(0, dtype=np.int64))
    # EOS's id on every row, (rows, 1), from own_rows: no Shape/Expand node (see OWN_ROWS)
    column = node("Unsqueeze", [OWN_ROWS, axis1], _PREFIX + "own_column")
    zeros = node("Mul", [column, zero], _PREFIX + "zeros")
    eos_ids = node("Add", [zeros, eos_column], _PREFIX + "eos_ids")

    prev, parents = spec.PREV_TOKENS, spec.PARENT_ROWS
    states = {s: s for s in state_names}
    tokens, log_probs, attention = [], [], []
    for j in range(steps):
        suffix = f"__step{j}"
        # what this copy reads: the inputs it shares, the previous copy's outputs, its own
        fed = {spec.TOP_K: top_k, spec.PREV_TOKENS: prev, spec.PARENT_ROWS: parents, **states}
        fed.update((n, n) for n in (*weights, *_SHARED, ""))
        for i, original in enumerate(graph.node):
            copy = composed.node.add()
            copy.CopyFrom(original)
            # unique even where the decoder leaves names empty (ORT refuses duplicates)
            copy.name = f"{original.name or original.op_type}#{i}{suffix}"
            copy.input[:] = [fed.get(n, n + suffix) for n in original.input]
            copy.output[:] = [n and n + suffix for n in original.output]
        out = {n: n + suffix for n in spec.decoder_outputs(tuple(state_names))}
        p = f"{_PREFIX}{j}_"
        # candidates(): the top-k with pad/bos blocked, EOS last; restrict(): the mask
        ids = node("Concat", [out[spec.TOPK_IDS], eos_ids], p + "ids", axis=1)
        eos_value = node("Unsqueeze", [out[spec.EOS_LOG_PROBS], axis1], p + "eos_value")
        rule = node("Gather", [EOS_MASK, const(f"step{j}", np.array(j))], p + "rule", axis=1)
        # restrict(): a forced EOS (the top-k banned) the model gives -inf still wins
        forced = node("Gather", [rule, first], p + "forced", axis=1)
        eos_inf = node("Equal", [eos_value, neg_inf], p + "eos_inf")
        stuck = node("And", [forced, eos_inf], p + "stuck")
        eos_value = node("Where", [stuck, floor, eos_value], p + "eos_floored")
        values = node("Concat", [out[spec.TOPK_LOG_PROBS], eos_value], p + "values", axis=1)
        banned = node("Or", [node("Gather", [blocked_ids, ids], p + "blocked"), rule], p + "ban")
        values = node("Where", [banned, neg_inf, values], p + "allowed")
        # greedy_pick(): numpy's argmax, the first best, where a NaN beats every number
        # (ArgMax also keeps the first of equal values; a log-prob is never +inf)
        nan = node("IsNaN", [values], p + "nan")
        ranked = node("Where", [nan, pos_inf, values], p + "ranked")
        best = node("ArgMax", [ranked], p + "best", axis=1, keepdims=1)
        token = node("GatherElements", [ids, best], p + "token", axis=1)
        tokens.append(token)
        log_probs.append(node("GatherElements", [values, best], p + "log_prob", axis=1))
        attention.append(node("Unsqueeze", [out[spec.ATTENTION], axis1], p + "attention"))
        prev = node("Squeeze", [token, axis1], p + "prev")
        parents = OWN_ROWS
        states = {s: out[s + spec.STATE_OUT_SUFFIX] for s in state_names}
    node("Concat", tokens, TOKENS, axis=1)
    node("Concat", log_probs, LOG_PROBS, axis=1)
    node("Concat", attention, spec.ATTENTION, axis=1)
    for s in state_names:
        node("Identity", [states[s]], s + spec.STATE_OUT_SUFFIX)

    composed.input.extend(i for i in graph.input if i.name != spec.TOP_K and i.name not in weights)
    _value(composed.input.add(), EOS_MASK, pb.TensorProto.BOOL, ["rows", steps, CANDIDATES])
    _value(composed.input.add(), OWN_ROWS, pb.TensorProto.INT64, ["rows"])
    by_name = {o.name: o for o in graph.output}
    _value(composed.output.add(), TOKENS, pb.TensorProto.INT64, ["rows", steps])
    _value(composed.output.add(), LOG_PROBS, pb.TensorProto.FLOAT, ["rows", steps])
    _value(composed.output.add(), spec.ATTENTION, pb.TensorProto.FLOAT, ["rows", steps, "src_len"])
    composed.output.extend(by_name[s + spec.STATE_OUT_SUFFIX] for s in state_names)
    return model.SerializeToString()


def _value(info: pb.ValueInfoProto, name: str, elem_type: int, dims: list) -> None:
    """Fill ``info``: a tensor ``name`` of ``elem_type`` over ``dims`` (names or sizes)."""
    info.name = name
    tensor = info.type.tensor_type
    tensor.elem_type = elem_type
    for d in dims:
        dim = tensor.shape.dim.add()
        if isinstance(d, str):
            dim.dim_param = d
        else:
            dim.dim_value = d


def _validate(decoder: pb.ModelProto, state_names: Sequence[str]) -> None:
    graph = decoder.graph
    opset = default_opset(decoder)
    if opset < 13:
        raise ComposeError(f"the decoder's opset is {opset}; composing steps needs 13 or later")
    subgraphs = [
        n.op_type
        for n in graph.node
        if any(a.type in (pb.AttributeProto.GRAPH, pb.AttributeProto.GRAPHS) for a in n.attribute)
    ]
    if subgraphs:
        raise ComposeError(f"the decoder has subgraphs ({', '.join(sorted(set(subgraphs)))})")
    names = tuple(state_names)
    have_in = [i.name for i in graph.input]
    have_out = [o.name for o in graph.output]
    missing = [n for n in spec.decoder_inputs(names) if n not in have_in]
    missing += [n for n in spec.decoder_outputs(names) if n not in have_out]
    if missing:
        raise ComposeError(f"the decoder lacks the contract's {', '.join(missing)}")
    floats = [
        o.name
        for o in graph.output
        if o.name in (spec.TOPK_LOG_PROBS, spec.EOS_LOG_PROBS, spec.ATTENTION)
        and o.type.tensor_type.elem_type != pb.TensorProto.FLOAT
    ]
    if floats:
        raise ComposeError(f"the decoder's {', '.join(floats)} are not float32")
