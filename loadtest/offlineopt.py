"""Would a bundle gain from ONNX Runtime's *offline* graph optimization?

``python -m loadtest.offlineopt [--bundle model_repository/en-es/7] [--rounds 3]``

ORT can save the graph it optimized (``SessionOptions.optimized_model_filepath``) so a
later session loads it with optimization disabled. This measures, side by side in one
run and interleaved over rounds, what that would buy the service: the time to build the
decoder session, and the time of one decoder step at 1 and 32 rows, for the bundle's
graph optimized at load time (level ``all``, what the service does) against the saved
optimized graph loaded with optimization off. CPU only: the ``all`` level writes
CPU-specific kernels (NCHWc layouts, fused ops) into the saved graph, which is why a
portable bundle could only ever ship the ``extended`` level.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnxruntime as ort

from export import spec

ROOT = Path(__file__).resolve().parent.parent
LEVELS = {
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    "off": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
}


def _options(level: str, threads: int, save: Path | None = None) -> ort.SessionOptions:
    opts = ort.SessionOptions()
    opts.graph_optimization_level = LEVELS[level]
    opts.intra_op_num_threads = threads
    opts.log_severity_level = 3  # the "hardware specific" warning is the point, not news
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if save is not None:
        opts.optimized_model_filepath = str(save)
    return opts


def _session(path: Path, level: str, threads: int) -> tuple[ort.InferenceSession, float]:
    start = time.perf_counter()
    session = ort.InferenceSession(
        str(path), _options(level, threads), providers=["CPUExecutionProvider"]
    )
    return session, time.perf_counter() - start


def _step_feeds(
    encoder: ort.InferenceSession, state_names, vocab: int, rows: int, src_len: int
) -> dict:
    """Decoder inputs for ``rows`` sentences of ``src_len`` random source tokens."""
    rng = np.random.default_rng(rows)
    ids = rng.integers(4, vocab, (rows, src_len)).astype(np.int64)
    outputs = encoder.run(None, {spec.SRC_IDS: ids, spec.SRC_LENGTHS: np.full(rows, src_len)})
    memory, keys, mask, *states = outputs
    feeds = {
        spec.PREV_TOKENS: np.full(rows, 2, dtype=np.int64),
        spec.PARENT_ROWS: np.arange(rows, dtype=np.int64),
        spec.ROW_SENTENCE: np.arange(rows, dtype=np.int64),
        spec.MEMORY: memory,
        spec.KEYS: keys,
        spec.SRC_MASK: mask,
        spec.TOP_K: np.array([3], dtype=np.int64),
    }
    return feeds | dict(zip(state_names, states, strict=True))


def _step_us(session: ort.InferenceSession, feeds: dict, steps: int) -> float:
    for _ in range(5):
        session.run(None, feeds)
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        session.run(None, feeds)
        times.append(time.perf_counter() - start)
    return 1e6 * statistics.median(times)


def measure(bundle: Path, *, rounds: int, steps: int, threads: int, src_len: int) -> dict:
    """``{(variant, metric): [value per round]}``; build in ms, steps in µs."""
    manifest = json.loads((bundle / spec.MANIFEST_FILE).read_text())
    names, vocab = manifest["state_names"], manifest["src_vocab_size"]
    encoder, _ = _session(bundle / spec.ENCODER_FILE, "all", threads)
    feeds = {rows: _step_feeds(encoder, names, vocab, rows, src_len) for rows in (1, 32)}
    results: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        saved = Path(tmp) / "decoder.optimized.onnx"
        ort.InferenceSession(
            str(bundle / spec.DECODER_FILE),
            _options("all", threads, save=saved),
            providers=["CPUExecutionProvider"],
        )
        variants = (
            ("optimized at load", bundle / spec.DECODER_FILE, "all"),
            ("saved", saved, "off"),
        )
        for _ in range(rounds):
            for name, path, level in variants:
                session, seconds = _session(path, level, threads)
                results.setdefault((name, "build ms"), []).append(1000 * seconds)
                for rows, f in feeds.items():
                    us = _step_us(session, f, steps)
                    results.setdefault((name, f"step {rows} rows µs"), []).append(us)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="offlineopt", description=__doc__.splitlines()[0])
    p.add_argument("--bundle", type=Path, default=ROOT / "model_repository" / "en-es" / "7")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=200, help="timed decoder steps per case")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--src-len", type=int, default=20)
    args = p.parse_args(argv)
    if not (args.bundle / spec.DECODER_FILE).is_file():
        print(f"offlineopt: error: no {spec.DECODER_FILE} in {args.bundle}", file=sys.stderr)
        return 2
    results = measure(
        args.bundle,
        rounds=args.rounds,
        steps=args.steps,
        threads=args.threads,
        src_len=args.src_len,
    )
    print(f"bundle {args.bundle}, {args.threads} threads, median of {args.rounds} rounds")
    print("| decoder graph | metric | median | rounds |")
    print("|---|---|---|---|")
    for (name, metric), values in results.items():
        rounds = ", ".join(f"{v:.1f}" for v in values)
        print(f"| {name} | {metric} | {statistics.median(values):.1f} | {rounds} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
