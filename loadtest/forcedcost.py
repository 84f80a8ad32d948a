"""What the forced tokens' output costs a decoder step (:mod:`service.forced`).

``python -m loadtest.forcedcost [--bundle DIR] [--rows 1,32,128] [--out STEM]``

The served decoder gets one more graph output, the row of log-probs its top-k ranks
(rows, V). This times one decoder step of the same graph, as the runtime serves it on
the CPU (top-k in two levels), three ways, interleaved round by round in one run: the
graph without that output ("plain"), with it but not fetched (every step that forces no
token), and with it fetched (a step that forces one). Same feeds (the encodings of real
sentences, BOS fed), same session options (``--threads``); medians of ``--rounds`` rounds
of ``--runs`` calls each, the kinds' order rotated round by round. The three give the
same top-k, checked.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from loadtest.outputs import write_result

ROOT = Path(__file__).resolve().parent.parent
KINDS = ("plain", "exposed", "exposed_fetched")


def measure(bundle_dir: Path, rows: list[int], *, threads: int, rounds: int, runs: int) -> list:
    import onnxruntime as ort

    from export import spec
    from service import forced, topk
    from service.bundle import load_bundle
    from service.sessions import RuntimeConfig

    bundle = load_bundle(bundle_dir, RuntimeConfig(providers=("cpu",), intra_op_threads=1))
    data = (bundle_dir / spec.DECODER_FILE).read_bytes()
    vocab = bundle.config.tgt_vocab_size
    graphs = {
        "plain": topk.chunked(data, vocab),
        "exposed": topk.chunked(forced.exposed(data), vocab),
    }
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    sessions = {
        k: ort.InferenceSession(g, opts, providers=["CPUExecutionProvider"])
        for k, g in graphs.items()
    }
    lines = (ROOT / "models" / "pretrained" / "en-es" / "test.en").read_text().splitlines()
    outs = spec.decoder_outputs(bundle.model.state_names)
    results = []
    for n in rows:
        src = [bundle.src_tokenizer.encode(t) for t in lines[:n]]
        ids = np.full((n, max(map(len, src))), bundle.special.pad, dtype=np.int64)
        for i, s in enumerate(src):
            ids[i, : len(s)] = s
        enc = bundle.model.encode(ids, np.array([len(s) for s in src], dtype=np.int64))
        feeds = {spec.PREV_TOKENS: np.full(n, bundle.special.bos, dtype=np.int64),
                 spec.PARENT_ROWS: np.arange(n, dtype=np.int64),
                 spec.ROW_SENTENCE: np.arange(n, dtype=np.int64), spec.MEMORY: enc.memory,
                 spec.KEYS: enc.keys, spec.SRC_MASK: enc.mask,
                 spec.TOP_K: np.array([3], dtype=np.int64)}  # fmt: skip
        feeds.update(zip(bundle.model.state_names, enc.states, strict=True))
        fetched = [*outs, forced.STEP_LOG_PROBS]
        calls = {"plain": (sessions["plain"], outs), "exposed": (sessions["exposed"], outs),
                 "exposed_fetched": (sessions["exposed"], fetched)}  # fmt: skip
        first = [s.run(o, feeds)[:2] for s, o in calls.values()]
        same = all(
            np.array_equal(a, b) for f in first[1:] for a, b in zip(first[0], f, strict=True)
        )
        times: dict[str, list[float]] = {k: [] for k in KINDS}
        order = list(calls)
        for r in range(rounds):  # each kind first in turn: no place in the round favoured
            for kind in order[r % 3 :] + order[: r % 3]:
                session, names = calls[kind]
                start = time.perf_counter()
                for _ in range(runs):
                    session.run(names, feeds)
                times[kind].append((time.perf_counter() - start) / runs)
        row = {"rows": n, "same_top_k": same}
        row |= {f"{k}_us": 1e6 * float(np.median(v)) for k, v in times.items()}
        results.append(row)
        print(json.dumps(row), flush=True)
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="forcedcost", description=__doc__.split("\n\n")[0])
    p.add_argument("--bundle", type=Path, default=ROOT / "model_repository" / "en-es" / "8")
    p.add_argument("--rows", default="1,32,128")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--runs", type=int, default=200)
    p.add_argument("--out", type=Path, default=None, help="result files' stem (.json, .md)")
    args = p.parse_args(argv)
    rows = [int(r) for r in args.rows.split(",")]
    results = measure(args.bundle, rows, threads=args.threads, rounds=args.rounds, runs=args.runs)
    command = "python -m loadtest.forcedcost " + " ".join(
        argv if argv is not None else sys.argv[1:]
    )
    where = args.bundle.relative_to(ROOT) if args.bundle.is_relative_to(ROOT) else args.bundle
    meta = {"date": time.strftime("%Y-%m-%d"), "bundle": str(where), "threads": args.threads,
            "rounds": args.rounds, "runs": args.runs, "cpus": os.cpu_count(),
            "command": command}  # fmt: skip
    lines = [
        f"# A decoder step with the forced tokens' output ({meta['date']})\n",
        f"`{command.strip()}`: `{meta['bundle']}`, {args.threads} ORT threads, "
        f"{os.cpu_count()} CPUs; median µs a step of {args.rounds} interleaved rounds of "
        f"{args.runs} calls.\n",
        "| rows | plain | output not fetched | fetched | not fetched / plain | same top-k |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['rows']} | {r['plain_us']:.0f} | {r['exposed_us']:.0f} | "
            f"{r['exposed_fetched_us']:.0f} | {r['exposed_us'] / r['plain_us']:.3f} | "
            f"{r['same_top_k']} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out is not None:
        write_result(args.out, {"meta": meta, "rows": results}, text)
    return 0 if all(r["same_top_k"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
