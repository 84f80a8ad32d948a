"""The decode loop's own host time per decoder step, apart from ONNX Runtime.

``python -m loadtest.loophost [--strategies greedy,beam5] [--batch 32,256]``

Decodes test sentences with :func:`service.loop.decode` (the scheduler's loop, without
gRPC, queues or threads) at several batch sizes and splits the wall time into the
decoder's and the encoder's ONNX Runtime calls (the model's own counters) and the rest:
the Python of the step (building its index inputs, candidates, EOS rules and bans, each
strategy's selection, each sentence taking its step) and the memory pool's appends,
growth and compaction. On a GPU the decoder call is 0.4-0.5 ms whatever the batch
(``loadtest.stepbench --device cuda``), so this host time per step, which grows with
the sentences a step carries, bounds a single engine once enough requests reach it.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from loadtest.concurrency import beam_of, strategy_name
from loadtest.machine import cpu_name
from loadtest.trees import commit_of, tree_env

ROOT = Path(__file__).resolve().parent.parent
TEST_EN = ROOT / "models" / "pretrained" / "en-es" / "test.en"


def measure(bundle, sources: list[list[int]], beam: int, batch: int) -> dict:
    """One decode of ``sources`` (token ids) at ``batch`` sentences: steps, rows per step
    and milliseconds of wall, ORT and host time, host µs per step and per row."""
    from models.options import DecodeOptions
    from service.loop import decode

    model = bundle.model
    before = dict(vars(model.stats))
    start = time.perf_counter()
    decode(
        model, sources, options=DecodeOptions(beam_size=beam), special=bundle.special,
        batch_size=batch,
    )  # fmt: skip
    wall = time.perf_counter() - start
    used = {k: v - before[k] for k, v in vars(model.stats).items()}
    steps, rows = used["decoder_steps"], used["decoder_rows"]
    host = wall - used["decoder_seconds"] - used["encoder_seconds"]
    return {
        "strategy": strategy_name(beam),
        "batch": batch,
        "steps": steps,
        "rows_per_step": round(rows / max(steps, 1), 1),
        "wall_ms": round(1000 * wall, 1),
        "decoder_ort_ms": round(1000 * used["decoder_seconds"], 1),
        "encoder_ort_ms": round(1000 * used["encoder_seconds"], 1),
        "host_ms": round(1000 * host, 1),
        "host_us_per_step": round(1e6 * host / max(steps, 1), 1),
        "host_us_per_row": round(1e6 * host / max(rows, 1), 2),
        "decoder_ort_us_per_step": round(1e6 * used["decoder_seconds"] / max(steps, 1), 1),
        # calls of several greedy steps (--greedy-steps): fewer calls than steps
        "decoder_calls": used["decoder_calls"],
        # steps run on the fixed buffers (--cuda-graphs on)
        "graph_steps": used["graph_steps"],
    }


def table(rows: list[dict]) -> str:
    lines = [
        "| tree | strategy | batch | steps | rows/step | host µs/step | host µs/row "
        "| decoder ORT µs/step | host share of wall % |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        share = 100 * r["host_ms"] / r["wall_ms"] if r["wall_ms"] else 0.0
        lines.append(
            f"| {r.get('tree', 'this')} | {r['strategy']} | {r['batch']} | {r['steps']} "
            f"| {r['rows_per_step']} | {r['host_us_per_step']} | {r['host_us_per_row']} "
            f"| {r['decoder_ort_us_per_step']} | {share:.1f} |"
        )
    return "\n".join(lines)


def _other_tree(args: argparse.Namespace) -> list[dict]:
    """The rows of ``args.ab_tree``'s own ``loadtest.loophost``, run with this run's
    settings in a subprocess."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rows.json"
        command = [
            sys.executable, "-m", "loadtest.loophost",
            "--model-repository", str(args.model_repository.resolve()), "--model", args.model,
            "--file", str(args.file.resolve()), "--sentences", str(args.sentences),
            "--strategies", args.strategies, "--batch", args.batch,
            "--rounds", str(args.rounds), "--json", str(out),
        ]  # fmt: skip
        if args.cuda_graphs == "on":  # (an older tree's loophost may not know the flag)
            command += ["--cuda-graphs", "on"]
        # older trees: one step; auto (0) is left to the tree's own default
        if args.greedy_steps and (args.ab_tree / "service" / "greedysteps.py").is_file():
            command += ["--greedy-steps", str(args.greedy_steps)]
        env = tree_env(args.ab_tree.resolve())
        done = subprocess.run(command, cwd=args.ab_tree, env=env, check=False)
        if done.returncode != 0 or not out.is_file():
            raise SystemExit(f"--ab-tree {args.ab_tree}: its loophost exited {done.returncode}")
        return json.loads(out.read_text())["rows"]


