"""One client's latency, A/B, finely interleaved: ``python -m loadtest.latab``.

``nmt-bench`` measures one client as one level per tree and round: a few hundred
sentences on one server, then as many on the next. On a machine whose speed drifts by
10-20 % within minutes (the lent 2-core VMs do), its rounds at one client spread
0.7-1.3x, too wide to tell whether a change costs or saves a few percent of latency.
Here every server runs at once (this tree; each ``--ab-tree``; this tree again with each
``--ab-flags``), idle while another is measured, and the one client moves on to the next
server every ``--block`` sentences (the order reversed every other block), so that every
server sees the same stretches of the machine's speed::

    python -m loadtest.latab --ab-tree /tmp/before --passes 3 --out /tmp/latab
    python -m loadtest.latab --ab-flags='--engine-process on --frontends 2'

One client in this process (the servers are processes of their own), one sentence per
``Translate``, sequential, each server on a connection of its own. Reported per server:
latency percentiles and mean, and against the first (this tree): p50 over p50, mean over
mean, in how many blocks its mean was the lower and an exact sign test on that count (how
likely it is if neither server is faster), and how many translations are identical.
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import shlex
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from loadtest.concurrency import percentile, read_sentences_arg
from loadtest.hostile import own_channel
from loadtest.machine import cpu_name, shown
from loadtest.outputs import write_result
from loadtest.trees import ab_servers, free_port, start_server, stop, wait_serving

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FILE = ROOT / "models" / "pretrained" / "en-es" / "test.en"


def sign_test_p(wins: int, blocks: int) -> float:
    """Two-sided exact sign test: how likely ``wins`` or a count as far from half of
    ``blocks`` is when neither server is faster (each block a fair coin)."""
    if not 0 <= wins <= blocks or blocks < 1:
        raise ValueError(f"{wins} wins of {blocks} blocks")
    tail = min(wins, blocks - wins)
    p = 2 * sum(math.comb(blocks, k) for k in range(tail + 1)) / 2**blocks
    return min(1.0, p)


def summarize(latencies: Sequence[Sequence[float]], block_means: Sequence[Sequence[float]]):
    """Per server (``latencies[i]``: its seconds per request; ``block_means[i]``: its mean
    in each block, the blocks in the same order for every server) the percentiles in ms,
    and against server 0 the p50 and mean ratios and the blocks where server 0 was faster.
    Raises ValueError on no requests, unequal blocks, or a latency that is not a finite
    positive number."""
    if not latencies or any(not values for values in latencies):
        raise ValueError("no latencies measured")
    if len({len(means) for means in block_means}) != 1 or len(block_means) != len(latencies):
        raise ValueError("every server needs a mean for every block")
    for values in latencies:
        if not all(math.isfinite(v) and v > 0 for v in values):
            raise ValueError("a latency is not a finite positive number of seconds")
    rows = []
    for values in latencies:
        rows.append(
            {
                "requests": len(values),
                "p50_ms": round(1000 * percentile(list(values), 50), 3),
                "p90_ms": round(1000 * percentile(list(values), 90), 3),
                "p99_ms": round(1000 * percentile(list(values), 99), 3),
                "mean_ms": round(1000 * statistics.fmean(values), 3),
            }
        )
    first, first_means = rows[0], block_means[0]
    for row, means in zip(rows, block_means, strict=True):
        row["p50_this_over_it"] = round(first["p50_ms"] / row["p50_ms"], 4)
        row["mean_this_over_it"] = round(first["mean_ms"] / row["mean_ms"], 4)
        row["blocks_this_faster"] = sum(a < b for a, b in zip(first_means, means, strict=True))
        row["blocks"] = len(means)
    for row in rows[1:]:
        row["sign_test_p"] = round(sign_test_p(row["blocks_this_faster"], row["blocks"]), 4)
    return rows


def same_as_first(first: Sequence[str], texts: Sequence[str]) -> int:
    """How many of ``texts`` are the translations ``first`` has at the same place."""
    return sum(a == b for a, b in zip(first, texts, strict=True))


def interleave(stubs, texts: list[str], block: int, passes: int, request):
    """Every text to every server, ``block`` at a time, server after server, for
    ``passes`` passes: ``(latencies, block_means, translations)`` per server (the
    translations of the first pass)."""
    n = len(stubs)
    latencies: list[list[float]] = [[] for _ in range(n)]
    means: list[list[float]] = [[] for _ in range(n)]
    outputs: list[list[str]] = [[] for _ in range(n)]
    blocks = 0
    for done in range(passes):
        for start in range(0, len(texts), block):
            order = range(n) if blocks % 2 == 0 else range(n - 1, -1, -1)
            blocks += 1
            for i in order:
                spent = []
                for text in texts[start : start + block]:
                    began = time.perf_counter()
                    reply = stubs[i].Translate(request(text), timeout=60)
                    spent.append(time.perf_counter() - began)
                    if done == 0:
                        outputs[i].append(reply.translations[0].hypotheses[0].text)
                latencies[i] += spent
                means[i].append(statistics.fmean(spent))
    return latencies, means, outputs


def _p(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def markdown(result: dict) -> str:
    s = result["settings"]
    lines = [
        "# One client's latency, finely interleaved",
        "",
        f"* machine: {s['cpu']}, {s['cores']} cores; {s['date']}",
        f"* command: `{s['command']}`",
        f"* {s['sentences']} sentences of `{s['file']}`, {s['passes']} passes, servers "
        f"alternating every {s['block']} sentences; "
        + (f"beam {s['beam']}" if s["beam"] > 1 else "greedy")
        + "; flags given to every server: "
        + (f"`{' '.join(s['flags'])}`" if s["flags"] else "none"),
        "* this / it: the first server's p50 (or mean) over this row's (below 1: the first "
        "is faster); blocks: those where the first server's mean was the lower; sign test "
        "p: how likely so many or so few such blocks are if neither server is faster; "
        "same: translations identical to the first server's",
        "",
        "| server | requests | p50 ms | p90 ms | p99 ms | mean ms | p50 this / it "
        "| mean this / it | blocks this faster | sign test p | same |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['server']} | {r['requests']} | {r['p50_ms']:.2f} | {r['p90_ms']:.2f} "
            f"| {r['p99_ms']:.2f} | {r['mean_ms']:.2f} | {r['p50_this_over_it']:.3f} "
            f"| {r['mean_this_over_it']:.3f} | {r['blocks_this_faster']} of {r['blocks']} "
            f"| {_p(r.get('sign_test_p'))} | {r['same']}/{s['sentences']} |"
        )
    return "\n".join(lines) + "\n"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m loadtest.latab",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--ab-tree", type=Path, action="append", default=[], metavar="DIR")
    p.add_argument("--ab-flags", action="append", default=[], metavar="FLAGS")
    p.add_argument("--flags", default="--providers cpu", help="given to every server")
    p.add_argument("--model-repository", type=Path, default=ROOT / "model_repository")
    p.add_argument("--file", type=Path, default=DEFAULT_FILE)
    p.add_argument("--sentences", type=int, default=300)
    p.add_argument("--block", type=int, default=25, help="sentences before the next server")
    p.add_argument("--passes", type=int, default=2, help="times over the sentences")
    p.add_argument("--beam", type=int, default=1, help="1: greedy")
    p.add_argument("--warmup", type=int, default=20, help="sentences each server gets first")
    p.add_argument("--out", type=Path, default=None, help="writes OUT.json and OUT.md")
    args = p.parse_args(argv)
    for name in ("sentences", "block", "passes", "beam"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be >= 1, got {getattr(args, name)}")
    if args.warmup < 0:
        p.error(f"--warmup must be >= 0, got {args.warmup}")
    try:
        args.common = shlex.split(args.flags)
    except ValueError as exc:
        p.error(f"--flags: {exc}")
    args.servers = ab_servers(p, ROOT, args.ab_tree, args.ab_flags)
    if not args.servers:
        p.error("nothing to compare: give --ab-tree DIR or --ab-flags FLAGS")
    args.texts = read_sentences_arg(p, args.file, args.sentences)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    from nmt_api.nmt.v1 import translator_pb2 as pb
    from nmt_api.nmt.v1 import translator_pb2_grpc as pb_grpc

    args = parse_args(argv)
    options = pb.DecodeOptions(beam_size=args.beam) if args.beam > 1 else pb.DecodeOptions()

    def request(text: str) -> pb.TranslateRequest:
        return pb.TranslateRequest(texts=[text], options=options)

    processes, channels, stubs = [], [], []
    try:
        for tree, _, extra in args.servers:
            port = free_port()
            flags = [*args.common, *extra]
            processes.append(
                start_server(tree, port, flags, model_repository=args.model_repository)
            )
            channels.append(own_channel(port))
            stubs.append(pb_grpc.TranslatorStub(channels[-1]))
            wait_serving(port, process=processes[-1])
        for stub in stubs:
            for text in (args.texts * args.warmup)[: args.warmup]:
                stub.Translate(request(text), timeout=60)
        latencies, means, outputs = interleave(stubs, args.texts, args.block, args.passes, request)
    finally:
        for channel in channels:
            channel.close()
        for process in processes:
            stop(process)
    rows = summarize(latencies, means)
    for row, (tree, label, extra), texts in zip(rows, args.servers, outputs, strict=True):
        row["server"] = label
        row["tree"] = str(tree)
        row["flags"] = extra
        row["same"] = same_as_first(outputs[0], texts)
    command = shlex.join(["python", "-m", "loadtest.latab", *(argv or sys.argv[1:])])
    result = {
        "settings": {
            "cpu": cpu_name(),
            "cores": os.cpu_count(),
            "date": datetime.date.today().isoformat(),
            "command": command,
            "file": shown(args.file),
            "sentences": len(args.texts),
            "block": args.block,
            "passes": args.passes,
            "beam": args.beam,
            "flags": args.common,
        },
        "rows": rows,
    }
    text = markdown(result)
    if args.out is not None:
        write_result(args.out, result, text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
