"""Where one request's time goes between its caller and the engine, in this process and
through an engine process (``python -m loadtest.hops``).

One sentence at a time (one client, nothing else decoding), alternating between an
engine in this process and an engine process (``nmt-serve --engine-process on``) of the
same bundle, both with the server's defaults for the device. No gRPC: the hand-overs
between threads and processes alone (``python -m loadtest.latab`` measures the whole
path through gRPC). Per engine, medians in milliseconds of:

* ``round trip``: submit to the caller holding the answer;
* ``to the scheduler``: submit to the scheduler admitting the sentence (through an engine
  process: pickling, the pipe, the child's reader thread, the scheduler's wake-up);
* ``in the engine``: admitted to finished (encoding and decoding);
* ``back``: finished to the job's future resolved in the caller's process (through an
  engine process: the pipe and the link's reader thread);
* ``caller``: future resolved to the waiting caller running again.

Both engines must translate every sentence the same (``same``); the run fails if not.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PARTS = ("round trip", "to the scheduler", "in the engine", "back", "caller")


def one_request(engine, source: list[int], options) -> tuple[dict[str, float], tuple]:
    """One sentence through ``engine``: its hops in seconds, and its best tokens."""
    resolved: list[float] = []
    start = time.monotonic()
    job = engine.enqueue([source], options, timeout=60)
    job.future.add_done_callback(lambda _f: resolved.append(time.monotonic()))
    nbest = job.future.result(60)
    end = time.monotonic()
    t = job.timing
    hops = {
        "round trip": end - start,
        "to the scheduler": t.admitted - start,
        "in the engine": t.finished - t.admitted,
        "back": resolved[0] - t.finished,
        "caller": end - resolved[0],
    }
    return hops, nbest[0][0].tokens


def measure(engines: dict, sources: list[list[int]], options, passes: int) -> dict:
    """Every sentence through every engine in turn (the order alternating sentence by
    sentence), ``passes`` times: per engine, each hop's median (ms) and the sentences
    translated as by the first engine."""
    names = list(engines)
    hops: dict[str, dict[str, list[float]]] = {n: {p: [] for p in PARTS} for n in names}
    same = dict.fromkeys(names, 0)
    for _ in range(passes):
        for i, source in enumerate(sources):
            order = names if i % 2 == 0 else names[::-1]
            tokens = {}
            for name in order:
                got, tokens[name] = one_request(engines[name], source, options)
                for part, seconds in got.items():
                    hops[name][part].append(seconds)
            for name in names:
                same[name] += tokens[name] == tokens[names[0]]
    return {
        name: {
            "requests": len(hops[name]["round trip"]),
            "same": same[name],
            **{part: round(1e3 * statistics.median(v), 3) for part, v in hops[name].items()},
        }
        for name in names
    }


def table(rows: dict) -> str:
    out = ["| engine | requests | " + " | ".join(f"{p} ms" for p in PARTS) + " | same |"]
    out.append("|---" * (len(PARTS) + 3) + "|")
    for name, r in rows.items():
        cells = " | ".join(f"{r[p]:.3f}" for p in PARTS)
        out.append(f"| {name} | {r['requests']} | {cells} | {r['same']}/{r['requests']} |")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    from prometheus_client import CollectorRegistry

    from models.options import DecodeOptions
    from models.tokenizer import read_lines
    from service.bundle import load_bundle
    from service.config import ServerConfig
    from service.lanes import for_machine, make_engine
    from service.metrics import create_metrics
    from service.remote import RemoteEngine
    from service.server import ServerError, find_bundles

    p = argparse.ArgumentParser(prog="python -m loadtest.hops", description=__doc__.splitlines()[0])
    p.add_argument("--model-repository", type=Path, default=ROOT / "model_repository")
    p.add_argument("--model", default="en-es")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--file", type=Path, default=ROOT / "models/pretrained/en-es/test.en")
    p.add_argument("--sentences", type=int, default=100)
    p.add_argument("--passes", type=int, default=3)
    p.add_argument("--beam", type=int, default=1, help="1: greedy (default: 1)")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    if args.sentences < 1 or args.passes < 1 or args.beam < 1:
        p.error("--sentences, --passes and --beam must be >= 1")
    gpu = args.device == "cuda"
    try:
        bundles = find_bundles(args.model_repository, gpu=gpu)
        lines = read_lines(args.file)[: args.sentences]
    except (ServerError, OSError, ValueError) as exc:
        p.error(str(exc))
    if args.model not in bundles:
        p.error(f"no model {args.model!r} in {args.model_repository} (models: {sorted(bundles)})")
    path = bundles[args.model]
    if not lines:
        p.error(f"{args.file}: no sentences")
    defaults = ServerConfig()
    runtime = dataclasses.replace(defaults.runtime, providers=("cuda",) if gpu else ("cpu",))
    config, runtime = for_machine(defaults.engine, runtime, gpu)
    local = make_engine(load_bundle(path, runtime), config, create_metrics(CollectorRegistry()))
    remote = RemoteEngine(path, runtime, config, create_metrics(CollectorRegistry()))
    engines = {"in this process": local, "engine process": remote}
    try:
        for engine in engines.values():
            engine.start()
            engine.warmup()
        limit = local.max_source_tokens
        sources = [ids[:limit] for ids in local.bundle.src_tokenizer.encode_batch(lines)]
        options = DecodeOptions(beam_size=args.beam)
        rows = measure(engines, [s for s in sources if s], options, args.passes)
    finally:
        for engine in engines.values():
            engine.stop(10)
    print(f"{path} on {args.device}, {time.strftime('%Y-%m-%d')}, beam {args.beam}")
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps({"bundle": str(path), "rows": rows}, indent=2) + "\n")
    if any(r["same"] != r["requests"] for r in rows.values()):
        print("error: the engines translated some sentences differently", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
