"""``python -m loadtest.stepbench``: every row count gets its timings; the CUDA-graph
column only where CUDA runs (no timing thresholds: the benchmark prints, never asserts)."""

from __future__ import annotations

import json

import onnxruntime as ort
import pytest

from loadtest import stepbench


def test_cpu_rows_have_every_timing_and_no_graph(tiny_bundle, tmp_path, capsys):
    out = tmp_path / "steps.json"
    argv = ["--model-repository", str(tiny_bundle.repo), "--model", "tiny"]
    assert stepbench.main([*argv, "--rows", "1,3,129", "--runs", "2", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["rows"] for r in rows] == [1, 3, 129]
    # past the largest bucket the runtime encodes the plain way: no fixed-shape timing
    assert rows.pop()["encoder_graphs_ms"] is None
    for r in rows:
        assert r["off_ms"] > 0 and r["on_ms"] > 0 and r["on_admitting_ms"] > 0
        assert r["encoder_off_ms"] > 0 and r["encoder_on_ms"] > 0 and r["encoder_graphs_ms"] > 0
        assert r["graph_ms"] is None  # CUDA graphs: CUDA only
        # the encoder with fixed axes runs (and computes a plain call's memory)
        assert r["encoder_fixed_ms"] > 0
        assert r["encoder_dynamic_ops"] == []
    table = capsys.readouterr().out
    assert (
        "| CUDA graph ms | encoder off ms | encoder on ms | encoder graphs ms "
        "| encoder fixed shape ms |" in table
    )
    assert "| 3 | " in table


@pytest.mark.skipif(
    "CUDAExecutionProvider" not in ort.get_available_providers(),
    reason="needs a GPU and onnxruntime-gpu",
)
def test_cuda_rows_time_the_graph_replay(tmp_path):
    """The replayed graph's top-k ids equal a plain session's (else graph_ms is None)."""
    out = tmp_path / "steps.json"
    argv = ["--device", "cuda", "--rows", "1,64", "--runs", "5", "--json", str(out)]
    assert stepbench.main(argv) == 0
    rows = json.loads(out.read_text())["rows"]
    assert all(r["graph_ms"] is not None and r["graph_ms"] > 0 for r in rows)
    assert all(r["encoder_on_ms"] > 0 and r["encoder_graphs_ms"] > 0 for r in rows)


@pytest.mark.parametrize("variant", ["gru", "lstm"])
def test_an_encoder_with_fixed_axes_folds_every_shape_op_away(tmp_path, variant):
    """The plain export has Shape, Range, ConstantOfShape and an If (the trace of the
    bidirectional reversal): ONNX Runtime leaves such nodes on the CPU, and a CUDA graph
    can hold none. With both axes fixed they fold away, and what is left computes what
    the plain session does (else time_encoder_graph returns None)."""
    import numpy as np
    import onnx

    from export import spec
    from tests.service.server_fixtures import build_tiny_bundle

    overrides = {} if variant == "gru" else {"rnn_type": "lstm"}
    bundle = build_tiny_bundle(tmp_path, max_source_tokens=64, **overrides)
    path = bundle.bundle_dir / spec.ENCODER_FILE
    plain = {n.op_type for n in onnx.load(str(path)).graph.node}
    assert {"Shape", "If"} <= plain  # (what this test is about: the export has them)
    assert stepbench.dynamic_ops(path, 4, 16) == []
    ids = np.random.default_rng(0).integers(4, 100, (4, 16)).astype(np.int64)
    lengths = np.array([16, 9, 3, 1], dtype=np.int64)  # padded rows too
    assert stepbench.time_encoder_graph(path, ids, lengths, "cpu", runs=2) > 0
