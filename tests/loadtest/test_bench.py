"""Smoke test of ``python -m loadtest.bench`` on the tiny exported model: every part runs
and the JSON and markdown have the expected rows with positive numbers. No timing
thresholds: speed targets are printed by the benchmark, never asserted."""

from __future__ import annotations

import json

import pytest

from loadtest import bench
from loadtest.roofline import model_flops
from models.config import ModelConfig

SENTENCES = 4
CLIENTS = (1, 2)


@pytest.fixture(scope="module")
def result(tiny_bundle, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bench")
    source = tmp / "test.en"
    source.write_text("\n".join(tiny_bundle.sentences[:SENTENCES]) + "\n", encoding="utf-8")
    out = tmp / "bench-cpu"
    argv = [
        "--model-repository",
        str(tiny_bundle.repo),
        "--model",
        "tiny",
        "--checkpoint",
        str(tiny_bundle.checkpoint),
        "--file",
        str(source),
        "--sentences",
        str(SENTENCES),
        "--clients",
        ",".join(map(str, CLIENTS)),
        "--beam",
        "2",
        "--threads",
        "1",
        "--peak-seconds",
        "0.01",
        "--out",
        str(out),
    ]
    assert bench.main(argv) == 0
    data = json.loads(out.with_suffix(".json").read_text())
    return data, out.with_suffix(".md").read_text()


def test_json_has_every_row(result):
    data, _ = result
    got = [(r["system"], r["strategy"], r["clients"]) for r in data["rows"]]
    want = [("pytorch-eager", s, None) for s in ("greedy", "beam2")]
    want += [("onnxruntime-sequential", s, None) for s in ("greedy", "beam2")]
    want += [("grpc-service", s, c) for s in ("greedy", "beam2") for c in CLIENTS]
    assert got == want
    for r in data["rows"]:
        assert r["sentences"] == SENTENCES
        for key in ("sentences_per_s", "tokens_per_s", "p50_ms", "p95_ms", "p99_ms", "speedup"):
            assert r[key] > 0, (r["system"], key)
        assert r["p50_ms"] <= r["p95_ms"] <= r["p99_ms"]
        assert 0 <= r["same_as_pytorch"] <= SENTENCES
    base = {r["strategy"]: r for r in data["rows"] if r["system"] == "pytorch-eager"}
    assert all(r["speedup"] == 1.0 for r in base.values())


def test_outputs_match_pytorch_greedy(result):
    """The exported tiny model passed the greedy parity gate on these sentences, so every
    system must translate them exactly like PyTorch."""
    data, _ = result
    for r in data["rows"]:
        if r["strategy"] == "greedy":
            assert r["same_as_pytorch"] == SENTENCES, r["system"]


def test_roofline_numbers(result, tiny_bundle):
    data, _ = result
    manifest = json.loads((tiny_bundle.bundle_dir / "manifest.json").read_text())
    flops = model_flops(ModelConfig.from_dict(manifest["model_config"]))
    assert data["flops"]["decoder_fixed_per_token"] == flops.decoder_fixed > 0
    assert data["flops"]["encoder_per_source_token"] == flops.encoder_per_source_token > 0
    assert data["peak"]["peak_gflops"] > 0 and data["peak"]["threads"] == 1
    assert {r["library"] for r in data["peak"]["rates"]} == {"numpy", "onnxruntime"}
    for r in data["rows"]:
        if r["system"] == "pytorch-eager":
            continue
        assert r["decoder_rows"] > 0 and r["decoder_calls"] > 0
        assert r["achieved_gflops"] > 0 and r["pct_of_peak"] > 0
        assert r["in_ort_gflops"] >= r["achieved_gflops"]
        assert r["cpu_ms_per_sentence"] > 0


def test_decoder_profiles(result):
    data, _ = result
    one, busiest = data["decoder_profiles"]
    assert one["rows"] == 1 and busiest["rows"] >= 1
    for pr in (one, busiest):
        assert pr["step_us"] > 0 and pr["kernels_us"] > 0 and pr["by_op_us"]
        assert pr["step_us_unprofiled"] > 0 and pr["threads"] == 1
        assert 0 < pr["gemm_share_pct"] <= 100 and pr["gemm_gflops"] > 0


def test_settings_and_targets(result):
    data, _ = result
    s = data["settings"]
    assert s["ort_intra_op_threads"] == 1 and s["torch_threads"] == 1
    assert s["sentences"] == SENTENCES and s["mean_source_tokens"] > 0
    assert s["checkpoint_is_the_bundles"] is True
    # the 32-client targets are not measured with clients 1,2; the others are
    measured = {t["target"]: t["met"] for t in data["targets"]}
    assert len(measured) == 4
    assert sum(v is None for v in measured.values()) == 2


def test_markdown_table(result):
    data, md = result
    assert "| system | strategy | clients | sentences/s |" in md
    assert "## Roofline" in md and "## Targets" in md
    table = [ln for ln in md.splitlines() if ln.startswith(("| pytorch", "| onnx", "| grpc"))]
    assert "## Where the CPU goes" in md and "## One decoder step inside ONNX Runtime" in md
    # results and CPU tables: every row; roofline table: every row but PyTorch's two
    assert len(table) == 3 * len(data["rows"]) - 2
