"""Time one decoder step of a bundle by batch size, the way the decode loop calls it.

``python -m loadtest.stepbench [--device cuda] [--rows 1,8,64,256]``

For each row count it reports the mean wall time of :meth:`OnnxModel.step` with IO
binding off (host arrays in, as the CPU service runs) and on (the memory pool on the
device, :mod:`service.devicepool`, bound where it lies; states left on the device),
and with IO binding on when one sentence is admitted before every step (its encoding
written into the pool's spare slots on the device; the pool compacted as the decode
loop does once half its slots are dead). This separates the per-call cost a device
pays whatever the batch (kernel launches, framework) from the per-row work and from
the cost of admissions.
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


def time_steps(model, feeds: dict, *, runs: int, admit=None) -> float:
    """Mean seconds of ``model.step(**feeds)`` with the pool and states the model keeps
    (a device pool under IO binding); ``admit``: an encoding of one sentence to add to
    the pool before every step."""
    pool = model.new_pool()
    pool.append(feeds["memory"], feeds["keys"], feeds["mask"])
    rows = feeds["prev_tokens"].shape[0]

    def step(states):
        if admit is not None:
            pool.append(admit.memory, admit.keys, admit.mask)
            if pool.slots >= 2 * rows:
                pool.compact(list(range(rows)), pool.width)
        views = dict(memory=pool.memory, keys=pool.keys, mask=pool.mask)
        # states stay wherever the runtime keeps them
        return model.step(**dict(feeds, states=states, **views)).states

    states = feeds["states"]
    for _ in range(3):
        states = step(states)
    start = time.perf_counter()
    for _ in range(runs):
        states = step(states)
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
    print("| rows | binding off ms | binding on ms | binding on, an admission per step ms |")
    print("|---|---|---|---|")
    for rows in [int(r) for r in args.rows.split(",") if r.strip()]:
        ids = rng.integers(4, cfg.src_vocab_size, (rows + 1, args.src_len)).astype(np.int64)
        lengths = np.full(rows, args.src_len, dtype=np.int64)
        enc = models["off"].model.encode(ids[:rows], lengths)
        one = models["on"].model.encode(ids[rows:], lengths[:1])
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
            "off_ms": 1e3 * time_steps(models["off"].model, feeds, runs=args.runs),
            "on_ms": 1e3 * time_steps(models["on"].model, feeds, runs=args.runs),
            "on_admitting_ms": 1e3
            * time_steps(models["on"].model, feeds, runs=args.runs, admit=one),
        }
        results.append(row)
        cells = (row["off_ms"], row["on_ms"], row["on_admitting_ms"])
        print(f"| {rows} | " + " | ".join(f"{c:.3f}" for c in cells) + " |")
    if args.json:
        meta = {"device": args.device, "bundle": str(bundle_dir), "src_len": args.src_len}
        args.json.write_text(json.dumps({"settings": meta, "rows": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
