"""What one request's decode options cost the sentences decoded beside it. The decode
loop (in process, the bundle the server would pick) translates test-split sentences
greedily, one in eight of them with an option (sampling from the k best, n-gram
blocking), 64 decoding at a time as the service decodes 64 clients' sentences;
sentences/s of the whole set, median of interleaved rounds, against the same set all
greedy.

Why: a step asks the decoder for as many candidates for every row as its widest
sentence needs (``sampling_topk``, a ban list), so one request's options slow the
others; ``nmt-serve --max-sampling-topk`` bounds it.

    python -m loadtest.optionscost --out loadtest/results/options-cost-cpu
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from loadtest.machine import cpu_name
from loadtest.outputs import write_result
from models.commands import show_defaults
from models.options import DecodeOptions

ROOT = Path(__file__).resolve().parents[1]
TEST = ROOT / "models" / "pretrained" / "en-es" / "test.en"
EVERY = 8  # one sentence in EVERY carries the option
LIVE = 64  # sentences decoding at once


def mixes(vocab: int) -> dict[str, DecodeOptions | None]:
    return {
        "all greedy": None,
        "sampling top-10": DecodeOptions(sampling_topk=10, seed=1),
        "sampling top-100": DecodeOptions(sampling_topk=100, seed=1),
        "sampling top-1000": DecodeOptions(sampling_topk=1000, seed=1),
        f"sampling the whole vocabulary ({vocab})": DecodeOptions(sampling_topk=vocab, seed=1),
        "block_ngram_repeat 1": DecodeOptions(block_ngram_repeat=1),
        "block_ngram_repeat 3 + ban_unk": DecodeOptions(block_ngram_repeat=3, ban_unk=True),
        # what return_attention, return_alignment, return_diagnostics and replace_unk ask
        "attention kept": DecodeOptions(return_attention=True),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m loadtest.optionscost", description=__doc__)
    p.add_argument("--bundle", type=Path, default=ROOT / "model_repository" / "en-es" / "8")
    p.add_argument("--sentences", type=int, default=256, help="test-split sentences a round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2, help="ONNX Runtime intra-op threads")
    p.add_argument("--out", type=Path, required=True, help="writes OUT.json and OUT.md")
    show_defaults(p)
    args = p.parse_args(argv)
    if args.sentences < EVERY or args.rounds < 1 or args.threads < 1:
        p.error(f"--sentences must be >= {EVERY}, --rounds and --threads >= 1")
    from service.bundle import BundleError, load_bundle
    from service.loop import decode
    from service.sessions import RuntimeConfig

    try:
        bundle = load_bundle(
            args.bundle, RuntimeConfig(providers=("cpu",), intra_op_threads=args.threads)
        )
    except BundleError as exc:
        p.error(str(exc))
    texts = [t for t in TEST.read_text(encoding="utf-8").splitlines() if t.strip()]
    limit = bundle.max_source_tokens or 128
    sources = [bundle.src_tokenizer.encode(t)[:limit] for t in texts[: args.sentences]]
    vocab = bundle.config.tgt_vocab_size

    def rate(option: DecodeOptions | None) -> float:
        options = [
            option if option is not None and i % EVERY == 0 else DecodeOptions()
            for i in range(len(sources))
        ]
        start = time.perf_counter()
        decode(bundle.model, sources, options=options, special=bundle.special,
               batch_size=LIVE, max_top_k=vocab)  # fmt: skip
        return len(sources) / (time.perf_counter() - start)

    rate(None)  # warm up
    runs = {name: [] for name in mixes(vocab)}
    for _ in range(args.rounds):  # interleaved: drift hits every mix alike
        for name, option in mixes(vocab).items():
            runs[name].append(rate(option))
    base = statistics.median(runs["all greedy"])
    rows = [
        {"mix": name, "sentences_per_second": statistics.median(r), "rounds": r,
         "vs_all_greedy": statistics.median(r) / base}
        for name, r in runs.items()
    ]  # fmt: skip
    command = "python -m loadtest.optionscost " + " ".join(argv or sys.argv[1:])
    data = {
        "command": command.strip(),
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{cpu_name()}, ORT intra-op threads {args.threads}",
        "bundle": str(
            args.bundle.relative_to(ROOT) if args.bundle.is_relative_to(ROOT) else args.bundle
        ),
        "sentences": len(sources),
        "rows": rows,
    }
    lines = [
        f"`{data['command']}` ({data['date']}; {data['machine']}; bundle {data['bundle']}; "
        f"{len(sources)} greedy sentences, {LIVE} at a time, one in {EVERY} with the "
        f"option, median of {args.rounds} interleaved rounds)",
        "",
        "| one sentence in 8 with | sentences/s | × all greedy |",
        "|---|---|---|",
        *(
            f"| {r['mix']} | {r['sentences_per_second']:.1f} | {r['vs_all_greedy']:.2f} |"
            for r in rows
        ),
    ]
    write_result(args.out, data, "\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
