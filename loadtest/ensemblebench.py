"""What an ensemble costs: a bundle alone against ensembles of copies of it, side by side.

    python -m loadtest.ensemblebench --out loadtest/results/ensemble-cpu

``nmt-convert ensemble`` composes the same bundle 2 and 3 times (weights 1/n, so the
ensemble's log-probs are the model's own: it must give the same translations and
scores, which the report counts), and the engine's decode loop
(:func:`service.loop.decode`, ONNX Runtime with 2 intra-op threads) translates the same
sources with each, greedy and beam 5: all in one call (sentences/s, the median of the
interleaved rounds) and the first 20 one at a time (p50). Members of one size cost what
copies of one model cost, so the ratios say what an ensemble of n such models costs.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from loadtest.machine import ROOT, cpu_name, shown
from loadtest.marianbench import BEAMS, THREADS, bundle_runs
from loadtest.outputs import write_result

ALONE = 20  # sentences decoded one at a time


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ensemblebench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="result files' stem")
    parser.add_argument("--bundle", type=Path, default=ROOT / "model_repository" / "en-es" / "8")
    parser.add_argument(
        "--sources", type=Path, default=ROOT / "models" / "pretrained" / "en-es" / "test.en"
    )
    parser.add_argument("--sentences", type=int, default=300)
    parser.add_argument("--members", type=int, nargs="+", default=[2, 3])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    if args.sentences < 1 or args.rounds < 1 or min(args.members) < 2:
        parser.error("--sentences and --rounds must be >= 1, --members >= 2")
    from export.ensemble import write_ensemble

    lines = [x for x in args.sources.read_text(encoding="utf-8").splitlines() if x.strip()]
    lines = lines[: args.sentences]
    with tempfile.TemporaryDirectory() as tmp:
        configs = {1: args.bundle}
        for n in args.members:
            configs[n] = Path(tmp) / f"x{n}" / "1"
            write_ensemble([args.bundle] * n, configs[n], weights=[1.0 / n] * n,
                           parity_src=args.sources, parity_limit=20, beam_sentences=2)  # fmt: skip
        results: dict[int, list[dict]] = {n: [] for n in configs}
        for _ in range(args.rounds):  # interleaved: a slow spell of the machine hits all
            for n, path in configs.items():
                results[n].append(bundle_runs(path, lines, alone=ALONE))
    rows = []
    for beam in BEAMS:
        single = results[1]
        base = float(np.median([r[str(beam)]["seconds"] for r in single]))
        for n, runs in results.items():
            seconds = float(np.median([r[str(beam)]["seconds"] for r in runs]))
            best, ref = runs[0][str(beam)]["best"], single[0][str(beam)]["best"]
            rows.append({
                "members": n,
                "beam": beam,
                "sentences_per_s": len(lines) / seconds,
                "relative_to_one": base / seconds,
                "alone_p50_ms": 1000 * float(np.median([t for r in runs
                                                        for t in r[str(beam)]["alone"]])),
                "same_translations": sum(a[0] == b[0] for a, b in zip(best, ref, strict=True)),
                "max_score_diff": max(abs(a[1] - b[1]) for a, b in zip(best, ref, strict=True)),
            })  # fmt: skip
    meta = {"date": time.strftime("%Y-%m-%d"), "cpu": cpu_name(), "bundle": shown(args.bundle),
            "sentences": len(lines), "sources": shown(args.sources), "rounds": args.rounds,
            "threads": THREADS, "command": "python -m loadtest.ensemblebench "
            + " ".join(argv if argv is not None else sys.argv[1:])}  # fmt: skip
    table = [
        "| models | beam | sentences/s | × one model | one alone p50 ms | "
        "same best as one model | max abs score diff |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        table.append(
            f"| {r['members']} | {r['beam']} | {r['sentences_per_s']:.1f} | "
            f"{r['relative_to_one']:.2f}x | {r['alone_p50_ms']:.1f} | "
            f"{r['same_translations']}/{len(lines)} | {r['max_score_diff']:.1e} |"
        )
    text = (
        f"# What an ensemble costs ({meta['date']})\n\n`{meta['command']}` on {meta['cpu']}: "
        f"`{meta['bundle']}` alone and composed {', '.join(map(str, args.members))} times "
        f"(weights 1/n), the first {len(lines)} sources of `{meta['sources']}`, "
        f"{THREADS} ONNX Runtime threads, one call of `service.loop.decode` (median of "
        f"{args.rounds} interleaved rounds); one alone: the first {ALONE}, one at a time.\n\n"
        + "\n".join(table)
        + "\n"
    )
    write_result(args.out, {"meta": meta, "rows": rows}, text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
