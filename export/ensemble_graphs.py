"""The ensemble's two graphs, composed from its members' (see :mod:`export.ensemble`).

Each member's graph is copied in whole under its prefix (``m<i>/``: nodes, values,
weights, also inside loop bodies), its inputs fed from the ensemble's by
``Identity`` (or, for memory and keys, by a ``Slice`` of the member's columns), and
its outputs combined or renamed into the contract's. ONNX Runtime folds the
``Identity`` nodes away when it loads the graph.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from export import spec
from export.ensemble import EnsembleError, Member

# inputs of a member's decoder the ensemble feeds as they are (top_k: only where a node
# besides the member's TopK reads it)
_SHARED_DECODER_INPUTS = (
    spec.PREV_TOKENS, spec.PARENT_ROWS, spec.ROW_SENTENCE, spec.SRC_MASK, spec.TOP_K,
)  # fmt: skip
_INT64 = TensorProto.INT64
_P = "ensemble/"  # names of the nodes and values this module adds


class _Graph:
    """The composed graph as it is built: nodes, weights, value infos."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[TensorProto] = []
        self.value_info: list[onnx.ValueInfoProto] = []
        self.opsets: dict[str, int] = {}
        self.ir_version = 0

    def node(self, op: str, inputs: Sequence[str], outputs: Sequence[str] | str, **attrs) -> str:
        outputs = [outputs] if isinstance(outputs, str) else list(outputs)
        self.nodes.append(
            helper.make_node(op, list(inputs), outputs, name=_P + outputs[0], **attrs)
        )
        return outputs[0]

    def const(self, name: str, value: np.ndarray) -> str:
        self.initializers.append(numpy_helper.from_array(value, _P + name))
        return _P + name

    def member(self, m: Member, model: onnx.ModelProto) -> onnx.GraphProto:
        """Member ``m``'s graph under its prefix, its weights added; the caller adds its
        nodes (:meth:`nodes_of`) after the nodes that feed its inputs."""
        for opset in model.opset_import:
            domain = opset.domain or ""
            seen = self.opsets.setdefault(domain, opset.version)
            if seen != opset.version:
                raise EnsembleError(
                    f"member {m.index + 1} ({m.path}) uses opset {opset.version} of "
                    f"{domain or 'ai.onnx'!r}, an earlier member {seen}; re-export it"
                )
        if model.functions:
            raise EnsembleError(f"member {m.index + 1} ({m.path}) holds ONNX functions")
        self.ir_version = max(self.ir_version, model.ir_version)
        graph = onnx.GraphProto()
        graph.CopyFrom(model.graph)
        _prefix(graph, m.prefix)
        self.initializers.extend(graph.initializer)
        self.value_info.extend(graph.value_info)
        return graph

    def write(self, inputs, outputs, path: Path, name: str) -> None:
        graph = helper.make_graph(
            self.nodes, name, inputs, outputs, self.initializers, value_info=self.value_info
        )
        opsets = [helper.make_opsetid(d, v) for d, v in sorted(self.opsets.items())]
        model = helper.make_model(graph, opset_imports=opsets, producer_name="rnn-nmt-serving")
        model.ir_version = self.ir_version
        onnx.checker.check_model(model, full_check=True)
        onnx.save(model, str(path))


def _prefix(graph: onnx.GraphProto, prefix: str) -> None:
    """Every name of ``graph`` and of the graphs inside its nodes (a Loop's body) starts
    with ``prefix``: values, weights, nodes. A body's reads of the outer graph's values
    are renamed alike (:func:`onnx.compose.add_prefix` leaves those as they were)."""

    def name(n: str) -> str:
        return prefix + n if n else n  # "" is an omitted optional input

    for v in (*graph.input, *graph.output, *graph.value_info, *graph.initializer):
        v.name = name(v.name)
    for node in graph.node:
        node.name = name(node.name)
        node.input[:] = [name(n) for n in node.input]
        node.output[:] = [name(n) for n in node.output]
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                _prefix(attr.g, prefix)
            for body in attr.graphs:
                _prefix(body, prefix)


