"""Batch-invariant int8 quantization of the exported graphs (CPU).

ONNX Runtime's ``quantize_dynamic`` quantizes each activation with **one** scale and zero
point per tensor (``DynamicQuantizeLinear``): the scale follows the largest value in the
whole batch, so a sentence's numbers, and now and then its translation, depend on what
else is decoded with it (in the encoder, on padded positions too). Here every activation
is quantized **per row** instead: each vector along the last axis (one decoder row, one
source position) gets its own symmetric scale,

    s_r = max|x_r| / 127,     q_r = round(x_r / s_r) + 128              (uint8)
    y_r = MatMulInteger(q_r - 128, W_q) * w_scale * s_r + bias          (fp32)

so a row's result is computed from that row alone: the integer product is exact and every
other op works element by element or along the row, whatever else the batch holds.

* Only standard ONNX ops are written (Abs, ReduceMax, Max, Div, QuantizeLinear with the
  constant scale 1 and zero point 128, MatMulInteger, Cast, Mul, Add): any ONNX Runtime
  runs the graphs. ONNX Runtime's ``MatMulIntegerToFloat`` fusion, whose kernel scales
  the bias too when the activation scale is not one number, never matches the pattern.
* Weights: int8, symmetric per output column, in -63..63. The u8s8 kernels of AVX2 CPUs
  without VNNI add pairs of products in saturating 16-bit arithmetic: 255 x 63 x 2 cannot
  overflow there, 255 x 127 x 2 can. Full-range uint8 weights (the exact u8u8 kernels)
  measured the same BLEU and slower decoding on the 2-core AVX2 machine.
* Only MatMul/Gemm nodes with a constant 2-D float weight of at least ``MIN_COLUMNS``
  output columns are quantized. Narrower ones (additive attention's one-column score
  ``v . tanh(...)``, computed for every source position) stay fp32: quantizing their
  input costs more than the product, and the fp32 product of one row does not depend on
  the others either. GRU cells and attention over the source stay fp32.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from export.variants import VariantError

ACTIVATION_LEVELS = 127.0
WEIGHT_LEVELS = 63.0
ZERO_POINT = 128
MIN_COLUMNS = 16
# A row of zeros (a padded source position) gets this tiny scale instead of 0, so
# x / scale stays 0 rather than NaN.
MIN_ABS_MAX = 1e-30
SUFFIX = "_rowq"


class QuantizeError(VariantError):
    """A graph or weight this module cannot quantize; the message says which."""


def quantize_weight(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(W_q int8, w_scale float32 [N])`` of a ``[K, N]`` float weight, symmetric per
    output column: ``W ~= W_q * w_scale``."""
    w = np.asarray(w, dtype=np.float32)
    if w.ndim != 2 or w.size == 0:
        raise QuantizeError(f"expected a non-empty 2-D weight, got shape {w.shape}")
    if not np.all(np.isfinite(w)):
        raise QuantizeError("the weight holds NaN or infinity")
    scale = (np.maximum(np.abs(w).max(axis=0), MIN_ABS_MAX) / WEIGHT_LEVELS).astype(np.float32)
    q = np.clip(np.rint(w / scale), -WEIGHT_LEVELS, WEIGHT_LEVELS).astype(np.int8)
    return q, scale


def _opset(model) -> int:
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return imp.version
    raise QuantizeError("the graph imports no default-domain opset")


def _constant_weight(node, inits: dict) -> tuple[np.ndarray, np.ndarray | None] | None:
    """``(W [K, N], bias [N] or None)`` of a MatMul/Gemm node with a constant 2-D float
    weight, else None (the node stays fp32)."""
    from onnx import helper, numpy_helper

    if node.op_type not in ("MatMul", "Gemm") or node.domain not in ("", "ai.onnx"):
        return None
    if len(node.input) < 2 or node.input[1] not in inits:
        return None
    w = numpy_helper.to_array(inits[node.input[1]])
    if w.dtype != np.float32 or w.ndim != 2:
        return None
    if node.op_type == "MatMul":
        return w, None
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    if attrs.get("transA", 0):
        return None
    w = (w.T if attrs.get("transB", 0) else w) * np.float32(attrs.get("alpha", 1.0))
    bias = None
    if len(node.input) > 2 and node.input[2]:
        if node.input[2] not in inits:
            return None
        bias = numpy_helper.to_array(inits[node.input[2]]).astype(np.float32)
        if bias.size not in (1, w.shape[1]) or (bias.ndim == 2 and bias.shape[0] != 1):
            return None  # a bias per row is not a layer's bias
        bias = bias.reshape(-1) * np.float32(attrs.get("beta", 1.0))
    return np.ascontiguousarray(w, dtype=np.float32), bias


