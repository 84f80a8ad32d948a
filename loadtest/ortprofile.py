"""Where one decoder step's time goes inside ONNX Runtime (its built-in profiler).

Runs the bundle's ``decoder.onnx`` on a batch of ``rows`` hypotheses attending over
``src_len`` positions (random tokens: the kernels do not depend on the values) with
the service's session options, and splits the mean step time into kernel
time per op type and framework time between kernels (the profiler's own per-node cost
is part of it: ``step_us_unprofiled`` is the same step timed without profiling). GEMM
FLOP/s come from the node shapes ORT records.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

from export import spec
from service import topk

WARMUP = 10  # runs left out of the profile (first-run allocations)
# Matrix products of fp32 and of dynamically quantized int8 graphs (activations (rows, K)).
GEMM_OPS = (
    "Gemm",
    "FusedGemm",
    "MatMul",
    "FusedMatMul",
    "DynamicQuantizeMatMul",
    "MatMulInteger",
    "MatMulIntegerToFloat",
)


def _gemm_flops(args: dict) -> int:
    """``2 * rows * K * N`` of a Gemm/MatMul node from the shapes ORT records (weights
    are not listed, so K comes from the first input and N from the output)."""
    try:
        a = list(next(iter(args["input_type_shape"][0].values())))
        out = list(next(iter(args["output_type_shape"][0].values())))
    except (KeyError, IndexError, StopIteration):
        return 0
    return 2 * int(np.prod(out[:-1])) * a[-1] * out[-1]


def step_feeds(bundle, rows: int, src_len: int, *, top_k: int, seed: int) -> dict:
    """The inputs of one ``decoder.onnx`` step of ``bundle`` (a loaded
    :class:`service.bundle.Bundle`) for ``rows`` sentences of ``src_len`` random source
    tokens, one row each, with random previous tokens (the kernels do not depend on the
    values)."""
    rng = np.random.default_rng(seed)
    vocab = bundle.config.src_vocab_size
    ids = rng.integers(4, vocab, (rows, src_len)).astype(np.int64)
    enc = bundle.model.encode(ids, np.full(rows, src_len, dtype=np.int64))
    index = np.arange(rows, dtype=np.int64)
    feeds = {
        spec.PREV_TOKENS: rng.integers(4, bundle.config.tgt_vocab_size, rows).astype(np.int64),
        spec.PARENT_ROWS: index,
        spec.ROW_SENTENCE: index,
        spec.MEMORY: enc.memory,
        spec.KEYS: enc.keys,
        spec.SRC_MASK: enc.mask,
        spec.TOP_K: np.array([top_k], dtype=np.int64),
    }
    feeds.update(zip(bundle.config.state_names, enc.states, strict=True))
    return feeds


def profile_decoder(
    bundle_dir: Path, *, rows: int, src_len: int, threads: int, runs: int = 100
) -> dict:
    """Mean per-step time of the decoder at ``rows`` x ``src_len`` on the session the
    service would use for that many rows (``threads`` intra-op threads, or one below
    ``RuntimeConfig.parallel_rows``): total, kernels by op type (microseconds), framework
    overhead, GEMM share and GEMM GFLOP/s."""
    import onnxruntime as ort

    from service.bundle import load_bundle
    from service.sessions import RuntimeConfig

    rows, src_len = max(1, rows), max(1, src_len)
    config = RuntimeConfig(providers=("cpu",), intra_op_threads=threads)
    bundle = load_bundle(bundle_dir, config)
    # the session the service would pick for this many rows (see RuntimeConfig)
    threads = threads if bundle.model.parallel_rows and rows >= bundle.model.parallel_rows else 1
    feeds = step_feeds(bundle, rows, src_len, top_k=3, seed=0)
    # the decoder as the service runs it: with its top-k in two levels where it does
    graph = str(bundle_dir / spec.DECODER_FILE)
    if bundle.model.chunked_topk:
        graph = topk.chunked(Path(graph).read_bytes(), bundle.config.tgt_vocab_size)
    with tempfile.TemporaryDirectory() as tmp:
        opts = config.session_options(threads=threads)
        opts.enable_profiling = True
        opts.profile_file_prefix = os.path.join(tmp, "decoder")
        session = ort.InferenceSession(graph, opts, providers=["CPUExecutionProvider"])
        for _ in range(WARMUP + runs):
            session.run(None, feeds)
        events = json.loads(Path(session.end_profiling()).read_text())
    plain = ort.InferenceSession(
        graph,
        config.session_options(threads=threads),
        providers=["CPUExecutionProvider"],
    )
    for _ in range(WARMUP):
        plain.run(None, feeds)
    start = time.perf_counter()
    for _ in range(runs):
        plain.run(None, feeds)
    unprofiled_us = 1e6 * (time.perf_counter() - start) / runs
    starts = sorted(e["ts"] for e in events if e.get("name") == "model_run")
    cutoff = starts[WARMUP] if len(starts) > WARMUP else 0
    events = [e for e in events if e.get("ts", 0) >= cutoff]
    by_op: Counter = Counter()
    gemm_flops = 0
    run_us, n_runs = 0.0, 0
    for e in events:
        if e.get("cat") == "Session" and e.get("name") == "model_run":
            run_us += e["dur"]
            n_runs += 1
        elif e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time"):
            op = e["args"].get("op_name", "?")
            by_op[op] += e["dur"]
            if op in GEMM_OPS:
                gemm_flops += _gemm_flops(e["args"])
    n_runs = max(1, n_runs)
    kernels = sum(by_op.values()) / n_runs
    step = run_us / n_runs
    gemm = sum(v for k, v in by_op.items() if "Gemm" in k or "MatMul" in k) / n_runs
    return {
        "rows": rows,
        "src_len": src_len,
        "threads": threads,
        "step_us_unprofiled": round(unprofiled_us, 1),
        "step_us": round(step, 1),
        "kernels_us": round(kernels, 1),
        "framework_us": round(step - kernels, 1),
        "gemm_share_pct": round(100 * gemm / step, 1) if step else None,
        "gemm_gflops": round(gemm_flops / n_runs / gemm / 1e3, 3) if gemm else None,
        "by_op_us": {k: round(v / n_runs, 1) for k, v in by_op.most_common()},
    }