def _reads(nodes) -> set[str]:
    """Every value ``nodes`` read, inside their loop bodies too (a body may read the
    outer graph's inputs)."""
    out = set()
    for node in nodes:
        out.update(node.input)
        for attr in node.attribute:
            for body in [attr.g] if attr.type == onnx.AttributeProto.GRAPH else attr.graphs:
                out |= _reads(body.node)
    return out


def _value(graph: onnx.GraphProto, name: str, new_name: str) -> onnx.ValueInfoProto:
    """A copy of ``graph``'s input or output ``name`` (its type and shape) as ``new_name``."""
    for v in (*graph.input, *graph.output):
        if v.name == name:
            copy = onnx.ValueInfoProto()
            copy.CopyFrom(v)
            copy.name = new_name
            return copy
    raise EnsembleError(f"the graph has no input or output {name!r}")


def _float(name: str, dims: list) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)


def _load(m: Member, file: str) -> onnx.ModelProto:
    return onnx.load(str(m.path / file))


def _input_names(graph: onnx.GraphProto) -> set[str]:
    return {i.name for i in graph.input}


def compose_encoder(members: Sequence[Member], path: Path) -> None:
    """``encoder.onnx`` of the ensemble (see :mod:`export.ensemble`)::

    src_ids (batch, src_len), src_lengths (batch,)
      -> memory (batch, src_len, sum D_i), keys (batch, src_len, sum K_i),
         src_mask (batch, src_len), init_<state> for each member's states
    """
    g = _Graph()
    firsts = []
    for m in members:
        graph = g.member(m, _load(m, spec.ENCODER_FILE))
        firsts.append(graph)
        for name in spec.encoder_inputs():
            if m.prefix + name in _input_names(graph):
                g.node("Identity", [name], m.prefix + name)
        g.nodes.extend(graph.node)
    p0 = members[0].prefix
    inputs = [
        helper.make_tensor_value_info(spec.SRC_IDS, _INT64, ["batch", "src_len"]),
        helper.make_tensor_value_info(spec.SRC_LENGTHS, _INT64, ["batch"]),
    ]
    g.node("Concat", [m.prefix + spec.MEMORY for m in members], spec.MEMORY, axis=2)
    g.node("Concat", [m.prefix + spec.KEYS for m in members], spec.KEYS, axis=2)
    g.node("Identity", [p0 + spec.SRC_MASK], spec.SRC_MASK)
    outputs = [
        _float(spec.MEMORY, ["batch", "src_len", sum(m.memory_dim for m in members)]),
        _float(spec.KEYS, ["batch", "src_len", sum(m.keys_dim for m in members)]),
        _value(firsts[0], p0 + spec.SRC_MASK, spec.SRC_MASK),
    ]
    for m, graph in zip(members, firsts, strict=True):
        for own, name in zip(m.config.state_names, m.states, strict=True):
            g.node("Identity", [m.prefix + spec.INIT_PREFIX + own], spec.INIT_PREFIX + name)
            outputs.append(
                _value(graph, m.prefix + spec.INIT_PREFIX + own, spec.INIT_PREFIX + name)
            )
    g.write(inputs, outputs, path, "ensemble_encoder")


def the_topk(graph: onnx.GraphProto, prefix: str, where: str) -> onnx.NodeProto:
    """The TopK that writes a member decoder's top-k outputs (names under ``prefix``)."""
    wanted = [prefix + spec.TOPK_LOG_PROBS, prefix + spec.TOPK_IDS]
    found = [n for n in graph.node if list(n.output) == wanted and n.op_type == "TopK"]
    if len(found) != 1:
        raise EnsembleError(
            f"{where}: no single TopK writes its top-k outputs; re-export it with this version"
        )
    return found[0]


