"""What lexically constrained decoding (:mod:`service.constraints`) costs, in process.

``python -m loadtest.constraintcost [--bundle DIR] [--sentences 200] [--rounds 3] [--out STEM]``

The service's decode loop (:func:`service.loop.decode`, 64 sentences at a time as the
scheduler admits them) over the first ``--sentences`` sentences of the demo model's test
split, four ways, interleaved round by round in one run (the order rotated each round):

* ``beam5``: beam 5, no constraints;
* ``beam5_constrained``: beam 5, each sentence with one phrase: the longest word of its
  reference translation (what a glossary would ask for);
* ``greedy``: greedy, no constraints;
* ``greedy_with_8_beam5``: the same greedy sentences plus 8 beam-5 ones decoding
  alongside, without constraints;
* ``greedy_with_8_constrained``: the same with the 8 constrained: what a few constrained
  requests in flight cost the others beyond their own rows (their steps fetch whole
  log-prob rows, and greedy rows run one step a call).

Prints sentences/s (medians over rounds; for the last two, the greedy sentences only) and,
for the constrained runs, the share of best translations that hold their phrase.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
import time
from pathlib import Path

from loadtest.outputs import write_result

ROOT = Path(__file__).resolve().parent.parent
KINDS = (
    "beam5", "beam5_constrained", "greedy", "greedy_with_8_beam5", "greedy_with_8_constrained",
)  # fmt: skip
EXTRA = 8


def _phrase(reference: str) -> str:
    words = re.findall(r"\w+", reference)
    return max(words, key=len) if words else ""


def measure(bundle_dir: Path, n: int, rounds: int) -> dict:
    from service.bundle import load_bundle
    from service.limits import validate_constraints
    from service.loop import decode
    from service.sessions import RuntimeConfig

    bundle = load_bundle(bundle_dir, RuntimeConfig(providers=("cpu",)))
    split = ROOT / "models" / "pretrained" / "en-es"
    texts = (split / "test.en").read_text(encoding="utf-8").splitlines()[: n + EXTRA]
    refs = (split / "test.es").read_text(encoding="utf-8").splitlines()[: n + EXTRA]
    sources = [bundle.src_tokenizer.encode(t)[: bundle.max_source_tokens] for t in texts]
    greedy = dataclasses.replace(bundle.decoding, beam_size=1, n_best=1)
    beam = dataclasses.replace(bundle.decoding, beam_size=5, n_best=1)
    asked = [([_phrase(r)], False) for r in refs]
    constraints = validate_constraints(asked, sources, beam, bundle.tgt_tokenizer, bundle.special)
    main, extra = sources[:n], sources[n:]

    def run(kind: str):
        if kind == "beam5":
            return decode(bundle.model, main, options=beam, special=bundle.special)
        if kind == "beam5_constrained":
            return decode(bundle.model, main, options=beam, special=bundle.special,
                          constraints=constraints[:n])  # fmt: skip
        if kind == "greedy":
            return decode(bundle.model, main, options=greedy, special=bundle.special)
        with_phrases = kind == "greedy_with_8_constrained"
        return decode(
            bundle.model, main + extra, options=[greedy] * n + [beam] * EXTRA,
            special=bundle.special,
            constraints=[None] * n + (constraints[n:] if with_phrases else [None] * EXTRA),
        )  # fmt: skip

    seconds: dict[str, list[float]] = {k: [] for k in KINDS}
    held: dict[str, float] = {}
    for r in range(rounds):
        for kind in KINDS[r % len(KINDS) :] + KINDS[: r % len(KINDS)]:
            start = time.perf_counter()
            out = run(kind)
            seconds[kind].append(time.perf_counter() - start)
            if kind == "beam5_constrained":
                held[kind] = _held(bundle, out, constraints[:n])
            elif kind == "greedy_with_8_constrained":
                held[kind] = _held(bundle, out[n:], constraints[n:])
    per_second = {k: sorted(n / s for s in v)[len(v) // 2] for k, v in seconds.items()}
    return {"sentences": n, "rounds": rounds, "sentences_per_second": per_second,
            "best_holds_phrase": held, "phrases": [a[0][0] for a in asked]}  # fmt: skip


def _held(bundle, results, constraints) -> float:
    pieces = [tuple(c.phrases[0]) for c in constraints]
    hits = 0
    for hyps, p in zip(results, pieces, strict=True):
        t = hyps[0].tokens
        hits += any(t[i : i + len(p)] == p for i in range(len(t) - len(p) + 1))
    return hits / len(results)


def report(result: dict) -> str:
    rate = result["sentences_per_second"]
    lines = [
        f"{result['sentences']} sentences, {result['rounds']} interleaved rounds (medians)",
        "| run | sentences/s | vs unconstrained | best holds its phrase |",
        "|---|---|---|---|",
    ]
    base = {
        "beam5_constrained": "beam5",
        "greedy_with_8_beam5": "greedy",
        "greedy_with_8_constrained": "greedy_with_8_beam5",
    }
    for kind in KINDS:
        ratio = f"{rate[kind] / rate[base[kind]]:.2f}x" if kind in base else ""
        held = result["best_holds_phrase"].get(kind)
        lines.append(
            f"| {kind} | {rate[kind]:.1f} | {ratio} | "
            f"{'' if held is None else f'{100 * held:.1f} %'} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m loadtest.constraintcost", description=__doc__)
    p.add_argument("--bundle", type=Path, default=ROOT / "model_repository" / "en-es" / "8")
    p.add_argument("--sentences", type=int, default=200)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", type=Path, default=None, help="write STEM.json and STEM.md")
    args = p.parse_args(argv)
    if args.sentences < 1 or args.rounds < 1:
        print("--sentences and --rounds must be >= 1", file=sys.stderr)
        return 2
    result = measure(args.bundle, args.sentences, args.rounds)
    text = report(result)
    print(text)
    if args.out is not None:
        command = (
            f"python -m loadtest.constraintcost --sentences {args.sentences} --rounds {args.rounds}"
        )
        write_result(args.out, result, f"`{command}`\n\n{text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
