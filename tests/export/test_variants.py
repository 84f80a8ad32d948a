"""The int8 variant's per-row quantization (``export/quantize.py``) and the variant gate's
checks (``export/variants.py``): exact per-row arithmetic, no dependence on other rows,
standard ops only, and gates that refuse empty input and NaN."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from export import spec
from export.quantize import (
    MIN_COLUMNS,
    QuantizeError,
    quantize_file,
    quantize_rowwise,
    quantize_weight,
)
from export.variants import (
    VariantError,
    batch_differences,
    check_batch_invariance,
    compare,
    quantize_int8,
)
from models.options import DecodeOptions


def one_node_graph(op: str, w: np.ndarray, bias: np.ndarray | None, rank: int, **attrs):
    """A graph of one MatMul/Gemm with constant weight (and bias): x [.., K] -> y."""
    k = w.shape[1] if attrs.get("transB") else w.shape[0]
    n = w.shape[0] if attrs.get("transB") else w.shape[1]
    inits = [numpy_helper.from_array(w, "w")]
    inputs = ["x", "w"]
    if bias is not None:
        inits.append(numpy_helper.from_array(bias, "b"))
        inputs.append("b")
    dims = [None] * (rank - 1)
    graph = helper.make_graph(
        [helper.make_node(op, inputs, ["y"], name="layer", **attrs)],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [*dims, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [*dims, n])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def run(model, x: np.ndarray, level=ort.GraphOptimizationLevel.ORT_ENABLE_ALL) -> np.ndarray:
    opts = ort.SessionOptions()
    opts.graph_optimization_level = level
    opts.intra_op_num_threads = 1
    session = ort.InferenceSession(
        model.SerializeToString(), opts, providers=["CPUExecutionProvider"]
    )
    return session.run(None, {"x": x})[0]


def reference(x: np.ndarray, w_kn: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    """The per-row scheme in numpy (float64 products of the same integers)."""
    w_q, w_scale = quantize_weight(w_kn)
    scale = np.maximum(np.abs(x).max(axis=-1, keepdims=True), 1e-30) / np.float32(127)
    q = np.clip(np.rint(x / scale), -128, 127)
    acc = (q.astype(np.int64) @ w_q.astype(np.int64)).astype(np.float32)
    y = acc * w_scale * scale
    return y if bias is None else y + bias


# -- quantize.py ------------------------------------------------------------------------


def test_weights_are_symmetric_per_column_in_seven_bits():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((64, 32)).astype(np.float32) * np.linspace(0.01, 3, 32)
    w_q, scale = quantize_weight(w)
    assert w_q.dtype == np.int8 and scale.shape == (32,)
    assert np.abs(w_q).max() == 63  # 255 x 63 x 2 cannot saturate AVX2's 16-bit sums
    assert np.all(np.abs(w_q * scale - w) <= scale / 2 + 1e-7)
    zero = quantize_weight(np.zeros((4, 20), np.float32))
    assert np.all(zero[0] == 0) and np.all(np.isfinite(zero[1]))


@pytest.mark.parametrize(
    ("w", "match"),
    [
        (np.zeros((0, 20), np.float32), "non-empty 2-D weight"),
        (np.zeros(20, np.float32), "non-empty 2-D weight"),
        (np.full((3, 20), np.nan, np.float32), "NaN or infinity"),
    ],
)
def test_weight_quantization_refuses_empty_and_nan(w, match):
    with pytest.raises(QuantizeError, match=match):
        quantize_weight(w)


@pytest.mark.parametrize(
    ("op", "rank", "attrs", "with_bias"),
    [("Gemm", 2, {"transB": 1}, True), ("Gemm", 2, {}, False), ("MatMul", 3, {}, False)],
)
def test_rowwise_graph_computes_the_scheme_row_by_row(op, rank, attrs, with_bias):
    """ONNX Runtime's result (all optimizations on) equals the numpy scheme, stays near
    fp32, and a row's result is the same alone and next to rows of any magnitude."""
    rng = np.random.default_rng(1)
    k, n = 48, 40
    w = rng.standard_normal((n, k) if attrs.get("transB") else (k, n)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32) if with_bias else None
    fp32 = one_node_graph(op, w, bias, rank, **attrs)
    int8, quantized = quantize_rowwise(fp32)
    assert quantized == ["layer"]
    ops = {node.op_type for node in int8.graph.node}
    assert "MatMulInteger" in ops and ops <= {
        "Abs", "ReduceMax", "Max", "Div", "QuantizeLinear", "MatMulInteger", "Cast", "Mul", "Add"
    }  # fmt: skip
    shape = (7, k) if rank == 2 else (3, 5, k)
    x = rng.standard_normal(shape).astype(np.float32)
    x[1] *= 1000.0  # a loud neighbour: it would set a per-tensor scale
    x[2] = 0.0  # a row of zeros (a padded position): no NaN
    got = run(int8, x)
    w_kn = w.T if attrs.get("transB") else w
    np.testing.assert_allclose(got, reference(x, w_kn, bias), rtol=1e-5, atol=1e-5)
    exact = run(fp32, x)
    assert np.all(np.isfinite(got))
    assert np.abs(got - exact).max() <= 0.02 * np.abs(exact).max()
    alone = run(int8, x[:1])
    np.testing.assert_array_equal(alone[0], got[0])
    unoptimized = run(int8, x, ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    np.testing.assert_array_equal(unoptimized, got)


def test_onnxruntime_does_not_fuse_the_pattern_into_per_tensor_kernels(tmp_path):
    """MatMulIntegerToFloat takes one activation scale (and scales the bias too when
    given more): the optimized graph must keep MatMulInteger."""
    rng = np.random.default_rng(2)
    w = rng.standard_normal((32, 24)).astype(np.float32)
    int8, _ = quantize_rowwise(one_node_graph("Gemm", w, np.ones(32, np.float32), 2, transB=1))
    opts = ort.SessionOptions()
    opts.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    ort.InferenceSession(int8.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    ops = {n.op_type for n in onnx.load(str(tmp_path / "optimized.onnx")).graph.node}
    assert "MatMulInteger" in ops
    assert not ops & {"MatMulIntegerToFloat", "DynamicQuantizeMatMul"}


def test_narrow_and_non_constant_products_stay_fp32():
    w = np.ones((8, MIN_COLUMNS - 1), np.float32)
    model, quantized = quantize_rowwise(one_node_graph("MatMul", w, None, 2))
    assert quantized == []
    assert [n.op_type for n in model.graph.node] == ["MatMul"]


def test_old_opsets_are_refused():
    model = one_node_graph("MatMul", np.ones((8, 32), np.float32), None, 2)
    model.opset_import[0].version = 11
    with pytest.raises(QuantizeError, match="opset 11 is too old"):
        quantize_rowwise(model)


def test_int8_variant_needs_something_to_quantize(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir(), dst.mkdir()
    narrow = one_node_graph("MatMul", np.ones((8, 4), np.float32), None, 2)
    for name in (spec.ENCODER_FILE, spec.DECODER_FILE):
        onnx.save(narrow, str(src / name))
    with pytest.raises(VariantError, match="neither graph has a MatMul/Gemm"):
        quantize_int8(src, dst)


# -- the variant gate -----------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny(bundle_dir: Path, tmp_path_factory):
    """(fp32 bundle, OnnxModel of its per-row int8 graphs)."""
    from service.bundle import load_bundle
    from service.runtime import OnnxModel
    from service.sessions import RuntimeConfig

    runtime = RuntimeConfig(providers=("cpu",), intra_op_threads=1)
    bundle = load_bundle(bundle_dir, runtime)
    int8_dir = tmp_path_factory.mktemp("int8")
    for name in (spec.ENCODER_FILE, spec.DECODER_FILE):
        quantize_file(bundle_dir / name, int8_dir / name)
    model = OnnxModel(
        int8_dir,
        bundle.config.state_names,
        runtime,
        exact_lengths=bundle.config.exact_lengths,
    )
    return bundle, model


SOURCES = [[5, 6, 7], [8, 9, 10, 11, 12, 13, 14, 15, 16], [17], [20, 21, 22, 23, 24, 25]] * 3


def test_batch_invariance_gate_passes_a_per_row_int8_model(tiny):
    bundle, model = tiny
    report = check_batch_invariance(model, SOURCES, bundle.special)
    assert report["sentences"] == len(SOURCES)
    assert report["options"] == ["greedy", "beam5-nbest3"]
    assert report["max_score_diff"] <= 1e-5


def test_batch_invariance_gate_refuses_nothing_to_check(tiny):
    bundle, model = tiny
    with pytest.raises(VariantError, match="no sentences or no decode options"):
        check_batch_invariance(model, [], bundle.special)
    with pytest.raises(VariantError, match="no sentences or no decode options"):
        check_batch_invariance(model, SOURCES, bundle.special, options={})
    with pytest.raises(VariantError, match="no sentences to check"):
        batch_differences(model, [], bundle.special, DecodeOptions())
    with pytest.raises(VariantError, match="tolerance must be finite"):
        check_batch_invariance(model, SOURCES, bundle.special, tolerance=float("nan"))


class NanModel:
    """A step model whose log-probs turn NaN: a NaN must fail the gate, not compare
    'equal' by slipping through a ``<=``."""

    def __init__(self, model) -> None:
        self.model = model
        self.state_names = model.state_names

    def new_pool(self):
        return self.model.new_pool()

    def encode(self, *args, **kwargs):
        return self.model.encode(*args, **kwargs)

    def step(self, **kwargs):
        out = self.model.step(**kwargs)
        return dataclasses.replace(out, topk_values=np.full_like(out.topk_values, np.nan))


def test_batch_invariance_gate_refuses_nan_scores(tiny):
    bundle, model = tiny
    greedy = {"greedy": DecodeOptions(max_length=4)}
    with pytest.raises(VariantError, match=r"\d+ scores NaN or infinite"):
        check_batch_invariance(NanModel(model), SOURCES[:3], bundle.special, options=greedy)


class NoisyModel(NanModel):
    """Adds batch-dependent noise to the log-probs, as a per-tensor scale does."""

    def step(self, **kwargs):
        out = self.model.step(**kwargs)
        noise = 1e-3 * out.topk_values.shape[0]
        return dataclasses.replace(out, topk_values=out.topk_values + noise)


def test_batch_invariance_gate_refuses_batch_dependent_scores(tiny):
    bundle, model = tiny
    with pytest.raises(VariantError, match="not batch-invariant"):
        check_batch_invariance(NoisyModel(model), SOURCES, bundle.special)


def test_compare_refuses_empty_or_mismatched_references(tiny, bundle_dir):
    bundle, _ = tiny
    kwargs = dict(precision="int8", config=bundle.config, detok=bundle.tgt_tokenizer.decode)
    with pytest.raises(VariantError, match="0 sentences and 0 references"):
        compare(bundle_dir, bundle_dir, sources=[], references=[], **kwargs)
    with pytest.raises(VariantError, match="2 sentences and 1 references"):
        compare(bundle_dir, bundle_dir, sources=SOURCES[:2], references=["a"], **kwargs)


# -- python -m export.quantize ------------------------------------------------------------


def test_side_by_side_measurement_runs_on_a_tiny_bundle(bundle_dir, tmp_path, capsys):
    from export.quantize import main
    from models.tokenizer import read_lines

    sample = Path(__file__).resolve().parents[2] / "models" / "sample"
    for side in ("en", "es"):
        lines = read_lines(sample / f"sample.{side}")[:6]
        (tmp_path / f"s.{side}").write_text("\n".join(lines) + "\n")
    args = ["--bundle", str(bundle_dir), "--src", str(tmp_path / "s.en")]
    args += ["--ref", str(tmp_path / "s.es"), "--rounds", "1", "--one-at-a-time", "2"]
    args += ["--invariance-sentences", "4", "--no-beam-bleu", "--json", str(tmp_path / "r.json")]
    assert main(args) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[2].startswith("| fp32 | ") and table[4].startswith("| int8 per row | ")
    rows = json.loads((tmp_path / "r.json").read_text())
    per_row = rows[2]["invariance_greedy"]
    assert per_row["sentences"] == 4 and per_row["best_changed"] == 0
    assert rows[2]["invariance_beam5-nbest3"]["nbest_changed"] == 0
    assert rows[0]["batched_s_speedup"] == 1.0


def test_side_by_side_measurement_refuses_empty_input(bundle_dir, tmp_path, capsys):
    from export.quantize import main

    (tmp_path / "empty.en").write_text("")
    (tmp_path / "empty.es").write_text("")
    args = ["--bundle", str(bundle_dir), "--src", str(tmp_path / "empty.en")]
    assert main(args + ["--ref", str(tmp_path / "empty.es")]) == 2
    assert "0 sources and 0 references" in capsys.readouterr().err
    assert main(args + ["--ref", str(tmp_path / "empty.es"), "--rounds", "0"]) == 2
    assert "must be >= 1" in capsys.readouterr().err