def _names_read(graph) -> set[str]:
    """Every name a node of ``graph`` reads, nodes of its subgraphs (If, Loop) included:
    a branch may read the outer graph's initializers."""
    from onnx import AttributeProto

    names: set[str] = set()
    for node in graph.node:
        names.update(node.input)
        for attr in node.attribute:
            if attr.type == AttributeProto.GRAPH:
                names |= _names_read(attr.g)
            elif attr.type == AttributeProto.GRAPHS:
                for sub in attr.graphs:
                    names |= _names_read(sub)
    return names


def quantize_rowwise(model) -> tuple[Any, list[str]]:
    """``(copy of model, names of the nodes quantized)``: in the copy of ``model`` (an
    ``onnx.ModelProto``) the MatMul/Gemm nodes with a constant 2-D weight of at least
    ``MIN_COLUMNS`` columns run in int8 with one activation scale per row (module
    docstring); with no such node the copy equals the original."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    opset = _opset(model)
    if opset < 13:
        raise QuantizeError(f"opset {opset} is too old: re-export with opset 13 or later")
    inits = {t.name: t for t in graph.initializer}
    taken = set(inits) | {o for n in graph.node for o in n.output} | {i.name for i in graph.input}
    new_inits: list = []

    def fresh(base: str) -> str:
        name, i = base, 0
        while name in taken:
            i += 1
            name = f"{base}_{i}"
        taken.add(name)
        return name

    def const(base: str, array: np.ndarray) -> str:
        name = fresh(base)
        new_inits.append(numpy_helper.from_array(array, name))
        return name

    eps = const(f"min_abs_max{SUFFIX}", np.array(MIN_ABS_MAX, dtype=np.float32))
    levels = const(f"levels{SUFFIX}", np.array(ACTIVATION_LEVELS, dtype=np.float32))
    one = const(f"one{SUFFIX}", np.array(1.0, dtype=np.float32))
    zero_point = const(f"zero_point{SUFFIX}", np.array(ZERO_POINT, dtype=np.uint8))
    axes = const(f"last_axis{SUFFIX}", np.array([-1], dtype=np.int64)) if opset >= 18 else None
    nodes: list = []
    quantized: list[str] = []
    for node in graph.node:
        found = _constant_weight(node, inits)
        if found is None or found[0].shape[1] < MIN_COLUMNS:
            nodes.append(node)
            continue
        w, bias = found
        w_q, w_scale = quantize_weight(w)
        base = (node.name or node.output[0]).strip("/").replace("/", "_") + SUFFIX

        def op(op_type: str, inputs: list[str], tag: str, base=base, **attrs) -> str:
            out = fresh(f"{base}_{tag}")
            nodes.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
            return out

        x = node.input[0]
        absx = op("Abs", [x], "abs")
        if axes is None:
            amax = op("ReduceMax", [absx], "absmax", axes=[-1], keepdims=1)
        else:
            amax = op("ReduceMax", [absx, axes], "absmax", keepdims=1)
        scale = op("Div", [op("Max", [amax, eps], "absmax_eps"), levels], "scale")
        q = op("QuantizeLinear", [op("Div", [x, scale], "scaled"), one, zero_point], "q")
        acc = op("MatMulInteger", [q, const(f"{base}_weight", w_q), zero_point], "acc")
        accf = op("Cast", [acc], "acc_float", to=TensorProto.FLOAT)
        cols = op("Mul", [accf, const(f"{base}_weight_scale", w_scale)], "cols")
        y = op("Mul", [cols, scale], "rows")
        if bias is not None:
            y = op("Add", [y, const(f"{base}_bias", bias)], "bias")
        nodes[-1].output[0] = node.output[0]  # the last op writes the node's own output
        quantized.append(node.name or node.output[0])
    del graph.node[:]
    graph.node.extend(nodes)
    used = _names_read(graph) | {o.name for o in graph.output} | {i.name for i in graph.input}
    kept = [t for t in list(graph.initializer) + new_inits if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    onnx.checker.check_model(model)
    return model, quantized


def quantize_file(src: Path, dst: Path) -> list[str]:
    """:func:`quantize_rowwise` of the graph file ``src``, written to ``dst``; returns the
    names of the nodes quantized."""
    import onnx

    model, quantized = quantize_rowwise(onnx.load(str(src)))
    onnx.save(model, str(dst))
    return quantized


def quantize_per_tensor_file(src: Path, dst: Path) -> None:
    """The former int8 path: ONNX Runtime's ``quantize_dynamic``, one activation scale per
    tensor, hence NOT batch-invariant. Kept to measure against, and for the tests that
    show the batch-invariance checks catch a graph made this way."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(
        str(src), str(dst), weight_type=QuantType.QInt8, op_types_to_quantize=["MatMul", "Gemm"]
    )


