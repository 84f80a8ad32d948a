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
    assert stepbench.main([*argv, "--rows", "1,3", "--runs", "2", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["rows"] for r in rows] == [1, 3]
    for r in rows:
        assert r["off_ms"] > 0 and r["on_ms"] > 0 and r["on_admitting_ms"] > 0
        assert r["encoder_off_ms"] > 0 and r["encoder_on_ms"] > 0
        assert r["graph_ms"] is None  # CUDA graphs: CUDA only
    table = capsys.readouterr().out
    assert "| CUDA graph ms | encoder off ms | encoder on ms |" in table
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
    assert all(r["encoder_on_ms"] > 0 for r in rows)