def combined_value(
    graph: onnx.GraphProto, prefix: str, renormalize: bool, where: str
) -> tuple[str, str | None]:
    """The value of a member's decoder that the ensemble combines, ``(rows, V)``: its
    TopK's input (log-probs, pad/bos/eos at -inf), or to renormalize the log-probs of
    every token before those columns were blocked, then the name of the blocking row."""
    x = the_topk(graph, prefix, where).input[0]
    if not renormalize:
        return x, None
    made = {o: n for n in graph.node for o in n.output}
    weights = {w.name for w in graph.initializer}
    add = made.get(x)
    constants = [i for i in add.input if i in weights] if add is not None else []
    if add is None or add.op_type != "Add" or len(constants) != 1 or len(add.input) != 2:
        raise EnsembleError(
            f"{where}: its decoder's top-k does not read log-probs plus one constant row "
            "(pad, bos and eos blocked), which --renormalize needs"
        )
    return next(i for i in add.input if i != constants[0]), constants[0]


def compose_decoder(
    members: Sequence[Member], weights: Sequence[float], combine: str, path: Path,
    renormalize: bool = False,
) -> None:  # fmt: skip
    """``decoder.onnx`` of the ensemble: the contract's one step (:mod:`export.spec`)
    over the ensemble's states, candidates ranked by the combined log-probs (with
    ``renormalize``, their ``log_softmax`` over the whole vocabulary, as Eole and
    OpenNMT-py 2-3 normalise the mean of their members' logits)."""
    g = _Graph()
    graphs, ranked, eos, attention, blocked = [], [], [], [], []
    offsets = {spec.MEMORY: 0, spec.KEYS: 0}
    for m in members:
        graph = g.member(m, _load(m, spec.DECODER_FILE))
        graphs.append(graph)
        where = f"member {m.index + 1} ({m.path})"
        topk = the_topk(graph, m.prefix, where)
        value, blocking = combined_value(graph, m.prefix, renormalize, where)
        ranked.append(value)
        blocked.append(blocking)
        eos.append(m.prefix + spec.EOS_LOG_PROBS)
        attention.append(m.prefix + spec.ATTENTION)
        kept = [n for n in graph.node if n is not topk]
        read = _reads(kept)
        names = _input_names(graph)
        for name in _SHARED_DECODER_INPUTS:
            if m.prefix + name in names and m.prefix + name in read:
                g.node("Identity", [name], m.prefix + name)
        for name, width in ((spec.MEMORY, m.memory_dim), (spec.KEYS, m.keys_dim)):
            start = offsets[name]
            offsets[name] += width
            if m.prefix + name in names:
                bounds = np.array([start]), np.array([start + width]), np.array([2])
                g.node("Slice", [name, *(g.const(f"{m.prefix}{name}_{k}", v)
                                         for k, v in zip(("start", "end", "axis"), bounds,
                                                         strict=True))],
                       m.prefix + name)  # fmt: skip
        for own, name in zip(m.config.state_names, m.states, strict=True):
            g.node("Identity", [name], m.prefix + own)
        g.nodes.extend(kept)  # the ensemble ranks the combination instead of its TopK
        for own, name in zip(m.config.state_names, m.states, strict=True):
            out = m.prefix + own + spec.STATE_OUT_SUFFIX
            g.node("Identity", [out], name + spec.STATE_OUT_SUFFIX)
    w = [np.array(x, dtype=np.float32) for x in weights]
    combined = _combine(g, ranked, w, combine, "ranked")
    if renormalize:  # one distribution again; pad, bos and eos then blocked as a model's
        normal = g.node("LogSoftmax", [combined], f"{_P}normalised", axis=-1)
        combined = g.node("Add", [normal, blocked[0]], f"{_P}ranked_blocked")
        eos_id = g.const("eos_id", np.array(members[0].config.eos_id, dtype=np.int64))
        g.node("Gather", [normal, eos_id], spec.EOS_LOG_PROBS, axis=1)
    else:
        _combine(g, eos, w, combine, spec.EOS_LOG_PROBS, out=spec.EOS_LOG_PROBS)
    g.node("TopK", [combined, spec.TOP_K], [spec.TOPK_LOG_PROBS, spec.TOPK_IDS], axis=-1)
    share = [g.const(f"attention_share_{i}", x / sum(w)) for i, x in enumerate(w)]
    parts = [g.node("Mul", [a, s], f"{_P}attention_{i}") for i, (a, s) in
             enumerate(zip(attention, share, strict=True))]  # fmt: skip
    g.node("Sum", parts, spec.ATTENTION)
    inputs = [
        helper.make_tensor_value_info(n, _INT64, ["rows"])
        for n in (spec.PREV_TOKENS, spec.PARENT_ROWS, spec.ROW_SENTENCE)
    ]
    inputs += [
        _float(spec.MEMORY, ["sentences", "src_len", offsets[spec.MEMORY]]),
        _float(spec.KEYS, ["sentences", "src_len", offsets[spec.KEYS]]),
        helper.make_tensor_value_info(spec.SRC_MASK, TensorProto.BOOL, ["sentences", "src_len"]),
        helper.make_tensor_value_info(spec.TOP_K, _INT64, [1]),
    ]
    outputs = [
        _float(spec.TOPK_LOG_PROBS, ["rows", "k"]),
        helper.make_tensor_value_info(spec.TOPK_IDS, _INT64, ["rows", "k"]),
        _float(spec.EOS_LOG_PROBS, ["rows"]),
        _float(spec.ATTENTION, ["rows", "src_len"]),
    ]
    for m, graph in zip(members, graphs, strict=True):
        for own, name in zip(m.config.state_names, m.states, strict=True):
            inputs.append(_value(graph, m.prefix + own, name))
            out = own + spec.STATE_OUT_SUFFIX
            outputs.append(_value(graph, m.prefix + out, name + spec.STATE_OUT_SUFFIX))
    g.write(inputs, outputs, path, "ensemble_decoder_step")