def main(argv: Sequence[str] | None = None) -> int:
    from service.bundle import load_bundle
    from service.server import ServerError, find_bundles
    from service.sessions import RuntimeConfig

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model-repository", type=Path, default=ROOT / "model_repository")
    p.add_argument("--model", default="en-es")
    p.add_argument("--file", type=Path, default=TEST_EN)
    p.add_argument("--sentences", type=int, default=1000)
    p.add_argument("--strategies", default="greedy,beam5", help="greedy and/or beamN")
    p.add_argument("--batch", default="32,256", help="sentences decoded at once")
    p.add_argument("--rounds", type=int, default=3, help="each row's median round is kept")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument(
        "--cuda-graphs",
        choices=("on", "off"),
        default="off",
        help="on: decode through the fixed, bucketed buffers that CUDA graphs replay "
        "(IO binding on the CPU provider, nothing captured): the host time of the GPU "
        "path's loop, measured on a CPU",
    )
    p.add_argument(
        "--greedy-steps",
        type=int,
        default=RuntimeConfig.greedy_steps,
        help="decoder steps per call while every sentence is plain greedy (nmt-serve "
        "--greedy-steps; 1: one step a call, 0: auto)",
    )
    p.add_argument(
        "--ab-tree",
        type=Path,
        default=None,
        help="another source tree of this project (a git worktree of an older commit): "
        "its loop is measured the same way in the same run, after this tree's, in a "
        "subprocess with its own code, on this run's model repository",
    )
    args = p.parse_args(argv)
    if args.ab_tree is not None and not (args.ab_tree / "loadtest" / "loophost.py").is_file():
        p.error(
            f"--ab-tree {args.ab_tree}: not a source tree of this project (no loadtest/loophost.py)"
        )
    try:
        beams = [beam_of(s) for s in args.strategies.split(",")]
        batches = [int(b) for b in args.batch.split(",")]
    except ValueError as exc:
        p.error(f"--strategies/--batch: {exc}")
    if args.rounds < 1 or min(beams + batches) < 1:
        p.error("--rounds, beam sizes and batch sizes must be >= 1")
    try:
        bundles = find_bundles(args.model_repository, gpu=False)
    except ServerError as exc:
        p.error(f"--model-repository: {exc}")
    if args.model not in bundles:
        p.error(f"--model {args.model!r} is not in {args.model_repository}: {', '.join(bundles)}")
    bundle_dir = bundles[args.model]
    graphs = args.cuda_graphs == "on"
    try:  # RuntimeConfig checks --greedy-steps' bounds
        runtime = RuntimeConfig(
            providers=("cpu",),
            io_binding="on" if graphs else "off",
            cuda_graphs=args.cuda_graphs,
            greedy_steps=args.greedy_steps,
        )
    except ValueError as exc:
        p.error(str(exc))
    bundle = load_bundle(bundle_dir, runtime)
    lines = [s for s in args.file.read_text(encoding="utf-8").splitlines() if s.strip()]
    sources = [bundle.src_tokenizer.encode(s) for s in lines[: args.sentences]]
    if not sources:
        p.error(f"--file {args.file} has no sentences")
    rows = []
    for beam in beams:
        for batch in batches:
            runs = [measure(bundle, sources, beam, batch) for _ in range(args.rounds)]
            rows.append(sorted(runs, key=lambda r: r["host_us_per_step"])[len(runs) // 2])
    for r in rows:
        r["tree"] = "this"
    if args.ab_tree is not None:
        other = _other_tree(args)
        for ours, theirs in zip(rows, other, strict=True):
            theirs["tree"] = str(args.ab_tree)
            ours["host_ratio_vs_ab"] = round(theirs["host_us_per_row"] / ours["host_us_per_row"], 2)
            ours["wall_ratio_vs_ab"] = round(theirs["wall_ms"] / ours["wall_ms"], 2)
        rows = [r for pair in zip(rows, other, strict=True) for r in pair]
    print(table(rows))
    if args.json:
        settings = {
            "command": "python -m loadtest.loophost " + " ".join(argv or sys.argv[1:]),
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "cpu": cpu_name(),
            "python": platform.python_version(),
            "bundle": str(bundle_dir.relative_to(ROOT))
            if bundle_dir.is_relative_to(ROOT)
            else str(bundle_dir),
            "sentences": len(sources),
            "rounds": args.rounds,
            "cuda_graphs": args.cuda_graphs,
        }
        if args.ab_tree is not None:
            settings["ab_tree"] = {"tree": str(args.ab_tree), "commit": commit_of(args.ab_tree)}
        args.json.write_text(json.dumps({"settings": settings, "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