# -- side-by-side measurement ---------------------------------------------------------


def _variant_dir(fp32_dir: Path, dst: Path, write) -> Path:
    import shutil

    shutil.copytree(fp32_dir, dst, ignore=shutil.ignore_patterns("*.onnx", "manifest.json"))
    for name in ("encoder.onnx", "decoder.onnx"):
        write(fp32_dir / name, dst / name)
    return dst


# wall and CPU seconds (all threads of this process: the CPU time is what a loaded
# machine changes least)
TIMINGS = ("batched_s", "batched_cpu_s", "one_at_a_time_s", "one_at_a_time_cpu_s")


def compare_bundles(
    fp32_dir: Path,
    src: Path,
    ref: Path,
    *,
    rounds: int = 3,
    one_at_a_time: int = 300,
    invariance_sentences: int = 200,
    beam_bleu: bool = True,
) -> list[dict]:
    """fp32, the former per-tensor int8 and this module's per-row int8 of ``fp32_dir``,
    side by side in one process: BLEU (greedy and, with ``beam_bleu``, beam 5) on
    ``src``/``ref``; decoding speed as the median of ``rounds`` interleaved rounds (all
    sentences batched 64 live at a time as the service admits them, and the first
    ``one_at_a_time`` sentences one at a time, greedy; wall and CPU time); and batch invariance
    (:func:`export.variants.batch_differences` on the first ``invariance_sentences``)."""
    import statistics
    import tempfile
    import time

    import sacrebleu

    from export.variants import INVARIANCE_OPTIONS, batch_differences
    from models.options import DecodeOptions
    from models.tokenizer import read_lines
    from service.bundle import load_bundle
    from service.loop import decode
    from service.runtime import OnnxModel
    from service.sessions import RuntimeConfig

    if rounds < 1 or one_at_a_time < 1 or invariance_sentences < 1:
        raise ValueError("rounds, one_at_a_time and invariance_sentences must be >= 1")
    lines, refs = read_lines(src), read_lines(ref)
    if not lines or len(lines) != len(refs):
        raise ValueError(f"{len(lines)} sources and {len(refs)} references: need as many, >= 1")
    runtime = RuntimeConfig(providers=("cpu",))
    fp32 = load_bundle(fp32_dir, runtime)
    sources = fp32.src_tokenizer.encode_batch(lines)
    if not all(sources):
        raise ValueError(f"{src}: a line encodes to no tokens")
    special, config = fp32.special, fp32.config
    with tempfile.TemporaryDirectory() as tmp:
        dirs = {
            "fp32": fp32_dir,
            "int8 per tensor (quantize_dynamic)": _variant_dir(
                fp32_dir, Path(tmp) / "tensor", quantize_per_tensor_file
            ),
            "int8 per row": _variant_dir(fp32_dir, Path(tmp) / "row", quantize_file),
        }
        models = {
            name: OnnxModel(d, config.state_names, runtime, exact_lengths=config.exact_lengths)
            for name, d in dirs.items()
        }
    greedy, beam = DecodeOptions(), DecodeOptions(beam_size=5)
    rows = []
    for name, model in models.items():
        row: dict = {"variant": name}
        for label, opts in (("greedy", greedy), ("beam5", beam))[: 2 if beam_bleu else 1]:
            out = decode(model, sources, options=opts, special=special)
            hyps = [fp32.tgt_tokenizer.decode(h[0].tokens) for h in out]
            row[f"bleu_{label}"] = round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2)
        subset = sources[:invariance_sentences]
        for label, opts in INVARIANCE_OPTIONS.items():
            row[f"invariance_{label}"] = batch_differences(model, subset, special, opts)
        for key in TIMINGS:
            row[key] = []
        rows.append(row)
    for _ in range(rounds):
        for row, model in zip(rows, models.values(), strict=True):
            wall, cpu = time.perf_counter(), time.process_time()
            decode(model, sources, options=greedy, special=special)
            row["batched_s"].append(time.perf_counter() - wall)
            row["batched_cpu_s"].append(time.process_time() - cpu)
            wall, cpu = time.perf_counter(), time.process_time()
            for s in sources[:one_at_a_time]:
                decode(model, [s], options=greedy, special=special, batch_size=1)
            row["one_at_a_time_s"].append(time.perf_counter() - wall)
            row["one_at_a_time_cpu_s"].append(time.process_time() - cpu)
    for row in rows:
        for key in TIMINGS:
            row[key + "_median"] = round(statistics.median(row[key]), 3)
            row[key + "_speedup"] = round(
                statistics.median(rows[0][key]) / statistics.median(row[key]), 3
            )
    return rows


