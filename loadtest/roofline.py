"""FLOPs of the attention RNN from its config, and this machine's fp32 matmul peak.

Counting rules (2 FLOPs per multiply-add; embedding lookups, biases, gate
nonlinearities and other element-wise work are free unless stated):

* encoder, per source token: every layer and direction runs a GRU (3 gates) or LSTM
  (4 gates) cell, ``2 * gates * H_enc * (input + H_enc)``; then the attention keys
  ``memory @ W`` (additive: ``D x A``, general: ``D x H_dec``). Per sentence the bridge
  ``D x (layers * H_dec)``.
* decoder, per generated token (one hypothesis row, one step): the stacked cells
  ``2 * gates * H_dec * (input + H_dec)``, the pre-output projection, the output
  projection ``2 * O * V`` and, per source position, the attention score and the
  context sum (additive: ``U h + W s`` add and ``v^T tanh(.)``: ``3 * A``; dot/general:
  ``2 * H_dec``; concat: ``2 * (H_dec + D) * A + 2 * A``; context ``2 * D``). The
  per-query projection of additive attention (``2 * H_dec * A``) is counted once.

``python -m loadtest.roofline --threads N`` prints numpy's matmul rates as JSON (the
benchmark runs it in a subprocess so OpenBLAS sees ``OPENBLAS_NUM_THREADS`` from the
start).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from loadtest.trees import tree_env
from models.config import ModelConfig

# (rows, inner, cols): the output projection and the GRU gates at serving batch sizes,
# plus a large square product that shows the machine's real ceiling.
DEFAULT_SHAPES: tuple[tuple[int, int, int], ...] = (
    (64, 256, 4000),
    (256, 256, 4000),
    (64, 960, 1152),
    (1024, 1024, 1024),
)


@dataclass(frozen=True)
class ModelFlops:
    """FLOPs of one model: encoder per source token and per sentence, decoder per
    generated token as ``decoder_fixed + decoder_per_source_token * src_len``."""

    encoder_per_source_token: int
    encoder_per_sentence: int
    decoder_fixed: int
    decoder_per_source_token: int
    decoder_parts: dict[str, int]

    def decoder_per_token(self, src_len: float) -> float:
        """Decoder FLOPs of one hypothesis row attending over ``src_len`` positions."""
        return self.decoder_fixed + self.decoder_per_source_token * src_len

    def to_dict(self) -> dict:
        return {
            "encoder_per_source_token": self.encoder_per_source_token,
            "encoder_per_sentence": self.encoder_per_sentence,
            "decoder_fixed_per_token": self.decoder_fixed,
            "decoder_per_token_per_source_token": self.decoder_per_source_token,
            "decoder_parts_per_token": self.decoder_parts,
        }


def _cell(gates: int, inp: int, hidden: int) -> int:
    return 2 * gates * hidden * (inp + hidden)


def model_flops(cfg: ModelConfig) -> ModelFlops:
    """Count FLOPs of ``cfg`` by the rules in the module docstring."""
    gates = 4 if cfg.has_cell else 3
    H, D, E, A, O, V = (  # noqa: E741 - the names of the docstring
        cfg.decoder_hidden,
        cfg.memory_dim,
        cfg.embed_dim,
        cfg.attention_dim,
        cfg.output_dim,
        cfg.tgt_vocab_size,
    )
    enc = 0
    for layer in range(cfg.encoder_layers):
        inp = E if layer == 0 else D
        enc += cfg.directions * _cell(gates, inp, cfg.encoder_hidden)
    keys = {"additive": 2 * D * A, "general": 2 * D * H}.get(cfg.attention, 0)
    bridge = 2 * D * cfg.decoder_layers * H

    if cfg.placement == "bahdanau":
        first_in, pre_in = E + D, H + D + E
    else:
        first_in, pre_in = E + (O if cfg.uses_input_feed else 0), H + D
    rnn = sum(_cell(gates, first_in if i == 0 else H, H) for i in range(cfg.decoder_layers))
    query = 2 * H * A if cfg.attention == "additive" else 0
    score = {
        "additive": 3 * A,
        "dot": 2 * H,
        "general": 2 * H,
        "concat": 2 * (H + D) * A + 2 * A,
    }[cfg.attention]
    parts = {
        "rnn_cells": rnn,
        "attention_query": query,
        "pre_output": 2 * pre_in * O,
        "output_projection": 2 * O * V,
    }
    return ModelFlops(
        encoder_per_source_token=enc + keys,
        encoder_per_sentence=bridge,
        decoder_fixed=sum(parts.values()),
        decoder_per_source_token=score + 2 * D,
        decoder_parts=parts,
    )


def _rate(fn, flops: float, min_seconds: float) -> float:
    """Best-of-3 GFLOP/s of ``fn``, each trial repeated for at least ``min_seconds``."""
    fn()
    best = 0.0
    for _ in range(3):
        reps, start = 0, time.perf_counter()
        while True:
            fn()
            reps += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_seconds:
                break
        best = max(best, flops * reps / elapsed / 1e9)
    return best


def numpy_peak(shapes: Sequence[tuple[int, int, int]], min_seconds: float = 0.3) -> list[dict]:
    """GFLOP/s of ``A (m, k) @ B (k, n)`` in fp32 with numpy (OpenBLAS threads as set
    by the environment)."""
    import numpy as np

    rng = np.random.default_rng(0)
    out = []
    for m, k, n in shapes:
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((k, n), dtype=np.float32)
        c = np.empty((m, n), dtype=np.float32)
        gflops = _rate(lambda a=a, b=b, c=c: np.matmul(a, b, out=c), 2.0 * m * k * n, min_seconds)
        out.append({"library": "numpy", "shape": [m, k, n], "gflops": round(gflops, 1)})
    return out


def onnxruntime_peak(
    shapes: Sequence[tuple[int, int, int]], threads: int, min_seconds: float = 0.3
) -> list[dict]:
    """GFLOP/s of one ORT ``MatMul`` node (weights as an initializer, like the model's)
    with ``threads`` intra-op threads. Empty when the ``onnx`` package is missing."""
    try:
        import onnx
        from onnx import TensorProto, helper, numpy_helper
    except ImportError:
        return []
    import numpy as np
    import onnxruntime as ort

    rng = np.random.default_rng(0)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    out = []
    for m, k, n in shapes:
        weight = numpy_helper.from_array(rng.standard_normal((k, n), dtype=np.float32), "B")
        graph = helper.make_graph(
            [helper.make_node("MatMul", ["A", "B"], ["C"])],
            "matmul",
            [helper.make_tensor_value_info("A", TensorProto.FLOAT, [m, k])],
            [helper.make_tensor_value_info("C", TensorProto.FLOAT, [m, n])],
            [weight],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = min(model.ir_version, onnx.IR_VERSION)
        session = ort.InferenceSession(
            model.SerializeToString(), opts, providers=["CPUExecutionProvider"]
        )
        feeds = {"A": rng.standard_normal((m, k), dtype=np.float32)}
        gflops = _rate(lambda s=session, f=feeds: s.run(None, f), 2.0 * m * k * n, min_seconds)
        out.append({"library": "onnxruntime", "shape": [m, k, n], "gflops": round(gflops, 1)})
    return out


def measure_peak(
    threads: int, shapes: Sequence[tuple[int, int, int]] = DEFAULT_SHAPES, min_seconds: float = 0.3
) -> dict:
    """numpy (in a subprocess with ``OPENBLAS_NUM_THREADS=threads``) and ORT MatMul rates;
    ``peak_gflops`` is the best of them."""
    root = str(Path(__file__).resolve().parent.parent)
    env = tree_env(root, OPENBLAS_NUM_THREADS=str(threads))
    shape_arg = ";".join(f"{m}x{k}x{n}" for m, k, n in shapes)
    cmd = [sys.executable, "-m", "loadtest.roofline", "--shapes", shape_arg]
    cmd += ["--min-seconds", str(min_seconds)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    rates = json.loads(done.stdout) + onnxruntime_peak(shapes, threads, min_seconds)
    best = max(rates, key=lambda r: r["gflops"])
    return {"threads": threads, "peak_gflops": best["gflops"], "peak_from": best, "rates": rates}


def parse_shapes(text: str) -> list[tuple[int, int, int]]:
    """``"64x256x4000;1024x1024x1024"`` -> ``[(64, 256, 4000), (1024, 1024, 1024)]``."""
    shapes = []
    for item in text.split(";"):
        m, k, n = (int(x) for x in item.lower().split("x"))
        shapes.append((m, k, n))
    return shapes


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="numpy fp32 matmul GFLOP/s as JSON")
    p.add_argument("--shapes", default=";".join(f"{m}x{k}x{n}" for m, k, n in DEFAULT_SHAPES))
    p.add_argument("--min-seconds", type=float, default=0.3)
    args = p.parse_args(argv)
    print(json.dumps(numpy_peak(parse_shapes(args.shapes), args.min_seconds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
