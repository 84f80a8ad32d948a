"""Time one decoder step of a bundle by batch size, the way the decode loop calls it.

``python -m loadtest.stepbench [--device cuda] [--rows 1,8,64,256]``

For each row count it reports the mean wall time of :meth:`OnnxModel.step` (host
arrays in, top-k/EOS/attention out) with IO binding off and on, and with IO binding
both when the memory pool is unchanged between steps (device copy reused) and when it
changed (every admission uploads the pool again). This separates the per-call cost a
GPU pays whatever the batch (kernel launches, framework) from the per-row work and
from the host-to-device traffic of the pool.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def time_steps(model, feeds: dict, *, runs: int, fresh_memory: bool) -> float:
    """Mean seconds of ``model.step(**feeds)``; ``fresh_memory`` passes other memory
    array objects each step (two copies made beforehand, alternating), as when every
    step follows an admission."""
    pools = [(feeds["memory"], feeds["keys"])]
    if fresh_memory:
        pools = [(feeds["memory"].copy(), feeds["keys"].copy()) for _ in range(2)]
    states = feeds["states"]
    for _ in range(3):
        states = model.step(**dict(feeds, states=states)).states
    start = time.perf_counter()
    for i in range(runs):
        memory, keys = pools[i % len(pools)]
        # states stay wherever the runtime keeps them
        states = model.step(**dict(feeds, states=states, memory=memory, keys=keys)).states
    return (time.perf_counter() - start) / runs


def main(argv: Sequence[str] | None = None) -> int:
    from service.bundle import load_bundle
    from service.runtime import RuntimeConfig
    from service.server import find_bundles

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model-repository", type=Path, default=ROOT / "model_repository")
    p.add_argument("--model", default="en-es")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--rows", default="1,8,64,256")
    p.add_argument("--src-len", type=int, default=16, help="source positions per sentence")
    p.add_argument("--runs", type=int, default=200)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    providers = ("cuda",) if args.device == "cuda" else ("cpu",)
    bundle_dir = find_bundles(args.model_repository, gpu=args.device == "cuda")[args.model]
    models = {
        mode: load_bundle(
            bundle_dir,
            RuntimeConfig(providers=providers, require_gpu=args.device == "cuda", io_binding=mode),
        )
        for mode in ("off", "on")
    }
    cfg = models["off"].config
    rng = np.random.default_rng(0)
    results = []
    print("| rows | binding off ms | binding on, pool unchanged ms | binding on, pool new ms |")
    print("|---|---|---|---|")
    for rows in [int(r) for r in args.rows.split(",") if r.strip()]:
        ids = rng.integers(4, cfg.src_vocab_size, (rows, args.src_len)).astype(np.int64)
        enc = models["off"].model.encode(ids, np.full(rows, args.src_len, dtype=np.int64))
        index = np.arange(rows, dtype=np.int64)
        feeds = dict(
            prev_tokens=rng.integers(4, cfg.tgt_vocab_size, rows).astype(np.int64),
            parent_rows=index,
            row_sentence=index,
            memory=enc.memory,
            keys=enc.keys,
            mask=enc.mask,
            states=enc.states,
            top_k=1,
        )
        row = {
            "rows": rows,
            "off_ms": 1e3
            * time_steps(models["off"].model, feeds, runs=args.runs, fresh_memory=False),
            "on_reused_ms": 1e3
            * time_steps(models["on"].model, feeds, runs=args.runs, fresh_memory=False),
            "on_new_pool_ms": 1e3
            * time_steps(models["on"].model, feeds, runs=args.runs, fresh_memory=True),
        }
        results.append(row)
        cells = (row["off_ms"], row["on_reused_ms"], row["on_new_pool_ms"])
        print(f"| {rows} | " + " | ".join(f"{c:.3f}" for c in cells) + " |")
    if args.json:
        meta = {"device": args.device, "bundle": str(bundle_dir), "src_len": args.src_len}
        args.json.write_text(json.dumps({"settings": meta, "rows": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