def _table(rows: list[dict]) -> str:
    out = [
        "| variant | greedy BLEU | beam 5 BLEU | batched s (x fp32) | batched CPU s (x fp32)"
        " | one at a time s (x fp32) | one at a time CPU s (x fp32) | greedy best changed"
        " | beam n-best changed | max score diff |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        g, b = r["invariance_greedy"], r["invariance_beam5-nbest3"]
        times = "".join(f" | {r[k + '_median']:.2f} ({r[k + '_speedup']:.2f}x)" for k in TIMINGS)
        out.append(
            f"| {r['variant']} | {r['bleu_greedy']:.2f} | {r.get('bleu_beam5', '–')}"
            f"{times} | {g['best_changed']}/{g['sentences']} | {b['nbest_changed']}/"
            f"{b['sentences']} | {max(g['max_score_diff'], b['max_score_diff']):.1e} |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    """``python -m export.quantize``: the side-by-side table of :func:`compare_bundles`."""
    import argparse
    import json
    import sys

    root = Path(__file__).resolve().parents[1]
    test = root / "models" / "pretrained" / "en-es"
    p = argparse.ArgumentParser(
        prog="python -m export.quantize",
        description="fp32 vs per-tensor int8 (quantize_dynamic) vs per-row int8 of a bundle, "
        "side by side: BLEU, decoding speed, batch invariance",
    )
    p.add_argument("--bundle", type=Path, default=root / "model_repository" / "en-es" / "7")
    p.add_argument("--src", type=Path, default=test / "test.en")
    p.add_argument("--ref", type=Path, default=test / "test.es")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--one-at-a-time", type=int, default=300)
    p.add_argument("--invariance-sentences", type=int, default=200)
    p.add_argument("--no-beam-bleu", action="store_true")
    p.add_argument("--json", type=Path, default=None, help="also write the rows as JSON")
    args = p.parse_args(argv)
    try:
        rows = compare_bundles(
            args.bundle,
            args.src,
            args.ref,
            rounds=args.rounds,
            one_at_a_time=args.one_at_a_time,
            invariance_sentences=args.invariance_sentences,
            beam_bleu=not args.no_beam_bleu,
        )
    except (ValueError, OSError) as exc:
        print(f"python -m export.quantize: error: {exc}", file=sys.stderr)
        return 2
    print(_table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