def _combine(
    g: _Graph, xs: Sequence[str], w: Sequence[np.ndarray], combine: str, name: str,
    out: str | None = None,
) -> str:  # fmt: skip
    """The members' log-probs ``xs`` (each ``(rows, V)`` or ``(rows,)``) combined:
    ``sum w_i x_i`` (log-linear) or ``log sum w_i exp(x_i)`` (linear), the latter shifted
    by the members' maximum of each element for range, 0 where that is -inf (a column
    every member bans)."""
    out = out or f"{_P}{name}"
    if combine == "log-linear":
        terms = [
            x if float(wi) == 1.0 else g.node("Mul", [x, g.const(f"{name}_w{i}", wi)],
                                               f"{_P}{name}_{i}")
            for i, (x, wi) in enumerate(zip(xs, w, strict=True))
        ]  # fmt: skip
        return g.node("Sum", terms, out) if len(terms) > 1 else g.node("Identity", terms, out)
    top = g.node("Max", list(xs), f"{_P}{name}_max")
    floor = g.const(f"{name}_zero", np.array(0.0, dtype=np.float32))
    is_inf = g.node("IsInf", [top], f"{_P}{name}_max_is_inf", detect_positive=0)
    shift = g.node("Where", [is_inf, floor, top], f"{_P}{name}_shift")
    terms = []
    for i, (x, wi) in enumerate(zip(xs, w, strict=True)):
        e = g.node(
            "Exp", [g.node("Sub", [x, shift], f"{_P}{name}_{i}_shifted")], f"{_P}{name}_{i}_exp"
        )
        terms.append(g.node("Mul", [e, g.const(f"{name}_w{i}", wi)], f"{_P}{name}_{i}_weighted"))
    total = g.node("Sum", terms, f"{_P}{name}_sum")
    return g.node("Add", [g.node("Log", [total], f"{_P}{name}_log"), shift], out)
